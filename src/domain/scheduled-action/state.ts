/**
 * Scheduled-action state (the inline projection in the `scheduled_action` table) and `evolve`. Plain
 * JSON keyed on `status`, never `undefined`, so a jsonb round trip and a replay both give exactly the
 * stored row (invariant 8). `evolve` refuses an event that cannot follow the state (a corrupt log).
 *
 * What expiry needs beside the seed's five statuses: `expired` (the wait's deadline passed without a
 * signal: a claim runs the expiry branch), `unlockedBy` (the signal that came first), `firedNow` (an
 * operator fired it), `dueBecause` (what made it due: its time, a signal, an operator, its deadline, a
 * retry or a recovery), `branch` (which config the live or last claim runs) and `outcome` of a done action
 * (`executed`, or `expired` when the wait expired with no branch to run).
 */
import { IllegalStateError } from '../../errors.js';
import { assertNever } from '../decider.js';
import type { ScheduledActionEvent } from './events.js';
import type {
  ActionBranch,
  ActionDelivery,
  ActionMode,
  ActionOutcome,
  ActionStatus,
  ClaimTrigger,
} from './status.js';

export interface ActionFields {
  readonly actionId: string;
  readonly organizationId: string;
  readonly mode: ActionMode;
  readonly actionType: string;
  readonly actionConfig: Readonly<Record<string, unknown>>;
  readonly sourceConfig: Readonly<Record<string, unknown>> | null;
  readonly workflowId: string | null;
  readonly workflowNodePath: string | null;
  readonly subjectId: string | null;
  /** When it is next due (a pending action); for a wait, its deadline until a signal makes it due now. */
  readonly executeAt: string;
  /** waitForSignal: the deadline. */
  readonly expiresAt: string | null;
  readonly wait: { readonly names: readonly string[]; readonly correlationKey: string } | null;
  readonly expiry: {
    readonly actionType: string;
    readonly actionConfig: Readonly<Record<string, unknown>>;
  } | null;
  readonly maxRetries: number;
  readonly retryCount: number;
  readonly unlockedBy: {
    readonly signalId: string;
    readonly name: string;
    readonly receivedAt: string;
  } | null;
  readonly firedNow: boolean;
  readonly expired: boolean;
  /** Why a pending action is (or will be) due: what its next claim records as the trigger. */
  readonly dueBecause: ClaimTrigger;
  /** Fencing token: incremented by every claim and reclaim. Starts at 0. */
  readonly claimEpoch: number;
  /** The live claim's claim/heartbeat time; non-null only while processing. */
  readonly claimedAt: string | null;
  readonly branch: ActionBranch | null;
  readonly delivery: ActionDelivery | null;
  readonly lastError: string | null;
  readonly cancelReason: string | null;
  readonly outcome: ActionOutcome | null;
  readonly createdAt: string;
  readonly statusChangedAt: string;
  /** The Idempotency-Key the action was created with, or null. */
  readonly idempotencyKey: string | null;
}

export interface NoAction {
  readonly status: 'NONE';
}
export type PendingAction = ActionFields & { readonly status: 'pending' };
export type ProcessingAction = ActionFields & {
  readonly status: 'processing';
  readonly claimedAt: string;
  readonly branch: ActionBranch;
};
export type DoneAction = ActionFields & { readonly status: 'done'; readonly outcome: ActionOutcome };
export type FailedAction = ActionFields & { readonly status: 'failed' };
export type CancelledAction = ActionFields & { readonly status: 'cancelled'; readonly cancelReason: string };

export type ExistingAction = PendingAction | ProcessingAction | DoneAction | FailedAction | CancelledAction;
export type ScheduledActionState = NoAction | ExistingAction;
export type ActionIn<S extends ActionStatus> = Extract<ExistingAction, { status: S }>;

export function initialScheduledActionState(): ScheduledActionState {
  return { status: 'NONE' };
}

export function evolveScheduledAction(
  state: ScheduledActionState,
  event: ScheduledActionEvent,
): ScheduledActionState {
  switch (event.type) {
    case 'ActionScheduled': {
      if (state.status !== 'NONE') throw unfit(state, event);
      const { at, idempotencyKey, ...fields } = event.data;
      return {
        ...fields,
        idempotencyKey: idempotencyKey ?? null,
        status: 'pending',
        retryCount: 0,
        unlockedBy: null,
        firedNow: false,
        expired: false,
        dueBecause: 'due',
        claimEpoch: 0,
        claimedAt: null,
        branch: null,
        delivery: null,
        lastError: null,
        cancelReason: null,
        outcome: null,
        createdAt: at,
        statusChangedAt: at,
      };
    }
    case 'ActionSignalled': {
      const s = requireStatus(state, event, ['pending']);
      if (s.mode !== 'waitForSignal' || s.unlockedBy || s.expired)
        throw unfit(state, event, 'it is not waiting');
      const { signalId, name, receivedAt, at } = event.data;
      return { ...s, unlockedBy: { signalId, name, receivedAt }, executeAt: at, dueBecause: 'signal' };
    }
    case 'ActionFireRequested': {
      const s = requireStatus(state, event, ['pending']);
      return { ...s, firedNow: true, executeAt: event.data.at, dueBecause: 'fire_now' };
    }
    case 'ActionRescheduled': {
      const s = requireStatus(state, event, ['pending']);
      return { ...s, executeAt: event.data.executeAt, expiresAt: event.data.expiresAt, dueBecause: 'due' };
    }
    case 'ActionExpired': {
      const s = requireStatus(state, event, ['pending']);
      if (s.mode !== 'waitForSignal' || s.unlockedBy) throw unfit(state, event, 'it is not waiting');
      const expired = { ...s, expired: true, dueBecause: 'deadline' as const };
      if (event.data.branch !== null) return expired;
      return { ...expired, status: 'done', outcome: 'expired', statusChangedAt: event.data.at };
    }
    case 'ActionClaimed': {
      const s = requireStatus(state, event, ['pending']);
      expectEpoch(s, event, s.claimEpoch + 1);
      const { epoch, branch, delivery, claimedAt } = event.data;
      return {
        ...s,
        status: 'processing',
        claimEpoch: epoch,
        claimedAt,
        branch,
        delivery,
        statusChangedAt: claimedAt,
      };
    }
    case 'ActionHeartbeat': {
      const s = requireStatus(state, event, ['processing']);
      expectEpoch(s, event, s.claimEpoch);
      return { ...s, claimedAt: event.data.claimedAt };
    }
    case 'ActionReclaimed': {
      const s = requireStatus(state, event, ['processing']);
      expectEpoch(s, event, s.claimEpoch + 1);
      const { epoch, at } = event.data;
      return {
        ...s,
        status: 'pending',
        claimEpoch: epoch,
        claimedAt: null,
        executeAt: at,
        dueBecause: 'recovery',
        statusChangedAt: at,
      };
    }
    case 'ActionExecuted': {
      const s = requireStatus(state, event, ['processing']);
      expectEpoch(s, event, s.claimEpoch);
      return { ...s, status: 'done', outcome: 'executed', claimedAt: null, statusChangedAt: event.data.at };
    }
    case 'ActionRetryScheduled': {
      const s = requireStatus(state, event, ['processing']);
      expectEpoch(s, event, s.claimEpoch);
      const { retryCount, executeAt, error, at } = event.data;
      return {
        ...s,
        status: 'pending',
        retryCount,
        executeAt,
        dueBecause: 'retry',
        lastError: error,
        claimedAt: null,
        statusChangedAt: at,
      };
    }
    case 'ActionFailed': {
      const s = requireStatus(state, event, ['processing']);
      expectEpoch(s, event, s.claimEpoch);
      return {
        ...s,
        status: 'failed',
        lastError: event.data.error,
        claimedAt: null,
        statusChangedAt: event.data.at,
      };
    }
    case 'ActionCancelled': {
      const s = requireStatus(state, event, ['pending', 'processing']);
      if (s.status === 'processing') expectEpoch(s, event, s.claimEpoch);
      else if (event.data.epoch !== null)
        throw unfit(state, event, 'only a processing action is cancelled with an epoch');
      return {
        ...s,
        status: 'cancelled',
        cancelReason: event.data.reason,
        claimedAt: null,
        statusChangedAt: event.data.at,
      };
    }
    default:
      return assertNever(event, 'scheduled action event');
  }
}

function requireStatus<S extends ActionStatus>(
  state: ScheduledActionState,
  event: ScheduledActionEvent,
  allowed: readonly S[],
): ActionIn<S> {
  if (!(allowed as readonly string[]).includes(state.status)) throw unfit(state, event);
  return state as ActionIn<S>;
}

function expectEpoch(
  state: ExistingAction,
  event: ScheduledActionEvent & { data: { epoch: number | null } },
  epoch: number,
) {
  if (event.data.epoch !== epoch) {
    throw unfit(state, event, `expected epoch ${epoch}, claim epoch is ${state.claimEpoch}`);
  }
}

function unfit(state: ScheduledActionState, event: ScheduledActionEvent, why?: string): IllegalStateError {
  const id = state.status === 'NONE' ? '(new)' : state.actionId;
  return new IllegalStateError(
    `cannot apply ${event.type} to scheduled action ${id} in status ${state.status}${why ? `: ${why}` : ''}`,
    { event: event.type, status: state.status, actionId: id },
  );
}

/** A pending wait that no signal, operator or deadline has resolved yet. */
export function isWaiting(state: ExistingAction): boolean {
  return (
    state.status === 'pending' &&
    state.mode === 'waitForSignal' &&
    state.unlockedBy === null &&
    !state.expired &&
    !state.firedNow
  );
}
