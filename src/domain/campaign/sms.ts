/**
 * What an SMS campaign (seed 003) adds to the campaign lifecycle: its definition (message type,
 * language, the operator-approved campaignId, template, per-recipient send window, inline or CSV), its
 * frozen totals (recipients, segments, cost, rejected rows), the charge that activated it, the CSV
 * build attempts (the build's fencing token) and its progress counters (pending, deferred by window,
 * submitted, and — for the delivery-report roll-up — delivered, failed, refunded). The counters move
 * only by events, in the same transactions as the recipient rows they count, so they are never counted
 * on read and `herald verify` checks them like any other field (invariant 8). Plain JSON; pure.
 */
import { z } from 'zod';
import { isMoney } from '../sms/money.js';
import { SMS_MESSAGE_TYPES } from '../sms/routing.js';
import { SMS_LANGS, TEMPLATE_TYPES } from '../sms/template.js';
import { sendWindowPolicySchema } from '../sms/windows.js';
import { storedInstant } from '../time.js';

export const money = z.string().refine(isMoney, 'expected a decimal amount with at most 4 fraction digits');
const count = z.number().int().nonnegative();

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
});
export type SmsDefinition = z.infer<typeof smsDefinitionSchema>;

export type SmsProgress = {
  /** Saved, not yet submitted, not waiting for a send window. */
  readonly pending: number;
  /** Waiting for their send window (deferred, never dropped). */
  readonly deferred: number;
  readonly submitted: number;
  /** Part 2 (delivery-report roll-up). */
  readonly delivered: number;
  readonly failed: number;
  readonly refunded: number;
};

export type SmsCampaignFacts = SmsDefinition & {
  /** Recipients saved (frozen rows). */
  readonly recipients: number;
  readonly segments: number;
  /** The full amount charged (seed 003's totalCost), a money string. */
  readonly totalCost: string;
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
  recipients: count,
  segments: count,
  totalCost: money,
  rejected: count,
  chargeKey: z.string().nullable(),
  chargedAt: storedInstant.nullable(),
  buildAttempt: count,
  buildHeartbeatAt: storedInstant.nullable(),
  progress: z.strictObject({
    pending: count,
    deferred: count,
    submitted: count,
    delivered: count,
    failed: count,
    refunded: count,
  }),
  deferrals: count,
  submissions: count,
});

export const EMPTY_PROGRESS: SmsProgress = {
  pending: 0,
  deferred: 0,
  submitted: 0,
  delivered: 0,
  failed: 0,
  refunded: 0,
};

export function newSmsFacts(definition: SmsDefinition): SmsCampaignFacts {
  return {
    ...definition,
    recipients: 0,
    segments: 0,
    totalCost: '0.0000',
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

/** Recipients still to be sent (pending or deferred). */
export function unsent(facts: SmsCampaignFacts | null): number {
  return facts ? facts.progress.pending + facts.progress.deferred : 0;
}

/** The stable charge key of a campaign (seed 003: "Deduct key campaign:{uuid}"). */
export function campaignChargeKey(campaignId: string): string {
  return `campaign:${campaignId.toLowerCase()}`;
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
