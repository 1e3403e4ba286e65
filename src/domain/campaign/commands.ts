/**
 * Campaign commands: what callers (API, scanner, reaper, workers, recovery jobs) ask a campaign to do.
 * Each command names its campaign and carries `now`, the database time read by the command handler
 * (invariant 6: the decider never reads a clock). Schemas are strict: an unknown field is a typo, not
 * something to ignore. Rules that need only the command itself (castType for LINE, deadline after
 * startAt, a new startAt in the future) live here; rules that need the state live in decide.ts.
 */
import { z } from 'zod';
import { isMoney, toUnits } from '../sms/money.js';
import { instantInput, ms } from '../time.js';
import { validationErrorFrom } from '../validation.js';
import { LINE_MULTICAST_MAX, lineContentSchema } from './line.js';
import { money, smsDefinitionSchema, WITHDRAWAL_REASONS } from './sms.js';
import { CAMPAIGN_CHANNELS, CAST_TYPES } from './status.js';

const campaignId = z.uuid().transform((id) => id.toLowerCase());
const text = (max: number) => z.string().trim().min(1, 'must not be empty').max(max);
const identifier = text(200);
const reason = text(1000);
/** A claim epoch as carried by a claim's messages; the first claim has epoch 1. */
const epoch = z.number().int().positive();

const base = { campaignId, now: instantInput };
const count = z.number().int().nonnegative();

type Ctx = z.RefinementCtx;

/** superRefine runs after field errors too: compare amounts only when they are well-formed. */
const isMoneyText = (value: unknown): value is string => typeof value === 'string' && isMoney(value);

function deadlineAfterStart(
  startAt: string | null | undefined,
  deadline: string | null | undefined,
  ctx: Ctx,
) {
  if (deadline == null) return;
  if (startAt == null) {
    ctx.addIssue({
      code: 'custom',
      path: ['dispatchDeadline'],
      message: 'a dispatchDeadline needs a startAt',
    });
  } else if (ms(deadline) <= ms(startAt)) {
    ctx.addIssue({
      code: 'custom',
      path: ['dispatchDeadline'],
      message: `dispatchDeadline ${deadline} must be after startAt ${startAt}`,
    });
  }
}

function startInFuture(startAt: string, now: string, ctx: Ctx) {
  if (ms(startAt) <= ms(now)) {
    ctx.addIssue({
      code: 'custom',
      path: ['startAt'],
      message: `startAt ${startAt} must be after now (${now})`,
    });
  }
}

const createCampaign = z
  .strictObject({
    type: z.literal('CreateCampaign'),
    ...base,
    /** 'draft': inline create (seed 003 inline, seed 000 CMS). 'building': a CSV upload still being read. */
    mode: z.enum(['draft', 'building']),
    organizationId: identifier,
    channel: z.enum(CAMPAIGN_CHANNELS),
    castType: z.enum(CAST_TYPES).nullish(),
    audienceId: identifier.nullish(),
    lineOaId: identifier.nullish(),
    name: text(200),
    startAt: instantInput.nullish(),
    dispatchDeadline: instantInput.nullish(),
    idempotencyKey: identifier.nullish(),
    /** The Idempotency-Key header of the request that created it (HTTP API), shown on the campaign. */
    requestIdempotencyKey: text(255).nullish(),
    /** SMS campaigns (seed 003): the definition; null/absent for LINE (and for sms drafts without one). */
    sms: smsDefinitionSchema.nullish(),
    /** LINE campaigns: the message objects sent (1..5). */
    line: z.strictObject({ messages: lineContentSchema }).nullish(),
  })
  .superRefine((c, ctx) => {
    if (c.sms != null && c.channel !== 'sms') {
      ctx.addIssue({ code: 'custom', path: ['sms'], message: 'only for sms campaigns' });
    }
    if (c.sms != null && (c.sms.source === 'csv') !== (c.mode === 'building')) {
      ctx.addIssue({
        code: 'custom',
        path: ['sms', 'source'],
        message: 'a csv campaign is created building, an inline one as a draft',
      });
    }
    if (c.channel === 'line') {
      if (c.castType == null)
        ctx.addIssue({ code: 'custom', path: ['castType'], message: 'required for line' });
      if (c.lineOaId == null)
        ctx.addIssue({ code: 'custom', path: ['lineOaId'], message: 'required for line' });
      lineTargetRules(c, ctx);
      if (c.line == null) ctx.addIssue({ code: 'custom', path: ['line'], message: 'required for line' });
    } else {
      for (const field of ['castType', 'audienceId', 'lineOaId', 'line'] as const) {
        if (c[field] != null)
          ctx.addIssue({ code: 'custom', path: [field], message: 'only for line campaigns' });
      }
    }
    deadlineAfterStart(c.startAt, c.dispatchDeadline, ctx);
  });

/** A multicast needs an audience; a narrowcast's audience is a LINE audience group id (digits). */
function lineTargetRules(
  c: { castType?: string | null | undefined; audienceId?: string | null | undefined },
  ctx: Ctx,
): void {
  if ((c.castType === 'multicast' || c.castType === 'narrowcast') && c.audienceId == null) {
    ctx.addIssue({ code: 'custom', path: ['audienceId'], message: `required for a line ${c.castType}` });
  }
  if (c.castType === 'narrowcast' && c.audienceId != null && !/^[1-9][0-9]{0,17}$/.test(c.audienceId)) {
    ctx.addIssue({
      code: 'custom',
      path: ['audienceId'],
      message: 'a narrowcast audience is a LINE audience group id (digits)',
    });
  }
}

/**
 * A CMS edit (seed 000) of a campaign not yet claimed: any of name, audience, cast type, official account
 * and (LINE) content. Absent fields are kept; decide refuses an edit that changes nothing.
 */
const editCampaign = z
  .strictObject({
    type: z.literal('EditCampaign'),
    ...base,
    name: text(200).optional(),
    castType: z.enum(CAST_TYPES).optional(),
    audienceId: identifier.nullable().optional(),
    lineOaId: identifier.optional(),
    messages: lineContentSchema.optional(),
  })
  .superRefine((c, ctx) => {
    if (
      c.name === undefined &&
      c.castType === undefined &&
      c.audienceId === undefined &&
      c.lineOaId === undefined &&
      c.messages === undefined
    ) {
      ctx.addIssue({ code: 'custom', path: ['name'], message: 'an edit needs at least one field' });
    }
  });

/** What a LINE call came to, as the delivery worker records it. */
const lineCallFailure = z.strictObject({
  kind: z.enum(['throttled', 'transient', 'rejected', 'quota']),
  status: z.number().int().nullable(),
  requestId: z.string().nullable(),
  message: text(2000),
  details: z
    .array(z.strictObject({ message: z.string().optional(), property: z.string().optional() }))
    .optional(),
  retryAfterMs: z.number().int().nonnegative().nullable().optional(),
});

/**
 * One step of a LINE delivery under the live claim: the plan (first attempt only), a chunk accepted by LINE
 * (first time, or 409 with the earlier request id), a chunk given up as unconfirmed, or a failed call.
 */
const advanceLineDelivery = z.strictObject({
  type: z.literal('AdvanceLineDelivery'),
  ...base,
  epoch,
  step: z.discriminatedUnion('type', [
    z.strictObject({
      type: z.literal('plan'),
      chunks: z.number().int().positive(),
      recipients: count.nullable(),
    }),
    z.strictObject({
      type: z.literal('accepted'),
      chunk: count,
      recipients: count.max(LINE_MULTICAST_MAX).nullable(),
      cursor: z.string().min(1).nullable(),
      requestId: z.string().min(1).nullable(),
      acceptedRequestId: z.string().min(1).nullable(),
    }),
    z.strictObject({
      type: z.literal('unconfirmed'),
      chunk: count,
      recipients: count.max(LINE_MULTICAST_MAX).nullable(),
      cursor: z.string().min(1).nullable(),
    }),
    z.strictObject({ type: z.literal('failed'), chunk: count, failure: lineCallFailure }),
  ]),
});

/** An SMS campaign with recipients is activated by its charge (seed 003, step 10); LINE campaigns carry none. */
const activateCampaign = z.strictObject({
  type: z.literal('ActivateCampaign'),
  ...base,
  charge: z.strictObject({ key: identifier, amount: money }).optional(),
});

/**
 * `dispatchDeadline` on Schedule/Reschedule/Defer: a value replaces the deadline, `null` clears it,
 * omitted keeps the current one (decide rejects a kept deadline that would fall before the new startAt).
 */
const scheduleCampaign = z
  .strictObject({
    type: z.literal('ScheduleCampaign'),
    ...base,
    startAt: instantInput,
    dispatchDeadline: instantInput.nullable().optional(),
  })
  .superRefine((c, ctx) => {
    startInFuture(c.startAt, c.now, ctx);
    deadlineAfterStart(c.startAt, c.dispatchDeadline, ctx);
  });

const sendNow = z.strictObject({ type: z.literal('SendNow'), ...base });

const claimCampaign = z.strictObject({ type: z.literal('ClaimCampaign'), ...base });

const reclaimCampaign = z.strictObject({
  type: z.literal('ReclaimCampaign'),
  ...base,
  /** The claim is stale when `now - claimedAt > staleAfterMs` (seed 000: 15 minutes). */
  staleAfterMs: z.number().int().positive(),
  reason: reason.optional(),
});

const heartbeat = z.strictObject({ type: z.literal('Heartbeat'), ...base, epoch });

const completeCampaign = z.strictObject({ type: z.literal('CompleteCampaign'), ...base, epoch });

const failCampaign = z.strictObject({
  type: z.literal('FailCampaign'),
  ...base,
  reason,
  /** Required when failing a DISPATCHING campaign (the claim's epoch); must be omitted otherwise. */
  epoch: epoch.optional(),
  /** SMS DRAFT/BUILDING: the saved recipients are deleted in the same transaction (counters back to 0). */
  clearRecipients: z.literal(true).optional(),
});

/**
 * A CSV build worker claims a BUILDING campaign's build (seed 003's CampaignBuildWorker): a new attempt,
 * the build's fencing token. Refused while another attempt shows a sign of life within `staleAfterMs`.
 */
const startBuild = z.strictObject({
  type: z.literal('StartBuild'),
  ...base,
  staleAfterMs: z.number().int().positive(),
});

/** Recipients saved (inline: all at once in DRAFT; CSV: one batch of the build attempt in BUILDING). */
const addRecipients = z
  .strictObject({
    type: z.literal('AddRecipients'),
    ...base,
    buildAttempt: z.number().int().positive().optional(),
    recipients: count,
    segments: count,
    cost: money,
    rejected: count,
  })
  .superRefine((c, ctx) => {
    if (c.recipients + c.rejected === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['recipients'],
        message: 'nothing added: no recipients and no rejected rows',
      });
    }
    if (c.segments < c.recipients) {
      ctx.addIssue({
        code: 'custom',
        path: ['segments'],
        message: 'every recipient has at least one segment',
      });
    }
  });

/** One dispatch batch of a DISPATCHING SMS campaign: recipients submitted in chunks or deferred by window. */
const recordDispatch = z
  .strictObject({
    type: z.literal('RecordDispatch'),
    ...base,
    epoch,
    submittedFromPending: count,
    submittedFromDeferred: count,
    deferredFromPending: count,
    deferredAgain: count,
    submissions: count,
  })
  .superRefine((c, ctx) => {
    const submitted = c.submittedFromPending + c.submittedFromDeferred;
    if (submitted + c.deferredFromPending + c.deferredAgain === 0) {
      ctx.addIssue({ code: 'custom', path: ['submittedFromPending'], message: 'an empty dispatch batch' });
    }
    if ((submitted === 0) !== (c.submissions === 0) || c.submissions > submitted) {
      ctx.addIssue({
        code: 'custom',
        path: ['submissions'],
        message: 'submitted recipients travel in 1..submitted chunks',
      });
    }
  });

const finishPartially = z.strictObject({ type: z.literal('FinishPartially'), ...base, epoch });

/** The claim holder puts its campaign back to SCHEDULED at a later time (seed 003: promotional window closed). */
const deferCampaign = z
  .strictObject({
    type: z.literal('DeferCampaign'),
    ...base,
    epoch,
    startAt: instantInput,
    dispatchDeadline: instantInput.nullable().optional(),
    reason,
  })
  .superRefine((c, ctx) => {
    startInFuture(c.startAt, c.now, ctx);
    deadlineAfterStart(c.startAt, c.dispatchDeadline, ctx);
  });

/**
 * An operator's pause (optional reason), or an auto-pause (ADR 0019) carrying the measured failure rate
 * over the last `window` reports and the threshold it crossed (reason defaults to a sentence saying so).
 */
const pauseCampaign = z
  .strictObject({
    type: z.literal('PauseCampaign'),
    ...base,
    reason: reason.optional(),
    auto: z
      .strictObject({
        rate: z.number().min(0).max(1),
        window: z.number().int().positive(),
        maxFailureRate: z.number().gt(0).lt(1),
      })
      .optional(),
  })
  .superRefine((c, ctx) => {
    if (c.auto && !(c.auto.rate > c.auto.maxFailureRate)) {
      ctx.addIssue({
        code: 'custom',
        path: ['auto', 'rate'],
        message: `an auto-pause needs a failure rate above maxFailureRate ${c.auto.maxFailureRate}`,
      });
    }
  });

const resumeCampaign = z.strictObject({
  type: z.literal('ResumeCampaign'),
  ...base,
  reason: reason.optional(),
});

const rescheduleCampaign = z
  .strictObject({
    type: z.literal('RescheduleCampaign'),
    ...base,
    startAt: instantInput,
    dispatchDeadline: instantInput.nullable().optional(),
    reason: reason.optional(),
  })
  .superRefine((c, ctx) => {
    startInFuture(c.startAt, c.now, ctx);
    deadlineAfterStart(c.startAt, c.dispatchDeadline, ctx);
  });

const cancelCampaign = z.strictObject({
  type: z.literal('CancelCampaign'),
  ...base,
  reason: reason.optional(),
});

const settleCancellation = z.strictObject({ type: z.literal('SettleCancellation'), ...base });

const expireCampaign = z.strictObject({ type: z.literal('ExpireCampaign'), ...base });

const requeueCampaign = z.strictObject({
  type: z.literal('RequeueCampaign'),
  ...base,
  reason: reason.optional(),
});

/**
 * Reopens a PARTIAL/FAILED campaign for its failed recipients. An SMS campaign carries the resend's
 * charge: exactly the failed recipients' cost, key `resendChargeKey(campaignId, resendAttempt + 1)`.
 */
const resendFailed = z.strictObject({
  type: z.literal('ResendFailed'),
  ...base,
  reason: reason.optional(),
  charge: z.strictObject({ key: identifier, amount: money }).optional(),
});

/** A count of recipients and their summed cost travel together: no recipients, no cost. */
function costFits(c: Record<string, unknown>, countField: string, costField: string, ctx: Ctx): void {
  if (c[countField] === 0 && toUnits(c[costField] as string) !== 0) {
    ctx.addIssue({
      code: 'custom',
      path: [costField],
      message: `${costField} ${c[costField]} but ${countField} is 0`,
    });
  }
}

/**
 * The DLR roll-up's batch for one campaign (part 2): SUBMITTED recipients that reached a terminal
 * report, moved to DELIVERED, FAILED (some of them unconfirmed) or RETRY_PENDING, with their costs.
 * When the last non-final recipient of a DISPATCHING campaign is counted, the campaign is recounted in
 * the same decision (COMPLETED, PARTIAL or FAILED).
 */
const recordDeliveryReports = z
  .strictObject({
    type: z.literal('RecordDeliveryReports'),
    ...base,
    delivered: count,
    deliveredCost: money,
    failed: count,
    failedCost: money,
    unconfirmed: count,
    unconfirmedCost: money,
    retryPending: count,
  })
  .superRefine((c, ctx) => {
    if (c.delivered + c.failed + c.retryPending === 0) {
      ctx.addIssue({ code: 'custom', path: ['delivered'], message: 'an empty delivery report batch' });
    }
    if (c.unconfirmed > c.failed) {
      ctx.addIssue({
        code: 'custom',
        path: ['unconfirmed'],
        message: `${c.unconfirmed} unconfirmed of ${c.failed} failed: unconfirmed recipients are failed ones`,
      });
    }
    if (isMoneyText(c.unconfirmedCost) && isMoneyText(c.failedCost)) {
      if (toUnits(c.unconfirmedCost) > toUnits(c.failedCost)) {
        ctx.addIssue({
          code: 'custom',
          path: ['unconfirmedCost'],
          message: `unconfirmedCost ${c.unconfirmedCost} exceeds failedCost ${c.failedCost}`,
        });
      }
      costFits(c, 'delivered', 'deliveredCost', ctx);
      costFits(c, 'failed', 'failedCost', ctx);
      costFits(c, 'unconfirmed', 'unconfirmedCost', ctx);
    }
  });

/** The retry dispatcher: RETRY_PENDING recipients whose delay passed become PENDING again. */
const releaseRetries = z.strictObject({
  type: z.literal('ReleaseRetries'),
  ...base,
  recipients: z.number().int().positive(),
});

/** Refunds of failed (not unconfirmed) recipients recorded once billing accepted them. */
const recordRefunds = z.strictObject({
  type: z.literal('RecordRefunds'),
  ...base,
  recipients: z.number().int().positive(),
  amount: money,
});

/**
 * A CANCELLING (reason cancelled) or EXPIRED (reason expired) SMS campaign's unsent recipients — all of
 * them, pending, deferred and retry pending — withdrawn at once with their summed cost, owed back under
 * `key` (withdrawalKey(campaignId, reason, resendAttempt)).
 */
const withdrawUnsent = z
  .strictObject({
    type: z.literal('WithdrawUnsent'),
    ...base,
    reason: z.enum(WITHDRAWAL_REASONS),
    recipients: count,
    amount: money,
    key: identifier,
  })
  .superRefine((c, ctx) => {
    if (isMoneyText(c.amount)) costFits(c, 'recipients', 'amount', ctx);
  });

/** The withdrawal's refund, recorded once billing accepted it (same key, same amount). */
const recordWithdrawalRefund = z.strictObject({
  type: z.literal('RecordWithdrawalRefund'),
  ...base,
  key: identifier,
  amount: money,
});

const deleteCampaign = z.strictObject({ type: z.literal('DeleteCampaign'), ...base });

export const campaignCommandSchema = z.discriminatedUnion('type', [
  createCampaign,
  activateCampaign,
  scheduleCampaign,
  sendNow,
  claimCampaign,
  reclaimCampaign,
  heartbeat,
  completeCampaign,
  failCampaign,
  finishPartially,
  deferCampaign,
  pauseCampaign,
  resumeCampaign,
  rescheduleCampaign,
  cancelCampaign,
  settleCancellation,
  expireCampaign,
  requeueCampaign,
  resendFailed,
  deleteCampaign,
  startBuild,
  addRecipients,
  recordDispatch,
  recordDeliveryReports,
  releaseRetries,
  recordRefunds,
  withdrawUnsent,
  recordWithdrawalRefund,
  editCampaign,
  advanceLineDelivery,
]);

/** What callers pass (times as Date or ISO string). */
export type CampaignCommand = z.input<typeof campaignCommandSchema>;
/** What decide works with after validation (times canonical ISO UTC, ids trimmed / lower-cased). */
export type ParsedCampaignCommand = z.output<typeof campaignCommandSchema>;
export type CampaignCommandType = CampaignCommand['type'];

export type CreateCampaign = z.input<typeof createCampaign>;
export type ActivateCampaign = z.input<typeof activateCampaign>;
export type ScheduleCampaign = z.input<typeof scheduleCampaign>;
export type SendNow = z.input<typeof sendNow>;
export type ClaimCampaign = z.input<typeof claimCampaign>;
export type ReclaimCampaign = z.input<typeof reclaimCampaign>;
export type Heartbeat = z.input<typeof heartbeat>;
export type CompleteCampaign = z.input<typeof completeCampaign>;
export type FailCampaign = z.input<typeof failCampaign>;
export type FinishPartially = z.input<typeof finishPartially>;
export type DeferCampaign = z.input<typeof deferCampaign>;
export type PauseCampaign = z.input<typeof pauseCampaign>;
export type ResumeCampaign = z.input<typeof resumeCampaign>;
export type RescheduleCampaign = z.input<typeof rescheduleCampaign>;
export type CancelCampaign = z.input<typeof cancelCampaign>;
export type SettleCancellation = z.input<typeof settleCancellation>;
export type ExpireCampaign = z.input<typeof expireCampaign>;
export type RequeueCampaign = z.input<typeof requeueCampaign>;
export type ResendFailed = z.input<typeof resendFailed>;
export type DeleteCampaign = z.input<typeof deleteCampaign>;
export type StartBuild = z.input<typeof startBuild>;
export type AddRecipients = z.input<typeof addRecipients>;
export type RecordDispatch = z.input<typeof recordDispatch>;
export type RecordDeliveryReports = z.input<typeof recordDeliveryReports>;
export type ReleaseRetries = z.input<typeof releaseRetries>;
export type RecordRefunds = z.input<typeof recordRefunds>;
export type WithdrawUnsent = z.input<typeof withdrawUnsent>;
export type RecordWithdrawalRefund = z.input<typeof recordWithdrawalRefund>;
export type EditCampaign = z.input<typeof editCampaign>;
export type AdvanceLineDelivery = z.input<typeof advanceLineDelivery>;
export type LineDeliveryStep = AdvanceLineDelivery['step'];
export type LineCallFailure = z.input<typeof lineCallFailure>;

export const CAMPAIGN_COMMAND_TYPES = campaignCommandSchema.options.map(
  (option) => option.shape.type.value,
) as readonly CampaignCommandType[];

/** Validates a command (e.g. an API body); throws ValidationError naming every problem. */
export function parseCampaignCommand(raw: unknown): ParsedCampaignCommand {
  const result = campaignCommandSchema.safeParse(raw);
  if (result.success) return result.data;
  throw validationErrorFrom('campaign command', raw, result.error.issues);
}
