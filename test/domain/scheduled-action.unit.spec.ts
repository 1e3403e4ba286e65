/**
 * Scheduled-action decider (seed 002): every legal and illegal (situation × command) pair, the wait's
 * rules (signal names, deadline, first signal wins, early signals), expiry into its branch, retries,
 * the claim-epoch fence (invariant 5), validation, the event schemas and a replay property
 * (invariant 8). Histories are produced by the decider itself, never forged.
 */
import { describe, expect, it } from 'vitest';
import { fold } from '../../src/domain/decider.js';
import {
  parseScheduledActionEvent,
  type ScheduleAction,
  type ScheduledActionCommand,
  type ScheduledActionEvent,
  type ScheduledActionState,
  scheduledActionDecider,
} from '../../src/domain/scheduled-action.js';
import { IllegalStateError, ValidationError } from '../../src/errors.js';
import { specFor } from '../../src/testing/given-when-then.js';

const { given } = specFor(scheduledActionDecider);
const decider = scheduledActionDecider;

const ID = '5d0c1a8e-2b3f-4c5d-8e9f-0a1b2c3d4e5f';
const SIGNAL = '7e1d2c3b-4a59-4687-9a0b-1c2d3e4f5a6b';
const SIGNAL_2 = '8f2e3d4c-5b6a-4798-8b1c-2d3e4f5a6b7c';
const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const at = (minutes: number) => new Date(T0 + minutes * 60_000).toISOString();
const STALE_MS = 5 * 60_000;
const KEY = 'subject-1:node-2';

function schedule(overrides: Partial<ScheduleAction> = {}): ScheduleAction {
  return {
    type: 'ScheduleAction',
    actionId: ID,
    now: at(0),
    organizationId: 'org-1',
    mode: 'normal',
    actionType: 'send_message',
    actionConfig: { text: 'hello' },
    delaySeconds: 3600,
    ...overrides,
  };
}

function wait(overrides: Partial<ScheduleAction> = {}): ScheduleAction {
  return schedule({
    mode: 'waitForSignal',
    delaySeconds: undefined,
    expiresSeconds: 7200,
    wait: { names: ['clicked', 'replied'], correlationKey: KEY },
    expiry: { actionType: 'send_message', actionConfig: { text: 'you did not click' } },
    ...overrides,
  });
}

const cmd = {
  signal: (now = at(10), name = 'clicked', signalId = SIGNAL): ScheduledActionCommand => ({
    type: 'SignalAction',
    actionId: ID,
    now,
    signalId,
    name,
    correlationKey: KEY,
  }),
  fire: (now = at(10)): ScheduledActionCommand => ({
    type: 'FireActionNow',
    actionId: ID,
    now,
    reason: 'operator',
  }),
  claim: (now = at(70)): ScheduledActionCommand => ({
    type: 'ClaimAction',
    actionId: ID,
    now,
    delivery: 'queue',
  }),
  heartbeat: (epoch: number, now: string): ScheduledActionCommand => ({
    type: 'HeartbeatAction',
    actionId: ID,
    now,
    epoch,
  }),
  reclaim: (now: string): ScheduledActionCommand => ({
    type: 'ReclaimAction',
    actionId: ID,
    now,
    staleAfterMs: STALE_MS,
  }),
  complete: (epoch: number, now: string): ScheduledActionCommand => ({
    type: 'CompleteAction',
    actionId: ID,
    now,
    epoch,
    published: true,
  }),
  retry: (epoch: number, now: string, delayMs = 600_000): ScheduledActionCommand => ({
    type: 'RetryAction',
    actionId: ID,
    now,
    epoch,
    error: 'executor unavailable',
    delayMs,
  }),
  fail: (epoch: number, now: string): ScheduledActionCommand => ({
    type: 'FailAction',
    actionId: ID,
    now,
    epoch,
    error: 'rejected by the executor',
  }),
  cancel: (now = at(10), epoch?: number): ScheduledActionCommand => ({
    type: 'CancelAction',
    actionId: ID,
    now,
    reason: 'customer unsubscribed',
    ...(epoch === undefined ? {} : { epoch }),
  }),
  reschedule: (now: string, to: { executeAt?: string; expiresAt?: string }): ScheduledActionCommand => ({
    type: 'RescheduleAction',
    actionId: ID,
    now,
    ...to,
  }),
};

function run(
  commands: readonly ScheduledActionCommand[],
  events: ScheduledActionEvent[] = [],
): ScheduledActionEvent[] {
  const history = [...events];
  let state = fold(decider, history);
  for (const command of commands) {
    const emitted = decider.decide(command, state);
    for (const event of emitted) state = decider.evolve(state, event);
    history.push(...emitted);
  }
  return history;
}

const stateOf = (history: readonly ScheduledActionEvent[]) => fold(decider, history);
const epochOf = (state: ScheduledActionState) => (state.status === 'NONE' ? 0 : state.claimEpoch);

/** Every situation an action can be in, each with a history and a time for sample commands. */
const SITUATIONS = {
  NONE: { history: [], now: at(0) },
  scheduled: { history: run([schedule()]), now: at(10) },
  due: { history: run([schedule()]), now: at(70) },
  waiting: { history: run([wait()]), now: at(10) },
  waitingPastDeadline: { history: run([wait()]), now: at(130) },
  unlocked: { history: run([wait(), cmd.signal(at(10))]), now: at(11) },
  firedNow: { history: run([wait(), cmd.fire(at(10))]), now: at(11) },
  processing: { history: run([schedule(), cmd.claim(at(70))]), now: at(71) },
  processingExpiry: { history: run([wait(), cmd.claim(at(130))]), now: at(131) },
  retryPending: { history: run([schedule(), cmd.claim(at(70)), cmd.retry(1, at(72))]), now: at(73) },
  expiredPending: { history: run([wait(), cmd.claim(at(130)), cmd.reclaim(at(140))]), now: at(141) },
  done: { history: run([schedule(), cmd.claim(at(70)), cmd.complete(1, at(72))]), now: at(73) },
  doneExpired: { history: run([wait({ expiry: null }), cmd.claim(at(130))]), now: at(131) },
  failed: { history: run([schedule(), cmd.claim(at(70)), cmd.fail(1, at(72))]), now: at(73) },
  cancelled: { history: run([schedule(), cmd.cancel(at(5))]), now: at(10) },
} as const;
type Situation = keyof typeof SITUATIONS;

type CommandType = ScheduledActionCommand['type'];
const PENDING: Situation[] = [
  'scheduled',
  'due',
  'waiting',
  'waitingPastDeadline',
  'unlocked',
  'firedNow',
  'retryPending',
  'expiredPending',
];
const PROCESSING: Situation[] = ['processing', 'processingExpiry'];

/** Where each command is legal; every other situation must refuse it. */
const LEGAL: Record<CommandType | 'CancelByConditions', Situation[]> = {
  ScheduleAction: ['NONE'],
  SignalAction: ['waiting'],
  FireActionNow: ['scheduled', 'waiting', 'retryPending'],
  RescheduleAction: ['scheduled', 'due', 'waiting', 'waitingPastDeadline', 'retryPending', 'expiredPending'],
  CancelAction: PENDING,
  CancelByConditions: PROCESSING,
  ClaimAction: ['due', 'waitingPastDeadline', 'unlocked', 'firedNow', 'expiredPending'],
  HeartbeatAction: PROCESSING,
  ReclaimAction: PROCESSING,
  CompleteAction: PROCESSING,
  RetryAction: PROCESSING,
  FailAction: PROCESSING,
};

function sample(type: CommandType | 'CancelByConditions', situation: Situation): ScheduledActionCommand {
  const { history, now } = SITUATIONS[situation];
  const state = stateOf(history);
  const epoch = Math.max(1, epochOf(state));
  const later = new Date(Date.parse(now) + 3_600_000).toISOString();
  const waitingNow = situation === 'waiting' || situation === 'waitingPastDeadline';
  switch (type) {
    case 'ScheduleAction':
      return schedule({ now });
    case 'SignalAction':
      return cmd.signal(now);
    case 'FireActionNow':
      return cmd.fire(now);
    case 'RescheduleAction':
      return cmd.reschedule(now, waitingNow ? { expiresAt: later } : { executeAt: later });
    case 'CancelAction':
      return cmd.cancel(now);
    case 'CancelByConditions':
      return cmd.cancel(now, epoch);
    case 'ClaimAction':
      return cmd.claim(now);
    case 'HeartbeatAction':
      return cmd.heartbeat(epoch, now);
    case 'ReclaimAction':
      return cmd.reclaim(new Date(Date.parse(now) + STALE_MS + 60_000).toISOString());
    case 'CompleteAction':
      return cmd.complete(epoch, now);
    case 'RetryAction':
      return cmd.retry(epoch, now);
    case 'FailAction':
      return cmd.fail(epoch, now);
  }
}

describe('scheduled action decider: every (situation × command) pair', () => {
  const rows = (Object.keys(SITUATIONS) as Situation[]).flatMap((situation) =>
    (Object.keys(LEGAL) as (keyof typeof LEGAL)[]).map((type) => ({ situation, type })),
  );
  const legal = rows.filter((r) => LEGAL[r.type].includes(r.situation));
  const illegal = rows.filter((r) => !LEGAL[r.type].includes(r.situation));

  it('the situations are what their names say', () => {
    const status = (s: Situation) => stateOf(SITUATIONS[s].history).status;
    expect(PENDING.map(status)).toEqual(PENDING.map(() => 'pending'));
    expect(PROCESSING.map(status)).toEqual(['processing', 'processing']);
    expect(['done', 'doneExpired', 'failed', 'cancelled'].map((s) => status(s as Situation))).toEqual([
      'done',
      'done',
      'failed',
      'cancelled',
    ]);
    expect(rows).toHaveLength(15 * 12);
  });

  it.each(legal)('$situation × $type is accepted', ({ situation, type }) => {
    const { events } = given(SITUATIONS[situation].history).when(sample(type, situation)).thenSucceeds();
    expect(events.length).toBeGreaterThan(0);
  });

  it.each(illegal)('$situation × $type → IllegalStateError naming the command', ({ situation, type }) => {
    const error = given(SITUATIONS[situation].history)
      .when(sample(type, situation))
      .thenThrows(IllegalStateError);
    const commandType = type === 'CancelByConditions' ? 'CancelAction' : type;
    expect(error.message).toContain(commandType);
    expect(error.details).toMatchObject({ command: commandType });
  });
});

describe('scheduled action decider: normal actions', () => {
  it('ScheduleAction → pending, due at now + delaySeconds', () => {
    const state = given([]).when(schedule()).thenSucceeds().state;
    expect(state).toMatchObject({
      status: 'pending',
      executeAt: at(60),
      expiresAt: null,
      retryCount: 0,
      maxRetries: 3,
      dueBecause: 'due',
    });
  });

  it('claim at the due time (not 1 ms before) → processing with epoch 1; complete → done, executed', () => {
    const history = run([schedule()]);
    given(history)
      .when(cmd.claim(new Date(Date.parse(at(60)) - 1).toISOString()))
      .thenThrows(IllegalStateError, /due at/);
    const claimed = given(history)
      .when(cmd.claim(at(60)))
      .then([
        {
          type: 'ActionClaimed',
          data: { epoch: 1, branch: 'main', trigger: 'due', delivery: 'queue', claimedAt: at(60) },
        },
      ]);
    expect(claimed).toMatchObject({ status: 'processing', claimEpoch: 1, claimedAt: at(60) });
    const done = given(run([cmd.claim(at(60))], history))
      .when(cmd.complete(1, at(61)))
      .then([{ type: 'ActionExecuted', data: { epoch: 1, branch: 'main', published: true, at: at(61) } }]);
    expect(done).toMatchObject({ status: 'done', outcome: 'executed', claimedAt: null });
  });

  it('claimWith on a schedule with no delay claims in the same command; with a delay it does not', () => {
    const { events } = given([])
      .when(schedule({ delaySeconds: 0, claimWith: 'queue' }))
      .thenSucceeds();
    expect(events.map((e) => e.type)).toEqual(['ActionScheduled', 'ActionClaimed']);
    const later = given([])
      .when(schedule({ claimWith: 'queue' }))
      .thenSucceeds();
    expect(later.events.map((e) => e.type)).toEqual(['ActionScheduled']);
  });

  it('retries: RetryScheduled up to maxRetries (the count and the due time advance), then Failed', () => {
    let history = run([schedule({ maxRetries: 2 }), cmd.claim(at(70))]);
    const retried = given(history)
      .when(cmd.retry(1, at(71), 30_000))
      .then([
        {
          type: 'ActionRetryScheduled',
          data: {
            epoch: 1,
            retryCount: 1,
            executeAt: '2030-01-01T01:11:30.000Z',
            error: 'executor unavailable',
            at: at(71),
          },
        },
      ]);
    expect(retried).toMatchObject({
      status: 'pending',
      retryCount: 1,
      dueBecause: 'retry',
      lastError: 'executor unavailable',
    });
    history = run([cmd.retry(1, at(71), 30_000), cmd.claim(at(72))], history);
    expect(stateOf(history)).toMatchObject({ status: 'processing', claimEpoch: 2 });
    expect(history.at(-1)).toMatchObject({ type: 'ActionClaimed', data: { trigger: 'retry' } });
    history = run([cmd.retry(2, at(73), 0), cmd.claim(at(73))], history);
    const failed = given(history)
      .when(cmd.retry(3, at(74)))
      .thenSucceeds();
    expect(failed.events).toEqual([
      {
        type: 'ActionFailed',
        data: {
          epoch: 3,
          error: 'executor unavailable (gave up after 2 retries)',
          retryCount: 2,
          at: at(74),
        },
      },
    ]);
    expect(failed.state).toMatchObject({ status: 'failed', retryCount: 2 });
  });

  it('maxRetries 0: the first transient failure fails the action', () => {
    const history = run([schedule({ maxRetries: 0 }), cmd.claim(at(70))]);
    const { state } = given(history)
      .when(cmd.retry(1, at(71)))
      .thenSucceeds();
    expect(state.status).toBe('failed');
  });

  it('a permanent failure fails at once, whatever retries are left', () => {
    const history = run([schedule(), cmd.claim(at(70))]);
    expect(
      given(history)
        .when(cmd.fail(1, at(71)))
        .thenSucceeds().state,
    ).toMatchObject({ status: 'failed', retryCount: 0 });
  });
});

describe('scheduled action decider: waits', () => {
  it('a wait is due at its deadline (expiresSeconds, or delaySeconds without it)', () => {
    expect(stateOf(run([wait()]))).toMatchObject({
      executeAt: at(120),
      expiresAt: at(120),
      mode: 'waitForSignal',
    });
    const byDelay = stateOf(run([wait({ expiresSeconds: undefined, delaySeconds: 1800 })]));
    expect(byDelay).toMatchObject({ executeAt: at(30), expiresAt: at(30) });
  });

  it('a signal unlocks it: due now; the claim runs the main branch with trigger signal', () => {
    const state = given(run([wait()]))
      .when(cmd.signal(at(10)))
      .then([
        {
          type: 'ActionSignalled',
          data: { signalId: SIGNAL, name: 'clicked', receivedAt: at(10), early: false, at: at(10) },
        },
      ]);
    expect(state).toMatchObject({
      status: 'pending',
      executeAt: at(10),
      unlockedBy: { signalId: SIGNAL, name: 'clicked' },
    });
    const claimed = given(run([wait(), cmd.signal(at(10))]))
      .when(cmd.claim(at(10)))
      .thenSucceeds();
    expect(claimed.events[0]).toMatchObject({
      type: 'ActionClaimed',
      data: { branch: 'main', trigger: 'signal' },
    });
  });

  it('any of the names unlocks it; a name it does not list, or another correlation key, does not', () => {
    given(run([wait()]))
      .when(cmd.signal(at(10), 'replied'))
      .thenSucceeds();
    given(run([wait()]))
      .when(cmd.signal(at(10), 'opened'))
      .thenThrows(IllegalStateError, /waits for clicked or replied, not opened/);
    given(run([wait()]))
      .when({ ...cmd.signal(at(10)), correlationKey: 'subject-2:node-2' } as ScheduledActionCommand)
      .thenThrows(IllegalStateError, /correlation key/);
  });

  it('the first signal wins: a second one (same or other name) is refused', () => {
    const history = run([wait(), cmd.signal(at(10))]);
    given(history)
      .when(cmd.signal(at(11), 'replied', SIGNAL_2))
      .thenThrows(IllegalStateError, /already unlocked it/);
  });

  it('a signal exactly at the deadline unlocks; 1 ms after is refused (the deadline claim wins)', () => {
    given(run([wait()]))
      .when(cmd.signal(at(120)))
      .thenSucceeds();
    given(run([wait()]))
      .when(cmd.signal(new Date(Date.parse(at(120)) + 1).toISOString()))
      .thenThrows(IllegalStateError, /deadline .* has passed/);
  });

  it('past the deadline the claim records the expiry and claims the expiry branch (trigger deadline)', () => {
    const history = run([wait()]);
    given(history)
      .when(cmd.claim(at(120)))
      .thenThrows(IllegalStateError, /waits for a signal until/);
    const state = given(history)
      .when(cmd.claim(at(121)))
      .then([
        { type: 'ActionExpired', data: { expiresAt: at(120), branch: 'expiry', at: at(121) } },
        {
          type: 'ActionClaimed',
          data: { epoch: 1, branch: 'expiry', trigger: 'deadline', delivery: 'queue', claimedAt: at(121) },
        },
      ]);
    expect(state).toMatchObject({ status: 'processing', expired: true, branch: 'expiry' });
    const done = given(run([cmd.claim(at(121))], history))
      .when(cmd.complete(1, at(122)))
      .thenSucceeds();
    expect(done.events[0]).toMatchObject({ type: 'ActionExecuted', data: { branch: 'expiry' } });
    expect(done.state).toMatchObject({ status: 'done', outcome: 'executed' });
  });

  it('a wait without an expiry branch expires into done with outcome expired: an outcome, not a failure', () => {
    const state = given(run([wait({ expiry: null })]))
      .when(cmd.claim(at(121)))
      .then([{ type: 'ActionExpired', data: { expiresAt: at(120), branch: null, at: at(121) } }]);
    expect(state).toMatchObject({ status: 'done', outcome: 'expired', expired: true, lastError: null });
  });

  it('an expiry branch recovered after a crash is claimed again as the expiry branch', () => {
    const { events } = given(SITUATIONS.expiredPending.history)
      .when(cmd.claim(at(141)))
      .thenSucceeds();
    expect(events[0]).toMatchObject({
      type: 'ActionClaimed',
      data: { epoch: 3, branch: 'expiry', trigger: 'recovery' },
    });
  });

  it('a signal that arrived before the wait was saved unlocks it at scheduling (early), claimed at once with claimWith', () => {
    const prior = { signalId: SIGNAL, name: 'clicked', receivedAt: at(-1) };
    const { events, state } = given([])
      .when(wait({ priorSignal: prior, claimWith: 'queue' }))
      .thenSucceeds();
    expect(events.map((e) => e.type)).toEqual(['ActionScheduled', 'ActionSignalled', 'ActionClaimed']);
    expect(events[1]).toMatchObject({ data: { early: true, receivedAt: at(-1) } });
    expect(events[2]).toMatchObject({ data: { trigger: 'signal', branch: 'main' } });
    expect(state.status).toBe('processing');
    // A prior signal the wait does not list is a caller error.
    given([])
      .when(wait({ priorSignal: { ...prior, name: 'opened' } }))
      .thenThrows(ValidationError, /priorSignal/);
  });

  it('fire now on a wait runs its main branch as if signalled; on an unlocked wait it is refused (already due)', () => {
    const fired = given(run([wait()]))
      .when(cmd.fire(at(10)))
      .thenSucceeds();
    expect(fired.state).toMatchObject({ firedNow: true, executeAt: at(10), dueBecause: 'fire_now' });
    const claimed = given(run([wait(), cmd.fire(at(10))]))
      .when(cmd.claim(at(10)))
      .thenSucceeds();
    expect(claimed.events[0]).toMatchObject({ data: { branch: 'main', trigger: 'fire_now' } });
    given(run([wait(), cmd.signal(at(10))]))
      .when(cmd.fire(at(11)))
      .thenThrows(IllegalStateError, /already due/);
    given(run([wait()]))
      .when(cmd.signal(at(11)))
      .thenSucceeds();
    given(run([wait(), cmd.fire(at(10))]))
      .when(cmd.signal(at(11)))
      .thenThrows(IllegalStateError, /operator already fired/);
  });
});

describe('scheduled action decider: operator changes', () => {
  it('reschedule a normal action moves executeAt; a wait moves its deadline (expiresAt)', () => {
    const moved = given(run([schedule()]))
      .when({
        ...cmd.reschedule(at(10), { executeAt: at(90) }),
        reason: 'customer asked',
      } as ScheduledActionCommand)
      .then([
        {
          type: 'ActionRescheduled',
          data: { executeAt: at(90), expiresAt: null, reason: 'customer asked', at: at(10) },
        },
      ]);
    expect(moved).toMatchObject({ executeAt: at(90) });
    const extended = given(run([wait()]))
      .when(cmd.reschedule(at(10), { expiresAt: at(240) }))
      .thenSucceeds();
    expect(extended.state).toMatchObject({ executeAt: at(240), expiresAt: at(240) });
    // The extended wait still takes a signal before the new deadline, past the old one.
    given(run([cmd.reschedule(at(10), { expiresAt: at(240) })], run([wait()])))
      .when(cmd.signal(at(200)))
      .thenSucceeds();
  });

  it('reschedule names the field that applies, and refuses a time not after now', () => {
    given(run([wait()]))
      .when(cmd.reschedule(at(10), { executeAt: at(90) }))
      .thenThrows(ValidationError, /executeAt does not apply/);
    given(run([schedule()]))
      .when(cmd.reschedule(at(10), { expiresAt: at(90) }))
      .thenThrows(ValidationError, /expiresAt does not apply/);
    given(run([schedule()]))
      .when(cmd.reschedule(at(10), {}))
      .thenThrows(ValidationError, /executeAt is required/);
    given(run([schedule()]))
      .when(cmd.reschedule(at(10), { executeAt: at(10) }))
      .thenThrows(ValidationError, /not after now/);
  });

  it('cancel a pending action (operator) → cancelled with the reason; a processing one needs the claim epoch', () => {
    const cancelled = given(run([wait()]))
      .when(cmd.cancel(at(10)))
      .then([
        {
          type: 'ActionCancelled',
          data: { reason: 'customer unsubscribed', by: 'operator', epoch: null, at: at(10) },
        },
      ]);
    expect(cancelled).toMatchObject({ status: 'cancelled', cancelReason: 'customer unsubscribed' });
    const processing = run([schedule(), cmd.claim(at(70))]);
    given(processing)
      .when(cmd.cancel(at(71)))
      .thenThrows(IllegalStateError, /allowed only when pending/);
    const byConditions = given(processing)
      .when(cmd.cancel(at(71), 1))
      .thenSucceeds();
    expect(byConditions.events[0]).toMatchObject({ data: { by: 'conditions', epoch: 1 } });
  });
});

describe('scheduled action decider: claim epoch fencing (invariant 5)', () => {
  it('heartbeat, complete, retry, fail and cancel carry the current epoch; a stale one is refused', () => {
    const history = run([schedule(), cmd.claim(at(70))]);
    for (const stale of [
      cmd.heartbeat(2, at(71)),
      cmd.complete(2, at(71)),
      cmd.retry(2, at(71)),
      cmd.fail(2, at(71)),
      cmd.cancel(at(71), 2),
    ]) {
      given(history)
        .when(stale)
        .thenThrows(IllegalStateError, /epoch 2 is stale/);
    }
  });

  it('a reclaim is refused while fresh; once stale it bumps the epoch and the old holder is fenced out', () => {
    const history = run([schedule(), cmd.claim(at(70)), cmd.heartbeat(1, at(73))]);
    // Stale counts from the last heartbeat (73), not the claim (70).
    given(history)
      .when(cmd.reclaim(at(78)))
      .thenThrows(IllegalStateError, /not stale/);
    const afterReclaim = run([cmd.reclaim(at(79))], history);
    expect(stateOf(afterReclaim)).toMatchObject({
      status: 'pending',
      claimEpoch: 2,
      dueBecause: 'recovery',
      executeAt: at(79),
    });
    const reclaimedAgain = run([cmd.claim(at(79))], afterReclaim);
    given(reclaimedAgain)
      .when(cmd.complete(1, at(80)))
      .thenThrows(IllegalStateError, /epoch 1 is stale/);
    given(reclaimedAgain)
      .when(cmd.complete(3, at(80)))
      .thenSucceeds();
  });
});

describe('scheduled action decider: validation', () => {
  it('reports the field: missing delay, wait options on a normal action, wait without names or deadline', () => {
    given([])
      .when(schedule({ delaySeconds: undefined }))
      .thenThrows(ValidationError, /delaySeconds/);
    given([])
      .when(schedule({ wait: { names: ['clicked'], correlationKey: KEY } }))
      .thenThrows(ValidationError, /wait.*only for waitForSignal/);
    given([])
      .when(wait({ wait: undefined }))
      .thenThrows(ValidationError, /wait/);
    given([])
      .when(wait({ expiresSeconds: undefined }))
      .thenThrows(ValidationError, /expiresSeconds/);
    given([])
      .when(wait({ expiresSeconds: 0 }))
      .thenThrows(ValidationError, /deadline after now/);
    given([])
      .when(wait({ wait: { names: [], correlationKey: KEY } }))
      .thenThrows(ValidationError, /names/);
    given([])
      .when({ ...schedule(), surprise: true } as unknown as ScheduledActionCommand)
      .thenThrows(ValidationError, /surprise/);
  });

  it('a command for another action id is refused', () => {
    given(run([schedule()]))
      .when({ ...cmd.cancel(at(10)), actionId: SIGNAL } as ScheduledActionCommand)
      .thenThrows(ValidationError, /is for action/);
  });
});

describe('scheduled action events: schemas and replay (invariant 8)', () => {
  it('every emitted event is plain JSON that parses back to itself', () => {
    const all = Object.values(SITUATIONS).flatMap((s) => s.history);
    const types = new Set(all.map((e) => e.type));
    expect(types.size).toBeGreaterThanOrEqual(9);
    for (const event of all)
      expect(parseScheduledActionEvent(JSON.parse(JSON.stringify(event)))).toEqual(event);
    expect(() => parseScheduledActionEvent({ type: 'ActionClaimed', data: { epoch: 0 } })).toThrow(
      ValidationError,
    );
  });

  it('evolve refuses events that cannot follow the state (a corrupt log)', () => {
    const claimed = SITUATIONS.processing.history.at(-1)!;
    expect(() => decider.evolve(stateOf(SITUATIONS.done.history), claimed)).toThrow(IllegalStateError);
    expect(() => decider.evolve(stateOf(SITUATIONS.NONE.history), claimed)).toThrow(IllegalStateError);
    const signalled = SITUATIONS.unlocked.history.at(-1)!;
    expect(() => decider.evolve(stateOf(SITUATIONS.unlocked.history), signalled)).toThrow(/not waiting/);
  });

  it('for random command sequences, step-by-step state equals fold(all events), in stored form', () => {
    const types = Object.keys(LEGAL) as (keyof typeof LEGAL)[];
    const reached = new Set<string>();
    const emittedTypes = new Set<string>();
    for (let seed = 1; seed <= 200; seed++) {
      let x = seed;
      const rnd = () => {
        x = (x * 1103515245 + 12345) % 2147483648;
        return x / 2147483648;
      };
      let minutes = 0;
      const events: ScheduledActionEvent[] = [];
      let state = decider.initialState();
      for (let step = 0; step < 200; step++) {
        minutes += Math.floor(rnd() * 40);
        const now = at(minutes);
        const later = at(minutes + 1 + Math.floor(rnd() * 120));
        const epoch = Math.max(1, epochOf(state));
        const type = types[Math.floor(rnd() * types.length)]!;
        const command: ScheduledActionCommand = {
          ScheduleAction: () =>
            rnd() < 0.5
              ? schedule({ now, maxRetries: Math.floor(rnd() * 3) })
              : wait({ now, expiry: rnd() < 0.5 ? null : { actionType: 'x', actionConfig: {} } }),
          SignalAction: () => cmd.signal(now, rnd() < 0.5 ? 'clicked' : 'replied'),
          FireActionNow: () => cmd.fire(now),
          RescheduleAction: () =>
            cmd.reschedule(now, rnd() < 0.5 ? { executeAt: later } : { expiresAt: later }),
          CancelAction: () => cmd.cancel(now),
          CancelByConditions: () => cmd.cancel(now, epoch),
          ClaimAction: () => cmd.claim(now),
          HeartbeatAction: () => cmd.heartbeat(epoch, now),
          ReclaimAction: () => cmd.reclaim(now),
          CompleteAction: () => cmd.complete(epoch, now),
          RetryAction: () => cmd.retry(epoch, now, Math.floor(rnd() * 3_600_000)),
          FailAction: () => cmd.fail(epoch, now),
        }[type]();
        let emitted: ScheduledActionEvent[];
        try {
          emitted = decider.decide(command, state);
        } catch (error) {
          if (error instanceof IllegalStateError || error instanceof ValidationError) continue;
          throw error;
        }
        for (const event of emitted) {
          state = decider.evolve(state, event);
          emittedTypes.add(event.type);
        }
        events.push(...emitted);
        reached.add(state.status);
        expect(state, `seed ${seed}, step ${step}`).toEqual(fold(decider, events));
      }
      const stored = (JSON.parse(JSON.stringify(events)) as unknown[]).map(parseScheduledActionEvent);
      expect(fold(decider, stored), `seed ${seed}`).toStrictEqual(state);
      expect(JSON.parse(JSON.stringify(state)), 'state must be plain JSON').toStrictEqual(state);
    }
    // The walk is only worth something if it goes everywhere.
    expect([...reached].sort()).toEqual(['cancelled', 'done', 'failed', 'pending', 'processing']);
    expect(emittedTypes.size).toBe(12);
  });
});
