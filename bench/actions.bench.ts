/**
 * Scheduled-action benchmark (seed 002, queue shape): due → action_execute published, with the
 * scanner, relay and worker roles as separate processes (docs/benchmarks.md has results).
 *
 *   npm run bench:actions -- [--scenario all|burst|signal] [--burst 100000] [--signals 1000]
 *                            [--window-ms 20000] [--scanners 2] [--workers 2] [--relays 2]
 *                            [--warm-up 100] [--baseline-samples 300]
 *
 *   baseline  one trivial transaction + one publish/confirm to a quorum queue, sampled while idle.
 *   burst     N actions due at the same instant: fired/s (executions per second from the due time to
 *             the last execution) and due → action_execute published p50/p99. Each action goes
 *             scanner claim → scheduled_action_fire (relay) → worker (fenced handler, processAction,
 *             completion) → action_execute (relay).
 *   signal    N waits (deadline an hour away), unlocked by signals sent through the library at
 *             distinct random milliseconds over --window-ms, the roles idle between: signal →
 *             action_execute published p50/p99 (goal: p99 ≤ 25 ms). The signal's transaction claims
 *             the wait itself, so its fire message leaves with the signal's commit.
 *
 * Each scenario runs on a fresh database. The actions are written through the decider (ScheduleAction
 * with `now` an hour before the due instant and a one-hour delay, so all fall due at one instant: the
 * library's delays are whole seconds from the caller's commit) in batches, not timed. --warm-up actions
 * fall due in the 3 s to 1 s before the measured ones. Times come from the database (invariant 6):
 * due = execute_at, signal = the signal's received_at, published = the action_execute row's sent_at.
 * The roles publish to and consume the real seed queues (scheduled_action_fire, action_execute): the
 * benchmark refuses to run while anything else consumes them, and purges them before and after.
 */

import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { AmqpSink } from '../src/adapters/amqp/amqp-sink.js';
import { createDatabase } from '../src/adapters/postgres/database.js';
import { CoalescingNotifier } from '../src/adapters/postgres/notifications.js';
import { ScheduledActionService } from '../src/aggregates/scheduled-action/service.js';
import { loadConfig } from '../src/config.js';
import { CommandHandler } from '../src/eventstore/command-handler.js';
import { OutboxRelay } from '../src/outbox/relay.js';
import type { Database } from '../src/ports/database.js';
import { createTestDatabase, requireEnv, type TestDatabase, uniqueName } from '../test/support/services.js';
import {
  type ActionsBench,
  burst,
  checkOnce,
  seedActions,
  stages,
  WARM_UP_ORGANIZATION,
  waitForDone,
  withScenario,
} from './support/actions-burst.js';
import { describeWork } from './support/db-work.js';
import { baseline, type Distribution, describe, distribution, ms } from './support/dispatch-measure.js';
import { stopRoles } from './support/dispatch-roles.js';
import { databaseNowMs, distinctOffsets, inParallel } from './support/dispatch-setup.js';

const { values } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'all' },
    burst: { type: 'string', default: '100000' },
    signals: { type: 'string', default: '1000' },
    'window-ms': { type: 'string', default: '20000' },
    scanners: { type: 'string', default: '2' },
    workers: { type: 'string', default: '2' },
    relays: { type: 'string', default: '2' },
    'warm-up': { type: 'string', default: '100' },
    'baseline-samples': { type: 'string', default: '300' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  process.stdout.write(
    'npm run bench:actions -- [--scenario all|burst|signal] [--burst 100000] [--signals 1000] [--window-ms 20000] ' +
      '[--scanners 2] [--workers 2] [--relays 2] [--warm-up 100] [--baseline-samples 300]\n(see bench/actions.bench.ts)\n',
  );
  process.exit(0);
}
const scenario = values.scenario!;
if (!['all', 'burst', 'signal'].includes(scenario))
  throw new Error(`--scenario ${scenario}: all|burst|signal`);
const counts = {
  scanners: Number(values.scanners),
  relays: Number(values.relays),
  workers: Number(values.workers),
};
const amqpUrl = requireEnv('AMQP_URL');
const queueType = process.env.HERALD_AMQP_QUEUE_TYPE === 'classic' ? 'classic' : 'quorum';
/** The library's NOTIFY window, as the roles read it (HERALD_NOTIFY_COALESCE_MS). */
const notifyCoalesceMs = loadConfig({
  ...process.env,
  DATABASE_URL: requireEnv('DATABASE_URL'),
}).notifyCoalesceMs;

const log = (line: string) => process.stdout.write(`${line}\n`);
const summary: string[] = [];
const bench: ActionsBench = { amqpUrl, queueType, counts, log };

const SIGNAL_TIMES = `
  select (extract(epoch from (o.sent_at - s.received_at)) * 1000)::float8 as signal_to_sent,
         (extract(epoch from (f.sent_at - s.received_at)) * 1000)::float8 as signal_to_fire
    from scheduled_action a
    join action_signal s on s.id = (a.unlocked_by ->> 'signalId')::uuid
    join outbox o on o.destination = 'action_execute' and (o.payload ->> 'actionId')::uuid = a.id
    join outbox f on f.destination = 'scheduled_action_fire' and (f.payload ->> 'actionId')::uuid = a.id
   where a.organization_id <> '${WARM_UP_ORGANIZATION}' and o.status = 'sent'`;

async function signals(n: number) {
  return withScenario(bench, 'signal', async (db, start, database) => {
    // The signals' own Database publishes the fire messages it commits (ADR 0024), as a library caller
    // opts in, unless HERALD_RELAY_INLINE_PUBLISH=false (then the relays take them).
    const inline = inlineSignals(database);
    const signalDb = inline?.db ?? db;
    const notifier = new CoalescingNotifier(signalDb, notifyCoalesceMs);
    const service = new ScheduledActionService({
      db: signalDb,
      handler: new CommandHandler({ db: signalDb, wakeups: notifier, pod: 'bench' }),
      settings: { dispatch: 'queue', maxRetries: 3, signalLookbackMs: 86_400_000 },
    });
    try {
      const warmUp = Number(values['warm-up']);
      const now = await databaseNowMs(db);
      const keys = Array.from({ length: n }, () => uniqueName('subject'));
      const warmKeys = Array.from({ length: warmUp }, () => uniqueName('warm'));
      await seedActions(db, [
        ...warmKeys.map((wait) => ({ dueAtMs: now + 3_600_000, wait, organizationId: WARM_UP_ORGANIZATION })),
        ...keys.map((wait) => ({ dueAtMs: now + 3_600_000, wait, organizationId: 'org-bench' })),
      ]);
      const roles = await start();
      // Warm-up: connections and code paths, then the measured signals at their offsets.
      await inParallel(warmKeys, 4, async (k) => {
        await service.signal({ organizationId: WARM_UP_ORGANIZATION, correlationKey: k, name: 'clicked' });
      });
      const windowMs = Number(values['window-ms']);
      const offsets = distinctOffsets(n, windowMs);
      const started = performance.now() + 500;
      const calls: number[] = [];
      await Promise.all(
        keys.map(async (k, i) => {
          const wait = started + offsets[i]! - performance.now();
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
          const called = performance.now();
          const outcome = await service.signal({
            organizationId: 'org-bench',
            correlationKey: k,
            name: 'clicked',
          });
          calls.push(performance.now() - called);
          if (outcome.unlocked.length !== 1)
            throw new Error(`signal for ${k} unlocked ${outcome.unlocked.length} waits`);
        }),
      );
      log(
        `signal: ${n} signals sent over ${windowMs} ms to ${roles.length} roles; the signal call (one transaction) ${describe(distribution(calls))}`,
      );
      await waitForDone(db, warmUp + n, 120_000);
      await stopRoles(roles);
      roles.length = 0;
      await checkOnce(db, warmUp + n);
      await stages(bench, db, 'signal');
      const times = await db.query<{ signal_to_sent: number; signal_to_fire: number }>(SIGNAL_TIMES);
      return {
        signalToSent: distribution(times.rows.map((r) => r.signal_to_sent)),
        signalToFire: distribution(times.rows.map((r) => r.signal_to_fire)),
      };
    } finally {
      notifier.close();
      await inline?.close();
    }
  });
}

/** A Database on the scenario's database whose transactions publish their own outbox rows (ADR 0024). */
function inlineSignals(database: TestDatabase): { db: Database; close(): Promise<void> } | undefined {
  if (process.env.HERALD_RELAY_INLINE_PUBLISH === 'false') return undefined;
  const config = database.config();
  const db = createDatabase({ url: database.url, schema: database.schema, poolSize: 10 });
  const sink = new AmqpSink({ url: amqpUrl, inFlight: config.relay.inFlight, name: 'herald-bench-signals' });
  const publisher = new OutboxRelay({
    db,
    sinks: { amqp: sink },
    settings: config.relay,
    owner: 'bench-signals',
  });
  db.publishOutboxInline?.(publisher.inlinePublisher());
  return {
    db,
    async close() {
      await publisher.stop();
      await sink.close();
      await db.close();
    },
  };
}

async function runBaseline(): Promise<Distribution> {
  const database = await createTestDatabase({ migrate: false });
  try {
    const samples = await baseline({
      db: database.db,
      amqpUrl,
      queue: uniqueName('herald_bench_baseline'),
      queueType,
      samples: Number(values['baseline-samples']),
      gapMs: 20,
      body: JSON.stringify({ actionId: randomUUID(), organizationId: 'org-1', epoch: 1 }),
    });
    const total = distribution(samples.total);
    log(`baseline: ${describe(total)}`);
    summary.push(
      `baseline p50=${ms(total.p50)} p99=${ms(total.p99)} (ms: one trivial transaction + one publish/confirm)`,
    );
    return total;
  } finally {
    await database.drop();
  }
}

const base = await runBaseline();
const ratio = (d: Distribution) =>
  `p50 ${(d.p50 / base.p50).toFixed(1)}x, p99 ${(d.p99 / base.p99).toFixed(1)}x the baseline`;
if (scenario === 'all' || scenario === 'burst') {
  const n = Number(values.burst);
  const r = await burst(bench, n, Number(values['warm-up']));
  log(`burst: due → action_execute published ${describe(r.dueToSent)}`);
  log(`burst: database: ${describeWork(r.databaseWork, n)}`);
  summary.push(
    `burst p50=${ms(r.dueToSent.p50)} p99=${ms(r.dueToSent.p99)} fired/s=${Math.round(r.firedPerSecond)} ` +
      `(${n} actions due at one instant, ${counts.scanners} scanners, ${counts.workers} workers, ${counts.relays} relays; ` +
      `last published ${(r.lastAfterDueMs / 1000).toFixed(1)} s after the due time; ${ratio(r.dueToSent)})`,
  );
}
if (scenario === 'all' || scenario === 'signal') {
  const n = Number(values.signals);
  const r = await signals(n);
  log(`signal: signal → scheduled_action_fire published ${describe(r.signalToFire)}`);
  log(`signal: signal → action_execute published ${describe(r.signalToSent)}`);
  summary.push(
    `signal p50=${ms(r.signalToSent.p50)} p99=${ms(r.signalToSent.p99)} (signal → action_execute published, ${n} waits; ` +
      `goal p99 ≤ 25 ms: ${r.signalToSent.p99 <= 25 ? 'met' : 'missed'}; ${ratio(r.signalToSent)})`,
  );
}
log('');
for (const line of summary) log(line);
process.exit(0);
