/**
 * The campaign library API (create, schedule, send now, pause, resume, reschedule, cancel, delete,
 * get, history). Each call is one command through the command handler: one transaction with its
 * events, state row and outbox rows (invariant 1), time from the database (invariant 6). The command
 * handler wakes the scanners after a commit that makes a campaign due soon, and the relays after one
 * that wrote outbox rows.
 */
import { randomUUID } from 'node:crypto';
import { findCampaignByIdempotencyKey } from '../../adapters/postgres/campaign-queries.js';
import { failUpload } from '../../adapters/postgres/sms-recovery-queries.js';
import type {
  CampaignCommand,
  CampaignEvent,
  CampaignState,
  CreateCampaign,
  EditCampaign,
  ExistingCampaign,
} from '../../domain/campaign.js';
import { ConflictError, NotFoundError, ValidationError } from '../../errors.js';
import type { AggregateCommands, CommandHandler, CommandResult } from '../../eventstore/command-handler.js';
import { readCurrentStream } from '../../eventstore/read-stream.js';
import type { Database } from '../../ports/database.js';
import type { EventMeta, StoredEvent } from '../../ports/events.js';
import { campaignAggregate } from './descriptor.js';

type Times = Date | string;
type WithoutCommandFields<C> = Omit<C, 'type' | 'now' | 'campaignId'>;

export type NewCampaign = WithoutCommandFields<CreateCampaign> & { campaignId?: string };

/** Why a LINE campaign cannot go on its way to dispatch yet (its channel credentials, its audience), or null. */
export type LineReadiness = (
  campaign: Pick<ExistingCampaign, 'organizationId' | 'channel' | 'castType' | 'audienceId' | 'lineOaId'>,
) => Promise<{ field: string; reason: string } | null>;

export interface CampaignServiceDeps {
  db: Database;
  handler: CommandHandler;
  /** Checked before a LINE campaign is scheduled, activated, sent or resent (absent: not checked). */
  lineReadiness?: LineReadiness;
  /** How far ahead of the database clock a startAt may be (HERALD_CAMPAIGN_MAX_START_AHEAD_DAYS; absent: unbounded). */
  maxStartAheadMs?: number;
}

/** A CMS edit: the fields to change (absent ones are kept). */
export type CampaignEdit = WithoutCommandFields<EditCampaign>;

export class CampaignService {
  private readonly campaigns: AggregateCommands<CampaignState, CampaignCommand, CampaignEvent>;

  constructor(private readonly deps: CampaignServiceDeps) {
    this.campaigns = deps.handler.for(campaignAggregate);
  }

  /**
   * Creates a DRAFT campaign (or BUILDING with mode 'building'). An idempotency key the organization
   * already used is a ConflictError naming the campaign that holds it (`details.existingCampaignId`).
   */
  async create(input: NewCampaign, meta?: EventMeta): Promise<ExistingCampaign> {
    const campaignId = input.campaignId ?? randomUUID();
    try {
      return await this.run(
        campaignId,
        (now) => ({ ...input, type: 'CreateCampaign', campaignId, now }),
        meta,
      );
    } catch (error) {
      if (!(error instanceof ConflictError)) throw error;
      // The stored (trimmed) spellings the conflict reports, not the raw input.
      const { organizationId, idempotencyKey } = error.details as {
        organizationId: string;
        idempotencyKey: string;
      };
      const existing = await findCampaignByIdempotencyKey(this.deps.db, organizationId, idempotencyKey);
      throw new ConflictError(error.message, { ...error.details, existingCampaignId: existing });
    }
  }

  /**
   * `now` when `startAt` is within HERALD_CAMPAIGN_MAX_START_AHEAD_DAYS of it (the transaction's
   * database time); otherwise a ValidationError naming startAt, and the command writes nothing.
   */
  private withinHorizon(startAt: Times, now: Date): Date {
    const limit = this.deps.maxStartAheadMs;
    const at = new Date(startAt).getTime();
    if (limit !== undefined && at - now.getTime() > limit) {
      const days = Math.round(limit / 86_400_000);
      throw new ValidationError(
        `startAt ${new Date(at).toISOString()} is more than ${days} days ahead (HERALD_CAMPAIGN_MAX_START_AHEAD_DAYS)`,
        { field: 'startAt' },
      );
    }
    return now;
  }

  /** DRAFT → SCHEDULED at `startAt` (optionally with a dispatch deadline). */
  async schedule(campaignId: string, startAt: Times, dispatchDeadline?: Times | null, meta?: EventMeta) {
    await this.requireReady(campaignId);
    return this.run(
      campaignId,
      (now) => ({
        type: 'ScheduleCampaign',
        campaignId,
        now: this.withinHorizon(startAt, now),
        startAt,
        ...(dispatchDeadline !== undefined ? { dispatchDeadline } : {}),
      }),
      meta,
    );
  }

  /** DRAFT/BUILDING → QUEUED (no future startAt) or SCHEDULED. */
  async activate(campaignId: string, meta?: EventMeta) {
    await this.requireReady(campaignId);
    return this.run(campaignId, (now) => ({ type: 'ActivateCampaign', campaignId, now }), meta);
  }

  /** QUEUED/SCHEDULED → DISPATCHING at once: the scanner's claim, without waiting for the scanner. */
  async sendNow(campaignId: string, meta?: EventMeta) {
    await this.requireReady(campaignId);
    return this.run(campaignId, (now) => ({ type: 'SendNow', campaignId, now }), meta);
  }

  /**
   * SCHEDULED/QUEUED/DISPATCHING → PAUSED; the reason is kept on the campaign (pauseReason) and its
   * event. Every control takes (campaign, reason, meta), as the SMS controls do.
   */
  pause(campaignId: string, reason?: string, meta?: EventMeta) {
    return this.run(
      campaignId,
      (now) => ({ type: 'PauseCampaign', campaignId, now, ...(reason ? { reason } : {}) }),
      meta,
    );
  }

  resume(campaignId: string, reason?: string, meta?: EventMeta) {
    return this.run(
      campaignId,
      (now) => ({ type: 'ResumeCampaign', campaignId, now, ...(reason ? { reason } : {}) }),
      meta,
    );
  }

  reschedule(campaignId: string, startAt: Times, dispatchDeadline?: Times | null, meta?: EventMeta) {
    return this.run(
      campaignId,
      (now) => ({
        type: 'RescheduleCampaign',
        campaignId,
        now: this.withinHorizon(startAt, now),
        startAt,
        ...(dispatchDeadline !== undefined ? { dispatchDeadline } : {}),
      }),
      meta,
    );
  }

  /**
   * Cancels; a CSV campaign cancelled while BUILDING (nothing saved, nothing charged) has its upload
   * FAILED in the same transaction, so no build attempt takes it again (a running one is fenced off).
   */
  async cancel(campaignId: string, reason?: string, meta?: EventMeta) {
    const result = await this.deps.db.transaction(async (tx) => {
      const cancelled = await this.campaigns.handleInTransaction(
        tx,
        campaignId,
        (now) => ({ type: 'CancelCampaign', campaignId, now, ...(reason ? { reason } : {}) }),
        meta ? { meta } : {},
      );
      const requested = cancelled.events.find((e) => e.type === 'CampaignCancellationRequested');
      if (requested?.data.from === 'BUILDING') {
        await failUpload(tx, campaignId, `cancelled during its build${reason ? `: ${reason}` : ''}`);
      }
      return cancelled;
    });
    this.campaigns.signalAfterCommit([result]);
    return result.state as ExistingCampaign;
  }

  /**
   * Seed 000's CMS edit (DRAFT or SCHEDULED, until the first claim). A SCHEDULED campaign stays ready:
   * the edited campaign is checked as a schedule would check it.
   */
  async edit(campaignId: string, edit: CampaignEdit, meta?: EventMeta) {
    const current = await this.get(campaignId);
    if (current.status === 'SCHEDULED') {
      await this.requireReady(campaignId, {
        ...current,
        ...(edit.castType !== undefined ? { castType: edit.castType } : {}),
        ...(edit.audienceId !== undefined ? { audienceId: edit.audienceId } : {}),
        ...(edit.lineOaId !== undefined ? { lineOaId: edit.lineOaId } : {}),
      });
    }
    return this.run(campaignId, (now) => ({ ...edit, type: 'EditCampaign', campaignId, now }), meta);
  }

  /** A failed LINE campaign's chunks not yet accepted, again (PARTIAL/FAILED → QUEUED; same retry keys). */
  async resend(campaignId: string, reason?: string, meta?: EventMeta) {
    await this.requireReady(campaignId);
    return this.run(
      campaignId,
      (now) => ({ type: 'ResendFailed', campaignId, now, ...(reason ? { reason } : {}) }),
      meta,
    );
  }

  delete(campaignId: string, meta?: EventMeta) {
    return this.run(campaignId, (now) => ({ type: 'DeleteCampaign', campaignId, now }), meta);
  }

  /** Runs any campaign command (workers, recovery jobs) and returns the full result. */
  execute(campaignId: string, makeCommand: (now: Date) => CampaignCommand, meta?: EventMeta) {
    return this.handle(campaignId, makeCommand, meta);
  }

  async get(campaignId: string): Promise<ExistingCampaign> {
    const loaded = await campaignAggregate.store.load(this.deps.db, campaignId);
    if (!loaded || loaded.state.status === 'NONE')
      throw new NotFoundError(`campaign ${campaignId} not found`);
    return loaded.state;
  }

  history(campaignId: string, until?: Date): Promise<StoredEvent[]> {
    return readCurrentStream(this.deps.db, campaignAggregate, campaignId, until ? { until } : {});
  }

  /** A LINE campaign's channel credentials and audience must be in place before it is on its way. */
  private async requireReady(campaignId: string, campaign?: ExistingCampaign): Promise<void> {
    const { lineReadiness } = this.deps;
    if (!lineReadiness) return;
    const c = campaign ?? (await this.get(campaignId));
    if (c.channel !== 'line') return;
    const refused = await lineReadiness(c);
    if (refused) {
      throw new ValidationError(`campaign ${campaignId} cannot be sent yet: ${refused.reason}`, {
        field: refused.field,
        campaignId,
      });
    }
  }

  private async run(
    campaignId: string,
    makeCommand: (now: Date) => CampaignCommand,
    meta?: EventMeta,
  ): Promise<ExistingCampaign> {
    const result = await this.handle(campaignId, makeCommand, meta);
    return result.state as ExistingCampaign;
  }

  private handle(
    campaignId: string,
    makeCommand: (now: Date) => CampaignCommand,
    meta?: EventMeta,
  ): Promise<CommandResult<CampaignState, CampaignEvent>> {
    return this.campaigns.handle(campaignId, makeCommand, meta ? { meta } : {});
  }
}
