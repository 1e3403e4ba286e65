/**
 * Scheduled-action commands: what the library, the API, the scanner, the signal path and the fire
 * workers ask an action to do. Each carries `now`, the database time read by the command handler
 * (invariant 6). Schemas are strict: an unknown field is a typo. Rules that need only the command live
 * here; rules that need the state live in decide.ts.
 */
import { z } from 'zod';
import { instantInput } from '../time.js';
import { validationErrorFrom } from '../validation.js';
import { ACTION_MODES, DEFAULT_MAX_RETRIES, DELIVERIES } from './status.js';

const actionId = z.uuid().transform((id) => id.toLowerCase());
const text = (max: number) => z.string().trim().min(1, 'must not be empty').max(max);
const identifier = text(200);
const reason = text(1000);
const json = z.record(z.string(), z.unknown());
const epoch = z.number().int().positive();
const seconds = z
  .number()
  .int()
  .nonnegative()
  .max(10 * 365 * 86_400, 'at most ten years');

const base = { actionId, now: instantInput };
/** Claims the action in the same command once it is due now (a signal, fire now): one transaction less to its effect. */
const claimWith = z.enum(DELIVERIES).optional();

const scheduleAction = z
  .strictObject({
    type: z.literal('ScheduleAction'),
    ...base,
    organizationId: identifier,
    mode: z.enum(ACTION_MODES),
    actionType: identifier,
    actionConfig: json,
    /** Stored when the conditions are to be evaluated again at fire time (the seed's reEvaluateConditions). */
    sourceConfig: json.nullish(),
    workflowId: identifier.nullish(),
    workflowNodePath: text(1000).nullish(),
    subjectId: identifier.nullish(),
    /** normal: fire after this long. waitForSignal: the deadline, unless `expiresSeconds` is given. */
    delaySeconds: seconds.optional(),
    /** waitForSignal: the deadline (the seed's expiresSeconds); default `delaySeconds`. */
    expiresSeconds: seconds.optional(),
    wait: z.strictObject({ names: z.array(identifier).min(1).max(20), correlationKey: text(500) }).optional(),
    expiry: z.strictObject({ actionType: identifier, actionConfig: json }).nullish(),
    maxRetries: z.number().int().nonnegative().max(100).default(DEFAULT_MAX_RETRIES),
    /** A matching signal that arrived before the wait was saved (found in the lookback window). */
    priorSignal: z
      .strictObject({ signalId: z.uuid(), name: identifier, receivedAt: instantInput })
      .optional(),
    /** The Idempotency-Key the action was created with (HTTP API), shown on the action. */
    idempotencyKey: text(255).nullish(),
    claimWith,
  })
  .superRefine((c, ctx) => {
    const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
    if (c.mode === 'normal') {
      if (c.delaySeconds === undefined) issue('delaySeconds', 'required for a normal action');
      for (const field of ['wait', 'expiresSeconds', 'expiry', 'priorSignal'] as const) {
        if (c[field] != null) issue(field, 'only for waitForSignal');
      }
    } else {
      if (!c.wait) issue('wait', 'required for waitForSignal (the signal names and the correlation key)');
      const deadline = c.expiresSeconds ?? c.delaySeconds;
      if (deadline === undefined) issue('expiresSeconds', 'required for waitForSignal (or delaySeconds)');
      else if (deadline === 0) issue('expiresSeconds', 'a wait needs a deadline after now');
      if (c.priorSignal && c.wait && !c.wait.names.includes(c.priorSignal.name)) {
        issue('priorSignal', `signal ${c.priorSignal.name} is not one the wait names`);
      }
    }
  });

const signalAction = z.strictObject({
  type: z.literal('SignalAction'),
  ...base,
  signalId: z.uuid(),
  name: identifier,
  correlationKey: text(500),
  claimWith,
});

const fireNow = z.strictObject({
  type: z.literal('FireActionNow'),
  ...base,
  reason: reason.optional(),
  claimWith,
});

const rescheduleAction = z.strictObject({
  type: z.literal('RescheduleAction'),
  ...base,
  /** normal: the new execute time. */
  executeAt: instantInput.optional(),
  /** waitForSignal: the new deadline. */
  expiresAt: instantInput.optional(),
  reason: reason.optional(),
});

const cancelAction = z.strictObject({
  type: z.literal('CancelAction'),
  ...base,
  reason,
  /** Given by the fire worker when the conditions no longer hold (the claim's epoch); omitted by an operator. */
  epoch: epoch.optional(),
});

const claimAction = z.strictObject({
  type: z.literal('ClaimAction'),
  ...base,
  delivery: z.enum(DELIVERIES),
});

const heartbeat = z.strictObject({ type: z.literal('HeartbeatAction'), ...base, epoch });

const reclaimAction = z.strictObject({
  type: z.literal('ReclaimAction'),
  ...base,
  /** Seed 002: rows stuck in processing over 5 minutes. */
  staleAfterMs: z.number().int().positive(),
  reason: reason.optional(),
});

const completeAction = z.strictObject({
  type: z.literal('CompleteAction'),
  ...base,
  epoch,
  /** Whether the default executor's `action_execute` message goes out with the completion. */
  published: z.boolean(),
});

const retryAction = z.strictObject({
  type: z.literal('RetryAction'),
  ...base,
  epoch,
  error: text(2000),
  /** When the retry is due, after `now`; beyond maxRetries the action fails instead. */
  delayMs: z.number().int().nonnegative(),
});

const failAction = z.strictObject({ type: z.literal('FailAction'), ...base, epoch, error: text(2000) });

export const scheduledActionCommandSchema = z.discriminatedUnion('type', [
  scheduleAction,
  signalAction,
  fireNow,
  rescheduleAction,
  cancelAction,
  claimAction,
  heartbeat,
  reclaimAction,
  completeAction,
  retryAction,
  failAction,
]);

export type ScheduledActionCommand = z.input<typeof scheduledActionCommandSchema>;
export type ParsedScheduledActionCommand = z.output<typeof scheduledActionCommandSchema>;
export type ScheduleAction = z.input<typeof scheduleAction>;

export function parseScheduledActionCommand(raw: unknown): ParsedScheduledActionCommand {
  const result = scheduledActionCommandSchema.safeParse(raw);
  if (result.success) return result.data;
  throw validationErrorFrom('scheduled action command', raw, result.error.issues);
}
