/**
 * Campaign events: the facts in a campaign stream (stream type 'campaign'). Data is plain JSON with
 * canonical ISO UTC times because events are stored as jsonb and replayed through `evolve`
 * (invariant 8). Every event type has a zod schema so a reader can validate the log
 * (`parseCampaignEvent`). Wherever an event carries `epoch`, it is the campaign's claim epoch after
 * the event (docs/decisions/0003-campaign-lifecycle.md, "Claim epoch").
 */
import { z } from 'zod';
import { storedInstant } from '../time.js';
import { validationErrorFrom } from '../validation.js';
import { lineContentSchema } from './line.js';
import {
  money,
  recipientsAddedData,
  recipientsDispatchedData,
  smsDefinitionSchema,
  WITHDRAWAL_REASONS,
} from './sms.js';
import {
  CAMPAIGN_CHANNELS,
  CAMPAIGN_STATUSES,
  CAST_TYPES,
  CLAIM_TRIGGERS,
  PAUSABLE_CAMPAIGN_STATUSES,
} from './status.js';

const epoch = z.number().int().positive();
const id = z.string().min(1);
const count = z.number().int().nonnegative();

const event = <Type extends string, Shape extends z.ZodRawShape>(type: Type, data: Shape) =>
  z.object({ type: z.literal(type), data: z.object(data) });

const campaignCreated = event('CampaignCreated', {
  campaignId: z.uuid(),
  organizationId: id,
  channel: z.enum(CAMPAIGN_CHANNELS),
  castType: z.enum(CAST_TYPES).nullable(),
  audienceId: id.nullable(),
  lineOaId: id.nullable(),
  name: id,
  startAt: storedInstant.nullable(),
  dispatchDeadline: storedInstant.nullable(),
  idempotencyKey: id.nullable(),
  /** The Idempotency-Key header it was created with (absent in events from before issue 23: none). */
  requestIdempotencyKey: id.nullish(),
  mode: z.enum(['draft', 'building']),
  at: storedInstant,
  /** SMS campaigns only (absent on LINE campaigns and on events written before seed 003's part 1). */
  sms: smsDefinitionSchema.optional(),
  /** LINE campaigns' content (absent on events written before real LINE delivery, ADR 0021). */
  line: z.object({ messages: lineContentSchema }).optional(),
});

/** A CMS edit before the first claim: the fields it changed, with their new values. */
const campaignEdited = event('CampaignEdited', {
  changes: z.object({
    name: id.optional(),
    castType: z.enum(CAST_TYPES).optional(),
    audienceId: id.nullable().optional(),
    lineOaId: id.optional(),
    messages: lineContentSchema.optional(),
  }),
  at: storedInstant,
});

/** The LINE delivery plan, made at the first delivery attempt; its epoch keys every chunk's retry key. */
const lineDeliveryPlanned = event('LineDeliveryPlanned', {
  epoch,
  chunks: z.number().int().positive(),
  recipients: count.nullable(),
  at: storedInstant,
});

const lineChunk = {
  epoch,
  chunk: count,
  /** The chunk's retry key (X-Line-Retry-Key). */
  retryKey: z.uuid(),
  /** User ids in the chunk (null for a broadcast or narrowcast). */
  recipients: count.nullable(),
  /** The chunk's last user id: the next chunk starts after it (null for a broadcast or narrowcast). */
  cursor: z.string().nullable(),
  at: storedInstant,
};

/** LINE accepted the chunk: now (x-line-request-id), or earlier under the same key (409, the accepted id). */
const lineChunkAccepted = event('LineChunkAccepted', {
  ...lineChunk,
  requestId: z.string().nullable(),
  acceptedRequestId: z.string().nullable(),
});

/** The chunk may have reached LINE before a crash, and its key may have expired: given up, not re-sent. */
const lineChunkUnconfirmed = event('LineChunkUnconfirmed', lineChunk);

/** A LINE call that did not deliver: throttled (429), transient (5xx, network), rejected (4xx) or quota. */
const lineCallFailed = event('LineCallFailed', {
  epoch,
  chunk: count,
  retryKey: z.uuid(),
  kind: z.enum(['throttled', 'transient', 'rejected', 'quota']),
  status: z.number().int().nullable(),
  requestId: z.string().nullable(),
  message: z.string(),
  details: z.array(z.object({ message: z.string().optional(), property: z.string().optional() })).optional(),
  retryAfterMs: z.number().int().nonnegative().nullable().optional(),
  at: storedInstant,
});

const campaignActivated = event('CampaignActivated', {
  to: z.enum(['QUEUED', 'SCHEDULED']),
  at: storedInstant,
  /** The deduction that activated an SMS campaign (seed 003, step 10); absent otherwise. */
  charge: z.object({ key: id, amount: money }).optional(),
});

const campaignScheduled = event('CampaignScheduled', {
  startAt: storedInstant,
  dispatchDeadline: storedInstant.nullable(),
  at: storedInstant,
});

const campaignClaimed = event('CampaignClaimed', {
  epoch,
  claimedAt: storedInstant,
  trigger: z.enum(CLAIM_TRIGGERS),
});

const campaignReclaimed = event('CampaignReclaimed', {
  epoch,
  previousClaimedAt: storedInstant,
  reason: id,
  to: z.enum(['SCHEDULED', 'QUEUED']),
  at: storedInstant,
});

const campaignHeartbeat = event('CampaignHeartbeat', {
  epoch,
  claimedAt: storedInstant,
});

const campaignCompleted = event('CampaignCompleted', { epoch, at: storedInstant });

const campaignFailed = event('CampaignFailed', {
  reason: id,
  /** The failed claim's epoch when a DISPATCHING campaign failed; null for DRAFT/BUILDING. */
  epoch: epoch.nullable(),
  at: storedInstant,
  /** SMS: the saved recipients were deleted in the same transaction. */
  recipientsCleared: z.literal(true).optional(),
});

const campaignPartiallyCompleted = event('CampaignPartiallyCompleted', { epoch, at: storedInstant });

const campaignDeferred = event('CampaignDeferred', {
  epoch,
  startAt: storedInstant,
  dispatchDeadline: storedInstant.nullable(),
  reason: id,
  at: storedInstant,
});

const campaignPaused = event('CampaignPaused', {
  pausedFrom: z.enum(PAUSABLE_CAMPAIGN_STATUSES),
  /** Bumped when pausing a DISPATCHING campaign (the live claim is revoked), unchanged otherwise. */
  epoch: z.number().int().nonnegative(),
  at: storedInstant,
  /** Why (part 2; absent on older events and when none was given): becomes the state's pauseReason. */
  reason: id.optional(),
  /** An auto-pause (ADR 0019): the measured failure rate over the last `window` reports and the threshold. */
  auto: z
    .object({
      rate: z.number().min(0).max(1),
      window: z.number().int().positive(),
      maxFailureRate: z.number(),
    })
    .optional(),
});

const campaignResumed = event('CampaignResumed', {
  to: z.enum(['SCHEDULED', 'QUEUED']),
  at: storedInstant,
  reason: id.optional(),
});

const campaignRescheduled = event('CampaignRescheduled', {
  startAt: storedInstant,
  dispatchDeadline: storedInstant.nullable(),
  at: storedInstant,
  reason: id.optional(),
});

const campaignCancellationRequested = event('CampaignCancellationRequested', {
  from: z.enum(CAMPAIGN_STATUSES),
  reason: id.nullable(),
  at: storedInstant,
  /** SMS cancelled while DISPATCHING: the bumped claim epoch (fences the live dispatch batch). */
  epoch: epoch.optional(),
});

const campaignCancelled = event('CampaignCancelled', { at: storedInstant });

const campaignExpired = event('CampaignExpired', {
  dispatchDeadline: storedInstant,
  at: storedInstant,
});

const campaignRequeued = event('CampaignRequeued', {
  epoch,
  previousClaimedAt: storedInstant,
  reason: id.nullable(),
  at: storedInstant,
});

const campaignResendRequested = event('CampaignResendRequested', {
  resendAttempt: z.number().int().positive(),
  at: storedInstant,
  reason: id.optional(),
  /** SMS (part 2): the failed recipients reopened as pending, and the resend's charge. */
  recipients: count.optional(),
  charge: z.object({ key: id, amount: money }).optional(),
});

const campaignDeleted = event('CampaignDeleted', { at: storedInstant });

/** A CSV build attempt began (its number is the build's fencing token). */
const campaignBuildStarted = event('CampaignBuildStarted', {
  attempt: z.number().int().positive(),
  /** The previous attempt's last sign of life, when this one takes over a stale build. */
  previousHeartbeatAt: storedInstant.nullable(),
  at: storedInstant,
});

/** Recipients saved with their frozen content, route and cost (and CSV rows rejected). */
const campaignRecipientsAdded = event('CampaignRecipientsAdded', recipientsAddedData);

/** One dispatch batch: recipients submitted in chunks (outbox messages of this event) or deferred. */
const campaignRecipientsDispatched = event('CampaignRecipientsDispatched', recipientsDispatchedData);

/** Part 2: a roll-up batch of terminal delivery reports (SUBMITTED → DELIVERED / FAILED / RETRY_PENDING). */
const campaignDeliveryReported = event('CampaignDeliveryReported', {
  delivered: count,
  deliveredCost: money,
  failed: count,
  failedCost: money,
  unconfirmed: count,
  unconfirmedCost: money,
  retryPending: count,
  at: storedInstant,
});

/** Part 2: RETRY_PENDING recipients released as PENDING; a DISPATCHING campaign goes back to QUEUED. */
const campaignRetriesReleased = event('CampaignRetriesReleased', {
  recipients: z.number().int().positive(),
  to: z.literal('QUEUED').nullable(),
  at: storedInstant,
});

/** Part 2: refunds of failed recipients accepted by billing. */
const campaignRecipientsRefunded = event('CampaignRecipientsRefunded', {
  recipients: z.number().int().positive(),
  amount: money,
  at: storedInstant,
});

/** Part 2: every unsent recipient withdrawn (cancellation or expiry), their cost owed back under `key`. */
const campaignUnsentWithdrawn = event('CampaignUnsentWithdrawn', {
  reason: z.enum(WITHDRAWAL_REASONS),
  recipients: count,
  amount: money,
  key: id,
  at: storedInstant,
});

/** Part 2: the withdrawal's refund accepted by billing. */
const campaignWithdrawalRefunded = event('CampaignWithdrawalRefunded', {
  key: id,
  amount: money,
  at: storedInstant,
});

export const campaignEventSchema = z.discriminatedUnion('type', [
  campaignCreated,
  campaignActivated,
  campaignScheduled,
  campaignClaimed,
  campaignReclaimed,
  campaignHeartbeat,
  campaignCompleted,
  campaignFailed,
  campaignPartiallyCompleted,
  campaignDeferred,
  campaignPaused,
  campaignResumed,
  campaignRescheduled,
  campaignCancellationRequested,
  campaignCancelled,
  campaignExpired,
  campaignRequeued,
  campaignResendRequested,
  campaignDeleted,
  campaignBuildStarted,
  campaignRecipientsAdded,
  campaignRecipientsDispatched,
  campaignDeliveryReported,
  campaignRetriesReleased,
  campaignRecipientsRefunded,
  campaignUnsentWithdrawn,
  campaignWithdrawalRefunded,
  campaignEdited,
  lineDeliveryPlanned,
  lineChunkAccepted,
  lineChunkUnconfirmed,
  lineCallFailed,
]);

export type CampaignEvent = z.infer<typeof campaignEventSchema>;
export type CampaignEventType = CampaignEvent['type'];

export type CampaignCreated = z.infer<typeof campaignCreated>;
export type CampaignActivated = z.infer<typeof campaignActivated>;
export type CampaignScheduled = z.infer<typeof campaignScheduled>;
export type CampaignClaimed = z.infer<typeof campaignClaimed>;
export type CampaignReclaimed = z.infer<typeof campaignReclaimed>;
export type CampaignHeartbeat = z.infer<typeof campaignHeartbeat>;
export type CampaignCompleted = z.infer<typeof campaignCompleted>;
export type CampaignFailed = z.infer<typeof campaignFailed>;
export type CampaignPartiallyCompleted = z.infer<typeof campaignPartiallyCompleted>;
export type CampaignDeferred = z.infer<typeof campaignDeferred>;
export type CampaignPaused = z.infer<typeof campaignPaused>;
export type CampaignResumed = z.infer<typeof campaignResumed>;
export type CampaignRescheduled = z.infer<typeof campaignRescheduled>;
export type CampaignCancellationRequested = z.infer<typeof campaignCancellationRequested>;
export type CampaignCancelled = z.infer<typeof campaignCancelled>;
export type CampaignExpired = z.infer<typeof campaignExpired>;
export type CampaignRequeued = z.infer<typeof campaignRequeued>;
export type CampaignResendRequested = z.infer<typeof campaignResendRequested>;
export type CampaignDeleted = z.infer<typeof campaignDeleted>;
export type CampaignBuildStarted = z.infer<typeof campaignBuildStarted>;
export type CampaignRecipientsAdded = z.infer<typeof campaignRecipientsAdded>;
export type CampaignRecipientsDispatched = z.infer<typeof campaignRecipientsDispatched>;
export type CampaignDeliveryReported = z.infer<typeof campaignDeliveryReported>;
export type CampaignRetriesReleased = z.infer<typeof campaignRetriesReleased>;
export type CampaignRecipientsRefunded = z.infer<typeof campaignRecipientsRefunded>;
export type CampaignUnsentWithdrawn = z.infer<typeof campaignUnsentWithdrawn>;
export type CampaignWithdrawalRefunded = z.infer<typeof campaignWithdrawalRefunded>;
export type CampaignEdited = z.infer<typeof campaignEdited>;
export type LineDeliveryPlanned = z.infer<typeof lineDeliveryPlanned>;
export type LineChunkAccepted = z.infer<typeof lineChunkAccepted>;
export type LineChunkUnconfirmed = z.infer<typeof lineChunkUnconfirmed>;
export type LineCallFailed = z.infer<typeof lineCallFailed>;

export const CAMPAIGN_EVENT_TYPES = campaignEventSchema.options.map(
  (option) => option.shape.type.value,
) as readonly CampaignEventType[];

/**
 * Validates one stored event (`{ type, data }`, e.g. a row of the event table read back from jsonb).
 * Throws ValidationError: a malformed event in the log is corruption, not something to skip.
 */
export function parseCampaignEvent(raw: unknown): CampaignEvent {
  const result = campaignEventSchema.safeParse(raw);
  if (result.success) return result.data;
  throw validationErrorFrom('campaign event', raw, result.error.issues);
}
