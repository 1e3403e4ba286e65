/**
 * Scheduled actions through the library on real PostgreSQL (seed 002), in-process dispatch (the
 * queue shape runs end to end in test/e2e/scheduled-actions.e2e.spec.ts): delayed actions fire once,
 * waits are unlocked by signals in every interleaving (before the save, during the wait, racing the
 * deadline, two at once, outside the lookback), any of several names, expiry into its branch,
 * re-evaluated conditions, retries, operator changes, and replay/verify through the registry.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import type { ActionExecutor } from '../../src/aggregates/scheduled-action/processing.js';
import {
  IllegalStateError,
  NotFoundError,
  PermanentError,
  TransientError,
  ValidationError,
} from '../../src/errors.js';
import { replayStream } from '../../src/projections/replay.js';
import { verifyStates } from '../../src/projections/verify.js';
import { waitFor } from '../../src/testing/wait.js';
import { actionsHarness, eventTypes, executeMessages, normalAction, waitAction } from '../support/actions.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/services.js';

let t: TestDatabase;
let h: ReturnType<typeof actionsHarness>;
beforeAll(async () => {
  t = await createTestDatabase();
  h = actionsHarness(t);
});
afterAll(async () => t?.drop());

const key = () => uniqueName('subject');

describe('delayed actions', () => {
  it('a delayed action waits for its time, then fires once: executed, one action_execute with the epoch', async () => {
    const action = await h.service.schedule(normalAction({ delaySeconds: 1 }));
    expect(action).toMatchObject({ status: 'pending', mode: 'normal' });
    await h.drain();
    expect((await h.service.get(action.actionId)).status).toBe('pending');
    const done = await waitFor(async () => {
      await h.drain();
      const state = await h.service.get(action.actionId);
      return state.status === 'done' && state;
    });
    expect(done).toMatchObject({
      outcome: 'executed',
      branch: 'main',
      claimEpoch: 1,
      delivery: 'in-process',
    });
    expect(await eventTypes(t, action.actionId)).toEqual([
      'ActionScheduled',
      'ActionClaimed',
      'ActionExecuted',
    ]);
    const { rows } = await t.db.query<{ payload: Record<string, unknown> }>(
      `select payload from outbox where destination = 'action_execute' and payload->>'actionId' = $1`,
      [action.actionId],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.payload).toMatchObject({
      epoch: 1,
      actionType: 'send_message',
      actionConfig: { text: 'follow-up' },
      branch: 'main',
      trigger: 'due',
    });
  });

  it('invalid input is a ValidationError naming the field, and writes nothing', async () => {
    const before = (await t.db.query<{ n: number }>('select count(*)::int as n from event')).rows[0]!.n;
    const error = await h.service
      .schedule(normalAction({ delaySeconds: undefined }))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).message).toMatch(/delaySeconds/);
    await expect(
      h.service.signal({ organizationId: 'org-1', correlationKey: '', name: 'clicked' }),
    ).rejects.toThrow(/correlationKey/);
    expect((await t.db.query<{ n: number }>('select count(*)::int as n from event')).rows[0]!.n).toBe(before);
  });
});

describe('waits and signals', () => {
  it('a signal during the wait unlocks it at once: executed on the main branch, recorded on both sides', async () => {
    const k = key();
    const action = await h.service.schedule(waitAction(k));
    const outcome = await h.service.signal({
      organizationId: 'org-1',
      correlationKey: k,
      name: 'clicked',
      payload: { url: 'https://x/y' },
    });
    expect(outcome).toMatchObject({ unlocked: [action.actionId], refused: [] });
    await h.drain();
    expect(await h.service.get(action.actionId)).toMatchObject({
      status: 'done',
      branch: 'main',
      unlockedBy: { signalId: outcome.signalId, name: 'clicked' },
    });
    expect(await h.service.getSignal(outcome.signalId)).toMatchObject({
      unlocked: [action.actionId],
      payload: { url: 'https://x/y' },
    });
  });

  it('a signal recorded before the wait was saved unlocks it at scheduling (early), in the same transaction', async () => {
    const k = key();
    const signal = await h.service.signal({ organizationId: 'org-1', correlationKey: k, name: 'clicked' });
    expect(signal.unlocked).toEqual([]);
    const action = await h.service.schedule(waitAction(k));
    expect(action).toMatchObject({ status: 'pending', unlockedBy: { signalId: signal.signalId } });
    expect(await eventTypes(t, action.actionId)).toEqual(['ActionScheduled', 'ActionSignalled']);
    expect(await h.service.getSignal(signal.signalId)).toMatchObject({ unlockedLater: [action.actionId] });
    await h.drain();
    expect((await h.service.get(action.actionId)).status).toBe('done');
  });

  it('a signal outside the lookback window does not unlock a later wait', async () => {
    const k = key();
    const short = actionsHarness(t, { env: { HERALD_ACTIONS_SIGNAL_LOOKBACK_SECONDS: '1' } });
    const signal = await short.service.signal({
      organizationId: 'org-1',
      correlationKey: k,
      name: 'clicked',
    });
    const received = (await short.service.getSignal(signal.signalId)).receivedAt;
    await waitFor(async () => {
      const { rows } = await t.db.query<{ outside: boolean }>(
        `select now() > $1::timestamptz + interval '1 second' as outside`,
        [received],
      );
      return rows[0]!.outside;
    });
    const action = await short.service.schedule(waitAction(k));
    expect(action.unlockedBy).toBeNull();
    // Inside the window (the default 24 h) the same signal would have counted.
    const inside = await h.service.schedule(waitAction(k));
    expect(inside.unlockedBy).toMatchObject({ signalId: signal.signalId });
  });

  it('a wait for any of two names is unlocked by either; another name or another key leaves it waiting', async () => {
    const k = key();
    const names = { wait: { names: ['clicked', 'replied'], correlationKey: k } };
    const [a, b] = [
      await h.service.schedule(waitAction(k, names)),
      await h.service.schedule(waitAction(k, names)),
    ];
    expect(
      (await h.service.signal({ organizationId: 'org-1', correlationKey: k, name: 'opened' })).unlocked,
    ).toEqual([]);
    expect(
      (await h.service.signal({ organizationId: 'org-1', correlationKey: `${k}-other`, name: 'replied' }))
        .unlocked,
    ).toEqual([]);
    expect(
      (await h.service.signal({ organizationId: 'org-2', correlationKey: k, name: 'replied' })).unlocked,
    ).toEqual([]);
    const replied = await h.service.signal({ organizationId: 'org-1', correlationKey: k, name: 'replied' });
    expect(replied.unlocked.sort()).toEqual([a.actionId, b.actionId].sort());
    expect((await h.service.get(a.actionId)).unlockedBy).toMatchObject({ name: 'replied' });
  });

  it('two signals at once: exactly one unlocks the wait; the other is recorded as unlocking nothing', async () => {
    for (let round = 0; round < 5; round++) {
      const k = key();
      const action = await h.service.schedule(
        waitAction(k, { wait: { names: ['clicked', 'replied'], correlationKey: k } }),
      );
      const outcomes = await Promise.all(
        ['clicked', 'replied', 'clicked'].map((name) =>
          h.service.signal({ organizationId: 'org-1', correlationKey: k, name }),
        ),
      );
      expect(outcomes.filter((o) => o.unlocked.includes(action.actionId))).toHaveLength(1);
      const winner = outcomes.find((o) => o.unlocked.length > 0)!;
      expect((await h.service.get(action.actionId)).unlockedBy?.signalId).toBe(winner.signalId);
      for (const o of outcomes) expect((await h.service.getSignal(o.signalId)).unlocked).toEqual(o.unlocked);
    }
  });

  it('a signal saved at the same moment as its wait is never lost: every interleaving unlocks it', async () => {
    const keys = Array.from({ length: 40 }, key);
    const results = await Promise.all(
      keys.map(async (k, i) => {
        const [action, signal] = await Promise.all([
          i % 2
            ? h.service.schedule(waitAction(k))
            : new Promise((r) => setImmediate(r)).then(() => h.service.schedule(waitAction(k))),
          h.service.signal({ organizationId: 'org-1', correlationKey: k, name: 'clicked' }),
        ]);
        return { action, signal };
      }),
    );
    for (const { action, signal } of results) {
      const state = await h.service.get(action.actionId);
      expect(state.unlockedBy?.signalId, `wait ${action.actionId}`).toBe(signal.signalId);
    }
  });

  it('a signal racing the deadline: exactly one outcome each, the other recorded (a refusal or an unmatched signal)', async () => {
    const waits = await Promise.all(
      Array.from({ length: 12 }, async () => {
        const k = key();
        return { k, action: await h.service.schedule(waitAction(k, { expiresSeconds: 1 })) };
      }),
    );
    const deadline = Date.parse(waits[0]!.action.expiresAt!);
    // Race both at the deadline by the database clock.
    await waitFor(
      async () => {
        const { rows } = await t.db.query<{ now: Date }>('select now()');
        return rows[0]!.now.getTime() >= deadline - 5;
      },
      { intervalMs: 1 },
    );
    const sweeps = h.drain();
    const signals = await Promise.all(
      waits.map(({ k }) => h.service.signal({ organizationId: 'org-1', correlationKey: k, name: 'clicked' })),
    );
    await sweeps;
    await waitFor(async () => {
      await h.drain();
      const states = await Promise.all(waits.map(({ action }) => h.service.get(action.actionId)));
      return states.every((s) => s.status === 'done');
    });
    for (const [i, { action }] of waits.entries()) {
      const state = await h.service.get(action.actionId);
      const signal = signals[i]!;
      const types = await eventTypes(t, action.actionId);
      expect(types.filter((x) => x === 'ActionExecuted')).toHaveLength(1);
      if (signal.unlocked.includes(action.actionId)) {
        expect(state).toMatchObject({ branch: 'main', expired: false });
        expect(types).not.toContain('ActionExpired');
      } else {
        expect(state).toMatchObject({ branch: 'expiry', expired: true, unlockedBy: null });
        // Recorded on the signal: unmatched (the expiry claimed first) or refused (its deadline had passed).
        const record = await h.service.getSignal(signal.signalId);
        expect(record.unlocked).toEqual([]);
        expect(record.refused.every((r) => /deadline/.test(r.reason))).toBe(true);
      }
    }
    const executed = await executeMessages(t);
    for (const { action } of waits) expect(executed.get(action.actionId)).toBe(1);
  });

  it('a wait whose deadline passes follows its expiry branch (an outcome, not a failure); without a branch it is done, expired', async () => {
    const withBranch = await h.service.schedule(waitAction(key(), { expiresSeconds: 1 }));
    const without = await h.service.schedule(waitAction(key(), { expiresSeconds: 1, expiry: null }));
    await waitFor(async () => {
      await h.drain();
      const [a, b] = [await h.service.get(withBranch.actionId), await h.service.get(without.actionId)];
      return a.status === 'done' && b.status === 'done';
    });
    expect(await h.service.get(withBranch.actionId)).toMatchObject({
      outcome: 'executed',
      branch: 'expiry',
      expired: true,
      lastError: null,
    });
    expect(await eventTypes(t, withBranch.actionId)).toEqual([
      'ActionScheduled',
      'ActionExpired',
      'ActionClaimed',
      'ActionExecuted',
    ]);
    const { rows } = await t.db.query<{ payload: Record<string, unknown> }>(
      `select payload from outbox where destination = 'action_execute' and payload->>'actionId' = $1`,
      [withBranch.actionId],
    );
    expect(rows[0]!.payload).toMatchObject({
      branch: 'expiry',
      trigger: 'deadline',
      actionConfig: { text: 'resend: not clicked' },
    });
    expect(await h.service.get(without.actionId)).toMatchObject({ outcome: 'expired', claimEpoch: 0 });
    expect((await executeMessages(t)).get(without.actionId)).toBeUndefined();
  });
});

describe('processAction: subjects and re-evaluated conditions', () => {
  const reEvaluated = (subjectId: string) =>
    normalAction({
      subjectId,
      sourceConfig: { conditions: { '==': [{ var: 'subject.tier' }, 'gold'] } },
    });

  it('conditions that no longer hold cancel the action with the reason; still true → executed', async () => {
    await h.service.upsertSubject('org-1', 'alice', { tier: 'gold' });
    await h.service.upsertSubject('org-1', 'bob', { tier: 'gold' });
    const [alice, bob] = [
      await h.service.schedule(reEvaluated('alice')),
      await h.service.schedule(reEvaluated('bob')),
    ];
    await h.service.upsertSubject('org-1', 'bob', { tier: 'silver' });
    await h.drain();
    expect(await h.service.get(alice.actionId)).toMatchObject({ status: 'done', outcome: 'executed' });
    const cancelled = await h.service.get(bob.actionId);
    expect(cancelled).toMatchObject({
      status: 'cancelled',
      cancelReason: expect.stringMatching(/conditions no longer hold.*gold/),
    });
    expect(await eventTypes(t, bob.actionId)).toEqual([
      'ActionScheduled',
      'ActionClaimed',
      'ActionCancelled',
    ]);
    const history = await h.service.history(bob.actionId);
    expect(history.at(-1)).toMatchObject({ data: { by: 'conditions', epoch: 1 } });
    expect((await executeMessages(t)).get(bob.actionId)).toBeUndefined();
  });

  it('a subject that does not exist makes the conditions fail (cancelled), an action without conditions still runs', async () => {
    const ghost = await h.service.schedule(reEvaluated('nobody'));
    const plain = await h.service.schedule(normalAction({ subjectId: 'nobody' }));
    await h.drain();
    expect((await h.service.get(ghost.actionId)).status).toBe('cancelled');
    expect((await h.service.get(plain.actionId)).status).toBe('done');
    await expect(h.service.getSubject('org-1', 'nobody')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('a rule that cannot be evaluated fails the action permanently, recorded', async () => {
    const broken = await h.service.schedule(
      normalAction({ sourceConfig: { conditions: { no_such_operator: [1] } } }),
    );
    await h.drain();
    expect(await h.service.get(broken.actionId)).toMatchObject({
      status: 'failed',
      lastError: expect.stringMatching(/cannot be evaluated/),
    });
  });
});

describe('retries', () => {
  const failing = (failures: number, error = () => new TransientError('executor unavailable')) => {
    const calls = new Map<string, number>();
    const executor: ActionExecutor = {
      async execute({ action }) {
        const n = (calls.get(action.actionId) ?? 0) + 1;
        calls.set(action.actionId, n);
        if (n <= failures) throw error();
        return { published: true };
      },
    };
    return { executor, calls };
  };

  it('a transient executor error recovers on a retry with backoff', async () => {
    const { executor, calls } = failing(2);
    const sweeper = h.sweeper({ executor });
    const action = await h.service.schedule(normalAction());
    const done = await waitFor(async () => {
      await h.drain(sweeper);
      const state = await h.service.get(action.actionId);
      return state.status === 'done' && state;
    });
    expect(done).toMatchObject({ retryCount: 2, claimEpoch: 3, lastError: 'executor unavailable' });
    expect(calls.get(action.actionId)).toBe(3);
    expect(await eventTypes(t, action.actionId)).toEqual([
      'ActionScheduled',
      'ActionClaimed',
      'ActionRetryScheduled',
      'ActionClaimed',
      'ActionRetryScheduled',
      'ActionClaimed',
      'ActionExecuted',
    ]);
    expect((await executeMessages(t)).get(action.actionId)).toBe(1);
  });

  it('claims run in batches: one transaction records several executions; a failing action leaves the batch and retries alone', async () => {
    const calls = new Map<string, number>();
    let poisoned = '';
    const executor: ActionExecutor = {
      async execute({ action }) {
        calls.set(action.actionId, (calls.get(action.actionId) ?? 0) + 1);
        if (action.actionId === poisoned) throw new TransientError('executor unavailable');
        return { published: true };
      },
    };
    const actions: { actionId: string }[] = [];
    for (let i = 0; i < 6; i++) actions.push(await h.service.schedule(normalAction()));
    poisoned = actions[2]!.actionId;
    const ids = actions.map((a) => a.actionId);
    // All six due at once: one claim, then the runs.
    await h.drain(h.sweeper({ executor }));
    const executed = await t.db.query<{ stream_id: string; tx: string }>(
      `select stream_id, tx::text from event where type = 'ActionExecuted' and stream_id = any($1::text[])`,
      [ids],
    );
    expect(executed.rows.map((r) => r.stream_id).sort()).toEqual(ids.filter((id) => id !== poisoned).sort());
    // The batch failed once on the poisoned action, then ran one action per transaction.
    expect(calls.get(poisoned)).toBeGreaterThanOrEqual(1);
    // Claimed and retried (again, if its short test backoff ran out while the drain went on), never executed.
    const history = await eventTypes(t, poisoned);
    expect(history.slice(0, 3)).toEqual(['ActionScheduled', 'ActionClaimed', 'ActionRetryScheduled']);
    expect(new Set(history.slice(1))).toEqual(new Set(['ActionClaimed', 'ActionRetryScheduled']));
    expect((await executeMessages(t)).get(poisoned)).toBeUndefined();
    for (const id of ids) if (id !== poisoned) expect((await executeMessages(t)).get(id)).toBe(1);

    // Without a failure, several executions share one transaction (the retried action may join them).
    poisoned = '';
    const calm: { actionId: string }[] = [];
    for (let i = 0; i < 4; i++) calm.push(await h.service.schedule(normalAction()));
    const calmIds = calm.map((a) => a.actionId);
    await h.drain(h.sweeper({ executor }));
    const together = await t.db.query<{ n: number }>(
      `select count(distinct tx)::int as n from event where type = 'ActionExecuted' and stream_id = any($1::text[])`,
      [calmIds],
    );
    expect(together.rows[0]!.n).toBe(1);
    // Nothing left for the next test: the once-failing action runs once its backoff is over.
    await waitFor(async () => {
      await h.drain(h.sweeper({ executor }));
      return (await h.service.get(actions[2]!.actionId)).status === 'done';
    });
  });

  it('claims overlap runs: the next claim commits while the last one runs; stop waits for the runs', async () => {
    // Claims of 4, runs of 2 per transaction, 2 at a time: a claim's two runs take both lanes.
    const small = actionsHarness(t, {
      env: {
        HERALD_ACTIONS_BATCH_SIZE: '4',
        HERALD_CONSUMER_BATCH_SIZE: '2',
        HERALD_ACTIONS_CONCURRENCY: '2',
      },
    });
    const organizationId = uniqueName('org-overlap');
    const ids: string[] = [];
    for (let i = 0; i < 12; i++)
      ids.push((await small.service.schedule(normalAction({ organizationId }))).actionId);
    const claimedCount = async () =>
      (
        await t.db.query<{ n: number }>(
          `select count(*)::int as n from event where type = 'ActionClaimed' and stream_id = any($1::text[])`,
          [ids],
        )
      ).rows[0]!.n;
    // The first claim's runs hold their lanes until a second claim has committed: without the overlap
    // the second claim would wait for these runs, and they time out.
    let firstRuns = 0;
    const executor: ActionExecutor = {
      async execute() {
        if (firstRuns++ < 4) await waitFor(async () => (await claimedCount()) > 4, { timeoutMs: 10_000 });
        return { published: true };
      },
    };
    const sweeper = small.sweeper({ executor });
    sweeper.beginPass?.();
    const first = await sweeper.sweep();
    expect(first).toMatchObject({ processed: 4, more: true });
    await sweeper.sweep();
    // stop(): every claimed action has run; none is left processing for the stale window.
    await sweeper.stop?.();
    const { rows } = await t.db.query<{ status: string; n: number }>(
      `select status, count(*)::int as n from scheduled_action where id = any($1::uuid[]) group by 1`,
      [ids],
    );
    expect(Object.fromEntries(rows.map((r) => [r.status, r.n]))).toEqual({ done: 8, pending: 4 });
    await small.drain(sweeper);
    for (const id of ids) expect((await executeMessages(t)).get(id)).toBe(1);
  });

  it('after maxRetries the action fails, with the error; a PermanentError fails at once', async () => {
    const { executor, calls } = failing(100);
    const sweeper = h.sweeper({ executor });
    const action = await h.service.schedule(normalAction());
    const failed = await waitFor(async () => {
      await h.drain(sweeper);
      const state = await h.service.get(action.actionId);
      return state.status === 'failed' && state;
    });
    expect(failed).toMatchObject({
      retryCount: 3,
      lastError: 'executor unavailable (gave up after 3 retries)',
    });
    expect(calls.get(action.actionId)).toBe(4);
    expect((await executeMessages(t)).get(action.actionId)).toBeUndefined();

    const permanent = failing(100, () => new PermanentError('unknown template'));
    const once = await h.service.schedule(normalAction());
    await h.drain(h.sweeper({ executor: permanent.executor }));
    expect(await h.service.get(once.actionId)).toMatchObject({
      status: 'failed',
      retryCount: 0,
      lastError: 'unknown template',
    });
  });
});

describe('operator changes through the library', () => {
  it('fire now: a waiting action runs its main branch at once, recorded with the actor and reason', async () => {
    const action = await h.service.schedule(waitAction(key()));
    await h.service.fireNow(action.actionId, 'customer called support', { actor: 'operator:ann' });
    await h.drain();
    expect(await h.service.get(action.actionId)).toMatchObject({
      status: 'done',
      branch: 'main',
      firedNow: true,
    });
    const history = await h.service.history(action.actionId);
    expect(history[1]).toMatchObject({
      type: 'ActionFireRequested',
      data: { reason: 'customer called support' },
      meta: { actor: 'operator:ann' },
    });
  });

  it('change the deadline: an extended wait does not expire at the old deadline and still takes a signal', async () => {
    const k = key();
    const action = await h.service.schedule(waitAction(k, { expiresSeconds: 1 }));
    const later = new Date(Date.parse(action.expiresAt!) + 3_600_000);
    await h.service.reschedule(action.actionId, { expiresAt: later }, 'campaign extended', {
      actor: 'operator:ann',
    });
    await waitFor(async () => {
      const { rows } = await t.db.query<{ past: boolean }>('select now() > $1::timestamptz as past', [
        action.expiresAt,
      ]);
      return rows[0]!.past;
    });
    await h.drain();
    expect(await h.service.get(action.actionId)).toMatchObject({
      status: 'pending',
      expired: false,
      expiresAt: later.toISOString(),
    });
    expect(
      (await h.service.signal({ organizationId: 'org-1', correlationKey: k, name: 'clicked' })).unlocked,
    ).toEqual([action.actionId]);
    const normal = await h.service.schedule(normalAction({ delaySeconds: 600 }));
    await expect(h.service.reschedule(normal.actionId, { expiresAt: later })).rejects.toThrow(
      /expiresAt does not apply/,
    );
  });

  it('cancel: the action never fires; a second cancel, or a signal, is refused or matches nothing', async () => {
    const k = key();
    const action = await h.service.schedule(waitAction(k));
    const cancelled = await h.service.cancel(action.actionId, 'customer unsubscribed', {
      actor: 'operator:ann',
    });
    expect(cancelled).toMatchObject({ status: 'cancelled', cancelReason: 'customer unsubscribed' });
    await expect(h.service.cancel(action.actionId, 'again')).rejects.toBeInstanceOf(IllegalStateError);
    expect(
      (await h.service.signal({ organizationId: 'org-1', correlationKey: k, name: 'clicked' })).unlocked,
    ).toEqual([]);
    await h.drain();
    expect((await h.service.get(action.actionId)).status).toBe('cancelled');
    await expect(h.service.get('00000000-0000-4000-8000-000000000000')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('list filters by organization and status', async () => {
    const org = uniqueName('org');
    await h.service.schedule(normalAction({ organizationId: org, delaySeconds: 600 }));
    const cancelled = await h.service.schedule(normalAction({ organizationId: org, delaySeconds: 600 }));
    await h.service.cancel(cancelled.actionId, 'no longer needed');
    expect((await h.service.list({ organizationId: org })).length).toBe(2);
    expect(
      (await h.service.list({ organizationId: org, status: 'cancelled' })).map((a) => a.actionId),
    ).toEqual([cancelled.actionId]);
  });
});

describe('replay and verify (invariant 8)', () => {
  it('replay shows an action with its messages; verify folds every action and signal stream into its row, through the registry alone', async () => {
    const k = key();
    const action = await h.service.schedule(waitAction(k));
    const signal = await h.service.signal({ organizationId: 'org-1', correlationKey: k, name: 'clicked' });
    await h.drain();
    const replay = await replayStream(t.db, heraldRegistry, {
      streamType: 'scheduled_action',
      streamId: action.actionId,
    });
    expect(replay.state).toEqual(await h.service.get(action.actionId));
    expect(replay.commands.flatMap((c) => c.messages.map((m) => m.destination))).toEqual(['action_execute']);
    const signalReplay = await replayStream(t.db, heraldRegistry, {
      streamType: 'action_signal',
      streamId: signal.signalId,
    });
    expect(signalReplay.state).toMatchObject({ unlocked: [action.actionId] });

    const report = await verifyStates(t.db, heraldRegistry);
    expect(report.streamTypes).toEqual(expect.arrayContaining(['scheduled_action', 'action_signal']));
    expect(report.drifts).toEqual([]);
    expect(report.streams).toBeGreaterThan(20);
    await t.db.query(`update scheduled_action set retry_count = retry_count + 7 where id = $1`, [
      action.actionId,
    ]);
    await t.db.query(`update action_signal set unlocked = '[]'::jsonb where id = $1`, [signal.signalId]);
    const drifted = await verifyStates(t.db, heraldRegistry);
    expect(drifted.drifts.map((d) => [d.streamType, d.field]).sort()).toEqual([
      ['action_signal', 'unlocked'],
      ['scheduled_action', 'retryCount'],
    ]);
  });
});
