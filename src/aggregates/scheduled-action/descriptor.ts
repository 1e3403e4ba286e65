/**
 * The scheduled-action and action-signal descriptors: deciders, state tables (the inline projections
 * replay, verify and the sandbox use), the outbox messages their events cause and when an action is due.
 * - A claim with queue delivery causes one `scheduled_action_fire` message carrying the claim's epoch;
 *   the fire worker acts on it only while the action is processing with that epoch (invariant 5).
 * - An execution by the default executor (`published`) causes one `action_execute` message with the
 *   epoch and the branch's config: what the trigger engine runs.
 * Both are written in the transition's transaction (invariant 1) under ids derived from the claim, so
 * stale recovery can tell whether a claim's message is still in flight.
 */
import { actionSignalTable, scheduledActionTable } from '../../adapters/postgres/scheduled-action-queries.js';
import { tableBackedState } from '../../adapters/postgres/state-table.js';
import {
  ACTION_SIGNAL_STREAM_TYPE,
  type ActionSignalCommand,
  type ActionSignalEvent,
  type ActionSignalState,
  actionSignalDecider,
  parseActionSignalEvent,
} from '../../domain/action-signal.js';
import {
  type ActionBranch,
  type ClaimTrigger,
  type ExistingAction,
  parseScheduledActionEvent,
  SCHEDULED_ACTION_STREAM_TYPE,
  type ScheduledActionCommand,
  type ScheduledActionEvent,
  type ScheduledActionState,
  scheduledActionDecider,
} from '../../domain/scheduled-action.js';
import type { AggregateDescriptor, ClaimedAggregate } from '../../eventstore/aggregate.js';
import { HEADER } from '../../messaging/headers.js';
import { derivedMessageId, type OutboxMessageSpec } from '../../outbox/outbox-writer.js';
import { ACTION_EXECUTE_QUEUE, ACTION_FIRE_STREAM_TYPE, SCHEDULED_ACTION_FIRE_QUEUE } from './topology.js';

/** The fire message: which claim to run. */
export interface ActionFirePayload {
  actionId: string;
  organizationId: string;
  epoch: number;
}

/** The execute message (seed 002's ExecuteAction input): the branch's action, fenced by the epoch. */
export interface ActionExecutePayload {
  actionId: string;
  organizationId: string;
  actionType: string;
  actionConfig: Record<string, unknown>;
  branch: ActionBranch;
  trigger: ClaimTrigger;
  workflowId: string | null;
  workflowNodePath: string | null;
  subjectId: string | null;
  /** The signal that unlocked the wait, if one did. */
  signal: { signalId: string; name: string; receivedAt: string } | null;
  retryCount: number;
  epoch: number;
}

export const fireMessageId = (actionId: string, epoch: number) =>
  derivedMessageId(SCHEDULED_ACTION_STREAM_TYPE, actionId.toLowerCase(), 'fire', epoch);
export const executeMessageId = (actionId: string, epoch: number) =>
  derivedMessageId(SCHEDULED_ACTION_STREAM_TYPE, actionId.toLowerCase(), 'execute', epoch);

/** The messages a processing action's liveness rests on: its claim's fire message (queue delivery). */
export function claimMessageIds(state: ScheduledActionState): string[] {
  if (state.status !== 'processing' || state.delivery !== 'queue') return [];
  return [fireMessageId(state.actionId, state.claimEpoch)];
}

/** The config a claim runs: the action's own, or its wait's expiry branch. */
export function branchAction(state: ExistingAction): {
  actionType: string;
  actionConfig: Record<string, unknown>;
} {
  const source = state.branch === 'expiry' && state.expiry ? state.expiry : state;
  return { actionType: source.actionType, actionConfig: { ...source.actionConfig } };
}

export function actionMessagesFor(
  event: ScheduledActionEvent,
  state: ScheduledActionState,
): OutboxMessageSpec[] {
  if (state.status === 'NONE') return [];
  const headers = { [HEADER.epoch]: state.claimEpoch, [HEADER.organizationId]: state.organizationId };
  if (event.type === 'ActionClaimed' && event.data.delivery === 'queue') {
    const payload: ActionFirePayload = {
      actionId: state.actionId,
      organizationId: state.organizationId,
      epoch: state.claimEpoch,
    };
    return [
      {
        messageId: fireMessageId(state.actionId, state.claimEpoch),
        destination: SCHEDULED_ACTION_FIRE_QUEUE,
        payload,
        headers,
      },
    ];
  }
  if (event.type === 'ActionExecuted' && event.data.published) {
    const payload: ActionExecutePayload = {
      actionId: state.actionId,
      organizationId: state.organizationId,
      ...branchAction(state),
      branch: event.data.branch,
      trigger: state.dueBecause,
      workflowId: state.workflowId,
      workflowNodePath: state.workflowNodePath,
      subjectId: state.subjectId,
      signal: state.unlockedBy ? { ...state.unlockedBy } : null,
      retryCount: state.retryCount,
      epoch: event.data.epoch,
    };
    return [
      {
        messageId: executeMessageId(state.actionId, event.data.epoch),
        destination: ACTION_EXECUTE_QUEUE,
        payload,
        headers,
      },
    ];
  }
  return [];
}

/** A pending action is due at its execute time (a wait: its deadline, or now once unlocked). */
export function actionDueAt(state: ScheduledActionState): string | null {
  return state.status === 'pending' ? state.executeAt : null;
}

const actionTable = tableBackedState<ScheduledActionState, ScheduledActionEvent>(
  scheduledActionTable,
  parseScheduledActionEvent,
);

export const scheduledActionAggregate: ClaimedAggregate<
  ScheduledActionState,
  ScheduledActionCommand,
  ScheduledActionEvent
> = {
  streamType: SCHEDULED_ACTION_STREAM_TYPE,
  // A fire message runs its action only while the action is processing with the message's epoch.
  claim: {
    noun: 'action',
    idField: 'actionId',
    liveStatuses: ['processing'],
    discard: {
      streamType: ACTION_FIRE_STREAM_TYPE,
      eventType: 'ActionFireDiscarded',
      description:
        'ActionFireDiscarded: a fire message the destination re-check refused (stale epoch, not processing)',
    },
  },
  decider: scheduledActionDecider,
  store: actionTable.store,
  stateTable: actionTable.stateTable,
  messagesFor: ({ event, state }) => actionMessagesFor(event, state),
  dueAt: actionDueAt,
};

const signalTable = tableBackedState<ActionSignalState, ActionSignalEvent>(
  actionSignalTable,
  parseActionSignalEvent,
);

export const actionSignalAggregate: AggregateDescriptor<
  ActionSignalState,
  ActionSignalCommand,
  ActionSignalEvent
> = {
  streamType: ACTION_SIGNAL_STREAM_TYPE,
  decider: actionSignalDecider,
  store: signalTable.store,
  stateTable: signalTable.stateTable,
};
