/**
 * `npm run bench:api`: the HTTP API under load (docs/benchmarks.md has results and how to read them).
 *
 *   npm run bench:api -- [--connections 50] [--seconds 10] [--pool 20]
 *
 * Starts `herald api` (the real CLI, `node --import tsx src/main.ts api`) in a child process on a
 * fresh database, and a bare Fastify route returning a constant in another (the same-run baseline), then
 * drives each with autocannon from this process at the given concurrency:
 * - baseline: GET of the constant route;
 * - create: POST /v1/campaigns creating and scheduling a campaign in one transaction, each request with
 *   its own Idempotency-Key (so each one reserves and completes a key);
 * - get: GET /v1/campaigns/{id} of one campaign.
 * Each is warmed up for 2 s first. Prints req/s and p99 latency per run and `ratio=` (req/s against
 * the baseline's), and checks that every create answered 201 and made exactly one campaign.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { LineDirectory } from '../src/aggregates/campaign/line/directory.js';
import type { CampaignConfig } from '../src/aggregates/campaign/settings.js';
import { createApiKey } from '../src/api/auth.js';
import { createTestDatabase, freePort } from '../test/support/services.js';

const { values } = parseArgs({
  options: {
    connections: { type: 'string', default: '50' },
    seconds: { type: 'string', default: '10' },
    pool: { type: 'string', default: '20' },
  },
});
const connections = Number(values.connections);
const seconds = Number(values.seconds);
const log = (line: string) => process.stdout.write(`${line}\n`);

function child(args: string[], env: NodeJS.ProcessEnv): { process: ChildProcess; output: () => string } {
  const proc = spawn('node', ['--import', 'tsx', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  proc.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  proc.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  return { process: proc, output: () => output };
}

async function until(probe: () => Promise<boolean> | boolean, what: string, output: () => string) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      if (await probe()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function stop(proc: ChildProcess) {
  if (proc.exitCode !== null) return;
  proc.kill('SIGTERM');
  await once(proc, 'exit');
}

type Options = Omit<autocannon.Options, 'url' | 'connections' | 'duration'>;

async function load(url: string, options: Options, duration = seconds): Promise<autocannon.Result> {
  return autocannon({ url, connections, duration, ...options });
}

const summary = (r: autocannon.Result) =>
  `req/s=${r.requests.average.toFixed(0)} p99=${r.latency.p99.toFixed(1)}ms mean=${r.latency.average.toFixed(1)}ms`;

async function main() {
  const database = await createTestDatabase();
  const apiPort = await freePort();
  const env = {
    ...process.env,
    DATABASE_URL: database.url,
    HERALD_SCHEMA: database.schema,
    HERALD_LOG_LEVEL: 'warn',
    HERALD_API_PORT: String(apiPort),
    HERALD_METRICS_PORT: '0',
    HERALD_DB_POOL_SIZE: values.pool,
  };
  const api = child(['src/main.ts', 'api'], env);
  const bare = child(['bench/support/bare-fastify.ts'], env);
  try {
    const apiUrl = `http://127.0.0.1:${apiPort}`;
    await until(async () => (await fetch(`${apiUrl}/healthz`)).ok, 'herald api', api.output);
    await until(() => /listening \d+/.test(bare.output()), 'the baseline server', bare.output);
    const bareUrl = `http://127.0.0.1:${/listening (\d+)/.exec(bare.output())![1]}/`;
    const { key } = await createApiKey(database.db, {
      organizationId: 'org-bench',
      role: 'operator',
      createdBy: 'bench',
    });
    // The official account's channel, so the campaigns pass the LINE readiness check (nothing is sent:
    // they start tomorrow).
    await new LineDirectory({
      db: database.db,
      settings: (database.config() as CampaignConfig).line,
    }).registerChannel({
      lineOaId: 'oa-bench',
      organizationId: 'org-bench',
      channelId: 'channel-oa-bench',
      channelAccessToken: 'token-oa-bench',
    });
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const startAt = new Date(Date.now() + 86_400_000).toISOString();
    const body = JSON.stringify({
      channel: 'line',
      name: 'bench',
      castType: 'broadcast',
      lineOaId: 'oa-bench',
      line: { messages: [{ type: 'text', text: 'bench: 20% off' }] },
      startAt,
    });
    const seeded = await fetch(`${apiUrl}/v1/campaigns`, { method: 'POST', headers, body });
    if (seeded.status !== 201) throw new Error(`seed campaign: ${seeded.status} ${await seeded.text()}`);
    const campaignId = ((await seeded.json()) as { campaignId: string }).campaignId;

    log(
      `bench:api: ${connections} connections, ${seconds} s per run (2 s warm-up each), API pool ${values.pool}`,
    );
    const create: Options = {
      method: 'POST',
      headers,
      body,
      requests: [
        {
          setupRequest: (request) => ({
            ...request,
            headers: { ...request.headers, 'idempotency-key': randomUUID() },
          }),
        },
      ],
    };
    const get: Options = { method: 'GET', headers: { authorization: headers.authorization } };

    await load(bareUrl, {}, 2);
    const baseline = await load(bareUrl, {});
    log(`baseline (bare Fastify, constant) ${summary(baseline)}`);

    const before = (await database.db.query<{ n: number }>('select count(*)::int as n from campaign'))
      .rows[0]!.n;
    await load(`${apiUrl}/v1/campaigns`, create, 2);
    const created = await load(`${apiUrl}/v1/campaigns`, create);
    // autocannon stops with requests in flight, which the API still commits: count once they have
    // settled, both counts in one snapshot.
    const counts = async () =>
      (
        await database.db.query<{ campaigns: number; keys: number }>(
          'select (select count(*)::int from campaign) as campaigns, (select count(*)::int from idempotency_key) as keys',
        )
      ).rows[0]!;
    let settled = await counts();
    for (let previous = ''; JSON.stringify(settled) !== previous; ) {
      previous = JSON.stringify(settled);
      await new Promise((resolve) => setTimeout(resolve, 500));
      settled = await counts();
    }
    const after = settled.campaigns;
    const keys = settled.keys;
    log(
      `create (POST /v1/campaigns, create + schedule, Idempotency-Key) ${summary(created)} ratio=${(created.requests.average / baseline.requests.average).toFixed(3)} non2xx=${created.non2xx}`,
    );
    log(`  campaigns made: ${after - before} (idempotency keys stored: ${keys})`);
    if (created.non2xx > 0 || created.errors > 0)
      throw new Error(`create: ${created.non2xx} non-2xx, ${created.errors} errors`);
    if (keys !== after - before) throw new Error(`create: ${after - before} campaigns but ${keys} keys`);

    await load(`${apiUrl}/v1/campaigns/${campaignId}`, get, 2);
    const got = await load(`${apiUrl}/v1/campaigns/${campaignId}`, get);
    log(
      `get (GET /v1/campaigns/{id}) ${summary(got)} ratio=${(got.requests.average / baseline.requests.average).toFixed(3)} non2xx=${got.non2xx}`,
    );
    if (got.non2xx > 0 || got.errors > 0) throw new Error(`get: ${got.non2xx} non-2xx, ${got.errors} errors`);
  } finally {
    await stop(api.process);
    await stop(bare.process);
    await database.drop();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench:api failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
