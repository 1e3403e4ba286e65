/**
 * `decide` for scheduled actions: validates a command against the current state and returns its events,
 * or throws (ValidationError, IllegalStateError) without emitting anything. Pure: time is the command's
 * `now`. A signal unlocks a wait only before its deadline, only for a name the wait lists, and only once
 * (the first wins); past its deadline a wait's claim records `ActionExpired` and runs the expiry branch,
 * an outcome, never a failure. Claims, heartbeats and outcomes are fenced by the claim epoch
 * (invariant 5). ADR 0010.
 */
import { IllegalStateError, ValidationError } from '../../errors.js';
import { assertNever } from '../decider.js';
import { type Operation, operationRefusal } from '../operations.js';
import { ms } from '../time.js';
import {
  type ParsedScheduledActionCommand,
  parseScheduledActionCommand,
  type ScheduledActionCommand,
} from './commands.js';
import type { ScheduledActionEvent } from './events.js';
import { ACTION_OPERATIONS, allowedOnlyWhen } from './operations.js';
import {
  type ActionIn,
  type ExistingAction,
  evolveScheduledAction,
  isWaiting,
  type ScheduledActionState,
} from './state.js';
import type { ActionDelivery, ActionStatus } from './status.js';

const plus = (iso: string, milliseconds: number) => new Date(ms(iso) + milliseconds).toISOString();

export function decideScheduledAction(
  command: ScheduledActionCommand,
  state: ScheduledActionState,
): ScheduledActionEvent[] {
  const c = parseScheduledActionCommand(command);
  const now = c.now;

  if (c.type === 'ScheduleAction') {
    if (state.status !== 'NONE') throw illegal(c, state, 'it already exists');
    const wait = c.mode === 'waitForSignal';
    const deadline = wait ? plus(now, (c.expiresSeconds ?? c.delaySeconds!) * 1000) : null;
    const scheduled: ScheduledActionEvent = {
      type: 'ActionScheduled',
      data: {
        actionId: c.actionId,
        organizationId: c.organizationId,
        mode: c.mode,
        actionType: c.actionType,
        actionConfig: c.actionConfig,
        sourceConfig: c.sourceConfig ?? null,
        workflowId: c.workflowId ?? null,
        workflowNodePath: c.workflowNodePath ?? null,
        subjectId: c.subjectId ?? null,
        executeAt: deadline ?? plus(now, c.delaySeconds! * 1000),
        expiresAt: deadline,
        wait: c.wait ?? null,
        expiry: c.expiry ?? null,
        maxRetries: c.maxRetries,
        // Only when the request had one: the events of other creates keep their shape.
        ...(c.idempotencyKey ? { idempotencyKey: c.idempotencyKey } : {}),
        at: now,
      },
    };
    const events: ScheduledActionEvent[] = [scheduled];
    if (c.priorSignal) {
      // Its receivedAt may be after `now` (this transaction's start): the signal committed while this
      // transaction waited for the correlation lock.
      events.push({
        type: 'ActionSignalled',
        data: {
          signalId: c.priorSignal.signalId,
          name: c.priorSignal.name,
          receivedAt: c.priorSignal.receivedAt,
          early: true,
          at: now,
        },
      });
    }
    return withClaim(events, state, c.claimWith, now);
  }

  if (state.status === 'NONE') throw illegal(c, state, 'it does not exist');
  if (c.actionId !== state.actionId) {
    throw new ValidationError(`${c.type} is for action ${c.actionId}, not ${state.actionId}`, {
      command: c.type,
      actionId: c.actionId,
      streamActionId: state.actionId,
    });
  }

  switch (c.type) {
    case 'SignalAction': {
      const s = requireStatus(c, state, ['pending']);
      requireWaiting(c, s);
      if (!s.wait!.names.includes(c.name)) {
        throw illegal(c, s, `it waits for ${s.wait!.names.join(' or ')}, not ${c.name}`);
      }
      if (c.correlationKey !== s.wait!.correlationKey) {
        throw illegal(c, s, `its correlation key is ${s.wait!.correlationKey}, not ${c.correlationKey}`);
      }
      if (ms(now) > ms(s.expiresAt!))
        throw illegal(c, s, `its deadline ${s.expiresAt} has passed (now ${now})`);
      return withClaim(
        [
          {
            type: 'ActionSignalled',
            data: { signalId: c.signalId, name: c.name, receivedAt: now, early: false, at: now },
          },
        ],
        s,
        c.claimWith,
        now,
      );
    }
    case 'FireActionNow': {
      const s = requireOperation(c, state, ACTION_OPERATIONS.fire);
      if (isWaiting(s)) {
        if (ms(now) > ms(s.expiresAt!)) {
          throw illegal(c, s, `its deadline ${s.expiresAt} has passed: it follows its expiry path`);
        }
      } else if (ms(s.executeAt) <= ms(now)) {
        throw illegal(c, s, `it is already due (at ${s.executeAt})`);
      }
      return withClaim(
        [{ type: 'ActionFireRequested', data: { reason: c.reason ?? null, at: now } }],
        s,
        c.claimWith,
        now,
      );
    }
    case 'RescheduleAction': {
      const s = requireOperation(c, state, ACTION_OPERATIONS.reschedule);
      const [field, other] = isWaiting(s)
        ? (['expiresAt', 'executeAt'] as const)
        : (['executeAt', 'expiresAt'] as const);
      if (c[other] !== undefined) {
        throw new ValidationError(
          `invalid RescheduleAction: ${other} does not apply (${isWaiting(s) ? 'a waiting action changes its deadline, expiresAt' : 'this action changes its execute time, executeAt'})`,
          { field: other },
        );
      }
      const at = c[field];
      if (at === undefined) {
        throw new ValidationError(`invalid RescheduleAction: ${field} is required`, { field });
      }
      if (ms(at) <= ms(now)) {
        throw new ValidationError(
          `invalid RescheduleAction: ${field} ${at} is not after now (${now}); fire it instead`,
          {
            field,
          },
        );
      }
      return [
        {
          type: 'ActionRescheduled',
          data: {
            executeAt: at,
            expiresAt: field === 'expiresAt' ? at : s.expiresAt,
            reason: c.reason ?? null,
            at: now,
          },
        },
      ];
    }
    case 'CancelAction': {
      if (c.epoch === undefined) {
        requireOperation(c, state, ACTION_OPERATIONS.cancel);
        return [
          { type: 'ActionCancelled', data: { reason: c.reason, by: 'operator', epoch: null, at: now } },
        ];
      }
      const s = requireStatus(c, state, ['processing']);
      requireEpoch(c, s, c.epoch);
      return [
        { type: 'ActionCancelled', data: { reason: c.reason, by: 'conditions', epoch: c.epoch, at: now } },
      ];
    }
    case 'ClaimAction': {
      const s = requireStatus(c, state, ['pending']);
      if (isWaiting(s)) {
        if (ms(now) <= ms(s.expiresAt!)) {
          throw illegal(c, s, `it waits for a signal until ${s.expiresAt} (now ${now})`);
        }
        return withClaim(
          [
            {
              type: 'ActionExpired',
              data: { expiresAt: s.expiresAt!, branch: s.expiry ? 'expiry' : null, at: now },
            },
          ],
          s,
          c.delivery,
          now,
        );
      }
      if (ms(s.executeAt) > ms(now)) throw illegal(c, s, `it is due at ${s.executeAt} (now ${now})`);
      return [claimed(s, c.delivery, now)];
    }
    case 'HeartbeatAction': {
      const s = requireStatus(c, state, ['processing']);
      requireEpoch(c, s, c.epoch);
      return [{ type: 'ActionHeartbeat', data: { epoch: c.epoch, claimedAt: now } }];
    }
    case 'ReclaimAction': {
      const s = requireStatus(c, state, ['processing']);
      const age = ms(now) - ms(s.claimedAt);
      if (age <= c.staleAfterMs) {
        throw illegal(c, s, `its claim is ${age} ms old, not stale (staleAfterMs ${c.staleAfterMs})`);
      }
      return [
        {
          type: 'ActionReclaimed',
          data: {
            epoch: s.claimEpoch + 1,
            previousClaimedAt: s.claimedAt,
            reason: c.reason ?? `no heartbeat for more than ${c.staleAfterMs} ms`,
            at: now,
          },
        },
      ];
    }
    case 'CompleteAction': {
      const s = requireStatus(c, state, ['processing']);
      requireEpoch(c, s, c.epoch);
      return [
        {
          type: 'ActionExecuted',
          data: { epoch: c.epoch, branch: s.branch, published: c.published, at: now },
        },
      ];
    }
    case 'RetryAction': {
      const s = requireStatus(c, state, ['processing']);
      requireEpoch(c, s, c.epoch);
      if (s.retryCount >= s.maxRetries) {
        return [
          {
            type: 'ActionFailed',
            data: {
              epoch: c.epoch,
              error: `${c.error} (gave up after ${s.retryCount} ${s.retryCount === 1 ? 'retry' : 'retries'})`,
              retryCount: s.retryCount,
              at: now,
            },
          },
        ];
      }
      return [
        {
          type: 'ActionRetryScheduled',
          data: {
            epoch: c.epoch,
            retryCount: s.retryCount + 1,
            executeAt: plus(now, c.delayMs),
            error: c.error,
            at: now,
          },
        },
      ];
    }
    case 'FailAction': {
      const s = requireStatus(c, state, ['processing']);
      requireEpoch(c, s, c.epoch);
      return [
        { type: 'ActionFailed', data: { epoch: c.epoch, error: c.error, retryCount: s.retryCount, at: now } },
      ];
    }
    default:
      return assertNever(c, 'scheduled action command');
  }
}

function claimed(s: ActionIn<'pending'>, delivery: ActionDelivery, now: string): ScheduledActionEvent {
  return {
    type: 'ActionClaimed',
    data: {
      epoch: s.claimEpoch + 1,
      branch: s.expired ? 'expiry' : 'main',
      trigger: s.dueBecause,
      delivery,
      claimedAt: now,
    },
  };
}

/** Appends a claim when asked for and the events leave the action pending and due now. */
function withClaim(
  events: ScheduledActionEvent[],
  before: ScheduledActionState,
  delivery: ActionDelivery | undefined,
  now: string,
): ScheduledActionEvent[] {
  if (!delivery) return events;
  const after = events.reduce(evolveScheduledAction, before);
  if (after.status !== 'pending' || isWaiting(after) || ms(after.executeAt) > ms(now)) return events;
  return [...events, claimed(after, delivery, now)];
}

function requireStatus<S extends ActionStatus>(
  c: ParsedScheduledActionCommand,
  state: ExistingAction,
  allowed: readonly S[],
): ActionIn<S> {
  if (!(allowed as readonly ActionStatus[]).includes(state.status)) {
    throw illegal(c, state, allowedOnlyWhen(allowed));
  }
  return state as ActionIn<S>;
}

/** An operator command's refusal (src/domain/scheduled-action/operations.ts) as its IllegalStateError. */
function requireOperation<S extends ActionStatus>(
  c: ParsedScheduledActionCommand,
  state: ExistingAction,
  operation: Operation<ExistingAction> & { readonly statuses: readonly S[] },
): ActionIn<S> {
  const refused = operationRefusal(operation, state, allowedOnlyWhen);
  if (refused !== null) throw illegal(c, state, refused);
  return state as ActionIn<S>;
}

function requireWaiting(c: ParsedScheduledActionCommand, s: ActionIn<'pending'>): void {
  if (s.mode !== 'waitForSignal') throw illegal(c, s, 'it is a normal action: it waits for no signal');
  if (s.unlockedBy)
    throw illegal(c, s, `signal ${s.unlockedBy.name} (${s.unlockedBy.signalId}) already unlocked it`);
  if (s.firedNow) throw illegal(c, s, 'an operator already fired it');
  if (s.expired) throw illegal(c, s, `its wait expired at ${s.expiresAt}`);
}

/** Fencing: a claim's commands must carry the action's current epoch (invariant 5). */
function requireEpoch(c: ParsedScheduledActionCommand, s: ActionIn<'processing'>, epoch: number): void {
  if (epoch !== s.claimEpoch) {
    throw illegal(c, s, `epoch ${epoch} is stale, the current claim epoch is ${s.claimEpoch}`);
  }
}

function illegal(
  c: ParsedScheduledActionCommand,
  state: ScheduledActionState,
  why: string,
): IllegalStateError {
  const id = state.status === 'NONE' ? c.actionId : state.actionId;
  return new IllegalStateError(`cannot ${c.type} scheduled action ${id} in status ${state.status}: ${why}`, {
    command: c.type,
    status: state.status,
    actionId: id,
  });
}
