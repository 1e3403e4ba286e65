/**
 * The scheduled-action slice's response views: an action exactly as its state holds it (`sameKeys`
 * fails to compile when the state gains or loses a field), and a signal's outcome.
 */
import { z } from 'zod';
import { instant, json, operationsField, type SameKeys, sameKeys } from '../../api/views.js';
import { availableOperations } from '../../domain/operations.js';
import {
  ACTION_BRANCHES,
  ACTION_MODES,
  ACTION_OPERATIONS,
  ACTION_OUTCOMES,
  ACTION_STATUSES,
  CLAIM_TRIGGERS,
  DELIVERIES,
  type ExistingAction,
} from '../../domain/scheduled-action.js';

const actionFields = z.object({
  actionId: z.uuid(),
  organizationId: z.string(),
  status: z.enum(ACTION_STATUSES),
  mode: z.enum(ACTION_MODES),
  actionType: z.string(),
  actionConfig: json,
  sourceConfig: json.nullable(),
  workflowId: z.string().nullable(),
  workflowNodePath: z.string().nullable(),
  subjectId: z.string().nullable(),
  executeAt: instant,
  expiresAt: instant.nullable(),
  wait: z.object({ names: z.array(z.string()), correlationKey: z.string() }).nullable(),
  expiry: z.object({ actionType: z.string(), actionConfig: json }).nullable(),
  maxRetries: z.number().int(),
  retryCount: z.number().int(),
  unlockedBy: z.object({ signalId: z.uuid(), name: z.string(), receivedAt: instant }).nullable(),
  firedNow: z.boolean(),
  expired: z.boolean(),
  dueBecause: z.enum(CLAIM_TRIGGERS),
  claimEpoch: z.number().int(),
  claimedAt: instant.nullable(),
  branch: z.enum(ACTION_BRANCHES).nullable(),
  delivery: z.enum(DELIVERIES).nullable(),
  lastError: z.string().nullable(),
  cancelReason: z.string().nullable(),
  outcome: z.enum(ACTION_OUTCOMES).nullable(),
  createdAt: instant,
  statusChangedAt: instant,
  idempotencyKey: z
    .string()
    .nullable()
    .describe('the Idempotency-Key header the action was created with (null: none)'),
});
sameKeys<SameKeys<ExistingAction, z.output<typeof actionFields>>>(true);

export const actionView = actionFields
  .extend({ commands: operationsField(ACTION_OPERATIONS) })
  .meta({ id: 'ScheduledAction' });

/** An action as the API answers it: its state and the operations that state allows. */
export function actionOut(action: ExistingAction) {
  return { ...action, commands: availableOperations(ACTION_OPERATIONS, action) };
}

export const signalOutcomeView = z
  .object({
    signalId: z.uuid(),
    unlocked: z.array(z.uuid()).describe('the waits this signal unlocked'),
    refused: z
      .array(z.object({ actionId: z.uuid(), reason: z.string() }))
      .describe('matching waits that refused it, and why'),
  })
  .meta({ id: 'SignalOutcome' });
