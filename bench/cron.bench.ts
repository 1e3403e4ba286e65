/**
 * Cron materialization benchmark: scheduled_for → run row committed → published, with `herald scanner`
 * × --scanners and `herald relay` × --relays as separate processes (docs/benchmarks.md has results).
 *
 *   npm run bench:cron -- [--scenario all|minute|second] [--minute-jobs 10000] [--second-jobs 1000]
 *                         [--seconds 10] [--scanners 2] [--relays 2] [--baseline-samples 300]
 *
 *   baseline  one trivial transaction + one publish/confirm to a quorum queue (the floor under
 *             scheduled_for → published), measured first in the same run.
 *   minute    --minute-jobs jobs `* * * * *` (every minute, at :00): the occurrence of one minute
 *             boundary, all due at the same instant.
 *   second    --second-jobs jobs `* * * * * *` (every second) for --seconds occurrences each.
 *
 * Jobs are created through CronService (overlap `allow`: no executor runs here, so every occurrence is
 * a run with its cron_events message; half in UTC, half in Asia/Bangkok). Times come from the
 * database: scheduled_for; materialized = the run's created_at (the claim transaction's now(), also the
 * outbox row's created_at);
 * published = outbox.sent_at (after the broker's confirm). Scanner CPU = utime + stime of the scanner
 * processes (/proc) from just before the measured occurrences to their last publish, per occurrence
 * materialized meanwhile, above the scanners' CPU while idle (measured first, before any job exists). The relays publish to the real
 * `cron_events` queue: the benchmark refuses to run while anything consumes it and purges it.
 */
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import { queueOptions } from '../src/adapters/amqp/amqp-connection.js';
import { CoalescingNotifier } from '../src/adapters/postgres/notifications.js';
import { CronService } from '../src/aggregates/cron/service.js';
import { CRON_EVENTS_QUEUE } from '../src/aggregates/cron/topology.js';
import { CommandHandler } from '../src/eventstore/command-handler.js';
import type { Database } from '../src/ports/database.js';
import { createTestDatabase, requireEnv, uniqueName } from '../test/support/services.js';
import { baseline, describe, distribution, ms } from './support/dispatch-measure.js';
import { type RoleProcess, startRoles, stopRoles } from './support/dispatch-roles.js';
import { databaseNowMs, inParallel } from './support/dispatch-setup.js';

const { values } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'all' },
    'minute-jobs': { type: 'string', default: '10000' },
    'second-jobs': { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '10' },
    scanners: { type: 'string', default: '2' },
    relays: { type: 'string', default: '2' },
    'baseline-samples': { type: 'string', default: '300' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  process.stdout.write(
    'npm run bench:cron -- [--scenario all|minute|second] [--minute-jobs 10000] [--second-jobs 1000] [--seconds 10] ' +
      '[--scanners 2] [--relays 2] [--baseline-samples 300]\n(see bench/cron.bench.ts and docs/benchmarks.md)\n',
  );
  process.exit(0);
}
const scenario = values.scenario!;
if (!['all', 'minute', 'second'].includes(scenario))
  throw new Error(`--scenario ${scenario}: all|minute|second`);
const amqpUrl = requireEnv('AMQP_URL');
const queueType = process.env.HERALD_AMQP_QUEUE_TYPE === 'classic' ? 'classic' : 'quorum';
const counts = { scanners: Number(values.scanners), relays: Number(values.relays) };
const log = (line: string) => process.stdout.write(`${line}\n`);
const summary: string[] = [];

async function cronQueue() {
  const connection = await amqp.connect(amqpUrl);
  const channel = await connection.createChannel();
  return {
    async check() {
      const ok = await channel.assertQueue(CRON_EVENTS_QUEUE, queueOptions(queueType));
      if (ok.consumerCount > 0) {
        throw new Error(
          `${CRON_EVENTS_QUEUE} has ${ok.consumerCount} consumer(s): run the benchmark when nothing consumes it`,
        );
      }
    },
    purge: async () => (await channel.purgeQueue(CRON_EVENTS_QUEUE)).messageCount,
    close: () => connection.close().catch(() => {}),
  };
}

/**
 * The measured occurrences' messages, from the outbox alone (no join: the tables grow by thousands of
 * rows a second during a run and a join's plan goes stale): a run's first message carries its
 * scheduledFor (ISO, so text order is time order) and epoch 1; the outbox row's created_at is the
 * claim transaction's now() (= the run's created_at), its sent_at the mark after the broker's confirm.
 */
const runMessages = (from: number, to: number) => `
    from outbox o
   where o.destination = '${CRON_EVENTS_QUEUE}' and (o.payload ->> 'epoch') = '1'
     and o.payload ->> 'scheduledFor' >= '${new Date(from).toISOString()}'
     and o.payload ->> 'scheduledFor' <= '${new Date(to).toISOString()}'`;

const lags = (from: number, to: number) => `
  select (extract(epoch from (o.created_at - (o.payload ->> 'scheduledFor')::timestamptz)) * 1000)::float8 as to_materialized,
         (extract(epoch from (o.sent_at - (o.payload ->> 'scheduledFor')::timestamptz)) * 1000)::float8 as to_published
  ${runMessages(from, to)}`;

const publishedCount = (from: number, to: number) =>
  `select count(*)::int as n ${runMessages(from, to)} and o.status = 'sent'`;

const MATERIALIZED_BETWEEN = `select count(*)::int as n from job_run where created_at >= $1 and created_at <= $2`;

const scannerCpu = (roles: readonly RoleProcess[]) =>
  roles.filter((r) => r.role === 'scanner').reduce((sum, r) => sum + r.cpuMs(), 0);

async function waitForDb(db: Database, atMs: number) {
  for (;;) {
    const now = await databaseNowMs(db);
    if (now >= atMs) return;
    await new Promise((resolve) => setTimeout(resolve, Math.min(250, atMs - now)));
  }
}

async function runScenario(name: string, jobs: number, schedule: string, occurrences: number) {
  const queue = await cronQueue();
  const database = await createTestDatabase();
  let roles: RoleProcess[] = [];
  let closeNotifier = () => {};
  try {
    await queue.check();
    await queue.purge();
    roles = await startRoles(counts, { databaseUrl: database.url, schema: database.schema, amqpUrl });
    // Idle scanner CPU, before any job exists: the floor under the CPU per occurrence.
    const idleStarted = performance.now();
    const idleCpu0 = scannerCpu(roles);
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const idleCpu = scannerCpu(roles) - idleCpu0;
    const idleMs = performance.now() - idleStarted;
    // The library wiring of docs/architecture.md (Library use): commits wake the scanners (NOTIFY) for jobs due within their poll.
    const notifier = new CoalescingNotifier(database.db, database.config().notifyCoalesceMs);
    closeNotifier = () => notifier.close();
    const cron = new CronService({
      db: database.db,
      handler: new CommandHandler({ db: database.db, wakeups: notifier, pod: 'bench' }),
    });
    const created = performance.now();
    await inParallel(Array.from({ length: jobs }), 16, async (_, i) => {
      await cron.create({
        organizationId: `org-${i % 50}`,
        name: `bench job ${i}`,
        schedule,
        timezone: i % 2 ? 'UTC' : 'Asia/Bangkok',
        jobType: i % 3 ? 'ping' : 'webhook',
        payload: { url: `https://hooks.example.com/bench/${i}` },
        overlap: 'allow',
      });
    });
    log(`${name}: ${jobs} jobs '${schedule}' created in ${Math.round(performance.now() - created)} ms`);
    // The measured occurrences: far enough ahead that the roles are warm and any backlog is gone.
    const now = await databaseNowMs(database.db);
    const period = name === 'minute' ? 60_000 : 1_000;
    const lead = name === 'minute' ? 8_000 : 3_000;
    const from = Math.ceil((now + lead) / period) * period;
    const to = from + (occurrences - 1) * period;
    await waitForDb(database.db, from - 500);
    const cpu0 = scannerCpu(roles);
    const cpuFrom = await databaseNowMs(database.db);
    const expected = jobs * occurrences;
    const deadline = Date.now() + (to - now) + 180_000;
    for (;;) {
      const { rows } = await database.db.query<{ n: number }>(publishedCount(from, to));
      if (rows[0]!.n >= expected) break;
      if (Date.now() > deadline)
        throw new Error(`${name}: ${rows[0]!.n} of ${expected} occurrences published in time`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const cpu = scannerCpu(roles) - cpu0;
    const cpuTo = await databaseNowMs(database.db);
    const { rows: made } = await database.db.query<{ n: number }>(MATERIALIZED_BETWEEN, [
      new Date(cpuFrom),
      new Date(cpuTo),
    ]);
    await stopRoles(roles);
    for (const r of roles) for (const problem of r.problems.slice(0, 10)) log(`  ${problem}`);
    roles = [];
    const { rows } = await database.db.query<{ to_materialized: number; to_published: number }>(
      lags(from, to),
    );
    const materialized = distribution(rows.map((r) => r.to_materialized));
    const published = distribution(rows.map((r) => r.to_published));
    const { rows: doubled } = await database.db.query<{ n: number }>(
      `select count(*)::int as n from (select job_id, scheduled_for from job_run where trigger_key = 'schedule'
         group by 1, 2 having count(*) > 1) d`,
    );
    if (doubled[0]!.n > 0) throw new Error(`${name}: ${doubled[0]!.n} occurrences materialized twice`);
    const perOccurrence =
      ((cpu - (idleCpu / Math.max(1, idleMs)) * (cpuTo - cpuFrom)) * 1000) / Math.max(1, made[0]!.n);
    log(`${name}: scheduled_for → materialized ${describe(materialized)}`);
    log(`${name}: scheduled_for → published ${describe(published)}`);
    log(
      `${name}: scanner CPU ${Math.round(cpu)} ms for ${made[0]!.n} occurrences in ${Math.round(cpuTo - cpuFrom)} ms ` +
        `(${Math.round(perOccurrence)} µs per occurrence above idle; idle ${((idleCpu / Math.max(1, idleMs)) * 1000).toFixed(1)} ms/s)`,
    );
    return { materialized, published, perOccurrence, n: rows.length };
  } finally {
    await stopRoles(roles).catch(() => {});
    closeNotifier();
    await queue.purge().catch(() => {});
    await queue.close();
    await database.drop();
  }
}

const floor = await (async () => {
  const database = await createTestDatabase({ migrate: false });
  try {
    const samples = await baseline({
      db: database.db,
      amqpUrl,
      queue: uniqueName('herald_bench_cron_baseline'),
      queueType,
      samples: Number(values['baseline-samples']),
      gapMs: 20,
      body: JSON.stringify({
        runId: '6b0f7a2e-4c1d-4f3b-9a55-2f0c8d1e7b90',
        jobId: '7c1f8b3f-5d2e-4a4c-8b66-3f1d9e2f8ca1',
        organizationId: 'org-12',
        jobType: 'ping',
        scheduledFor: '2026-12-01T12:00:00.000Z',
        epoch: 1,
        attempt: 1,
      }),
    });
    const total = distribution(samples.total);
    log(`baseline: transaction + publish/confirm (${queueType}) ${describe(total)}`);
    summary.push(
      `baseline p50=${ms(total.p50)} p99=${ms(total.p99)} (ms: one trivial transaction + one publish/confirm)`,
    );
    return total;
  } finally {
    await database.drop();
  }
})();

const ratio = (value: number, base: number) => `${(value / base).toFixed(1)}x`;
const line = (name: string, r: Awaited<ReturnType<typeof runScenario>>, what: string) =>
  `${name} p50=${ms(r.published.p50)} p99=${ms(r.published.p99)} (ms, scheduled_for → published, ${what}, n=${r.n}; ` +
  `materialized p50=${ms(r.materialized.p50)} p99=${ms(r.materialized.p99)}; scanner CPU ${Math.round(r.perOccurrence)} µs/occurrence; ` +
  `p50 ${ratio(r.published.p50, floor.p50)}, p99 ${ratio(r.published.p99, floor.p99)} baseline)`;

if (scenario === 'all' || scenario === 'minute') {
  const jobs = Number(values['minute-jobs']);
  const r = await runScenario('minute', jobs, '* * * * *', 1);
  summary.push(line('minute', r, `${jobs} jobs due at one minute boundary, ${counts.scanners} scanners`));
}
if (scenario === 'all' || scenario === 'second') {
  const jobs = Number(values['second-jobs']);
  const seconds = Number(values.seconds);
  const r = await runScenario('second', jobs, '* * * * * *', seconds);
  summary.push(line('second', r, `${jobs} jobs every second for ${seconds} s, ${counts.scanners} scanners`));
}

log('');
for (const s of summary) log(s);
