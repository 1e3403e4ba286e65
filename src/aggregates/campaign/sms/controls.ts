/**
 * SMS campaign controls as the SmsCampaignService exposes them: pause, resume, reschedule (a Dhaka-local
 * time validated as at creation, with a new dispatch deadline), cancel (the `sms:recovery` poller refunds
 * and settles) and resend of the failed recipients with a dry-run preview. Resend spans transactions: the
 * decision is first tried on the current state (a refused resend charges nothing), billing deducts
 * `failedCost` under `campaign:{id}:resend:{n}` (invariant 9), then one transaction appends ResendFailed
 * and reopens the failed rows, their count and cost checked against the charge. A deduction billing did
 * not answer is not reversed (that would spend the key): the campaign is unchanged and a retry deducts
 * the same key, charged once (ADR 0023); a charge whose transaction failed stays while a retry can still
 * use it, and is reversed only once the campaign moved on. ADR 0019.
 */

import { z } from 'zod';
import { reopenFailedRecipients } from '../../../adapters/postgres/sms-recovery-queries.js';
import { IdempotencyKeys, type Replayable, type RequestKey } from '../../../api/idempotency.js';
import {
  CAMPAIGN_OPERATIONS,
  type CampaignCommand,
  type CampaignEvent,
  type CampaignState,
  type ExistingCampaign,
  resendChargeKey,
} from '../../../domain/campaign.js';
import { operationRefusal } from '../../../domain/operations.js';
import { parseRequest, SmsValidationError, scheduledAtRule } from '../../../domain/sms/campaign-request.js';
import { toUnits } from '../../../domain/sms/money.js';
import {
  BillingUnavailableError,
  ConflictError,
  errorMessage,
  HeraldError,
  IllegalStateError,
  NotFoundError,
} from '../../../errors.js';
import {
  type AggregateCommands,
  type CommandHandler,
  databaseNow,
} from '../../../eventstore/command-handler.js';
import type { Logger } from '../../../logger.js';
import type { Database } from '../../../ports/database.js';
import type { EventMeta } from '../../../ports/events.js';
import { campaignAggregate } from '../descriptor.js';
import type { BillingPort, BillingReceipt } from './billing.js';
import type { SmsSettings } from './settings.js';

export interface ControlOptions {
  /** When given, a campaign of another organization is not found. */
  organizationId?: string;
  meta?: EventMeta;
}

export interface ResendOptions extends ControlOptions {
  organizationId: string;
  idempotency?: RequestKey;
}

/** What a resend would do, before anything is charged. */
export interface ResendPreview {
  campaignId: string;
  status: ExistingCampaign['status'];
  /** Failed recipients that would be sent again. */
  recipients: number;
  /** What the resend would charge: exactly the failed recipients' saved cost. */
  cost: string;
  currentResendAttempt: number;
  nextResendAttempt: number;
  /** The resend's charge key. */
  chargeKey: string;
  /** Failed recipients whose refund is not recorded yet (a resend is refused until they are). */
  refundsPending: number;
}

/** Body of a reschedule: a new start, validated as `scheduledAt` at creation. */
export const smsRescheduleSchema = z.strictObject({
  scheduledAt: z.string().min(1).max(40),
  reason: z.string().trim().min(1).max(1_000).optional(),
});
export type SmsReschedule = z.input<typeof smsRescheduleSchema>;

export interface SmsControlsDeps {
  db: Database;
  handler: CommandHandler;
  billing: BillingPort;
  settings: Pick<
    SmsSettings,
    'zone' | 'promotionalWindow' | 'minLeadMs' | 'maxFutureMs' | 'dispatchDeadlineMs'
  >;
  idempotencyTtlMs: number;
  logger: Logger;
}

export class SmsCampaignControls {
  private readonly campaigns: AggregateCommands<CampaignState, CampaignCommand, CampaignEvent>;

  private readonly keys: IdempotencyKeys;

  constructor(private readonly deps: SmsControlsDeps) {
    this.campaigns = deps.handler.for(campaignAggregate);
    this.keys = new IdempotencyKeys(deps.idempotencyTtlMs);
  }

  /** SCHEDULED, QUEUED or DISPATCHING → PAUSED (no new recipient claims; nothing recalled or refunded). */
  async pause(campaignId: string, reason: string | undefined, options: ControlOptions = {}) {
    await this.load(campaignId, options.organizationId);
    return this.run(
      campaignId,
      (now) => ({ type: 'PauseCampaign', campaignId, now, ...(reason ? { reason } : {}) }),
      options,
    );
  }

  /** PAUSED → SCHEDULED (paused from SCHEDULED) or QUEUED. */
  async resume(campaignId: string, reason: string | undefined, options: ControlOptions = {}) {
    await this.load(campaignId, options.organizationId);
    return this.run(
      campaignId,
      (now) => ({ type: 'ResumeCampaign', campaignId, now, ...(reason ? { reason } : {}) }),
      options,
    );
  }

  /** The generic cancellation; `sms:recovery` withdraws, refunds and settles it (CANCELLED). */
  async cancel(campaignId: string, reason: string | undefined, options: ControlOptions = {}) {
    await this.load(campaignId, options.organizationId);
    return this.run(
      campaignId,
      (now) => ({ type: 'CancelCampaign', campaignId, now, ...(reason ? { reason } : {}) }),
      options,
    );
  }

  /**
   * A new start for a SCHEDULED (or paused-from-SCHEDULED) SMS campaign: `scheduledAt` as at creation
   * (without an offset a wall time in HERALD_SMS_TIMEZONE; lead, horizon, promotional window), and a new
   * dispatch deadline. Field errors name `scheduledAt`; a status that forbids it is an IllegalStateError.
   */
  async reschedule(campaignId: string, raw: unknown, options: ControlOptions = {}) {
    const input = parseRequest(smsRescheduleSchema, raw);
    const state = await this.load(campaignId, options.organizationId);
    const now = (await databaseNow(this.deps.db)).getTime();
    const checked = scheduledAtRule(input.scheduledAt, state.sms!.messageType, now, this.deps.settings);
    if ('issue' in checked) throw new SmsValidationError([checked.issue]);
    const startAt = checked.startAt;
    const dispatchDeadline = new Date(
      Date.parse(startAt) + this.deps.settings.dispatchDeadlineMs,
    ).toISOString();
    return this.run(
      campaignId,
      (at) => ({
        type: 'RescheduleCampaign',
        campaignId,
        now: at,
        startAt,
        dispatchDeadline,
        ...(input.reason ? { reason: input.reason } : {}),
      }),
      options,
    );
  }

  /** The dry run of a resend: how many recipients, what it would cost, whether refunds are pending. */
  async resendPreview(campaignId: string, options: ControlOptions = {}): Promise<ResendPreview> {
    const state = await this.load(campaignId, options.organizationId);
    const refused = operationRefusal(CAMPAIGN_OPERATIONS.resend, state);
    if (refused !== null) {
      throw new IllegalStateError(
        `cannot resend campaign ${campaignId} in status ${state.status}: ${refused}`,
        {
          command: 'ResendFailed',
          status: state.status,
          campaignId,
        },
      );
    }
    return previewOf(state);
  }

  /** Resends the failed recipients: charged `failedCost` once with the resend key, then reopened (QUEUED). */
  async resend(
    campaignId: string,
    input: { reason?: string | undefined },
    options: ResendOptions,
  ): Promise<Replayable<ExistingCampaign>> {
    return this.keys.aroundReservation(this.deps.db, options.idempotency, this.deps.logger, () =>
      this.resendReserved(campaignId, input, options),
    );
  }

  // ─── internals ──────────────────────────────────────────────────────────────────────────────────

  private async resendReserved(
    campaignId: string,
    input: { reason?: string | undefined },
    options: ResendOptions,
  ): Promise<ExistingCampaign> {
    const { db, billing } = this.deps;
    const state = await this.load(campaignId, options.organizationId);
    const preview = previewOf(state);
    const charge = { key: preview.chargeKey, amount: preview.cost };
    const reason = input.reason ? { reason: input.reason } : {};
    const command = (now: Date): CampaignCommand => ({
      type: 'ResendFailed',
      campaignId,
      now,
      charge,
      ...reason,
    });
    // The decision first, on the state as it is: refused (status, refunds pending) before any charge.
    campaignAggregate.decider.decide(command(await databaseNow(db)), state);
    const log = this.deps.logger.child({
      aggregateId: campaignId,
      correlationId: options.meta?.correlationId,
    });
    const charged = toUnits(charge.amount) > 0;
    const correlation = { correlationId: options.meta?.correlationId };
    if (charged) {
      let receipt: BillingReceipt;
      try {
        receipt = await billing.deduct(
          {
            organizationId: state.organizationId,
            key: charge.key,
            amount: charge.amount,
            reason: `resend ${preview.nextResendAttempt} of sms campaign ${campaignId}`,
          },
          correlation,
        );
      } catch (error) {
        // Refused (402, a key reversed by an operator): nothing was charged under the key. Unanswered
        // (502): nothing is reversed — a reversal would spend the key and this resend could never be
        // retried; the campaign is unchanged, and a retry deducts the same key, which billing applies once.
        if (error instanceof HeraldError) throw error;
        throw new BillingUnavailableError(
          `billing failed: ${errorMessage(error)}`,
          { key: charge.key },
          error,
        );
      }
      if (toUnits(receipt.amount) !== toUnits(charge.amount)) {
        throw new ConflictError(
          `billing key ${charge.key} holds a deduction of ${receipt.amount}, not the resend's ${charge.amount}`,
          { field: 'key', key: charge.key },
        );
      }
    }
    try {
      const result = await db.transaction(async (tx) => {
        const done = await this.campaigns.handleInTransaction(tx, campaignId, command, {
          ...(options.meta ? { meta: options.meta } : {}),
        });
        const rows = await reopenFailedRecipients(
          tx,
          campaignId,
          preview.currentResendAttempt,
          preview.nextResendAttempt,
        );
        if (rows.recipients !== preview.recipients || toUnits(rows.amount) !== toUnits(charge.amount)) {
          throw new IllegalStateError(
            `campaign ${campaignId}: ${rows.recipients} failed rows costing ${rows.amount} do not match ` +
              `its ${preview.recipients} failed recipients costing ${charge.amount}`,
            { status: state.status, campaignId },
          );
        }
        if (options.idempotency) await this.keys.complete(tx, options.idempotency, done.state);
        return done;
      });
      this.campaigns.signalAfterCommit([result]);
      log.info(
        { recipients: preview.recipients, cost: charge.amount, resendAttempt: preview.nextResendAttempt },
        'sms campaign resend charged and queued',
      );
      return result.state as ExistingCampaign;
    } catch (error) {
      if (charged) await this.settleUnqueuedCharge(campaignId, preview, charge, error, log, correlation);
      throw error;
    }
  }

  /**
   * The resend was charged but its transaction did not commit. The charge stays when its key is still
   * this campaign's next resend (a retry then finishes it, billing answering the first result) or was
   * used by a concurrent resend that committed (the charge is that resend's); it is reversed only when
   * the campaign can no longer be resent with it (it moved on: deleted, or its failed cost changed).
   */
  private async settleUnqueuedCharge(
    campaignId: string,
    preview: ResendPreview,
    charge: { key: string; amount: string },
    cause: unknown,
    log: Logger,
    correlation: { correlationId?: string | undefined },
  ): Promise<void> {
    let now: ExistingCampaign | null = null;
    try {
      now = await this.load(campaignId);
    } catch (error) {
      log.warn(
        { err: error, key: charge.key },
        'resend not queued; its charge is kept for a retry with the key',
      );
      return;
    }
    const resentWithKey = now.resendAttempt >= preview.nextResendAttempt;
    const stillResendable =
      previewOf(now).chargeKey === charge.key &&
      toUnits(now.sms!.failedCost) === toUnits(charge.amount) &&
      operationRefusal(CAMPAIGN_OPERATIONS.resend, now) === null;
    if (resentWithKey || stillResendable) {
      log.warn(
        { err: cause, key: charge.key, resentWithKey },
        resentWithKey
          ? 'resend not queued by this request: a concurrent resend used the key; its charge stands'
          : 'resend not queued; its charge is kept and a retry with the key finishes it (charged once)',
      );
      return;
    }
    try {
      await this.deps.billing.reverse(
        now.organizationId,
        charge.key,
        `resend not queued: ${errorMessage(cause)}`,
        correlation,
      );
    } catch (error) {
      log.error({ err: error, key: charge.key }, 'could not reverse a resend charge; reverse it by its key');
    }
  }

  private async load(campaignId: string, organizationId?: string): Promise<ExistingCampaign> {
    const loaded = await campaignAggregate.store.load(this.deps.db, campaignId);
    const state = loaded?.state;
    if (
      !state ||
      state.status === 'NONE' ||
      state.channel !== 'sms' ||
      state.sms === null ||
      (organizationId && state.organizationId !== organizationId)
    ) {
      throw new NotFoundError(`sms campaign ${campaignId} not found`, { campaignId });
    }
    return state;
  }

  private async run(
    campaignId: string,
    makeCommand: (now: Date) => CampaignCommand,
    options: ControlOptions,
  ): Promise<ExistingCampaign> {
    const result = await this.campaigns.handle(
      campaignId,
      makeCommand,
      options.meta ? { meta: options.meta } : {},
    );
    return result.state as ExistingCampaign;
  }
}

/** The preview, from the facts the decider checks a resend's charge against. */
export function previewOf(state: ExistingCampaign): ResendPreview {
  const sms = state.sms!;
  const p = sms.progress;
  return {
    campaignId: state.campaignId,
    status: state.status,
    recipients: p.failed,
    cost: sms.failedCost,
    currentResendAttempt: state.resendAttempt,
    nextResendAttempt: state.resendAttempt + 1,
    chargeKey: resendChargeKey(state.campaignId, state.resendAttempt + 1),
    refundsPending: Math.max(0, p.failed - p.refunded - p.unconfirmed),
  };
}
