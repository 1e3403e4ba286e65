/**
 * LINE delivery benchmark: one multicast to a sealed audience of --members users, through Herald's
 * scanner, relay and worker roles to the LINE test server, against the raw ceiling of the same calls
 * from one process with the SDK and no database (docs/benchmarks.md has results and how to read them).
 *
 *   npm run bench:line -- [--members 1000000] [--per-second 100000] [--log-level info]
 *                         [--worker-from source|dist] [--worker-node-flags='…'] [--statements]
 *                         [--timeout-s 1800] [--keep]
 *
 *   raw     `messagingApi.MessagingApiClient` (the SDK Herald's adapter wraps) sending the same chunks —
 *           the audience's user ids in byte order, 500 per call, the same message — one call at a time
 *           as Herald's delivery does, each with its own X-Line-Retry-Key, through a LineRateLimiter
 *           with the same rate as the worker's. The ids are in memory before the clock starts. Run
 *           before and after Herald's run (the ratio is against their mean).
 *   raw + record  the same, and each chunk recorded before the next in a transaction of one insert
 *           through Herald's database adapter: the floor under any sender that, as ADR 0021 requires,
 *           records chunk k before it sends chunk k + 1 (printed, not part of the ratio).
 *   herald  a multicast campaign created and scheduled through CampaignService (2 s ahead), claimed by
 *           `herald scanner`, published by `herald relay` to line_multicast_rich_message and delivered
 *           by `herald worker` (each its own process, from source as `node --import tsx src/main.ts
 *           <role>`, or with --worker-from dist the worker as the image runs it, `node dist/main.js`):
 *           plan, then per chunk the call and the chunk's AdvanceLineDelivery transaction (the audience's
 *           ids read ten chunks at a time, ahead, while a chunk is in flight), then the completion. The
 *           time runs from the campaign's due time (start_at) to the last chunk's record, both from the
 *           database clock. Also printed: CPU per chunk of the worker, its PostgreSQL backends and the
 *           simulator (/proc), and with --statements every statement's executions and server time per
 *           chunk (pg_stat_statements: needs shared_preload_libraries = pg_stat_statements; planning
 *           time with pg_stat_statements.track_planning = on).
 *
 * The LINE test server (`startLineSimulator`, what `herald line-simulator` runs) is a process of its
 * own with two channels, one per side, each counting its receipts; it validates every request against
 * LINE's OpenAPI document. After each side it checks that every member was counted exactly once on
 * that side's channel and nobody else was (the benchmark fails otherwise), then forgets the receipts.
 * The rate limit is taken out of the way the same way on both sides: the worker's
 * HERALD_LINE_MULTICAST_PER_SECOND and the raw side's limiter are --per-second, and the simulator's
 * multicast limit on both channels is --per-second.
 *
 * Peak worker RSS is the worker's VmHWM from /proc (the kernel's high-water mark), read before it is
 * stopped; VmRSS is also sampled every 100 ms, and its value once the worker is idle and ready is the
 * baseline. --worker-node-flags go to the worker's node (e.g. --max-old-space-size=96, or --cpu-prof
 * --cpu-prof-dir=<dir> for a V8 profile). Setup (the audience load, through LineDirectory.addMembers in pages of 10,000, the API's
 * page size) is timed and printed but is not part of either side. Last line: ratio=<herald/raw>.
 * Needs PostgreSQL and RabbitMQ (npm run bench:line starts them). The relay publishes to the real
 * LINE queues: the benchmark refuses to start while anything consumes them and purges them.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { messagingApi } from '@line/bot-sdk';
import { CoalescingNotifier } from '../src/adapters/postgres/notifications.js';
import { LineDirectory } from '../src/aggregates/campaign/line/directory.js';
import { LineRateLimiter } from '../src/aggregates/campaign/line/rate-limit.js';
import { CampaignService } from '../src/aggregates/campaign/service.js';
import { LINE_MULTICAST_MAX, type LineMessage, lineRetryKey } from '../src/domain/campaign/line.js';
import { CommandHandler } from '../src/eventstore/command-handler.js';
import type { Database } from '../src/ports/database.js';
import { lineUserId, TEST_LINE_CREDENTIALS_KEY, testLineSettings } from '../test/support/line.js';
import { createTestDatabase, requireEnv } from '../test/support/services.js';
import { processCpuMs } from './support/consume-workers.js';
import { type RoleProcess, startRole, stopRoles } from './support/dispatch-roles.js';
import { sharedQueues } from './support/dispatch-setup.js';
import { type SimulatorProcess, startSimulatorProcess } from './support/line-simulator.js';
import { procStatusMb, RssSampler } from './support/rss.js';

const { values } = parseArgs({
  options: {
    members: { type: 'string', default: '1000000' },
    'per-second': { type: 'string', default: '100000' },
    'log-level': { type: 'string', default: 'info' },
    'worker-from': { type: 'string', default: 'source' },
    'worker-node-flags': { type: 'string', default: '' },
    'timeout-s': { type: 'string', default: '1800' },
    statements: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  process.stdout.write(
    'npm run bench:line -- [--members 1000000] [--per-second 100000] [--log-level info] ' +
      '[--worker-from source|dist] [--worker-node-flags=…] [--statements] [--timeout-s 1800] [--keep]\n(see bench/line.bench.ts and docs/benchmarks.md)\n',
  );
  process.exit(0);
}
const members = Number(values.members);
const perSecond = Number(values['per-second']);
const timeoutMs = Number(values['timeout-s']) * 1000;
const workerFrom = values['worker-from']!;
if (!Number.isInteger(members) || members < 1) throw new Error(`--members ${values.members}`);
if (!Number.isInteger(perSecond) || perSecond < 1 || perSecond > 100_000)
  throw new Error(
    `--per-second ${values['per-second']}: 1..100000 (HERALD_LINE_MULTICAST_PER_SECOND's range)`,
  );
if (workerFrom !== 'source' && workerFrom !== 'dist')
  throw new Error(`--worker-from ${workerFrom}: source|dist`);
const DIST_MAIN = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');
if (workerFrom === 'dist' && !existsSync(DIST_MAIN))
  throw new Error(`--worker-from dist: ${DIST_MAIN} is missing (npm run build)`);
const amqpUrl = requireEnv('AMQP_URL');

const log = (line: string) => process.stdout.write(`${line}\n`);
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
const perSec = (count: number, ms: number) => Math.round((count / ms) * 1000);
const chunks = Math.ceil(members / LINE_MULTICAST_MAX);

/** The one message both sides send (what a campaign's editor writes for a plain text multicast). */
const MESSAGES: LineMessage[] = [{ type: 'text', text: 'Hello from Herald: bench:line' }];
const ORGANIZATION = 'org-bench';
const LINE_OA = 'oa-bench';
const AUDIENCE = 'aud-bench';
const HERALD_CHANNEL = 'channel-bench-herald';
const RAW_CHANNEL = 'channel-bench-raw';
const heraldToken = randomBytes(24).toString('base64url');
const rawToken = randomBytes(24).toString('base64url');
const rateLimits = { multicast: perSecond };
const limiterSettings = { multicastPerSecond: perSecond, broadcastPerHour: 60, narrowcastPerHour: 60 };

/** Fails the run unless every member was counted exactly once on `channelId`, nobody else, no violation. */
async function verify(simulator: SimulatorProcess, side: string, channelId: string): Promise<string> {
  const v = await simulator.verify(channelId, members);
  const s = v.summary;
  const problems = [
    ...(v.wrongCount > 0
      ? [
          `${v.wrongCount} members not received exactly once (${v.wrong.map((w) => `${w.userId}×${w.times}`).join(', ')})`,
        ]
      : []),
    ...(v.strangers !== 0 ? [`${v.strangers} users received who are not members`] : []),
    ...(s.recipientsDelivered !== members
      ? [`${s.recipientsDelivered} receipts for ${members} members`]
      : []),
    ...(s.usersReceivedMoreThanOnce !== 0
      ? [`${s.usersReceivedMoreThanOnce} users received more than once`]
      : []),
    ...(v.violationCount !== 0 ? [`${v.violationCount} OpenAPI violations`] : []),
    ...(s.throttled !== 0 ? [`${s.throttled} calls answered 429`] : []),
  ];
  if (problems.length > 0) throw new Error(`${side}: the simulator says: ${problems.join('; ')}`);
  return (
    `every one of the ${members} members received exactly once on ${channelId} (${s.accepted} calls accepted, ` +
    `${s.duplicates} answered 409, max ${s.maxObservedRate.multicast ?? 0} multicast calls in one second, no OpenAPI violation)`
  );
}

interface RawResult {
  ms: number;
  clientCpuMs: number;
  simulatorCpuMs: number;
}

/**
 * The ceiling: the same chunks from memory, one SDK call at a time, no database. With `record`, each
 * accepted chunk is also recorded before the next is sent, in one transaction of one insert through
 * Herald's database adapter: the floor under any sender that records every chunk before the next one
 * (ADR 0021's order), whatever else it does.
 */
async function runRaw(
  simulator: SimulatorProcess,
  chunkIds: readonly string[][],
  record?: Database,
): Promise<RawResult> {
  const client = new messagingApi.MessagingApiClient({
    baseURL: simulator.url,
    channelAccessToken: rawToken,
  });
  const limiter = new LineRateLimiter({ limits: limiterSettings });
  const campaignId = randomUUID();
  const simulatorBefore = await simulator.cpuMs();
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  for (const [chunk, to] of chunkIds.entries()) {
    await limiter.take(LINE_OA, 'multicast');
    const { httpResponse } = await client.multicastWithHttpInfo(
      { messages: MESSAGES, to },
      lineRetryKey(campaignId, 1, chunk),
    );
    if (httpResponse.status !== 200) throw new Error(`raw: chunk ${chunk} answered ${httpResponse.status}`);
    if (record) {
      await record.transaction((tx) =>
        tx.query(RECORD_CHUNK, [
          campaignId,
          chunk,
          httpResponse.headers.get('x-line-request-id'),
          to.length,
          to[to.length - 1],
        ]),
      );
    }
  }
  const ms = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const simulatorCpuMs = (await simulator.cpuMs()) - simulatorBefore;
  return { ms, clientCpuMs: (cpu.user + cpu.system) / 1000, simulatorCpuMs };
}

const RECORD_CHUNK = `
  insert into bench_line_chunk (campaign_id, chunk, request_id, recipients, cursor) values ($1, $2, $3, $4, $5)`;

/** The audience: created, filled through the directory in the API's pages of 10,000, sealed. */
async function loadAudience(directory: LineDirectory): Promise<{ loadMs: number; sealMs: number }> {
  await directory.createAudience({ audienceId: AUDIENCE, organizationId: ORGANIZATION, name: 'bench:line' });
  const page = 10_000;
  const started = performance.now();
  for (let start = 0; start < members; start += page) {
    const ids = Array.from({ length: Math.min(page, members - start) }, (_, i) => lineUserId(start + i));
    await directory.addMembers(AUDIENCE, ids);
  }
  const loaded = performance.now();
  await directory.sealAudience(AUDIENCE);
  return { loadMs: loaded - started, sealMs: performance.now() - loaded };
}

interface HeraldTimes {
  due_ms: number;
  claimed_ms: number;
  published_ms: number;
  planned_ms: number;
  first_chunk_ms: number;
  last_chunk_ms: number;
  chunks: number;
  recipients: number;
  status: string;
}

async function heraldTimes(db: Database, campaignId: string): Promise<HeraldTimes> {
  const epochMs = (at: string) => `(extract(epoch from ${at}) * 1000)::float8`;
  const { rows } = await db.query<HeraldTimes>(
    `select ${epochMs('c.start_at')} as due_ms,
            ${epochMs(`(select min(recorded_at) from event where stream_id = c.id::text and type = 'CampaignClaimed')`)} as claimed_ms,
            ${epochMs('(select min(o.sent_at) from outbox o join event e on e.position = o.event_position where e.stream_id = c.id::text)')} as published_ms,
            ${epochMs(`(select min(recorded_at) from event where stream_id = c.id::text and type = 'LineDeliveryPlanned')`)} as planned_ms,
            ${epochMs(`(select min(recorded_at) from event where stream_id = c.id::text and type = 'LineChunkAccepted')`)} as first_chunk_ms,
            ${epochMs(`(select max(recorded_at) from event where stream_id = c.id::text and type = 'LineChunkAccepted')`)} as last_chunk_ms,
            (select count(*)::int from event where stream_id = c.id::text and type = 'LineChunkAccepted') as chunks,
            (c.line -> 'progress' ->> 'recipientsAccepted')::int as recipients,
            c.status
       from campaign c where c.id = $1`,
    [campaignId],
  );
  return rows[0]!;
}

async function backendPids(db: Database, applicationName: string): Promise<number[]> {
  const { rows } = await db.query<{ pid: number }>(
    'select pid from pg_stat_activity where datname = current_database() and application_name = $1',
    [applicationName],
  );
  return rows.map((r) => r.pid);
}

/** pg_stat_statements of the benchmark's database (needs shared_preload_libraries = pg_stat_statements). */
async function statementsReset(db: Database): Promise<void> {
  await db.query('create extension if not exists pg_stat_statements');
  await db.query('select pg_stat_statements_reset()');
}

async function statementsReport(db: Database): Promise<string[]> {
  const { rows } = await db.query<{
    query: string;
    calls: number;
    exec_ms: number;
    plans: number;
    plan_ms: number;
  }>(
    `select regexp_replace(query, '\\s+', ' ', 'g') as query, calls::int, total_exec_time as exec_ms,
            plans::int, total_plan_time as plan_ms
       from pg_stat_statements
      where dbid = (select oid from pg_database where datname = current_database())
      order by total_exec_time + total_plan_time desc limit 12`,
  );
  // Planning is counted with pg_stat_statements.track_planning = on (else 0).
  const us = (ms: number, calls: number) => ((ms * 1000) / calls).toFixed(0).padStart(4);
  return rows.map(
    (r) =>
      `${(r.calls / chunks).toFixed(2).padStart(5)}/chunk exec ${us(r.exec_ms, r.calls)} µs ` +
      `plan ${us(r.plan_ms, r.calls)} µs (${r.plans} plans) ${r.query.slice(0, 100)}`,
  );
}

interface HeraldResult {
  times: HeraldTimes;
  workerIdleMb: number;
  workerPeakMb: number;
  rssEvery5s: number[];
  workerCpuMs: number;
  backendCpuMs: number;
  simulatorCpuMs: number;
  problems: string[];
  /** --statements: the database's statements during the run, dearest first. */
  statements: string[];
}

async function runHerald(
  database: Awaited<ReturnType<typeof createTestDatabase>>,
  simulator: SimulatorProcess,
  directory: LineDirectory,
): Promise<HeraldResult> {
  const settings = {
    HERALD_LINE_API_BASE_URL: simulator.url,
    HERALD_LINE_CREDENTIALS_KEY: TEST_LINE_CREDENTIALS_KEY,
    HERALD_LINE_MULTICAST_PER_SECOND: String(perSecond),
    HERALD_LOG_LEVEL: values['log-level']!,
  };
  const environment = { databaseUrl: database.url, schema: database.schema, amqpUrl, settings };
  const queues = await sharedQueues(
    amqpUrl,
    process.env.HERALD_AMQP_QUEUE_TYPE === 'classic' ? 'classic' : 'quorum',
  );
  let roles: RoleProcess[] = [];
  let sampler: RssSampler | undefined;
  let notifier: CoalescingNotifier | undefined;
  try {
    await queues.requireNoConsumers();
    const stale = await queues.purge();
    if (stale > 0) log(`herald: purged ${stale} messages left in the LINE queues`);
    roles = [
      startRole('scanner', 1, environment),
      startRole('relay', 1, environment),
      startRole('worker', 1, environment, {
        ...(workerFrom === 'dist' ? { main: DIST_MAIN } : {}),
        nodeFlags: values['worker-node-flags'] ? values['worker-node-flags'].split(/\s+/) : [],
      }),
    ];
    await Promise.all(roles.map((r) => r.ready));
    const worker = roles[2]!;
    sampler = new RssSampler(worker.pid);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const workerIdleMb = procStatusMb(worker.pid, 'VmRSS');

    // The library wiring of docs/architecture.md (Library use): a command handler whose commits wake the scanners (NOTIFY).
    notifier = new CoalescingNotifier(database.db, database.config().notifyCoalesceMs);
    const service = new CampaignService({
      db: database.db,
      handler: new CommandHandler({ db: database.db, wakeups: notifier, pod: 'bench' }),
      lineReadiness: (campaign) => directory.readiness(campaign),
    });
    const created = await service.create({
      mode: 'draft',
      organizationId: ORGANIZATION,
      channel: 'line',
      castType: 'multicast',
      audienceId: AUDIENCE,
      lineOaId: LINE_OA,
      name: 'bench:line',
      line: { messages: MESSAGES },
    });
    const { rows } = await database.db.query<{ at: Date }>("select now() + interval '2 seconds' as at");
    await service.schedule(created.campaignId, rows[0]!.at.toISOString());
    if (values.statements) await statementsReset(database.db);
    const applicationName = 'herald-worker';
    const simulatorBefore = await simulator.cpuMs();
    const workerBefore = processCpuMs(worker.pid);
    const deadline = performance.now() + timeoutMs;
    let backendBefore = new Map<number, number>();
    let status = 'SCHEDULED';
    for (;;) {
      const c = await service.get(created.campaignId);
      status = c.status;
      if (status === 'SCHEDULED' || status === 'DISPATCHING') {
        // The worker's backends (its pool grows on demand): CPU counted from when each is first seen.
        for (const pid of await backendPids(database.db, applicationName)) {
          if (!backendBefore.has(pid)) backendBefore.set(pid, processCpuMs(pid));
        }
      }
      if (!['SCHEDULED', 'DISPATCHING'].includes(status)) break;
      const gone = roles.find((r) => r.exited);
      if (gone) throw new Error(`herald: ${gone.name} exited: ${gone.problems.slice(0, 10).join('; ')}`);
      if (performance.now() > deadline)
        throw new Error(`herald: timed out after ${timeoutMs} ms (${status})`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const workerCpuMs = processCpuMs(worker.pid) - workerBefore;
    let backendCpuMs = 0;
    for (const [pid, before] of backendBefore) backendCpuMs += processCpuMs(pid) - before;
    backendBefore = new Map();
    const simulatorCpuMs = (await simulator.cpuMs()) - simulatorBefore;
    const workerPeakMb = Math.max(procStatusMb(worker.pid, 'VmHWM'), sampler.maxSampledMb);
    sampler.stop();
    await stopRoles(roles);
    const problems = roles.flatMap((r) => r.problems);
    roles = [];
    const statements = values.statements ? await statementsReport(database.db) : [];
    const times = await heraldTimes(database.db, created.campaignId);
    if (times.status !== 'COMPLETED' || times.recipients !== members || times.chunks !== chunks) {
      throw new Error(
        `herald: campaign ${status}, ${times.recipients} recipients in ${times.chunks} chunks accepted ` +
          `(expected COMPLETED, ${members} in ${chunks}): ${problems.slice(0, 5).join('; ')}`,
      );
    }
    return {
      times,
      workerIdleMb,
      workerPeakMb,
      rssEvery5s: sampler.every(5_000),
      workerCpuMs,
      backendCpuMs,
      simulatorCpuMs,
      problems,
      statements,
    };
  } finally {
    sampler?.stop();
    notifier?.close();
    if (roles.length > 0) {
      await stopRoles(roles).catch(() => {});
      for (const role of roles) for (const problem of role.problems.slice(0, 20)) log(`  ${problem}`);
    }
    await queues.purge().catch(() => {});
    await queues.close();
  }
}

// --- the run ---------------------------------------------------------------------------------------

log(
  `line: machine ${cpus().length} cpus (${cpus()[0]?.model.trim()}), ${Math.round(totalmem() / 2 ** 30)} GB, ` +
    `node ${process.version}; load avg ${load()}`,
);
log(
  `line: ${members} members, ${chunks} chunks of ≤ ${LINE_MULTICAST_MAX}; rate limit out of the way on both sides: ` +
    `HERALD_LINE_MULTICAST_PER_SECOND=${perSecond} for the worker, a LineRateLimiter at ${perSecond}/s for raw, ` +
    `simulator multicast limit ${perSecond}/s on both channels`,
);
const simulator = await startSimulatorProcess([
  { channelId: HERALD_CHANNEL, tokens: [heraldToken], rateLimits },
  { channelId: RAW_CHANNEL, tokens: [rawToken], rateLimits },
]);
const database = await createTestDatabase();
const summary: string[] = [];
try {
  log(`line: LINE simulator (its own process, pid ${simulator.pid}) at ${simulator.url}`);
  const lineSettingsForDirectory = testLineSettings(simulator);
  const directory = new LineDirectory({ db: database.db, settings: lineSettingsForDirectory });
  await directory.registerChannel({
    lineOaId: LINE_OA,
    organizationId: ORGANIZATION,
    channelId: HERALD_CHANNEL,
    channelAccessToken: heraldToken,
  });
  const audience = await loadAudience(directory);
  log(
    `setup: audience of ${members} members loaded through LineDirectory.addMembers (pages of 10,000) in ` +
      `${Math.round(audience.loadMs)} ms = ${perSec(members, audience.loadMs)} rows/s, sealed in ` +
      `${Math.round(audience.sealMs)} ms; load avg ${load()}`,
  );
  await database.db.query('vacuum analyze line_audience_member');

  const chunkIds: string[][] = [];
  for (let start = 0; start < members; start += LINE_MULTICAST_MAX) {
    chunkIds.push(
      Array.from({ length: Math.min(LINE_MULTICAST_MAX, members - start) }, (_, i) => lineUserId(start + i)),
    );
  }

  const describeRaw = (label: string, r: RawResult) =>
    `${label}: ${members} recipients in ${Math.round(r.ms)} ms = ${perSec(members, r.ms)} recipients/s ` +
    `(${chunks} calls, ${(r.ms / chunks).toFixed(2)} ms each); cpu per chunk: client ${Math.round((r.clientCpuMs * 1000) / chunks)} µs, ` +
    `simulator ${Math.round((r.simulatorCpuMs * 1000) / chunks)} µs; load avg ${load()}`;

  const rawBefore = await runRaw(simulator, chunkIds);
  log(describeRaw('raw (before)', rawBefore));
  log(`raw (before): ${await verify(simulator, 'raw', RAW_CHANNEL)}`);
  await simulator.reset();

  await database.db.query(
    `create table bench_line_chunk (campaign_id uuid, chunk int, request_id text, recipients int, cursor text,
                                    recorded_at timestamptz not null default now(), primary key (campaign_id, chunk))`,
  );
  const floor = await runRaw(simulator, chunkIds, database.db);
  log(describeRaw('raw + record (the floor of recording each chunk before the next)', floor));
  log(`raw + record: ${await verify(simulator, 'raw + record', RAW_CHANNEL)}`);
  await simulator.reset();

  const herald = await runHerald(database, simulator, directory);
  const t = herald.times;
  const heraldMs = t.last_chunk_ms - t.due_ms;
  const chunkPhaseMs = t.last_chunk_ms - t.planned_ms;
  log(
    `herald: due → claimed ${Math.round(t.claimed_ms - t.due_ms)} ms, → published ${Math.round(t.published_ms - t.due_ms)} ms, ` +
      `→ planned ${Math.round(t.planned_ms - t.due_ms)} ms, → first chunk recorded ${Math.round(t.first_chunk_ms - t.due_ms)} ms, ` +
      `→ last chunk recorded ${Math.round(heraldMs)} ms`,
  );
  log(
    `herald: ${members} recipients in ${Math.round(heraldMs)} ms (due → last chunk recorded) = ${perSec(members, heraldMs)} recipients/s; ` +
      `chunks alone (planned → last recorded) ${perSec(members, chunkPhaseMs)} recipients/s, ${(chunkPhaseMs / chunks).toFixed(2)} ms per chunk; load avg ${load()}`,
  );
  log(
    `herald: cpu per chunk: worker ${Math.round((herald.workerCpuMs * 1000) / chunks)} µs, its PostgreSQL backends ` +
      `${Math.round((herald.backendCpuMs * 1000) / chunks)} µs, simulator ${Math.round((herald.simulatorCpuMs * 1000) / chunks)} µs`,
  );
  log(
    `herald: worker (${workerFrom === 'dist' ? 'node dist/main.js worker' : 'node --import tsx src/main.ts worker'}) ` +
      `RSS idle ${herald.workerIdleMb.toFixed(1)} MB, peak ${herald.workerPeakMb.toFixed(1)} MB (VmHWM); ` +
      `every ~5 s: ${herald.rssEvery5s.join(', ')} MB`,
  );
  for (const problem of herald.problems.slice(0, 20)) log(`  ${problem}`);
  for (const line of herald.statements) log(`herald: statement ${line}`);
  log(`herald: ${await verify(simulator, 'herald', HERALD_CHANNEL)}`);
  await simulator.reset();

  const rawAfter = await runRaw(simulator, chunkIds);
  log(describeRaw('raw (after)', rawAfter));
  log(`raw (after): ${await verify(simulator, 'raw', RAW_CHANNEL)}`);

  const heraldRate = perSec(members, heraldMs);
  const rawRate = perSec(2 * members, rawBefore.ms + rawAfter.ms);
  summary.push(
    `herald recipients/s=${heraldRate} (${members} members, due → last chunk recorded, scanner + relay + worker)`,
    `raw recipients/s=${rawRate} (the SDK from memory, no database; mean of ${perSec(members, rawBefore.ms)} before and ${perSec(members, rawAfter.ms)} after)`,
    `raw+record recipients/s=${perSec(members, floor.ms)} (the same calls, each chunk recorded in a one-insert transaction before the next; herald/floor ${(heraldRate / perSec(members, floor.ms)).toFixed(2)})`,
    `worker peak_rss_mb=${herald.workerPeakMb.toFixed(1)} idle_rss_mb=${herald.workerIdleMb.toFixed(1)} (goal ≤ 150)`,
    `rate limits: ${perSecond}/s multicast calls on both sides and at the simulator (not the bottleneck); load avg ${load()}`,
    `ratio=${(heraldRate / rawRate).toFixed(2)}`,
  );
} finally {
  await simulator.stop().catch(() => simulator.kill());
  if (values.keep) log(`line: database kept: ${database.url}`);
  else await database.drop();
}
log('');
for (const line of summary) log(line);
