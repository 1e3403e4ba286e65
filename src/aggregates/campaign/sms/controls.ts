/**
 * SMS campaign controls as the SmsCampaignService exposes them: pause, resume, reschedule (a Dhaka-local
 * time validated as at creation, with a new dispatch deadline), cancel (the `sms:recovery` poller refunds
 * and settles) and resend of the failed recipients with a dry-run preview. Resend spans transactions: the
 * decision is first tried on the current state (a refused resend charges nothing), billing deducts
 * `failedCost` under `campaign:{id}:resend:{n}` (invariant 9), then one transaction appends ResendFailed
 * and reopens the failed rows, their count and cost checked against the charge; any failure after the
 * deduction may have happened reverses it by its key and releases the Idempotency-Key. ADR 0019.
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
  errorMessage,
  HeraldError,
  IllegalStateError,
  InsufficientBalanceError,
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
import type { BillingPort } from './billing.js';
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
    if (charged) {
      try {
        await billing.deduct({
          organizationId: state.organizationId,
          key: charge.key,
          amount: charge.amount,
          reason: `resend ${preview.nextResendAttempt} of sms campaign ${campaignId}`,
        });
      } catch (error) {
        // Refused: nothing was charged (reversing would only block this key for a retry after a top-up).
        if (error instanceof InsufficientBalanceError) throw error;
        await this.reverse(state, charge.key, error, log);
        throw error instanceof HeraldError
          ? error
          : new BillingUnavailableError(`billing failed: ${errorMessage(error)}`, { key: charge.key }, error);
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
      if (charged) await this.reverse(state, charge.key, error, log);
      throw error;
    }
  }

  /** Best-effort reversal of a resend charge whose resend did not happen. */
  private async reverse(state: ExistingCampaign, key: string, cause: unknown, log: Logger): Promise<void> {
    try {
      await this.deps.billing.reverse(state.organizationId, key, `resend failed: ${errorMessage(cause)}`);
    } catch (error) {
      log.error({ err: error, key }, 'could not reverse a resend charge; reverse it by its key');
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
