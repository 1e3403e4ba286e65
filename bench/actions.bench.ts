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
import { appendEvents } from '../src/adapters/postgres/event-queries.js';
import { CoalescingNotifier } from '../src/adapters/postgres/notifications.js';
import { scheduledActionAggregate } from '../src/aggregates/scheduled-action/descriptor.js';
import { ScheduledActionService } from '../src/aggregates/scheduled-action/service.js';
import { ACTION_QUEUES } from '../src/aggregates/scheduled-action/topology.js';
import { loadConfig } from '../src/config.js';
import {
  SCHEDULED_ACTION_STREAM_TYPE,
  type ScheduleAction,
  scheduledActionDecider,
} from '../src/domain/scheduled-action.js';
import { CommandHandler } from '../src/eventstore/command-handler.js';
import type { Database } from '../src/ports/database.js';
import { channels } from '../src/ports/wakeups.js';
import { createTestDatabase, requireEnv, uniqueName } from '../test/support/services.js';
import { baseline, type Distribution, describe, distribution, ms } from './support/dispatch-measure.js';
import { type RoleProcess, startRoles, stopRoles } from './support/dispatch-roles.js';
import { databaseNowMs, distinctOffsets, inParallel, sharedQueues } from './support/dispatch-setup.js';

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
const WARM_UP_ORGANIZATION = 'bench-warm-up';
/** The library's NOTIFY window, as the roles read it (HERALD_NOTIFY_COALESCE_MS). */
const notifyCoalesceMs = loadConfig({
  ...process.env,
  DATABASE_URL: requireEnv('DATABASE_URL'),
}).notifyCoalesceMs;
const SEED_BATCH = 1_000;

const log = (line: string) => process.stdout.write(`${line}\n`);
const summary: string[] = [];

/** Writes scheduled actions through the decider, `SEED_BATCH` per transaction (setup: not timed). */
async function seedActions(
  db: Database,
  actions: readonly { dueAtMs: number; wait?: string; organizationId: string }[],
) {
  const ids: string[] = [];
  for (let i = 0; i < actions.length; i += SEED_BATCH) {
    const batch = actions.slice(i, i + SEED_BATCH).map((a) => {
      const actionId = randomUUID();
      ids.push(actionId);
      const command: ScheduleAction = {
        type: 'ScheduleAction',
        actionId,
        now: new Date(a.dueAtMs - 3_600_000),
        organizationId: a.organizationId,
        mode: a.wait ? 'waitForSignal' : 'normal',
        actionType: 'send_message',
        actionConfig: { template: 'follow-up', locale: 'th' },
        workflowId: 'wf-bench',
        workflowNodePath: 'root/wait-1',
        ...(a.wait
          ? { expiresSeconds: 3_600, wait: { names: ['clicked'], correlationKey: a.wait } }
          : { delaySeconds: 3_600 }),
      };
      const events = scheduledActionDecider.decide(command, scheduledActionDecider.initialState());
      const state = events.reduce(scheduledActionDecider.evolve, scheduledActionDecider.initialState());
      return { actionId, events, state };
    });
    await db.transaction(async (tx) => {
      await appendEvents(
        tx,
        batch.flatMap(({ actionId, events }) =>
          events.map((event, index) => ({
            streamType: SCHEDULED_ACTION_STREAM_TYPE,
            streamId: actionId,
            version: index + 1,
            type: event.type,
            data: event.data,
            meta: { actor: 'bench-seed' },
          })),
        ),
      );
      await scheduledActionAggregate.store.saveMany!(
        tx,
        batch.map((b) => ({
          streamId: b.actionId,
          state: b.state,
          version: b.events.length,
          expectedVersion: 0,
        })),
      );
    });
  }
  return ids;
}

const EXECUTE_TIMES = `
  select (extract(epoch from (o.sent_at - a.execute_at)) * 1000)::float8 as due_to_sent,
         (extract(epoch from o.sent_at) * 1000)::float8 as sent_ms
    from outbox o join scheduled_action a on a.id = (o.payload ->> 'actionId')::uuid
   where o.destination = 'action_execute' and o.status = 'sent' and a.organization_id <> '${WARM_UP_ORGANIZATION}'`;

/** Where due → published goes, per action (ms): claim, fire published, executed, execute published. */
const STAGE_TIMES = `
  select (extract(epoch from (c.recorded_at - a.execute_at)) * 1000)::float8 as due_to_claim,
         (extract(epoch from (f.sent_at - c.recorded_at)) * 1000)::float8 as claim_to_fire_sent,
         (extract(epoch from (x.recorded_at - f.sent_at)) * 1000)::float8 as fire_sent_to_executed,
         (extract(epoch from (o.sent_at - x.recorded_at)) * 1000)::float8 as executed_to_sent
    from scheduled_action a
    join event c on c.stream_type = 'scheduled_action' and c.stream_id = a.id::text and c.type = 'ActionClaimed'
    join event x on x.stream_type = 'scheduled_action' and x.stream_id = a.id::text and x.type = 'ActionExecuted'
    join outbox f on f.destination = 'scheduled_action_fire' and (f.payload ->> 'actionId')::uuid = a.id
    join outbox o on o.destination = 'action_execute' and (o.payload ->> 'actionId')::uuid = a.id
   where a.organization_id <> '${WARM_UP_ORGANIZATION}' and o.status = 'sent'`;

async function stages(db: Database, name: string) {
  const { rows } = await db.query<Record<string, number>>(STAGE_TIMES);
  for (const stage of ['due_to_claim', 'claim_to_fire_sent', 'fire_sent_to_executed', 'executed_to_sent']) {
    log(`${name}: stage ${stage.replaceAll('_', ' ')} ${describe(distribution(rows.map((r) => r[stage]!)))}`);
  }
}

const SIGNAL_TIMES = `
  select (extract(epoch from (o.sent_at - s.received_at)) * 1000)::float8 as signal_to_sent,
         (extract(epoch from (f.sent_at - s.received_at)) * 1000)::float8 as signal_to_fire
    from scheduled_action a
    join action_signal s on s.id = (a.unlocked_by ->> 'signalId')::uuid
    join outbox o on o.destination = 'action_execute' and (o.payload ->> 'actionId')::uuid = a.id
    join outbox f on f.destination = 'scheduled_action_fire' and (f.payload ->> 'actionId')::uuid = a.id
   where a.organization_id <> '${WARM_UP_ORGANIZATION}' and o.status = 'sent'`;

const PROGRESS = `
  select count(*) filter (where status = 'done')::int as done,
         count(*) filter (where status not in ('pending', 'processing', 'done'))::int as other,
         count(*)::int as total
    from scheduled_action`;

async function waitForDone(db: Database, expected: number, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await db.query<{ done: number; other: number; total: number }>(PROGRESS);
    const p = rows[0]!;
    if (p.other > 0) throw new Error(`${p.other} actions ended neither done nor pending`);
    const sent = await db.query<{ n: number }>(
      `select count(*)::int as n from outbox where destination = 'action_execute' and status = 'sent'`,
    );
    if (p.done >= expected && sent.rows[0]!.n >= expected) return;
    if (Date.now() > deadline)
      throw new Error(`timed out: ${p.done} of ${expected} done, ${sent.rows[0]!.n} published`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

async function checkOnce(db: Database, expected: number) {
  const { rows } = await db.query<{ executed: number; once: number; messages: number }>(`
    select (select count(*)::int from event where type = 'ActionExecuted') as executed,
           (select count(*)::int from (select stream_id from event where type = 'ActionExecuted'
              group by stream_id having count(*) = 1) x) as once,
           (select count(*)::int from outbox where destination = 'action_execute') as messages`);
  const r = rows[0]!;
  if (r.executed !== expected || r.once !== expected || r.messages !== expected) {
    throw new Error(`expected ${expected} actions executed once each, got ${JSON.stringify(r)}`);
  }
}

async function withScenario<T>(
  name: string,
  run: (db: Database, roles: () => Promise<RoleProcess[]>) => Promise<T>,
) {
  const queues = await sharedQueues(amqpUrl, queueType, ACTION_QUEUES);
  const database = await createTestDatabase();
  let roles: RoleProcess[] = [];
  try {
    await queues.requireNoConsumers();
    const stale = await queues.purge();
    if (stale > 0) log(`${name}: purged ${stale} messages left in ${ACTION_QUEUES.join(', ')}`);
    return await run(database.db, async () => {
      roles = await startRoles(counts, {
        databaseUrl: database.url,
        schema: database.schema,
        amqpUrl,
        settings: { HERALD_ACTIONS_DISPATCH: 'queue' },
      });
      return roles;
    });
  } finally {
    if (roles.length > 0) {
      await stopRoles(roles).catch(() => {});
      for (const role of roles) for (const problem of role.problems.slice(0, 20)) log(`  ${problem}`);
    }
    await queues.purge().catch(() => {});
    await queues.close();
    await database.drop();
  }
}

async function burst(n: number) {
  return withScenario('burst', async (db, start) => {
    const warmUp = Number(values['warm-up']);
    const roles = await start();
    const setupStarted = performance.now();
    // The roles first (they take seconds to start), then the actions: seeding runs at several thousand
    // a second, and the due instant comes after it with room to spare, the warm-up before it.
    const base = Math.ceil((await databaseNowMs(db)) + n / 5 + 5_000);
    const warmUpOffsets = distinctOffsets(warmUp, 2_000).map((o) => o - 3_000);
    await seedActions(
      db,
      warmUpOffsets.map((o) => ({ dueAtMs: base + o, organizationId: WARM_UP_ORGANIZATION })),
    );
    await seedActions(
      db,
      Array.from({ length: n }, (_, i) => ({ dueAtMs: base, organizationId: `org-${i % 50}` })),
    );
    // What the command handler does after a commit that leaves something due soon: wake the scanners
    // (they armed their timers before the seeding).
    await db.query('select pg_notify($1, $2)', [channels.due(db.schema), '']);
    const spare = base - 3_000 - (await databaseNowMs(db));
    log(
      `burst: ${roles.length} roles started; ${warmUp} warm-up + ${n} actions seeded in ${Math.round(performance.now() - setupStarted)} ms; warm-up due in ${Math.round(spare)} ms`,
    );
    if (spare < 500) throw new Error(`burst: setup ran into the first due (${Math.round(spare)} ms left)`);
    await waitForDone(db, warmUp + n, base - Date.now() + 600_000);
    await stopRoles(roles);
    roles.length = 0;
    await checkOnce(db, warmUp + n);
    await stages(db, 'burst');
    const { rows } = await db.query<{ due_to_sent: number; sent_ms: number }>(EXECUTE_TIMES);
    const lastMs = Math.max(...rows.map((r) => r.sent_ms));
    const fired = rows.length / ((lastMs - base) / 1000);
    return {
      dueToSent: distribution(rows.map((r) => r.due_to_sent)),
      firedPerSecond: fired,
      lastAfterDueMs: lastMs - base,
    };
  });
}

async function signals(n: number) {
  return withScenario('signal', async (db, start) => {
    const notifier = new CoalescingNotifier(db, notifyCoalesceMs);
    const service = new ScheduledActionService({
      db,
      handler: new CommandHandler({ db, wakeups: notifier, pod: 'bench' }),
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
      await stages(db, 'signal');
      const times = await db.query<{ signal_to_sent: number; signal_to_fire: number }>(SIGNAL_TIMES);
      return {
        signalToSent: distribution(times.rows.map((r) => r.signal_to_sent)),
        signalToFire: distribution(times.rows.map((r) => r.signal_to_fire)),
      };
    } finally {
      notifier.close();
    }
  });
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
  const r = await burst(n);
  log(`burst: due → action_execute published ${describe(r.dueToSent)}`);
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
