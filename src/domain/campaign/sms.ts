/**
 * What an SMS campaign (seed 003) adds to the campaign lifecycle: its definition (message type,
 * language, the operator-approved campaignId, template, per-recipient send window, inline or CSV), its
 * frozen totals (recipients, segments, cost, rejected rows), the charge that activated it, the CSV
 * build attempts (the build's fencing token), its progress counters (pending, deferred by window,
 * submitted, retry pending; delivered, failed, cancelled; unconfirmed and refunded as subsets of failed)
 * and its money facts (part 2: actual, failed, refunded, unconfirmed and cancelled cost, the withdrawal of
 * unsent recipients). The counters move only by events, in the same transactions as the recipient rows
 * they count, so they are never counted on read and `herald verify` checks them like any other field
 * (invariant 8). Facts stored before part 2 lack the new fields: `normalizeSmsFacts` gives them their
 * defaults when a state row is read back. Plain JSON; pure.
 */
import { z } from 'zod';
import { isMoney } from '../sms/money.js';
import { SMS_MESSAGE_TYPES } from '../sms/routing.js';
import { SMS_LANGS, TEMPLATE_TYPES } from '../sms/template.js';
import { sendWindowPolicySchema } from '../sms/windows.js';
import { storedInstant } from '../time.js';

export const money = z.string().refine(isMoney, 'expected a decimal amount with at most 4 fraction digits');
const count = z.number().int().nonnegative();

/**
 * Auto-pause on error rate (ADR 0019): pause when more than `maxFailureRate` of the last `window`
 * delivery reports failed (e.g. {maxFailureRate: 0.2, window: 500}). Resume is an operator's decision.
 */
export const autoPauseSchema = z.strictObject({
  maxFailureRate: z.number().gt(0).lt(1),
  window: z.number().int().min(10).max(10_000),
});
export type AutoPause = z.infer<typeof autoPauseSchema>;

/** The definition given at creation (CreateCampaign `sms`, CampaignCreated `sms`). */
export const smsDefinitionSchema = z.strictObject({
  messageType: z.enum(SMS_MESSAGE_TYPES),
  lang: z.enum(SMS_LANGS),
  /** Seed 003's operator-approved campaignId (PROMOTIONAL); the campaign's own id is `campaignId`. */
  operatorCampaignId: z.string().min(1).max(100).nullable(),
  templateType: z.enum(TEMPLATE_TYPES),
  template: z.string().min(1).max(2_000),
  source: z.enum(['inline', 'csv']),
  sendWindow: sendWindowPolicySchema.nullable(),
  /** Part 2: optional (absent on events written before it); null = no auto-pause. */
  autoPause: autoPauseSchema.nullable().optional(),
});
export type SmsDefinition = z.infer<typeof smsDefinitionSchema>;

export const WITHDRAWAL_REASONS = ['cancelled', 'expired'] as const;
export type WithdrawalReason = (typeof WITHDRAWAL_REASONS)[number];

/** Unsent recipients withdrawn at once (cancellation or expiry) and the refund of their saved cost. */
export interface SmsWithdrawal {
  /** The refund's ledger key (`withdrawalKey`). */
  readonly key: string;
  readonly reason: WithdrawalReason;
  readonly recipients: number;
  readonly amount: string;
  /** When the refund was recorded; null while it is owed. */
  readonly refundedAt: string | null;
}

export type SmsProgress = {
  /** Saved, not yet submitted, not waiting for a send window. */
  readonly pending: number;
  /** Waiting for their send window (deferred, never dropped). */
  readonly deferred: number;
  readonly submitted: number;
  /** Temporarily failed, waiting for the retry dispatcher (then pending again). */
  readonly retryPending: number;
  /** Final (part 2, delivery-report roll-up): delivered, failed, cancelled (withdrawn unsent). */
  readonly delivered: number;
  readonly failed: number;
  readonly cancelled: number;
  /** Subset of failed: maybe delivered (NOT_AVAILABLE, DLR timeout), never refunded. */
  readonly unconfirmed: number;
  /** Subset of failed: refunded (FAILED rows with refunded_at set). */
  readonly refunded: number;
};

export type SmsCampaignFacts = Omit<SmsDefinition, 'autoPause'> & {
  readonly autoPause: AutoPause | null;
  /** Recipients saved (frozen rows). */
  readonly recipients: number;
  readonly segments: number;
  /** The full amount charged (seed 003's totalCost): the initial charge plus every resend charge. */
  readonly totalCost: string;
  /** Cumulative cost of DELIVERED recipients. */
  readonly actualCost: string;
  /** Cost of the recipients currently FAILED (incl. unconfirmed): what a resend charges. */
  readonly failedCost: string;
  /** Cumulative amount refunded (recipient refunds and withdrawal refunds). */
  readonly refundedCost: string;
  /**
   * Cumulative cost of FAILED-unconfirmed recipients (never refunded). Cumulative, not reset by a
   * resend, so that charged = actualCost + refundedCost + unconfirmedCost holds across resends.
   */
  readonly unconfirmedCost: string;
  /** Cumulative cost of recipients withdrawn unsent (cancelled / expired). */
  readonly cancelledCost: string;
  /** The withdrawal of the unsent recipients (cancellation or expiry); null until then, reset by a resend. */
  readonly withdrawal: SmsWithdrawal | null;
  /** CSV rows skipped (invalid MSISDN, duplicate, invalid tags, no route, too long). */
  readonly rejected: number;
  /** The deduction's key (`campaign:{uuid}`), once charged. */
  readonly chargeKey: string | null;
  readonly chargedAt: string | null;
  /** CSV builds started (the build's fencing token; 0 for inline campaigns and builds not yet claimed). */
  readonly buildAttempt: number;
  /** The live build's last sign of life (start or last saved batch). */
  readonly buildHeartbeatAt: string | null;
  readonly progress: SmsProgress;
  /** Deferrals by send window so far (a recipient deferred twice counts twice). */
  readonly deferrals: number;
  /** Submission chunks written to the outbox so far. */
  readonly submissions: number;
};

/** The facts as a schema (API views, OpenAPI): exactly `SmsCampaignFacts`. */
export const smsCampaignFactsSchema = smsDefinitionSchema.extend({
  autoPause: autoPauseSchema.nullable(),
  recipients: count,
  segments: count,
  totalCost: money,
  actualCost: money,
  failedCost: money,
  refundedCost: money,
  unconfirmedCost: money,
  cancelledCost: money,
  withdrawal: z
    .strictObject({
      key: z.string(),
      reason: z.enum(WITHDRAWAL_REASONS),
      recipients: count,
      amount: money,
      refundedAt: storedInstant.nullable(),
    })
    .nullable(),
  rejected: count,
  chargeKey: z.string().nullable(),
  chargedAt: storedInstant.nullable(),
  buildAttempt: count,
  buildHeartbeatAt: storedInstant.nullable(),
  progress: z.strictObject({
    pending: count,
    deferred: count,
    submitted: count,
    retryPending: count,
    delivered: count,
    failed: count,
    cancelled: count,
    unconfirmed: count,
    refunded: count,
  }),
  deferrals: count,
  submissions: count,
});

export const EMPTY_PROGRESS: SmsProgress = {
  pending: 0,
  deferred: 0,
  submitted: 0,
  retryPending: 0,
  delivered: 0,
  failed: 0,
  cancelled: 0,
  unconfirmed: 0,
  refunded: 0,
};

export function newSmsFacts(definition: SmsDefinition): SmsCampaignFacts {
  return {
    ...definition,
    autoPause: definition.autoPause ?? null,
    recipients: 0,
    segments: 0,
    totalCost: '0.0000',
    actualCost: '0.0000',
    failedCost: '0.0000',
    refundedCost: '0.0000',
    unconfirmedCost: '0.0000',
    cancelledCost: '0.0000',
    withdrawal: null,
    rejected: 0,
    chargeKey: null,
    chargedAt: null,
    buildAttempt: 0,
    buildHeartbeatAt: null,
    progress: EMPTY_PROGRESS,
    deferrals: 0,
    submissions: 0,
  };
}

/**
 * Recipients the dispatcher may still send (pending or deferred): the dispatch sweep's `sms_unsent`.
 * RETRY_PENDING recipients are not among them until the retry dispatcher releases them (see `withdrawable`).
 */
export function unsent(facts: SmsCampaignFacts | null): number {
  return facts ? facts.progress.pending + facts.progress.deferred : 0;
}

/** Recipients not sent and not final (pending, deferred, retry pending): what a withdrawal takes. */
export function withdrawable(facts: SmsCampaignFacts | null): number {
  return facts ? facts.progress.pending + facts.progress.deferred + facts.progress.retryPending : 0;
}

/** Recipients without a final status (unsent, retry pending or submitted and awaiting their report). */
export function unfinished(facts: SmsCampaignFacts | null): number {
  return facts ? withdrawable(facts) + facts.progress.submitted : 0;
}

/**
 * Facts as stored in a state row's `sms` jsonb, with the fields added by part 2 defaulted (rows written
 * before it lack them): what a replay of the same stream gives (invariant 8). Idempotent; null stays null.
 */
export function normalizeSmsFacts(stored: unknown): SmsCampaignFacts | null {
  if (stored === null || stored === undefined) return null;
  const facts = stored as Partial<SmsCampaignFacts> & { progress?: Partial<SmsProgress> };
  return {
    ...(facts as SmsCampaignFacts),
    autoPause: facts.autoPause ?? null,
    actualCost: facts.actualCost ?? ZERO,
    failedCost: facts.failedCost ?? ZERO,
    refundedCost: facts.refundedCost ?? ZERO,
    unconfirmedCost: facts.unconfirmedCost ?? ZERO,
    cancelledCost: facts.cancelledCost ?? ZERO,
    withdrawal: facts.withdrawal ?? null,
    progress: { ...EMPTY_PROGRESS, ...facts.progress },
  };
}
const ZERO = '0.0000';

/** The stable charge key of a campaign (seed 003: "Deduct key campaign:{uuid}"). */
export function campaignChargeKey(campaignId: string): string {
  return `campaign:${campaignId.toLowerCase()}`;
}

/** The refund key of a withdrawal: `cancel:{campaignId}:{resendAttempt}` / `expire:{campaignId}:{resendAttempt}`. */
export function withdrawalKey(campaignId: string, reason: WithdrawalReason, resendAttempt: number): string {
  return `${reason === 'cancelled' ? 'cancel' : 'expire'}:${campaignId.toLowerCase()}:${resendAttempt}`;
}

/** The refund key of one failed recipient: `recipient:{recipientId}:{resendAttempt}`. */
export function recipientRefundKey(recipientId: string | number | bigint, resendAttempt: number): string {
  return `recipient:${String(recipientId)}:${resendAttempt}`;
}

/** The charge key of a resend: `campaign:{id}:resend:{n}` (n = the new resendAttempt). */
export function resendChargeKey(campaignId: string, resendAttempt: number): string {
  return `campaign:${campaignId.toLowerCase()}:resend:${resendAttempt}`;
}

export const recipientsAddedData = {
  /** The CSV build attempt that saved them; null for inline recipients. */
  buildAttempt: z.number().int().positive().nullable(),
  recipients: count,
  segments: count,
  cost: money,
  rejected: count,
  at: storedInstant,
};

export const recipientsDispatchedData = {
  epoch: z.number().int().positive(),
  /** PENDING → SUBMITTED, DEFERRED → SUBMITTED. */
  submittedFromPending: count,
  submittedFromDeferred: count,
  /** PENDING → DEFERRED (newly outside their window), DEFERRED → DEFERRED (still outside). */
  deferredFromPending: count,
  deferredAgain: count,
  /** Submission chunks (outbox messages) written. */
  submissions: count,
  at: storedInstant,
};
