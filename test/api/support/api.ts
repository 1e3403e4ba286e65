/**
 * The HTTP API on a test database, listening on a real loopback socket (any free port), with a runtime
 * built as `herald api` builds its own; requests go over the socket with fetch, and every response is
 * checked against the server's own OpenAPI document (./conformance.ts). API keys are made the way the
 * CLI makes them.
 */

import { LineDirectory } from '../../../src/aggregates/campaign/line/directory.js';
import type { LineSimulator } from '../../../src/aggregates/campaign/line/simulator/server.js';
import type { CampaignConfig } from '../../../src/aggregates/campaign/settings.js';
import { heraldRegistry } from '../../../src/aggregates/registry.js';
import { type ApiKeyRole, createApiKey } from '../../../src/api/auth.js';
import type { RunningApiServer } from '../../../src/api/server.js';
import type { HeraldRuntime as Runtime } from '../../../src/config.js';
import type { Logger } from '../../../src/logger.js';
import { startApi } from '../../../src/roles/api-role.js';
import { createRuntime } from '../../../src/roles/runtime.js';
import { waitFor } from '../../../src/testing/wait.js';
import { lineEnv, lineUserId, startTestLineSimulator } from '../../support/line.js';
import { testLogger } from '../../support/roles.js';
import { createTestDatabase, type TestDatabase } from '../../support/services.js';
import { checkConformance, forgetDocument, useDocument } from './conformance.js';

export interface ApiReply {
  status: number;
  headers: Headers;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: JSON bodies are asserted field by field
  body: any;
}

export interface RequestOptions {
  key?: string | null;
  body?: unknown;
  /** Sent as is (malformed JSON, other content types). */
  raw?: string | Uint8Array;
  contentType?: string;
  headers?: Record<string, string>;
  /**
   * Check the response against the server's /openapi.json (default true): an undocumented status,
   * content type or body fails the request (test/api/support/conformance.ts).
   */
  conformance?: boolean;
}

export interface ApiFixture {
  t: TestDatabase;
  runtime: Runtime;
  server: RunningApiServer;
  url: string;
  /**
   * An API key. Unless `seedLine` is false, the first organization given a key also owns the LINE
   * official account `oa-1` (a registered channel, as `lineCampaignBody` names it) and the sealed
   * audience `aud-1` (three users), so its LINE campaigns pass the readiness check.
   */
  key(organizationId: string, role?: ApiKeyRole): Promise<string>;
  /** The LINE test server the API's workers deliver to (every request checked against LINE's OpenAPI). */
  line: LineSimulator;
  /** Registers `lineOaId`'s channel for the organization, in the LINE test server and Herald's directory. */
  lineChannel(organizationId: string, lineOaId: string): Promise<void>;
  request(method: string, path: string, options?: RequestOptions): Promise<ApiReply>;
  close(): Promise<void>;
}

export async function request(
  url: string,
  method: string,
  path: string,
  options: RequestOptions = {},
): Promise<ApiReply> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  let body: string | Uint8Array | undefined;
  if (options.raw !== undefined) {
    body = options.raw;
    if (options.contentType) headers['content-type'] = options.contentType;
  } else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] = options.contentType ?? 'application/json';
  }
  const response = await fetch(`${url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await response.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (options.conformance !== false) {
    await checkConformance(url, {
      method,
      path,
      status: response.status,
      contentType: response.headers.get('content-type'),
      text,
    });
  }
  return { status: response.status, headers: response.headers, text, body: parsed };
}

export async function startTestApi(
  overrides: Record<string, string> = {},
  options: {
    logger?: Logger;
    /** Give the first organization `oa-1` and the sealed `aud-1` (default); false for LINE directory tests. */
    seedLine?: boolean;
  } = {},
): Promise<ApiFixture> {
  const t = await createTestDatabase();
  const line = await startTestLineSimulator();
  const config = t.config({
    HERALD_API_PORT: '0',
    HERALD_API_HOST: '127.0.0.1',
    ...lineEnv(line),
    ...overrides,
  });
  const runtime = createRuntime(config, options.logger ?? testLogger(), {
    registry: heraldRegistry,
    applicationName: 'herald-api-test',
  });
  const server = await startApi(runtime);
  useDocument(server.url, server.app.swagger());
  const directory = new LineDirectory({ db: t.db, settings: (config as CampaignConfig).line });
  async function lineChannel(organizationId: string, lineOaId: string): Promise<void> {
    const channelId = `channel-${lineOaId}`;
    line.addChannel({ channelId, tokens: [`token-${lineOaId}`] });
    await directory.registerChannel({
      lineOaId,
      organizationId,
      channelId,
      channelAccessToken: `token-${lineOaId}`,
    });
  }
  return {
    t,
    runtime,
    server,
    url: server.url,
    line,
    lineChannel,
    async key(organizationId, role = 'operator') {
      const channels = await directory.listChannels(null);
      if (options.seedLine !== false && channels.length === 0) {
        await lineChannel(organizationId, 'oa-1');
        await directory.createAudience({ audienceId: 'aud-1', organizationId, name: 'test audience' });
        await directory.addMembers('aud-1', [lineUserId(1), lineUserId(2), lineUserId(3)]);
        await directory.sealAudience('aud-1');
      }
      return (await createApiKey(t.db, { organizationId, role, createdBy: 'test' })).key;
    },
    request: (method, path, options) => request(server.url, method, path, options),
    async close() {
      forgetDocument(server.url);
      await server.close();
      await runtime.close();
      await line.close();
      await t.drop();
    },
  };
}

/** An ISO time `seconds` after the database's now (schedules are judged on the database clock). */
export async function dbTime(t: TestDatabase, seconds: number): Promise<string> {
  const { rows } = await t.db.query<{ at: Date }>('select now() + make_interval(secs => $1) as at', [
    seconds,
  ]);
  return rows[0]!.at.toISOString();
}

export const lineCampaignBody = (overrides: Record<string, unknown> = {}) => ({
  channel: 'line',
  name: 'spring sale',
  castType: 'broadcast',
  lineOaId: 'oa-1',
  line: { messages: [{ type: 'text', text: 'spring sale: 20% off' }] },
  ...overrides,
});

/** A problem document (RFC 9457) with this status, naming `field` among its field errors when given. */
/** herald_http_requests_total for one method, route pattern and status, read from the API's /metrics. */
export async function httpRequestCount(
  api: ApiFixture,
  method: string,
  route: string,
  status: number,
): Promise<number> {
  const series = `herald_http_requests_total{method="${method}",route="${route}",status="${status}"}`;
  const line = (await api.request('GET', '/metrics')).text.split('\n').find((l) => l.startsWith(series));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

export function expectProblem(reply: ApiReply, status: number, field?: string): void {
  if (reply.status !== status) throw new Error(`expected ${status}, got ${reply.status}: ${reply.text}`);
  const type = reply.headers.get('content-type') ?? '';
  if (!type.startsWith('application/problem+json'))
    throw new Error(`not a problem document (${type}): ${reply.text}`);
  if (
    reply.body?.status !== status ||
    typeof reply.body?.title !== 'string' ||
    typeof reply.body?.type !== 'string'
  ) {
    throw new Error(`malformed problem: ${reply.text}`);
  }
  if (field !== undefined) {
    const fields = (reply.body.errors ?? []).map((e: { field: string }) => e.field);
    if (!fields.includes(field))
      throw new Error(`expected a field error on ${field}, got ${JSON.stringify(fields)}`);
  }
}

/** 409 for a command the resource's status does not allow, naming that status. */
export function expectIllegal(reply: ApiReply, currentStatus: string): void {
  expectProblem(reply, 409);
  if (reply.body.currentStatus !== currentStatus) {
    throw new Error(`expected currentStatus ${currentStatus}: ${reply.text}`);
  }
}

/**
 * Another writer holding a row lock (`select … for update` in a transaction of its own) until
 * `release()`: a command on that row waits on it, in flight, meanwhile. Resolves once the lock is held.
 */
export async function holdRowLock(
  t: TestDatabase,
  table: 'campaign',
  id: string,
): Promise<{ release: () => Promise<void> }> {
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let held: () => void = () => {};
  const locked = new Promise<void>((resolve) => {
    held = resolve;
  });
  const holder = t.db.transaction(async (tx) => {
    await tx.query(`select 1 from ${table} where id = $1 for update`, [id]);
    held();
    await released;
  });
  await Promise.race([locked, holder]);
  return {
    async release() {
      release();
      await holder;
    },
  };
}

/** Resolves once a connection of `applicationName` waits on a lock (a request is in flight, blocked). */
export function waitForLockWait(t: TestDatabase, applicationName: string): Promise<true> {
  return waitFor(
    async () =>
      (
        await t.db.query<{ n: number }>(
          "select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and application_name = $1",
          [applicationName],
        )
      ).rows[0]!.n > 0,
    { what: `a ${applicationName} connection to wait on a lock` },
  );
}
