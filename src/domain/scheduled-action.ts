/**
 * The ScheduledAction aggregate (seed 002): an action that fires once at a time (normal mode), or waits
 * for a signal until a deadline and then follows its expiry branch (waitForSignal, the seed's
 * waitForTracking). Pure decider: commands carry `now`, events are plain JSON, state is a union keyed
 * on `status`. Upholds invariant 5 (every claim and reclaim changes `claimEpoch`; a claim's commands
 * carry the current epoch) and invariant 8 (`evolve` folds a stream into exactly its state row).
 * Decisions: docs/decisions/0010-scheduled-actions.md.
 */

import type { Decider } from './decider.js';
import type { ScheduledActionCommand } from './scheduled-action/commands.js';
import { decideScheduledAction } from './scheduled-action/decide.js';
import type { ScheduledActionEvent } from './scheduled-action/events.js';
import {
  evolveScheduledAction,
  initialScheduledActionState,
  type ScheduledActionState,
} from './scheduled-action/state.js';

export * from './scheduled-action/commands.js';
export { decideScheduledAction } from './scheduled-action/decide.js';
export * from './scheduled-action/events.js';
export * from './scheduled-action/operations.js';
export * from './scheduled-action/state.js';
export * from './scheduled-action/status.js';

export const SCHEDULED_ACTION_STREAM_TYPE = 'scheduled_action';

export const scheduledActionDecider: Decider<
  ScheduledActionState,
  ScheduledActionCommand,
  ScheduledActionEvent
> = {
  decide: decideScheduledAction,
  evolve: evolveScheduledAction,
  initialState: initialScheduledActionState,
};
