/**
 * The dashboard's browser tests (ADR 0018): Debian's Chromium driven by playwright-core against
 * `herald api` and the other roles as deployed — child processes of the real CLI on the real services,
 * a fresh database per spec file — with the UI built by the same script `npm test` runs. Every page a
 * test opens records its console errors, uncaught page errors and failed resource loads; the test fails
 * on any it did not declare expected (`allowHttp`). The roles use the seeds' fixed queue names: each
 * spec gets a RabbitMQ vhost of its own, so the `browser` project runs two files at a time; the specs
 * that send SMS share Kafka's fixed topics and run one at a time after them (`browser-sms`,
 * vitest.config.ts).
 *
 *   const ui = useDashboard({ roles: ['relay'] });
 *   it('…', async () => {
 *     const page = await ui.page();
 *     await page.signIn(await ui.dashboard.key('org-a', 'operator'));
 *     await page.goto('/outbox');
 *   });
 *
 * Every dashboard has a LINE test server (the simulator that checks each request against LINE's OpenAPI
 * document, ADR 0021) that its roles deliver LINE campaigns to: `ui.dashboard.lineChannel(org, oa)`
 * registers an official account's channel in it and in Herald's directory, `lineAudience` a sealed
 * audience, so the organization's LINE campaigns pass the readiness check.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { LineDirectory } from '../../../src/aggregates/campaign/line/directory.js';
import type { LineSimulator } from '../../../src/aggregates/campaign/line/simulator/server.js';
import { type ApiKeyRole, createApiKey } from '../../../src/api/auth.js';
import { waitFor } from '../../../src/testing/wait.js';
import { type ApiReply, type RequestOptions, request } from '../../api/support/api.js';
import { type RunningHerald, spawnHerald } from '../../support/cli.js';
import { lineEnv, lineUserId, startTestLineSimulator, testLineSettings } from '../../support/line.js';
import { createTestDatabase, freePort, type TestDatabase } from '../../support/services.js';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const CHROMIUM = process.env.HERALD_CHROMIUM ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

export type HeraldRole =
  | 'relay'
  | 'scanner'
  | 'worker'
  | 'projector'
  | 'maintenance'
  | 'tick'
  | 'sms-simulator';

export interface DashboardOptions {
  /** Roles started beside `herald api`, one child process each. */
  roles?: HeraldRole[];
  /** Extra environment for every child (e.g. short poll intervals); a function is read at start (a test server's URL). */
  env?: Record<string, string> | (() => Record<string, string>);
  /**
   * A RabbitMQ vhost of the spec's own (default true): the roles' seed queue names (fixed) are then
   * the spec's alone, so another test run's relay or worker on the same broker neither declares nor
   * consumes them (`scripts/services amqp-vhost`; with a reused AMQP_URL the shared vhost is used).
   */
  ownBroker?: boolean;
}

export interface Dashboard {
  t: TestDatabase;
  /** The AMQP URL the roles use (the spec's own vhost unless ownBroker was false). */
  amqpUrl: string;
  /** The API's base URL, e.g. http://127.0.0.1:41234 (the dashboard is at /ui/). */
  url: string;
  api: RunningHerald;
  roles: Map<HeraldRole, RunningHerald>;
  /** A new API key of `organizationId` (made as `herald api-keys create` makes it). */
  key(organizationId: string, role?: ApiKeyRole): Promise<string>;
  /** A request to the API outside the browser (Bearer key or none). */
  request(method: string, path: string, options?: RequestOptions): Promise<ApiReply>;
  /** The LINE test server the roles deliver LINE campaigns to. */
  line: LineSimulator;
  /**
   * Registers `lineOaId`'s channel for the organization in the LINE test server (channel
   * `channel-<lineOaId>`, a long-lived token; `friends` receive its broadcasts) and in Herald's directory.
   */
  lineChannel(organizationId: string, lineOaId: string, options?: { friends?: number }): Promise<void>;
  /** A sealed audience of `members` test users (lineUserId(from)…) for the organization's multicasts. */
  lineAudience(organizationId: string, audienceId: string, members: number, from?: number): Promise<void>;
  /** Every child's output so far (for failure messages). */
  output(): string;
  stop(): Promise<void>;
}

/** Builds the dashboard when dist/ui is missing or stale (a no-op otherwise), as `npm test` does. */
export function ensureUiBuilt(): void {
  execFileSync(process.execPath, [join(ROOT, 'scripts/ensure-ui.mjs')], { cwd: ROOT, stdio: 'inherit' });
}

function childEnv(t: TestDatabase, extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && (/^(HERALD_|AMQP_|REDIS_|KAFKA_|PG|NODE_)/.test(name) || name === 'TZ')) {
      env[name] = value;
    }
  }
  return {
    ...env,
    DATABASE_URL: t.url,
    HERALD_SCHEMA: t.schema,
    HERALD_LOG_LEVEL: process.env.HERALD_TEST_LOG ?? 'info',
    HERALD_METRICS_HOST: '127.0.0.1',
    HERALD_METRICS_PORT: '0',
    ...extra,
  };
}

/** `herald api` (+ `roles`) on a fresh database, the API on a free loopback port. */
export async function startDashboard(options: DashboardOptions = {}): Promise<Dashboard> {
  const t = await createTestDatabase();
  const line = await startTestLineSimulator();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const vhost = options.ownBroker === false ? undefined : `herald_ui_${randomUUID().slice(0, 8)}`;
  const services = (...args: string[]) =>
    execFileSync('bash', [join(ROOT, 'scripts/services'), ...args], { cwd: ROOT, encoding: 'utf8' }).trim();
  const amqpUrl = vhost ? services('amqp-vhost', 'add', vhost) : (process.env.AMQP_URL ?? '');
  const env = childEnv(t, {
    HERALD_API_HOST: '127.0.0.1',
    HERALD_API_PORT: String(port),
    ...(amqpUrl ? { AMQP_URL: amqpUrl } : {}),
    // LINE's limit of 60 broadcasts an hour per channel would space a spec's broadcasts a minute apart.
    ...lineEnv(line, { HERALD_LINE_BROADCAST_PER_HOUR: '360000', HERALD_LINE_NARROWCAST_PER_HOUR: '360000' }),
    ...(typeof options.env === 'function' ? options.env() : options.env),
  });
  const directory = new LineDirectory({ db: t.db, settings: testLineSettings(line) });
  // The API's request log is noise in a failure message; the roles' info lines tell what happened.
  const api = spawnHerald(['api'], { ...env, HERALD_LOG_LEVEL: process.env.HERALD_TEST_LOG ?? 'warn' });
  const roles = new Map<HeraldRole, RunningHerald>();
  for (const role of options.roles ?? []) roles.set(role, spawnHerald([role], env));
  const tail = (text: string) => (text.length > 6_000 ? `…${text.slice(-6_000)}` : text);
  const output = () =>
    [
      `--- herald api ---\n${tail(api.output())}`,
      ...[...roles].map(([n, r]) => `--- herald ${n} ---\n${tail(r.output())}`),
    ].join('\n');
  const stop = async () => {
    await Promise.all([api.stop(), ...[...roles.values()].map((r) => r.stop())]);
    await line.close();
    await t.drop();
    if (vhost) services('amqp-vhost', 'delete', vhost);
  };
  try {
    await waitFor(
      async () => {
        if (api.process.exitCode !== null) throw new Error(`herald api exited ${api.process.exitCode}`);
        try {
          return (await fetch(`${url}/healthz`)).status === 200;
        } catch {
          return false;
        }
      },
      { what: 'herald api to listen', timeoutMs: 60_000 },
    );
  } catch (error) {
    const message = `${(error as Error).message}\n${output()}`;
    await stop();
    throw new Error(message);
  }
  return {
    t,
    amqpUrl,
    url,
    api,
    roles,
    async key(organizationId, role = 'operator') {
      return (await createApiKey(t.db, { organizationId, role, createdBy: 'browser-test' })).key;
    },
    request: (method, path, opts) => request(url, method, path, opts),
    line,
    async lineChannel(organizationId, lineOaId, opts = {}) {
      const channelId = `channel-${lineOaId}`;
      const token = `token-${lineOaId}`;
      line.addChannel({
        channelId,
        tokens: [token],
        friends: Array.from({ length: opts.friends ?? 0 }, (_, i) => lineUserId(1_000_000 + i)),
      });
      await directory.registerChannel({ lineOaId, organizationId, channelId, channelAccessToken: token });
    },
    async lineAudience(organizationId, audienceId, members, from = 0) {
      await directory.createAudience({ audienceId, organizationId, name: audienceId });
      for (let start = 0; start < members; start += 10_000) {
        const ids = Array.from({ length: Math.min(10_000, members - start) }, (_, i) =>
          lineUserId(from + start + i),
        );
        await directory.addMembers(audienceId, ids);
      }
      await directory.sealAudience(audienceId);
    },
    output,
    stop,
  };
}

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
}

export interface ExpectedHttp {
  /** Matched against the resource's path (e.g. '/v1/session'). */
  path: string | RegExp;
  status: number;
}

export interface UiPage {
  page: Page;
  context: BrowserContext;
  /** Console errors, page errors and unexpected failed loads so far. */
  problems: string[];
  /** Declares a failed resource load as expected (e.g. the 401 of a wrong key). */
  allowHttp(expected: ExpectedHttp): void;
  /** Lets the page navigate to another origin (an OpenID Connect issuer's authorization endpoint). */
  allowOrigin(origin: string): void;
  /**
   * Serves every request to `origin` (e.g. `https://cdn.example.com`) with a generated picture, and
   * declares that origin allowed: the images a LINE campaign's content names by URL (the dashboard shows
   * their thumbnails), with no network. The dashboard's own assets must still come from the API.
   */
  serveImages(origin: string): Promise<void>;
  /** Opens /ui<path> and waits for the app to render it. */
  goto(path: string): Promise<void>;
  /** Signs in through the sign-in page with `key` and waits for the frame. */
  signIn(key: string, next?: string): Promise<void>;
  /** Saves a PNG of the page into docs/screenshots/<name>.png (the full page unless told otherwise). */
  screenshot(name: string, options?: { fullPage?: boolean }): Promise<string>;
  close(): Promise<void>;
}

/** A picture standing in for a content image: a gradient (its hue from the URL) with the file's name. */
function pictureOf(url: string): string {
  const name = decodeURIComponent(new URL(url).pathname.split('/').pop() ?? 'image');
  let hue = 0;
  for (const ch of url) hue = (hue * 31 + ch.charCodeAt(0)) % 360;
  const label = name.replace(/[<>&"]/g, '');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="480" height="320" viewBox="0 0 480 320">
<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1">
<stop offset="0" stop-color="hsl(${hue},70%,62%)"/><stop offset="1" stop-color="hsl(${(hue + 50) % 360},65%,42%)"/>
</linearGradient></defs>
<rect width="480" height="320" fill="url(#g)"/>
<circle cx="380" cy="90" r="44" fill="rgba(255,255,255,0.35)"/>
<path d="M0 320 L150 170 L260 260 L340 200 L480 320 Z" fill="rgba(0,0,0,0.18)"/>
<text x="24" y="292" font-family="sans-serif" font-size="26" fill="white">${label}</text>
</svg>`;
}

const FAILED_LOAD = /^Failed to load resource: the server responded with a status of (\d{3})/;

/** A fresh browser context (own cookies) on the dashboard, recording every error. */
export async function openUiPage(browser: Browser, dashboard: Dashboard): Promise<UiPage> {
  const context = await browser.newContext({
    baseURL: dashboard.url,
    viewport: { width: 1440, height: 900 },
    deviceScaleFactor: 1,
    locale: 'en-US',
    timezoneId: 'UTC',
  });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  const problems: string[] = [];
  // Nothing is allowed to fail unless declared: even the signed-out check on load answers 200
  // (GET /v1/session/status), so a signed-out visit logs nothing.
  const allowed: ExpectedHttp[] = [];
  const contentOrigins = new Set<string>();
  page.on('console', (message) => {
    if (message.type() !== 'error') return;
    const text = message.text();
    const failed = FAILED_LOAD.exec(text);
    if (failed) {
      const status = Number(failed[1]);
      const where = message.location().url;
      const path = where ? new URL(where).pathname : '';
      const ok = allowed.some(
        (a) => a.status === status && (typeof a.path === 'string' ? a.path === path : a.path.test(path)),
      );
      if (ok) return;
      problems.push(`failed load ${status} ${path}`);
      return;
    }
    problems.push(`console error: ${text} (${message.location().url}:${message.location().lineNumber})`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('requestfailed', (req) => {
    const reason = req.failure()?.errorText ?? '';
    // A stream or fetch the page itself abandons (navigation, unmount) is not a failure.
    if (/ERR_ABORTED/.test(reason)) return;
    problems.push(`request failed: ${req.method()} ${new URL(req.url()).pathname} ${reason}`);
  });
  page.on('request', (req) => {
    const target = new URL(req.url());
    if (contentOrigins.has(target.origin)) return;
    if (target.origin !== new URL(dashboard.url).origin && !req.url().startsWith('data:')) {
      problems.push(`off-origin request (no CDN allowed): ${req.url()}`);
    }
  });
  const ui: UiPage = {
    page,
    context,
    problems,
    allowHttp: (expected) => allowed.push(expected),
    allowOrigin: (origin) => contentOrigins.add(new URL(origin).origin),
    async serveImages(origin) {
      contentOrigins.add(new URL(origin).origin);
      await page.route(`${new URL(origin).origin}/**`, (route) =>
        route.fulfill({ status: 200, contentType: 'image/svg+xml', body: pictureOf(route.request().url()) }),
      );
    },
    async goto(path) {
      await page.goto(`/ui${path.startsWith('/') ? path : `/${path}`}`);
      await page.waitForSelector('#root > *');
    },
    async signIn(key, next) {
      await page.goto(`/ui/signin${next ? `?next=${encodeURIComponent(next)}` : ''}`);
      await page.getByLabel('API key').fill(key);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByTestId('session-role').waitFor();
    },
    async screenshot(name, options = {}) {
      const dir = join(ROOT, 'docs', 'screenshots');
      mkdirSync(dir, { recursive: true });
      const path = join(dir, `${name}.png`);
      await page.screenshot({ path, fullPage: options.fullPage ?? true });
      return path;
    },
    async close() {
      await context.close();
    },
  };
  return ui;
}

export interface DashboardSuite {
  readonly dashboard: Dashboard;
  readonly browser: Browser;
  /** A new page (own context and cookies), checked for errors after the test and closed. */
  page(): Promise<UiPage>;
}

/**
 * beforeAll: builds the UI if stale, starts the dashboard and Chromium; afterEach: fails the test on
 * any error recorded by a page it opened, then closes them; afterAll: stops everything.
 */
export function useDashboard(options: DashboardOptions = {}): DashboardSuite {
  let dashboard: Dashboard | undefined;
  let browser: Browser | undefined;
  const open: UiPage[] = [];
  beforeAll(async () => {
    ensureUiBuilt();
    dashboard = await startDashboard(options);
    browser = await launchBrowser();
  }, 180_000);
  afterEach(async () => {
    const pages = open.splice(0);
    const problems = pages.flatMap((p) => p.problems);
    await Promise.all(pages.map((p) => p.close().catch(() => {})));
    if (problems.length > 0) {
      throw new Error(`the browser reported errors:\n  ${problems.join('\n  ')}`);
    }
  });
  afterAll(async () => {
    await browser?.close();
    await dashboard?.stop();
  });
  return {
    get dashboard() {
      if (!dashboard) throw new Error('dashboard not started');
      return dashboard;
    },
    get browser() {
      if (!browser) throw new Error('browser not started');
      return browser;
    },
    async page() {
      const page = await openUiPage(this.browser, this.dashboard);
      open.push(page);
      return page;
    },
  };
}
