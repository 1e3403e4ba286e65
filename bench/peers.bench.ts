/**
 * Herald against its peer in the project, graphile-worker, on the same PostgreSQL and RabbitMQ (issue
 * 22, item 2; docs/benchmarks.md has results):
 *
 *   npm run bench:peers -- [--jobs 100000] [--pairs 3] [--warm-up 100] [--setup-ms-per-item 0.5]
 *                          [--scanners 2] [--relays 2] [--workers 2] [--dispatch queue|in-process]
 *                          [--gw-processes <scanners+relays+workers>] [--gw-concurrency 8] [--gw-pool 10]
 *                          [--gw-local-queue -1] [--gw-complete-batch-ms -1] [--wal-by-relation]
 *
 * The same work on both sides: N items due at one instant, each ending in one persistent, mandatory
 * message published to a quorum queue and confirmed by the broker. Measured: items per second from the
 * due instant to the last message confirmed, alternated herald, graphile-worker, herald, … (--pairs
 * pairs), each run on a fresh database, and `ratio=<herald/graphile-worker>` per pair.
 *
 * - herald: the burst scenario of bench:actions (bench/support/actions-burst.ts): N scheduled actions
 *   due at one instant through scanner → scheduled_action_fire → worker → action_execute, the roles as
 *   separate processes; last confirmed = the last action_execute row's sent_at (the relay marks it after
 *   the broker's confirm). `--dispatch in-process`: the workers claim the due actions and run them
 *   themselves, claims per transaction as the fire consumer records them (graphile-worker's shape:
 *   no fire message, no first relay hop); give it `--scanners 0`, the scanners then have nothing to do.
 * - graphile-worker: --gw-processes processes (default: as many as Herald's roles), each `run()` with
 *   concurrentJobs --gw-concurrency and maxPoolSize --gw-pool (Herald's HERALD_DB_POOL_SIZE default is
 *   10 too), one task that publishes the job's payload on a confirm channel
 *   (bench/support/peers-graphile-child.ts). The workers start first; then the jobs are added with
 *   addJobs, 1,000 per call, all with the same run_at, the due instant (plus --warm-up jobs due in the
 *   3 s to 1 s before it, as on Herald's side). graphile-worker finds jobs that become due by polling
 *   (pollInterval 2 s); at the due instant the benchmark sends the `jobs:insert` notification that
 *   adding a due job would, so its workers start at once, as Herald's scanners do on their timers.
 *   Last confirmed = the latest confirm any worker process saw (Date.now() after the confirm callback;
 *   the processes share the host's clock with PostgreSQL).
 *
 * Setup (databases, migrations, seeding, starting the processes) is not timed. The PostgreSQL
 * durability profile (scripts/services: HERALD_SERVICES_PG_DURABLE=1, the default of `npm run
 * bench:peers`) is read from the server and printed with the figures, as are the load average and the
 * CPU the processes of each side used from the due instant to the end. `--wal-by-relation` also prints
 * the measured stretch's WAL per item by relation (pg_walinspect; bench/support/db-work.ts).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import { makeWorkerUtils } from 'graphile-worker';
import { queueOptions } from '../src/adapters/amqp/amqp-connection.js';
import { createTestDatabase, requireEnv, uniqueName } from '../test/support/services.js';
import { type ActionsBench, burst } from './support/actions-burst.js';
import { type DatabaseWork, databaseWork, describeWalByRelation, describeWork } from './support/db-work.js';
import { processCpuMs } from './support/dispatch-roles.js';
import { databaseNowMs, distinctOffsets } from './support/dispatch-setup.js';
import { hostBusySince, hostCpu, postgresCpu, rabbitmqCpu } from './support/host-cpu.js';
import { durabilityProfile } from './support/pg-profile.js';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '100000' },
    pairs: { type: 'string', default: '3' },
    'warm-up': { type: 'string', default: '100' },
    'setup-ms-per-item': { type: 'string', default: '0.5' },
    scanners: { type: 'string', default: '2' },
    relays: { type: 'string', default: '2' },
    workers: { type: 'string', default: '2' },
    dispatch: { type: 'string', default: 'queue' },
    'gw-processes': { type: 'string' },
    'gw-concurrency': { type: 'string', default: '8' },
    'gw-pool': { type: 'string', default: '10' },
    'gw-local-queue': { type: 'string', default: '-1' },
    'gw-complete-batch-ms': { type: 'string', default: '-1' },
    'wal-by-relation': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  process.stdout.write(
    'npm run bench:peers -- [--jobs 100000] [--pairs 3] [--warm-up 100] [--setup-ms-per-item 0.5] ' +
      '[--scanners 2] [--relays 2] [--workers 2] [--dispatch queue|in-process] ' +
      '[--gw-processes N] [--gw-concurrency 8] [--gw-pool 10] [--gw-local-queue -1] [--gw-complete-batch-ms -1] ' +
      '[--wal-by-relation]\n' +
      '(see bench/peers.bench.ts)\n',
  );
  process.exit(0);
}
const n = Number(values.jobs);
const warmUp = Number(values['warm-up']);
/** The due instant comes this long per item (+5 s) after the seeding starts, on both sides. */
const setupMsPerItem = Number(values['setup-ms-per-item']);
if (values.dispatch !== 'queue' && values.dispatch !== 'in-process') {
  process.stderr.write(`bench:peers: --dispatch must be queue or in-process, not ${values.dispatch}\n`);
  process.exit(2);
}
const dispatch = values.dispatch;
const counts = {
  scanners: Number(values.scanners),
  relays: Number(values.relays),
  workers: Number(values.workers),
};
const gw = {
  processes: Number(values['gw-processes'] ?? counts.scanners + counts.relays + counts.workers),
  concurrency: Number(values['gw-concurrency']),
  pool: Number(values['gw-pool']),
  localQueue: Number(values['gw-local-queue']),
  completeBatchMs: Number(values['gw-complete-batch-ms']),
};
const amqpUrl = requireEnv('AMQP_URL');
const log = (line: string) => process.stdout.write(`${line}\n`);
const walByRelation = values['wal-by-relation'];
const bench: ActionsBench = { amqpUrl, queueType: 'quorum', counts, log, dispatch, walByRelation };
const CHILD = join(dirname(fileURLToPath(import.meta.url)), 'support', 'peers-graphile-child.ts');
const ADD_BATCH = 1_000;

interface Run {
  perSecond: number;
  lastAfterDueMs: number;
  /** CPU (user + system) of the side's processes from the due instant to the end, ms. */
  cpuMs: number;
  /** Share of both cores busy (everything on the host) from the due instant to the end. */
  hostBusy: number;
  /** CPU of the PostgreSQL server from the due instant to the end, ms. */
  postgresCpuMs: number;
  /** CPU of the RabbitMQ broker from the due instant to the end, ms (NaN: not found on this host). */
  rabbitmqCpuMs: number;
  /** What the database did from the due instant to the end. */
  databaseWork: DatabaseWork;
  load: string;
}

const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

async function herald(): Promise<Run> {
  const r = await burst(bench, n, warmUp, setupMsPerItem);
  // Role processes are named bench-<role>-<i> (dispatch-roles.ts): CPU per item of each kind of role.
  const byRole = new Map<string, number>();
  for (const [name, ms] of Object.entries(r.roleCpuMs)) {
    const role = name.split('-')[1]!;
    byRole.set(role, (byRole.get(role) ?? 0) + ms);
  }
  log(
    `herald: CPU per item by role: ${[...byRole].map(([role, ms]) => `${role}s ${(ms / n).toFixed(2)} ms`).join(', ')}`,
  );
  return {
    perSecond: r.firedPerSecond,
    lastAfterDueMs: r.lastAfterDueMs,
    cpuMs: Object.values(r.roleCpuMs).reduce((sum, v) => sum + v, 0),
    hostBusy: r.hostBusy,
    postgresCpuMs: r.postgresCpuMs,
    rabbitmqCpuMs: r.rabbitmqCpuMs,
    databaseWork: r.databaseWork,
    load: load(),
  };
}

interface GraphileReport {
  confirmed: number;
  warmUp: number;
  lastConfirmedMs: number;
}

interface GraphileProcess {
  child: ChildProcess;
  ready: Promise<void>;
  /** The report it prints after SIGTERM. */
  done: Promise<GraphileReport>;
  output: string[];
}

function startGraphile(index: number, databaseUrl: string, queue: string): GraphileProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      PEERS_QUEUE: queue,
      PEERS_CONCURRENCY: String(gw.concurrency),
      PEERS_POOL: String(gw.pool),
      PEERS_LOCAL_QUEUE: String(gw.localQueue),
      PEERS_COMPLETE_BATCH_MS: String(gw.completeBatchMs),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  // An exit before the line a promise waits for fails it (after it, the race is already decided).
  const exited = new Promise<never>((_, reject) =>
    child.on('exit', (code) =>
      reject(new Error(`graphile-worker ${index} exited with ${code}: ${output.slice(-5).join(' | ')}`)),
    ),
  );
  let onReady!: () => void;
  let onDone!: (report: GraphileReport) => void;
  const ready = Promise.race([new Promise<void>((resolve) => (onReady = resolve)), exited]);
  const done = Promise.race([new Promise<GraphileReport>((resolve) => (onDone = resolve)), exited]);
  for (const promise of [exited, ready, done]) promise.catch(() => {});
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (!line.startsWith('{"peers":')) {
      // graphile-worker's own log: one line per completed job at info; keep warnings and errors.
      if (/\b(WARN|ERROR)\b/.test(line)) output.push(line);
      return;
    }
    const message = JSON.parse(line);
    if (message.peers === 'ready') onReady();
    if (message.peers === 'done') onDone(message);
  });
  createInterface({ input: child.stderr! }).on('line', (line) => output.push(line));
  return { child, ready, done, output };
}

async function graphileWorker(): Promise<Run> {
  const database = await createTestDatabase({ migrate: false });
  const queue = uniqueName('herald_bench_peers');
  const connection = await amqp.connect(amqpUrl);
  const channel = await connection.createChannel();
  const processes: GraphileProcess[] = [];
  const utils = await makeWorkerUtils({ connectionString: database.url });
  try {
    await utils.migrate();
    await channel.assertQueue(queue, queueOptions('quorum'));
    for (let i = 0; i < gw.processes; i++) processes.push(startGraphile(i + 1, database.url, queue));
    await Promise.all(processes.map((p) => p.ready));
    const setupStarted = performance.now();
    const db = database.db;
    const base = Math.ceil((await databaseNowMs(db)) + n * setupMsPerItem + 5_000);
    const payload = (i: number) => ({
      organizationId: `org-${i % 50}`,
      actionType: 'send_message',
      actionConfig: { template: 'follow-up', locale: 'th' },
      workflowId: 'wf-bench',
      workflowNodePath: 'root/wait-1',
      epoch: 1,
    });
    const jobs = [
      ...distinctOffsets(warmUp, 2_000).map((o, i) => ({
        identifier: 'publish',
        payload: { ...payload(i), warmUp: true },
        runAt: new Date(base - 3_000 + o),
      })),
      ...Array.from({ length: n }, (_, i) => ({
        identifier: 'publish',
        payload: payload(i),
        runAt: new Date(base),
      })),
    ];
    for (let i = 0; i < jobs.length; i += ADD_BATCH) await utils.addJobs(jobs.slice(i, i + ADD_BATCH));
    const spare = base - 3_000 - (await databaseNowMs(db));
    log(
      `graphile-worker: ${gw.processes} processes started; ${warmUp} warm-up + ${n} jobs added in ${Math.round(performance.now() - setupStarted)} ms; warm-up due in ${Math.round(spare)} ms`,
    );
    if (spare < 500)
      throw new Error(`graphile-worker: setup ran into the first due (${Math.round(spare)} ms left)`);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, base + 2 - Date.now())));
    await db.query(`select pg_notify('jobs:insert', $1)`, [JSON.stringify({ count: n })]);
    const cpuAtDue = processes.map((p) => processCpuMs(p.child.pid!));
    const hostAtDue = hostCpu();
    const postgresAtDue = await postgresCpu(db);
    const rabbitmqAtDue = rabbitmqCpu(amqpUrl);
    const workAtDue = await databaseWork(db, { byRelation: walByRelation });
    const deadline = Date.now() + 1_800_000;
    for (;;) {
      const { rows } = await db.query<{ left: number; failed: number; error: string | null }>(
        `select count(*)::int as left, count(*) filter (where last_error is not null)::int as failed,
                max(last_error) as error
           from graphile_worker._private_jobs`,
      );
      if (rows[0]!.failed > 0) throw new Error(`${rows[0]!.failed} jobs failed: ${rows[0]!.error}`);
      if (rows[0]!.left === 0) break;
      if (Date.now() > deadline) throw new Error(`timed out: ${rows[0]!.left} jobs left`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const hostBusy = hostBusySince(hostAtDue);
    const postgresCpuMs = postgresAtDue.since();
    const rabbitmqCpuMs = rabbitmqAtDue?.since() ?? Number.NaN;
    const cpuMs = processes.reduce((sum, p, i) => sum + processCpuMs(p.child.pid!) - cpuAtDue[i]!, 0);
    const runLoad = load();
    for (const p of processes) p.child.kill('SIGTERM');
    const reports = await Promise.all(processes.map((p) => p.done));
    const work = await workAtDue.since();
    const confirmed = reports.reduce((sum, r) => sum + r.confirmed, 0);
    const warmUpConfirmed = reports.reduce((sum, r) => sum + r.warmUp, 0);
    const { messageCount } = await channel.checkQueue(queue);
    if (confirmed !== n || warmUpConfirmed !== warmUp || messageCount !== n + warmUp) {
      throw new Error(
        `expected ${n} + ${warmUp} warm-up messages confirmed, got ${confirmed} + ${warmUpConfirmed} (${messageCount} in ${queue})`,
      );
    }
    const lastMs = Math.max(...reports.map((r) => r.lastConfirmedMs));
    return {
      perSecond: n / ((lastMs - base) / 1000),
      lastAfterDueMs: lastMs - base,
      cpuMs,
      hostBusy,
      postgresCpuMs,
      rabbitmqCpuMs,
      databaseWork: work,
      load: runLoad,
    };
  } finally {
    for (const p of processes) {
      if (p.child.exitCode === null) p.child.kill('SIGTERM');
      for (const line of p.output.slice(0, 20)) log(`  graphile-worker: ${line}`);
    }
    await Promise.allSettled(processes.map((p) => p.done));
    await utils.release();
    await channel.deleteQueue(queue).catch(() => {});
    await connection.close().catch(() => {});
    await database.drop();
  }
}

/** HERALD_* settings the roles inherit from this environment (scripts/services' own left out). */
const heraldSettings =
  Object.entries(process.env)
    .filter(([name]) => name.startsWith('HERALD_') && !name.startsWith('HERALD_SERVICES_'))
    .map(([name, value]) => `${name}=${value}`)
    .join(' ') || 'default settings';
const profileDatabase = await createTestDatabase({ migrate: false });
const profile = await durabilityProfile(profileDatabase.db);
await profileDatabase.drop();
log(profile.line);
const setup =
  `${n} items due at one instant (+${warmUp} warm-up), one confirmed publish each to a quorum queue; ` +
  `herald: ${counts.scanners} scanners, ${counts.relays} relays, ${counts.workers} workers, ${dispatch} dispatch (${heraldSettings}); ` +
  `graphile-worker: ${gw.processes} processes × concurrentJobs ${gw.concurrency}, maxPoolSize ${gw.pool}` +
  (gw.localQueue > 0 ? `, localQueue ${gw.localQueue}` : '') +
  (gw.completeBatchMs >= 0 ? `, completeJobBatchDelay ${gw.completeBatchMs} ms` : '');
log(setup);
const pairs: string[] = [];
const describeRun = (name: string, r: Run) =>
  `${name}=${Math.round(r.perSecond)}/s (last confirmed ${(r.lastAfterDueMs / 1000).toFixed(1)} s after due; ` +
  `CPU per item: ${(r.cpuMs / n).toFixed(2)} ms in its processes, ${(r.postgresCpuMs / n).toFixed(2)} ms in PostgreSQL, ` +
  `${(r.rabbitmqCpuMs / n).toFixed(2)} ms in RabbitMQ; database: ${describeWork(r.databaseWork, n)}; ` +
  `host ${Math.round(r.hostBusy * 100)}% busy; load ${r.load})`;
for (let pair = 1; pair <= Number(values.pairs); pair++) {
  log(`pair ${pair}: herald (load ${load()})`);
  const h = await herald();
  log(`pair ${pair}: ${describeRun('herald', h)}`);
  for (const line of describeWalByRelation(h.databaseWork, n)) log(line);
  log(`pair ${pair}: graphile-worker (load ${load()})`);
  const g = await graphileWorker();
  log(`pair ${pair}: ${describeRun('graphile-worker', g)}`);
  for (const line of describeWalByRelation(g.databaseWork, n)) log(line);
  pairs.push(
    `pair ${pair}: herald=${Math.round(h.perSecond)}/s graphile-worker=${Math.round(g.perSecond)}/s ratio=${(h.perSecond / g.perSecond).toFixed(2)}`,
  );
  log(pairs[pairs.length - 1]!);
}
log('');
log(profile.line);
log(setup);
for (const line of pairs) log(line);
process.exit(0);
