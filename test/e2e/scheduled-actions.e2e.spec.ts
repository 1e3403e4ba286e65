/**
 * Scheduled actions end to end on real PostgreSQL and RabbitMQ, with Herald's roles (seed 002's fixed
 * queue names, so this runs in the serial project):
 * - both deployment shapes (scanner + queue + worker, and in-process workers) give the same outcomes
 *   on the same input, and publish each execution once to action_execute with its claim epoch;
 * - a worker killed with SIGKILL mid-processing leaves the row in processing; after the stale window
 *   another worker recovers it and it is executed once;
 * - with Redis down, signals (during the wait and before it was saved) still unlock waits.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import amqp from 'amqplib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { declareQueues } from '../../src/adapters/amqp/amqp-connection.js';
import { ACTION_EXECUTE_QUEUE, ACTION_QUEUES } from '../../src/aggregates/scheduled-action/topology.js';
import { waitFor } from '../../src/testing/wait.js';
import {
  actionsHarness,
  eventTypes,
  executeMessages,
  FAST_ACTIONS,
  normalAction,
  waitAction,
} from '../support/actions.js';
import { heraldArgs } from '../support/cli.js';
import { type RunningRoles, startRoles } from '../support/roles.js';
import { createTestDatabase, requireEnv, type TestDatabase } from '../support/services.js';

let connection: amqp.ChannelModel;
let channel: amqp.Channel;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  connection = await amqp.connect(requireEnv('AMQP_URL'));
  connection.on('error', () => {});
  channel = await connection.createChannel();
  channel.on('error', () => {});
  await declareQueues(channel, ACTION_QUEUES, 'quorum');
});
afterAll(async () => connection?.close());
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function freshDatabase(): Promise<TestDatabase> {
  const t = await createTestDatabase();
  cleanups.push(() => t.drop());
  // Messages of an earlier run belong to a database that is gone.
  for (const queue of ACTION_QUEUES) await channel.purgeQueue(queue);
  return t;
}

function run(roles: RunningRoles): RunningRoles {
  cleanups.push(() => roles.stop());
  return roles;
}

/** action_execute messages on the broker, by action id. */
async function drainExecuteQueue(ids: ReadonlySet<string>, expected: number) {
  const seen = new Map<string, { epoch: number; branch: string }[]>();
  let count = 0;
  await waitFor(
    async () => {
      for (;;) {
        const message = await channel.get(ACTION_EXECUTE_QUEUE, { noAck: false });
        if (!message) break;
        channel.ack(message);
        const payload = JSON.parse(message.content.toString()) as {
          actionId: string;
          epoch: number;
          branch: string;
        };
        if (!ids.has(payload.actionId)) continue;
        seen.set(payload.actionId, [
          ...(seen.get(payload.actionId) ?? []),
          { epoch: payload.epoch, branch: payload.branch },
        ]);
        count++;
      }
      return count >= expected;
    },
    { what: `${expected} action_execute messages`, timeoutMs: 30_000 },
  );
  return seen;
}

type Shape = 'queue' | 'in-process';

/** The same input in either shape; returns a normalized outcome per scenario. */
async function runScenarios(shape: Shape, env: Record<string, string> = {}) {
  const t = await freshDatabase();
  const roles =
    shape === 'queue' ? { scanner: true, relay: true, worker: true } : { relay: true, worker: true };
  const config = t.config({ ...FAST_ACTIONS, HERALD_ACTIONS_DISPATCH: shape, ...env });
  run(startRoles(config, { ...roles, ...(env.REDIS_URL ? { tick: true } : {}) }));
  const { service } = actionsHarness(t, { dispatch: shape, env });

  await service.upsertSubject('org-1', 'carol', { tier: 'gold' });
  const early = await service.signal({
    organizationId: 'org-1',
    correlationKey: 'early:n1',
    name: 'clicked',
  });
  const ids = {
    delayed: (await service.schedule(normalAction({ delaySeconds: 1 }))).actionId,
    signalled: (await service.schedule(waitAction('signalled:n1', { expiresSeconds: 60 }))).actionId,
    early: (await service.schedule(waitAction('early:n1', { expiresSeconds: 60 }))).actionId,
    expired: (await service.schedule(waitAction('expired:n1', { expiresSeconds: 1 }))).actionId,
    reEvaluated: (
      await service.schedule(
        normalAction({
          delaySeconds: 1,
          subjectId: 'carol',
          sourceConfig: { conditions: { '==': [{ var: 'subject.tier' }, 'gold'] } },
        }),
      )
    ).actionId,
    firedNow: (await service.schedule(waitAction('fired:n1', { expiresSeconds: 60 }))).actionId,
    cancelled: (await service.schedule(waitAction('cancelled:n1', { expiresSeconds: 60 }))).actionId,
  };
  await service.upsertSubject('org-1', 'carol', { tier: 'silver' });
  const signal = await service.signal({
    organizationId: 'org-1',
    correlationKey: 'signalled:n1',
    name: 'clicked',
  });
  expect(signal.unlocked).toEqual([ids.signalled]);
  await service.fireNow(ids.firedNow, 'operator');
  await service.cancel(ids.cancelled, 'unsubscribed');

  const all = Object.values(ids);
  await waitFor(
    async () => {
      const states = await Promise.all(all.map((id) => service.get(id)));
      return states.every((s) => s.status === 'done' || s.status === 'cancelled' || s.status === 'failed');
    },
    { what: `every ${shape} action settled`, timeoutMs: 30_000 },
  );
  const executed = await executeMessages(t);
  const broker = await drainExecuteQueue(
    new Set(all),
    [...executed.values()].reduce((a, b) => a + b, 0),
  );
  const outcomes: Record<string, unknown> = {};
  for (const [name, id] of Object.entries(ids)) {
    const s = await service.get(id);
    expect(broker.get(id) ?? [], `${shape} ${name}: published once with its epoch`).toEqual(
      executed.get(id) ? [{ epoch: s.claimEpoch, branch: s.branch }] : [],
    );
    if (s.claimEpoch > 0) expect(s.delivery, `${name} claimed for ${shape}`).toBe(shape);
    outcomes[name] = {
      status: s.status,
      outcome: s.outcome,
      branch: s.branch,
      cancelReason: s.cancelReason?.replace(/:.*/, ''),
      unlockedBy: s.unlockedBy?.name ?? null,
      early: s.unlockedBy?.signalId === early.signalId,
      executions: executed.get(id) ?? 0,
      events: (await eventTypes(t, id)).filter((type) => type !== 'ActionHeartbeat'),
    };
  }
  return outcomes;
}

describe('deployment shapes', () => {
  it('scanner + queue + worker and in-process workers give the same outcomes on the same input', async () => {
    const queue = await runScenarios('queue');
    while (cleanups.length) await cleanups.pop()!();
    const inProcess = await runScenarios('in-process');
    expect(queue).toMatchObject({
      delayed: { status: 'done', outcome: 'executed', branch: 'main', executions: 1 },
      signalled: { status: 'done', branch: 'main', unlockedBy: 'clicked', executions: 1 },
      early: { status: 'done', branch: 'main', early: true, executions: 1 },
      expired: { status: 'done', branch: 'expiry', executions: 1 },
      reEvaluated: {
        status: 'cancelled',
        cancelReason: 'conditions no longer hold at fire time',
        executions: 0,
      },
      firedNow: { status: 'done', branch: 'main', executions: 1 },
      cancelled: { status: 'cancelled', cancelReason: 'unsubscribed', executions: 0 },
    });
    expect(inProcess).toEqual(queue);
  });
});

describe('Redis down', () => {
  it('signals during the wait and before it was saved still unlock waits: PostgreSQL decides', async () => {
    const outcomes = await runScenarios('queue', { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(outcomes).toMatchObject({
      signalled: { status: 'done', unlockedBy: 'clicked', executions: 1 },
      early: { status: 'done', early: true, executions: 1 },
      expired: { status: 'done', branch: 'expiry', executions: 1 },
    });
  });
});

describe('a worker killed mid-processing', () => {
  let child: ChildProcess | undefined;
  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
  });

  it('SIGKILL: the row stays processing, is recovered after the stale window and executed once', async () => {
    const t = await freshDatabase();
    const env = { ...FAST_ACTIONS, HERALD_ACTIONS_DISPATCH: 'in-process' };
    const { service } = actionsHarness(t, { env });
    await service.upsertSubject('org-1', 'dave', { tier: 'gold' });

    // Hold the subject table: the worker claims the action, then blocks loading its subject.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const locked = new Promise<void>((resolve, reject) => {
      t.db
        .transaction(async (tx) => {
          await tx.query('lock table subject in access exclusive mode');
          resolve();
          await released;
        })
        .catch(reject);
    });
    await locked;
    const action = await service.schedule(normalAction({ subjectId: 'dave' }));

    child = spawn(process.execPath, heraldArgs(['worker']), {
      env: {
        ...process.env,
        DATABASE_URL: t.url,
        HERALD_SCHEMA: t.schema,
        HERALD_LOG_LEVEL: 'silent',
        ...env,
      },
      stdio: 'ignore',
    });
    await waitFor(
      async () => {
        const { rows } = await t.db.query<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and query ilike '%from subject%'`,
        );
        return rows[0]!.n > 0;
      },
      { what: 'the worker blocked mid-processing', timeoutMs: 30_000 },
    );
    expect(await service.get(action.actionId)).toMatchObject({ status: 'processing', claimEpoch: 1 });

    child.kill('SIGKILL');
    await once(child, 'exit');
    release();
    // Nothing runs it until another worker recovers it: still processing, epoch 1.
    expect(await service.get(action.actionId)).toMatchObject({ status: 'processing', claimEpoch: 1 });

    run(startRoles(t.config(env), { worker: true }));
    const done = await waitFor(
      async () => {
        const s = await service.get(action.actionId);
        return s.status === 'done' && s;
      },
      { what: 'the recovered action executed', timeoutMs: 30_000 },
    );
    expect(done).toMatchObject({ outcome: 'executed', claimEpoch: 3, dueBecause: 'recovery' });
    const types = (await eventTypes(t, action.actionId)).filter((type) => type !== 'ActionHeartbeat');
    expect(types).toEqual([
      'ActionScheduled',
      'ActionClaimed',
      'ActionReclaimed',
      'ActionClaimed',
      'ActionExecuted',
    ]);
    const history = await service.history(action.actionId);
    const reclaimed = history.find((e) => e.type === 'ActionReclaimed')!;
    const lastLife = history.filter((e) => e.version < reclaimed.version).at(-1)!;
    // Recovered only after the stale window (2 s) since the dead worker's last claim or heartbeat.
    expect(reclaimed.recordedAt.getTime() - lastLife.recordedAt.getTime()).toBeGreaterThanOrEqual(2_000);
    expect((await executeMessages(t)).get(action.actionId)).toBe(1);
  });
});
