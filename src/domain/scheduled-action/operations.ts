/**
 * The scheduled action's operator commands (src/domain/operations.ts), each said once: an operator
 * cancels, fires or reschedules a pending action; a reschedule also needs a wait that is not over.
 * The decider refuses through these entries (rules that compare with the command's time stay in the
 * decider); the API's view of an action lists those its state allows (`commands`).
 */
import type { Operation } from '../operations.js';
import { type ExistingAction, isWaiting } from './state.js';

export const ACTION_OPERATIONS = {
  cancel: { command: 'CancelAction', statuses: ['pending'] },
  fire: { command: 'FireActionNow', statuses: ['pending'] },
  reschedule: {
    command: 'RescheduleAction',
    statuses: ['pending'],
    rule: (s) =>
      s.status === 'pending' && !isWaiting(s) && s.mode === 'waitForSignal' && !s.expired
        ? 'its wait is over (signalled or fired): it is due now'
        : null,
  },
} as const satisfies Readonly<Record<string, Operation<ExistingAction>>>;

/** How the action's decider words a refusal by status. */
export const allowedOnlyWhen = (statuses: readonly string[]) => `allowed only when ${statuses.join(' or ')}`;
