/**
 * Scheduled-action events: the facts in a `scheduled_action` stream. Plain JSON with canonical ISO UTC
 * times (jsonb round trips and replay give them back unchanged, invariant 8); every type has a zod
 * schema so replay validates the log. Wherever an event carries `epoch`, it is the action's claim epoch
 * after the event (invariant 5).
 */
import { z } from 'zod';
import { storedInstant } from '../time.js';
import { validationErrorFrom } from '../validation.js';
import { ACTION_BRANCHES, ACTION_MODES, CLAIM_TRIGGERS, DELIVERIES } from './status.js';

const epoch = z.number().int().positive();
const text = z.string().min(1);
const json = z.record(z.string(), z.unknown());

const event = <Type extends string, Shape extends z.ZodRawShape>(type: Type, data: Shape) =>
  z.object({ type: z.literal(type), data: z.object(data) });

export const waitSchema = z.object({
  /** Any one of these signal names unlocks the wait. */
  names: z.array(text).min(1),
  /** What a signal must match besides its name (e.g. `<subject>:<workflow node>`). */
  correlationKey: text,
});

export const expirySchema = z.object({ actionType: text, actionConfig: json });

const actionScheduled = event('ActionScheduled', {
  actionId: z.uuid(),
  organizationId: text,
  mode: z.enum(ACTION_MODES),
  actionType: text,
  actionConfig: json,
  sourceConfig: json.nullable(),
  workflowId: text.nullable(),
  workflowNodePath: text.nullable(),
  subjectId: text.nullable(),
  /** When it is due: now + delay (normal), or the wait's deadline (waitForSignal). */
  executeAt: storedInstant,
  /** waitForSignal: the deadline, after which the expiry branch runs. */
  expiresAt: storedInstant.nullable(),
  wait: waitSchema.nullable(),
  expiry: expirySchema.nullable(),
  maxRetries: z.number().int().nonnegative(),
  /** The Idempotency-Key it was created with (absent in events from before issue 23: none). */
  idempotencyKey: text.nullish(),
  at: storedInstant,
});

/** A signal unlocked the wait: due at once. `early` when the signal had arrived before the wait was saved. */
const actionSignalled = event('ActionSignalled', {
  signalId: z.uuid(),
  name: text,
  receivedAt: storedInstant,
  early: z.boolean(),
  at: storedInstant,
});

const actionFireRequested = event('ActionFireRequested', { reason: text.nullable(), at: storedInstant });

const actionRescheduled = event('ActionRescheduled', {
  executeAt: storedInstant,
  expiresAt: storedInstant.nullable(),
  reason: text.nullable(),
  at: storedInstant,
});

/** A wait's deadline passed without a signal: its expiry branch runs (or, with none, it is done). */
const actionExpired = event('ActionExpired', {
  expiresAt: storedInstant,
  branch: z.enum(ACTION_BRANCHES).nullable(),
  at: storedInstant,
});

const actionClaimed = event('ActionClaimed', {
  epoch,
  branch: z.enum(ACTION_BRANCHES),
  trigger: z.enum(CLAIM_TRIGGERS),
  delivery: z.enum(DELIVERIES),
  claimedAt: storedInstant,
});

const actionHeartbeat = event('ActionHeartbeat', { epoch, claimedAt: storedInstant });

const actionReclaimed = event('ActionReclaimed', {
  epoch,
  previousClaimedAt: storedInstant,
  reason: text,
  at: storedInstant,
});

/** The branch ran. `published`: the default executor's `action_execute` message goes out with this event. */
const actionExecuted = event('ActionExecuted', {
  epoch,
  branch: z.enum(ACTION_BRANCHES),
  published: z.boolean(),
  at: storedInstant,
});

const actionRetryScheduled = event('ActionRetryScheduled', {
  epoch,
  retryCount: z.number().int().positive(),
  executeAt: storedInstant,
  error: text,
  at: storedInstant,
});

const actionFailed = event('ActionFailed', {
  epoch,
  error: text,
  retryCount: z.number().int().nonnegative(),
  at: storedInstant,
});

/** An operator cancelled it (pending), or its conditions no longer held at fire time (processing, with the epoch). */
const actionCancelled = event('ActionCancelled', {
  reason: text,
  by: z.enum(['operator', 'conditions']),
  epoch: epoch.nullable(),
  at: storedInstant,
});

export const scheduledActionEventSchema = z.discriminatedUnion('type', [
  actionScheduled,
  actionSignalled,
  actionFireRequested,
  actionRescheduled,
  actionExpired,
  actionClaimed,
  actionHeartbeat,
  actionReclaimed,
  actionExecuted,
  actionRetryScheduled,
  actionFailed,
  actionCancelled,
]);

export type ScheduledActionEvent = z.infer<typeof scheduledActionEventSchema>;
export type ScheduledActionEventType = ScheduledActionEvent['type'];
export type ActionScheduled = z.infer<typeof actionScheduled>;

export function parseScheduledActionEvent(raw: unknown): ScheduledActionEvent {
  const result = scheduledActionEventSchema.safeParse(raw);
  if (result.success) return result.data;
  throw validationErrorFrom('scheduled action event', raw, result.error.issues);
}
