/**
 * Consumer throughput benchmark: deliveries/s through the fenced LINE delivery worker against a
 * same-run baseline (docs/benchmarks.md has results and how to read them).
 *
 *   npm run bench:consume -- [--campaigns 20000] [--workers 1,3] [--log-level info] [--trace]
 *                            [--cpu-prof <dir>] [--effect-ms 0] [--timeout-s 900]
 *   npm run bench:consume -- --statement-cpu [--per-step 1500]
 *
 *   herald    the real LINE delivery consumer (the fenced handler: inbox claim, destination re-check,
 *             the delivery — its plan and its one chunk each recorded in a transaction of its own, the
 *             chunk sent through the @line/bot-sdk adapter to the LINE test server —, CompleteCampaign in
 *             the inbox transaction, then the ack) consumed through consume() with the LINE consumer's
 *             prefetch (HERALD_LINE_DELIVERY_CONCURRENCY, from the pool size), wired as `herald
 *             worker` wires it.
 *   baseline  raw amqplib with the same prefetch; per message one transaction with one statement (an
 *             inbox-style insert … on conflict do nothing), then the ack: the floor any at-least-once
 *             consumer with a database effect pays (no LINE call: the ratio includes Herald's).
 *
 * Each scenario (baseline and herald, for each --workers count, in that order) runs on a fresh
 * database and a queue of its own: 50 organizations' LINE channels and sealed audiences (10 members) are
 * registered in the LINE test server (run by this process, on loopback, with LINE's rate limits raised
 * out of the way) and Herald's directory, N campaigns are created, activated and claimed through the
 * library in batches of 500 (DISPATCHING, epoch 1, one dispatch outbox row each), the rows' messages are
 * published to the queue with the relay's properties and confirmed, the rows marked sent and the
 * tables vacuumed (bench/support/consume-setup.ts; not timed). Then the consumers — each its own child
 * process (node --import tsx, as `herald worker` runs from source) with its own AMQP connection and
 * pool — are started at once, and the time runs from that start until every campaign is COMPLETED
 * (herald) or every message has its inbox row (baseline), polled every 100 ms against a deadline.
 * Prints per scenario the rate and CPU per message (consumer processes, their PostgreSQL backends,
 * the RabbitMQ node), and last one line per worker count:
 *   consume workers=<n> herald=<msg/s> baseline=<msg/s> ratio=<herald/baseline>
 *
 * --trace times every transaction's phases inside the consumers (bench/support/consume-trace.ts) and
 * prints them per message; it adds a few timers per statement, so its rates are not the figures.
 * --cpu-prof <dir> makes every consumer process write a V8 CPU profile there when it stops.
 * --effect-ms <ms> stands in for a slower remote API: the LINE test server holds each answer that long
 * (the herald consumer waits for it inside the inbox transaction), the baseline waits as long inside its
 * transaction (bench/support/consume-child.ts). 0 (the default): LINE answers at once.
 * After each herald scenario, every campaign's planned retry key must have been accepted exactly once
 * by the LINE test server, with no request outside LINE's OpenAPI contract.
 * --statement-cpu runs no scenario: it prints what each statement of the fenced path costs the
 * PostgreSQL backend and the pg driver, one connection, no concurrency, unnamed (as sent today) and
 * as named prepared statements (bench/support/consume-statements.ts).
 * Needs PostgreSQL and RabbitMQ (npm run bench:consume starts them).
 */
import { cpus, loadavg, totalmem } from 'node:os';
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import type { QueueType } from '../src/adapters/amqp/amqp-connection.js';
import type { CampaignConfig } from '../src/aggregates/campaign/settings.js';
import { loadConfig } from '../src/config.js';
import type { Database } from '../src/ports/database.js';
import { lineEnv, plannedLineKeys, startTestLineSimulator } from '../test/support/line.js';
import { createTestDatabase, requireEnv, uniqueName } from '../test/support/services.js';
import {
  BENCH_ORGANIZATIONS,
  createClaimedCampaigns,
  deleteConsumerQueues,
  publishDispatchMessages,
  registerLineChannels,
} from './support/consume-setup.js';
import { type StatementCost, statementCosts } from './support/consume-statements.js';
import type { TraceReport } from './support/consume-trace.js';
import {
  beamPids,
  type ConsumerMode,
  type ConsumerProcess,
  CpuMeter,
  consumerBackendPids,
  startConsumers,
} from './support/consume-workers.js';

const { values } = parseArgs({
  options: {
    campaigns: { type: 'string', default: '20000' },
    workers: { type: 'string', default: '1,3' },
    'log-level': { type: 'string', default: 'info' },
    trace: { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
    'effect-ms': { type: 'string', default: '0' },
    'statement-cpu': { type: 'boolean', default: false },
    'per-step': { type: 'string', default: '1500' },
    'timeout-s': { type: 'string', default: '900' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  process.stdout.write(
    'npm run bench:consume -- [--campaigns 20000] [--workers 1,3] [--log-level info] [--trace] [--cpu-prof <dir>] [--effect-ms 0] [--timeout-s 900]\n' +
      '       npm run bench:consume -- --statement-cpu [--per-step 1500]\n' +
      '(see bench/consume.bench.ts and docs/benchmarks.md)\n',
  );
  process.exit(0);
}
const campaigns = Number(values.campaigns);
const workerCounts = values.workers!.split(',').map(Number);
if (!Number.isInteger(campaigns) || campaigns < 1) throw new Error(`--campaigns ${values.campaigns}`);
if (workerCounts.some((w) => !Number.isInteger(w) || w < 1)) throw new Error(`--workers ${values.workers}`);
const amqpUrl = requireEnv('AMQP_URL');
const queueType: QueueType = process.env.HERALD_AMQP_QUEUE_TYPE === 'classic' ? 'classic' : 'quorum';
const timeoutMs = Number(values['timeout-s']) * 1000;
const effectMs = Number(values['effect-ms']);
if (!Number.isInteger(effectMs) || effectMs < 0) throw new Error(`--effect-ms ${values['effect-ms']}`);

const log = (line: string) => process.stdout.write(`${line}\n`);
const rate = (messages: number, ms: number) => Math.round((messages / ms) * 1000);
const perMessageUs = (ms: number, messages: number) => Math.round((ms * 1000) / messages);
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

/** What the consumers leave when they are done with every message. */
const PROGRESS: Record<ConsumerMode, string> = {
  herald: `select count(*)::int as n from campaign where status = 'COMPLETED'`,
  baseline: 'select count(*)::int as n from inbox',
};

interface ScenarioResult {
  rate: number;
  elapsedMs: number;
}

async function runScenario(mode: ConsumerMode, workers: number): Promise<ScenarioResult> {
  const name = `workers=${workers} ${mode}`;
  const database = await createTestDatabase();
  const config = database.config();
  const queue = uniqueName(`herald_bench_consume_${mode}`);
  const spec = { queue, queueType, retryDelayMs: config.consumer.retryDelayMs };
  let consumers: ConsumerProcess[] = [];
  try {
    const setupStarted = performance.now();
    simulator.reset();
    if (mode === 'herald') {
      await registerLineChannels(database.db, simulator);
      if (effectMs > 0) {
        for (const channelId of channelIds()) simulator.behave(channelId, { kind: 'stall', ms: effectMs });
      }
    }
    const { claimTransactions } = await createClaimedCampaigns(database.db, campaigns);
    const created = performance.now();
    const published = await publishDispatchMessages(database.db, { url: amqpUrl, queue, queueType });
    if (published.inQueue !== campaigns) {
      throw new Error(`${name}: ${published.inQueue} of ${campaigns} messages in ${queue} after publishing`);
    }
    log(
      `${name}: setup ${campaigns} campaigns created and claimed in ${Math.round(created - setupStarted)} ms ` +
        `(${claimTransactions} claim transactions), ${published.published} messages (${published.bodyBytes} B ` +
        `bodies) published and confirmed in ${Math.round(performance.now() - created)} ms; load avg ${load()}`,
    );

    consumers = await startConsumers(mode, workers, {
      databaseUrl: database.url,
      schema: database.schema,
      amqpUrl,
      queue,
      logLevel: values['log-level']!,
      trace: values.trace!,
      effectMs,
      ...(values['cpu-prof'] ? { cpuProfileDirectory: values['cpu-prof'] } : {}),
    });
    const postgresCpu = new CpuMeter(() => consumerBackendPids(database.db));
    const brokerCpu = new CpuMeter(beamPids);
    await postgresCpu.start();
    await brokerCpu.start();

    const started = performance.now();
    await Promise.all(consumers.map((c) => c.go()));
    const consumingAfterMs = performance.now() - started;
    const deadline = started + timeoutMs;
    let done = 0;
    for (;;) {
      const { rows } = await database.db.query<{ n: number }>(PROGRESS[mode]);
      done = rows[0]!.n;
      if (done >= campaigns) break;
      const gone = consumers.find((c) => c.exited);
      if (gone) throw new Error(`${name}: ${gone.name} exited during the run: ${gone.problems.join('; ')}`);
      if (performance.now() > deadline) {
        throw new Error(`${name}: timed out after ${timeoutMs} ms: ${done} of ${campaigns} done`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const elapsedMs = performance.now() - started;
    const postgresMs = await postgresCpu.end();
    const brokerMs = await brokerCpu.end();
    const stopped = await Promise.all(consumers.map((c) => c.stop()));
    const problems = consumers.flatMap((c) => c.problems);
    consumers = [];

    await check(mode, database.db, stopped);
    for (const problem of problems.slice(0, 20)) log(`  ${problem}`);
    const consumerMs = stopped.reduce((sum, s) => sum + s.cpuMs, 0);
    const perSecond = rate(campaigns, elapsedMs);
    const cores = (ms: number) => (ms / elapsedMs).toFixed(2);
    log(
      `${name}: ${campaigns} in ${Math.round(elapsedMs)} ms = ${perSecond}/s (consuming ${Math.round(consumingAfterMs)} ms ` +
        `after the start); load avg ${load()}`,
    );
    log(
      `${name}: cpu per message (cores busy): consumer processes ${perMessageUs(consumerMs, campaigns)} µs ` +
        `(${cores(consumerMs)}), their PostgreSQL backends ${perMessageUs(postgresMs, campaigns)} µs ` +
        `(${cores(postgresMs)}), RabbitMQ node ${perMessageUs(brokerMs, campaigns)} µs (${cores(brokerMs)}; ` +
        'the whole node, whatever else uses it included)',
    );
    if (values.trace) for (const line of formatTrace(stopped.map((s) => s.trace!))) log(`${name}: ${line}`);
    return { rate: perSecond, elapsedMs };
  } finally {
    for (const consumer of consumers) consumer.kill();
    await deleteConsumerQueues(amqpUrl, spec).catch((error: unknown) =>
      log(`${name}: could not delete the queues of ${queue}: ${String(error)}`),
    );
    await database.drop();
  }
}

/** Every message handled exactly once, and nothing else happened (no retries, discards, duplicates). */
async function check(
  mode: ConsumerMode,
  db: Database,
  stopped: readonly { stats: Record<string, unknown> }[],
): Promise<void> {
  const sum = (key: string) => stopped.reduce((total, s) => total + Number(s.stats[key] ?? 0), 0);
  if (sum('processed') !== campaigns) {
    throw new Error(`${mode}: consumers processed ${sum('processed')} of ${campaigns}`);
  }
  if (mode === 'baseline') {
    if (sum('inserted') !== campaigns) throw new Error(`baseline: ${sum('inserted')} inbox rows inserted`);
    return;
  }
  for (const key of ['duplicates', 'discarded', 'rejected', 'retried', 'deadLettered', 'redeliveryPending']) {
    if (sum(key) !== 0) throw new Error(`herald: ${sum(key)} ${key}`);
  }
  const { rows } = await db.query<{ completed: number; inbox: number }>(
    `select (select count(*)::int from campaign where status = 'COMPLETED') as completed,
            (select count(*)::int from inbox where status = 'processed') as inbox`,
  );
  const r = rows[0]!;
  if (r.completed !== campaigns || r.inbox !== campaigns) {
    throw new Error(`herald: expected ${campaigns} of each, got ${JSON.stringify(r)}`);
  }
  // At LINE: every campaign's one planned chunk accepted exactly once, nothing else, every request valid.
  const accepted = new Map<string, number>();
  let calls = 0;
  let duplicates = 0;
  for (const channelId of channelIds()) {
    const stats = simulator.stats(channelId);
    if (stats.requestsDropped > 0) throw new Error(`herald: the LINE test server dropped request records`);
    calls += stats.requests.length;
    duplicates += stats.duplicates;
    for (const request of stats.requests) {
      if (request.retryKey !== null && request.status === 200) {
        accepted.set(request.retryKey, (accepted.get(request.retryKey) ?? 0) + 1);
      }
    }
  }
  const { rows: states } = await db.query<{
    campaign_id: string;
    line: { plan: { epoch: number; chunks: number } };
  }>(`select id::text as campaign_id, line from campaign`);
  const notOnce = states.filter((c) =>
    plannedLineKeys({ campaignId: c.campaign_id, line: c.line as never }).some(
      (key) => accepted.get(key) !== 1,
    ),
  );
  if (notOnce.length > 0 || calls !== campaigns || duplicates !== 0 || simulator.violationCount !== 0) {
    throw new Error(
      `herald: at LINE ${calls} calls for ${campaigns} campaigns, ${duplicates} answered 409, ` +
        `${notOnce.length} campaigns not accepted exactly once, ${simulator.violationCount} contract violations`,
    );
  }
}

/** Mean ms per message of each phase over all consumers (phases seen in fewer messages say so). */
function formatTrace(reports: readonly TraceReport[]): string[] {
  const transactions = reports.reduce((sum, r) => sum + r.transactions, 0);
  const statements = reports.reduce((sum, r) => sum + r.statements, 0);
  const phases = new Map<string, { count: number; totalMs: number }>();
  for (const report of reports) {
    for (const [phase, totals] of report.phases) {
      const sum = phases.get(phase) ?? { count: 0, totalMs: 0 };
      sum.count += totals.count;
      sum.totalMs += totals.totalMs;
      phases.set(phase, sum);
    }
  }
  const lines = [
    `trace: ${transactions} transactions, ${(statements / transactions).toFixed(2)} statements each (BEGIN and COMMIT included)`,
  ];
  for (const [phase, { count, totalMs }] of phases) {
    const per = count === transactions ? '' : ` (${count} times)`;
    lines.push(`trace:   ${phase.padEnd(42)} ${(totalMs / transactions).toFixed(3)} ms per message${per}`);
  }
  return lines;
}

/** The LINE test server the herald consumers deliver to; its settings reach them through the environment. */
const simulator = await startTestLineSimulator();
Object.assign(process.env, lineEnv(simulator));
// Out of the way unless given: 10,000 broadcasts over 50 channels at LINE's 60 an hour would take days.
process.env.HERALD_LINE_BROADCAST_PER_HOUR ??= '1000000';
process.env.HERALD_LINE_MULTICAST_PER_SECOND ??= '100000';
const channelIds = () => Array.from({ length: BENCH_ORGANIZATIONS }, (_, i) => `channel-oa-${i}`);

const facts = await (async () => {
  const database = await createTestDatabase({ migrate: false });
  try {
    const { rows } = await database.db.query<{ v: string }>("select current_setting('server_version') as v");
    const model = await amqp.connect(amqpUrl);
    const rabbit = (model as unknown as { connection: { serverProperties: { version?: string } } }).connection
      .serverProperties.version;
    await model.close();
    return { postgres: rows[0]!.v, rabbit: rabbit ?? 'unknown' };
  } finally {
    await database.drop();
  }
})();
const config = loadConfig(process.env);
log(
  `consume: machine ${cpus().length} cpus (${cpus()[0]?.model.trim()}), ${Math.round(totalmem() / 2 ** 30)} GB, ` +
    `node ${process.version}, PostgreSQL ${facts.postgres}, RabbitMQ ${facts.rabbit}; load avg ${load()}`,
);
if (values['statement-cpu']) {
  const perStep = Number(values['per-step']);
  const database = await createTestDatabase();
  try {
    log(`statement-cpu: ${perStep} transactions per prefix, one connection, sequential (no concurrency)`);
    const costs = await statementCosts(database, perStep);
    const us = (value: number) => (Number.isNaN(value) ? '—' : String(Math.round(value))).padStart(9);
    const row = (c: StatementCost) =>
      `statement-cpu: ${c.name.padEnd(42)} ${us(c.postgresUs)} ${us(c.preparedUs)} ${us(c.clientUs)}`;
    log(
      `statement-cpu: ${'(µs per execution)'.padEnd(42)} ${'postgres'.padStart(9)} ${'prepared'.padStart(9)} ${'client'.padStart(9)}`,
    );
    log(row(costs.transaction));
    for (const step of costs.steps) log(row(step));
    const sum = (key: 'postgresUs' | 'preparedUs' | 'clientUs') =>
      costs.steps.reduce((total, s) => total + s[key], costs.transaction[key]);
    log(
      row({
        name: 'fenced path, all of it',
        postgresUs: sum('postgresUs'),
        preparedUs: sum('preparedUs'),
        clientUs: sum('clientUs'),
      }),
    );
    log(row(costs.baseline));
  } finally {
    await database.drop();
  }
  process.exit(0);
}

log(
  `consume: N=${campaigns} messages per scenario, prefetch=${(config as CampaignConfig).line.deliveryConcurrency}, pool=${config.dbPoolSize} ` +
    `per consumer, ${queueType} queues, consumer log level ${values['log-level']}${effectMs > 0 ? `, a ${effectMs} ms stand-in remote call in every transaction` : ''}${values.trace ? ', TRACED (timers in the consumers)' : ''}`,
);
log(
  'consume: every consumer is its own child process (node --import tsx, as `herald worker` runs from source) ' +
    'with its own AMQP connection and pool; with several, they share the one queue',
);

const summary: string[] = [];
for (const workers of workerCounts) {
  const baseline = await runScenario('baseline', workers);
  const herald = await runScenario('herald', workers);
  summary.push(
    `consume workers=${workers} herald=${herald.rate}/s baseline=${baseline.rate}/s ratio=${(herald.rate / baseline.rate).toFixed(2)}`,
  );
}
log('');
for (const line of summary) log(line);
await simulator.close();
