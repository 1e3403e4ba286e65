/**
 * Scheduled actions through the scanner, relay and worker roles as separate processes: the fresh
 * database and the seed queues of one scenario, the actions written through the decider, and the burst
 * scenario itself (N actions due at one instant → fired/s to the last `action_execute` published). Used by
 * bench/actions.bench.ts (with its signal scenario) and bench/peers.bench.ts (Herald's side of the
 * comparison with graphile-worker). Times come from the database (invariant 6): due = execute_at,
 * published = the action_execute row's sent_at, which the relay marks after the broker's confirm.
 */
import { randomUUID } from 'node:crypto';
import { appendEvents } from '../../src/adapters/postgres/event-queries.js';
import { scheduledActionAggregate } from '../../src/aggregates/scheduled-action/descriptor.js';
import { ACTION_QUEUES } from '../../src/aggregates/scheduled-action/topology.js';
import {
  SCHEDULED_ACTION_STREAM_TYPE,
  type ScheduleAction,
  scheduledActionDecider,
} from '../../src/domain/scheduled-action.js';
import type { Database } from '../../src/ports/database.js';
import { channels } from '../../src/ports/wakeups.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/services.js';
import { type DatabaseWork, databaseWork } from './db-work.js';
import { type Distribution, describe, distribution } from './dispatch-measure.js';
import { type RoleProcess, startRoles, stopRoles } from './dispatch-roles.js';
import { databaseNowMs, distinctOffsets, sharedQueues, WARM_UP_ORGANIZATION } from './dispatch-setup.js';
import { hostBusySince, hostCpu, postgresCpu, rabbitmqCpu } from './host-cpu.js';

export { WARM_UP_ORGANIZATION };

export interface ActionsBench {
  amqpUrl: string;
  queueType: 'quorum' | 'classic';
  counts: { scanners: number; relays: number; workers: number };
  log: (line: string) => void;
  /**
   * HERALD_ACTIONS_DISPATCH of the roles: `queue` (the default: scanners claim and publish
   * scheduled_action_fire for the workers) or `in-process` (the workers claim and run the actions).
   */
  dispatch?: 'queue' | 'in-process';
  /** Break the measured stretch's WAL down by relation (bench/support/db-work.ts, pg_walinspect). */
  walByRelation?: boolean;
}

const SEED_BATCH = 1_000;

/** Writes scheduled actions through the decider, `SEED_BATCH` per transaction (setup: not timed). */
export async function seedActions(
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

/**
 * Where due → published goes, per action (ms): claimed, fire published (queue dispatch only: null
 * in-process, where the worker runs its own claims), executed, execute published.
 */
const STAGE_TIMES = `
  select (extract(epoch from (c.recorded_at - a.execute_at)) * 1000)::float8 as due_to_claim,
         (extract(epoch from (f.sent_at - c.recorded_at)) * 1000)::float8 as claim_to_fire_sent,
         (extract(epoch from (x.recorded_at - f.sent_at)) * 1000)::float8 as fire_sent_to_executed,
         (extract(epoch from (x.recorded_at - c.recorded_at)) * 1000)::float8 as claim_to_executed,
         (extract(epoch from (o.sent_at - x.recorded_at)) * 1000)::float8 as executed_to_sent
    from scheduled_action a
    join event c on c.stream_type = 'scheduled_action' and c.stream_id = a.id::text and c.type = 'ActionClaimed'
    join event x on x.stream_type = 'scheduled_action' and x.stream_id = a.id::text and x.type = 'ActionExecuted'
    left join outbox f on f.destination = 'scheduled_action_fire' and (f.payload ->> 'actionId')::uuid = a.id
    join outbox o on o.destination = 'action_execute' and (o.payload ->> 'actionId')::uuid = a.id
   where a.organization_id <> '${WARM_UP_ORGANIZATION}' and o.status = 'sent'`;

export const STAGES = [
  'due_to_claim',
  'claim_to_fire_sent',
  'fire_sent_to_executed',
  'claim_to_executed',
  'executed_to_sent',
] as const;
export type Stage = (typeof STAGES)[number];

/** Logs (and returns) each stage's distribution over the measured actions. */
export async function stages(bench: ActionsBench, db: Database, name: string) {
  const { rows } = await db.query<Record<Stage, number>>(STAGE_TIMES);
  const result: Partial<Record<Stage, Distribution>> = {};
  for (const stage of STAGES) {
    const samples = rows.map((r) => r[stage]).filter((ms) => ms !== null);
    if (samples.length === 0) continue; // no fire messages in-process
    result[stage] = distribution(samples);
    bench.log(`${name}: stage ${stage.replaceAll('_', ' ')} ${describe(result[stage])}`);
  }
  return result;
}

const PROGRESS = `
  select count(*) filter (where status = 'done')::int as done,
         count(*) filter (where status not in ('pending', 'processing', 'done'))::int as other,
         count(*)::int as total
    from scheduled_action`;

export async function waitForDone(db: Database, expected: number, timeoutMs: number) {
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

export async function checkOnce(db: Database, expected: number) {
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

/**
 * A fresh, migrated database and the seed queues (refused while anything else consumes them, purged
 * before and after); `run` gets the database and a function that starts the roles on it.
 */
export async function withScenario<T>(
  bench: ActionsBench,
  name: string,
  run: (db: Database, roles: () => Promise<RoleProcess[]>, database: TestDatabase) => Promise<T>,
) {
  const queues = await sharedQueues(bench.amqpUrl, bench.queueType, ACTION_QUEUES);
  const database = await createTestDatabase();
  let roles: RoleProcess[] = [];
  try {
    await queues.requireNoConsumers();
    const stale = await queues.purge();
    if (stale > 0) bench.log(`${name}: purged ${stale} messages left in ${ACTION_QUEUES.join(', ')}`);
    return await run(
      database.db,
      async () => {
        roles = await startRoles(bench.counts, {
          databaseUrl: database.url,
          schema: database.schema,
          amqpUrl: bench.amqpUrl,
          settings: { HERALD_ACTIONS_DISPATCH: bench.dispatch ?? 'queue' },
        });
        return roles;
      },
      database,
    );
  } finally {
    if (roles.length > 0) {
      await stopRoles(roles).catch(() => {});
      for (const role of roles) for (const problem of role.problems.slice(0, 20)) bench.log(`  ${problem}`);
    }
    await queues.purge().catch(() => {});
    await queues.close();
    await database.drop();
  }
}

export interface BurstResult {
  dueToSent: Distribution;
  /** Measured actions per second from the due instant to the last action_execute published. */
  firedPerSecond: number;
  lastAfterDueMs: number;
  stages: Partial<Record<Stage, Distribution>>;
  /** CPU time (user + system) of each role from the due instant to the end, in ms. */
  roleCpuMs: Record<string, number>;
  /** Share of the host's cores busy from the due instant to the end (bench/support/host-cpu.ts). */
  hostBusy: number;
  /** CPU time of the PostgreSQL server from the due instant to the end, in ms. */
  postgresCpuMs: number;
  /** CPU time of the RabbitMQ broker from the due instant to the end, in ms (NaN: not found on this host). */
  rabbitmqCpuMs: number;
  /** What the database did from the due instant to the end (bench/support/db-work.ts). */
  databaseWork: DatabaseWork;
}

/**
 * N actions due at one instant (after `warmUp` actions due in the 3 s to 1 s before it), the roles
 * started before the seeding. The due instant is `setupMsPerItem` × N + 5 s after the seeding starts
 * (it must come after the seeding, which slows down on a busy machine).
 */
export async function burst(
  bench: ActionsBench,
  n: number,
  warmUp: number,
  setupMsPerItem = 0.2,
): Promise<BurstResult> {
  return withScenario(bench, 'burst', async (db, start) => {
    const roles = await start();
    const setupStarted = performance.now();
    // The roles first (they take seconds to start), then the actions: seeding runs at several thousand
    // a second, and the due instant comes after it with room to spare, the warm-up before it.
    const base = Math.ceil((await databaseNowMs(db)) + n * setupMsPerItem + 5_000);
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
    bench.log(
      `burst: ${roles.length} roles started; ${warmUp} warm-up + ${n} actions seeded in ${Math.round(performance.now() - setupStarted)} ms; warm-up due in ${Math.round(spare)} ms`,
    );
    if (spare < 500) throw new Error(`burst: setup ran into the first due (${Math.round(spare)} ms left)`);
    // The roles' CPU from the due instant (the database and this process share a clock with them).
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, base - Date.now())));
    const cpuAtDue = roles.map((role) => role.cpuMs());
    const hostAtDue = hostCpu();
    const postgresAtDue = await postgresCpu(db);
    const rabbitmqAtDue = rabbitmqCpu(bench.amqpUrl);
    const workAtDue = await databaseWork(db, { byRelation: bench.walByRelation ?? false });
    await waitForDone(db, warmUp + n, base - Date.now() + 1_800_000);
    const hostBusy = hostBusySince(hostAtDue);
    const postgresCpuMs = postgresAtDue.since();
    const rabbitmqCpuMs = rabbitmqAtDue?.since() ?? Number.NaN;
    const roleCpuMs = Object.fromEntries(roles.map((role, i) => [role.name, role.cpuMs() - cpuAtDue[i]!]));
    await stopRoles(roles);
    roles.length = 0;
    const work = await workAtDue.since();
    await checkOnce(db, warmUp + n);
    const stageTimes = await stages(bench, db, 'burst');
    const { rows } = await db.query<{ due_to_sent: number; sent_ms: number }>(EXECUTE_TIMES);
    const lastMs = Math.max(...rows.map((r) => r.sent_ms));
    return {
      dueToSent: distribution(rows.map((r) => r.due_to_sent)),
      firedPerSecond: rows.length / ((lastMs - base) / 1000),
      lastAfterDueMs: lastMs - base,
      stages: stageTimes,
      roleCpuMs,
      hostBusy,
      postgresCpuMs,
      rabbitmqCpuMs,
      databaseWork: work,
    };
  });
}
