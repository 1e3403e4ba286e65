/**
 * The `sms:recovery` poller (`herald scanner`, under its lease) finishes what SMS campaigns leave behind:
 * cancellation and expiry (unsent recipients withdrawn, refunded under `cancel:` / `expire:` keys, then
 * recorded), stale DRAFT (charge reversed, FAILED; the row stays locked across the reversal, so a creation
 * still on its way cannot activate it), stale BUILDING, stale DISPATCHING (requeued: its unsent rows were
 * never published) and DLR timeouts (a synthetic report). Each campaign is its own transaction, so a
 * poisoned one is skipped; billing keys make every step safe to repeat (invariant 9), and every write is
 * guarded, so the lease only cuts work (invariant 7). ADR 0019.
 */
import { randomUUID } from 'node:crypto';
import { deleteRecipients } from '../../../adapters/postgres/sms-queries.js';
import {
  failUpload,
  findDlrTimeoutCampaigns,
  findRecoverable,
  insertDlrTimeoutReports,
  lockRecoverable,
  type SmsRecoveryStep,
  withdrawUnsentRecipients,
} from '../../../adapters/postgres/sms-recovery-queries.js';
import {
  type CampaignCommand,
  type CampaignEvent,
  type CampaignState,
  campaignChargeKey,
  type ExistingCampaign,
  unsent,
  withdrawalKey,
} from '../../../domain/campaign.js';
import { toUnits } from '../../../domain/sms/money.js';
import { errorMessage } from '../../../errors.js';
import type { LoadedStream } from '../../../eventstore/aggregate.js';
import type {
  AggregateCommands,
  CommandHandler,
  CommandResult,
} from '../../../eventstore/command-handler.js';
import type { Logger } from '../../../logger.js';
import type { Database, SqlClient } from '../../../ports/database.js';
import { channels, type WakeupSignal } from '../../../ports/wakeups.js';
import type { RequiredLease } from '../../../registry/module.js';
import { leasedSweeper } from '../../../scanner/leased-sweeper.js';
import type { Sweeper, SweepResult } from '../../../scanner/scanner.js';
import type { CountingSweeper } from '../../../scanner/sweeper.js';
import { campaignAggregate } from '../descriptor.js';
import type { CampaignContext } from '../ports.js';
import type { BillingPort } from './billing.js';
import type { SmsSettings } from './settings.js';

export const SMS_RECOVERY_LEASE = 'sms:recovery';
export const SMS_RECOVERY_ACTOR = 'sms-recovery';
/** Synthetic DLR-timeout reports written per campaign per pass (the roll-up takes them in its batches). */
export const DLR_TIMEOUT_BATCH = 5_000;

export type SmsRecoverySettings = Pick<
  SmsSettings,
  'draftStaleMs' | 'buildingStaleMs' | 'dispatchingStaleMs' | 'cancellingStaleMs' | 'dlrTimeoutMs'
>;

export interface SmsRecoveryDeps {
  db: Database;
  handler: CommandHandler;
  logger: Logger;
  billing: BillingPort;
  settings: SmsRecoverySettings;
  wakeups?: WakeupSignal;
  /** Campaigns examined per step per call. */
  batchSize?: number;
}

/** What one step did in one call. */
export interface StepResult {
  /** Campaigns changed. */
  processed: number;
  /** Campaigns whose recovery threw (logged and skipped). */
  failed: number;
  /** The step found a full batch: call again. */
  more: boolean;
}

type Campaigns = AggregateCommands<CampaignState, CampaignCommand, CampaignEvent>;

export const NEXT_SMS_DEADLINE_IN_MS = `
  select (extract(epoch from (min(dispatch_deadline) - now())) * 1000)::float8 as due_in_ms
    from campaign where status = 'SCHEDULED' and channel = 'sms' and sms is not null and dispatch_deadline is not null`;

export class SmsRecovery {
  private readonly campaigns: Campaigns;
  private readonly logger: Logger;
  private readonly batchSize: number;
  readonly stats: Record<string, number> = {};

  constructor(private readonly deps: SmsRecoveryDeps) {
    this.campaigns = deps.handler.for(campaignAggregate);
    this.logger = deps.logger.child({ sweeper: SMS_RECOVERY_LEASE });
    this.batchSize = deps.batchSize ?? 100;
  }

  /** Every step once, in order: what changes money first. */
  async runAll(): Promise<SweepResult> {
    let processed = 0;
    let more = false;
    for (const step of [
      () => this.cancellations(),
      () => this.expiries(),
      () => this.expiredRefunds(),
      () => this.staleDrafts(),
      () => this.staleBuilds(),
      () => this.staleDispatching(),
      () => this.dlrTimeouts(),
    ]) {
      const r = await step();
      processed += r.processed;
      more ||= r.more;
    }
    return { processed, more };
  }

  /** CANCELLING charged SMS campaigns: withdraw, refund, settle. */
  cancellations(): Promise<StepResult> {
    return this.each('cancelling', this.deps.settings.cancellingStaleMs, async (found) => {
      let state = found.state as ExistingCampaign;
      if (state.sms?.withdrawal == null) {
        const withdrawn = await this.deps.db.transaction(async (tx) => {
          const locked = await this.lock(tx, 'cancelling', this.deps.settings.cancellingStaleMs, found);
          if (!locked) return null;
          return this.withdraw(tx, locked.state as ExistingCampaign, 'cancelled');
        });
        if (!withdrawn) return false;
        this.campaigns.signalAfterCommit([withdrawn], this.deps.wakeups);
        this.count('withdrawn');
        state = withdrawn.state as ExistingCampaign;
      }
      await this.refundWithdrawal(state, { settle: true });
      return true;
    });
  }

  /** SCHEDULED SMS campaigns past their dispatch deadline: EXPIRED, unsent withdrawn, refunded. */
  expiries(): Promise<StepResult> {
    return this.each('expiring', 0, async (found) => {
      const expired = await this.deps.db.transaction(async (tx) => {
        const locked = await this.lock(tx, 'expiring', 0, found);
        if (!locked) return null;
        const id = locked.state.campaignId;
        await this.campaigns.handleInTransaction(
          tx,
          id,
          (now) => ({ type: 'ExpireCampaign', campaignId: id, now }),
          { meta: { actor: SMS_RECOVERY_ACTOR } },
        );
        const reloaded = await campaignAggregate.store.load(tx, id, { forUpdate: true });
        return this.withdraw(tx, reloaded!.state as ExistingCampaign, 'expired');
      });
      if (!expired) return false;
      this.campaigns.signalAfterCommit([expired], this.deps.wakeups);
      this.count('expired');
      await this.refundWithdrawal(expired.state as ExistingCampaign, { settle: false });
      return true;
    });
  }

  /** EXPIRED SMS campaigns whose withdrawal refund failed earlier: the same refund, the same key. */
  expiredRefunds(): Promise<StepResult> {
    return this.each('expiredRefund', this.deps.settings.cancellingStaleMs, async (found) => {
      await this.refundWithdrawal(found.state as ExistingCampaign, { settle: false });
      return true;
    });
  }

  /** DRAFT SMS campaigns older than the window: the charge reversed by its key, then FAILED, recipients cleared. */
  staleDrafts(): Promise<StepResult> {
    const windowMs = this.deps.settings.draftStaleMs;
    return this.each('staleDraft', windowMs, async (found) => {
      const failed = await this.deps.db.transaction(async (tx) => {
        const locked = await this.lock(tx, 'staleDraft', windowMs, found);
        if (!locked) return null;
        const s = locked.state as ExistingCampaign;
        const minutes = Math.round(windowMs / 60_000);
        // Inside the row lock: a creation still on its way cannot activate this campaign after the
        // reversal (its ActivateCampaign waits for the lock and then finds the campaign FAILED).
        await this.deps.billing.reverse(
          s.organizationId,
          campaignChargeKey(s.campaignId),
          `sms draft not activated within ${minutes} min (stale recovery)`,
        );
        await deleteRecipients(tx, s.campaignId);
        return this.campaigns.handleInTransaction(
          tx,
          s.campaignId,
          (now) => ({
            type: 'FailCampaign',
            campaignId: s.campaignId,
            now,
            reason: `not activated within ${minutes} min: the charge was reversed by its key`,
            clearRecipients: true,
          }),
          { meta: { actor: SMS_RECOVERY_ACTOR } },
        );
      });
      if (!failed) return false;
      this.count('staleDraftFailed');
      return true;
    });
  }

  /** BUILDING SMS campaigns, uncharged and without saved recipients, older than the window: FAILED. */
  staleBuilds(): Promise<StepResult> {
    const windowMs = this.deps.settings.buildingStaleMs;
    return this.each('staleBuilding', windowMs, async (found) => {
      const failed = await this.deps.db.transaction(async (tx) => {
        const locked = await this.lock(tx, 'staleBuilding', windowMs, found);
        if (!locked) return null;
        const id = locked.state.campaignId;
        const reason = `the CSV build did not save any recipient within ${Math.round(windowMs / 60_000)} min: upload the file again`;
        await failUpload(tx, id, reason);
        return this.campaigns.handleInTransaction(
          tx,
          id,
          (now) => ({ type: 'FailCampaign', campaignId: id, now, reason }),
          { meta: { actor: SMS_RECOVERY_ACTOR } },
        );
      });
      if (!failed) return false;
      this.count('staleBuildFailed');
      return true;
    });
  }

  /**
   * DISPATCHING SMS campaigns without a batch or a report for the window: with unsent recipients left,
   * back to QUEUED (a new epoch at the next claim). Without, the roll-up (and the DLR timeout) finish them.
   */
  staleDispatching(): Promise<StepResult> {
    const windowMs = this.deps.settings.dispatchingStaleMs;
    return this.each('staleDispatching', windowMs, async (found) => {
      if (unsent((found.state as ExistingCampaign).sms) === 0) return false;
      const requeued = await this.deps.db.transaction(async (tx) => {
        const locked = await this.lock(tx, 'staleDispatching', windowMs, found);
        if (!locked || unsent((locked.state as ExistingCampaign).sms) === 0) return null;
        const id = locked.state.campaignId;
        return this.campaigns.handleInTransaction(
          tx,
          id,
          (now) => ({
            type: 'RequeueCampaign',
            campaignId: id,
            now,
            reason: `no dispatch progress for ${Math.round(windowMs / 60_000)} min: unsent recipients queued again`,
          }),
          { meta: { actor: SMS_RECOVERY_ACTOR } },
        );
      });
      if (!requeued) return false;
      this.campaigns.signalAfterCommit([requeued], this.deps.wakeups);
      this.count('requeued');
      return true;
    });
  }

  /** Recipients SUBMITTED longer than the DLR timeout: synthetic NOT_AVAILABLE reports for the roll-up. */
  async dlrTimeouts(): Promise<StepResult> {
    const { dlrTimeoutMs } = this.deps.settings;
    const ids = await findDlrTimeoutCampaigns(this.deps.db, dlrTimeoutMs, this.batchSize);
    let processed = 0;
    let failed = 0;
    let reports = 0;
    for (const id of ids) {
      try {
        const n = await insertDlrTimeoutReports(this.deps.db, id, dlrTimeoutMs, DLR_TIMEOUT_BATCH);
        reports += n;
        if (n > 0) processed++;
      } catch (error) {
        failed++;
        this.poisoned('dlrTimeout', id, error);
      }
    }
    if (reports > 0) {
      this.count('dlrTimeoutReports', reports);
      this.logger.warn({ reports, campaigns: processed }, 'sms: synthetic DLR_TIMEOUT reports written');
      this.deps.wakeups?.signal(channels.due(this.deps.db.schema));
    }
    return { processed, failed, more: ids.length === this.batchSize };
  }

  async nextDueInMs(): Promise<number | null> {
    const { rows } = await this.deps.db.query<{ due_in_ms: number | null }>(NEXT_SMS_DEADLINE_IN_MS);
    const due = rows[0]?.due_in_ms ?? null;
    // Expiry is strictly after the deadline: wake just past it.
    return due === null ? null : Math.max(0, due + 1);
  }

  // ─── internals ──────────────────────────────────────────────────────────────────────────────────

  /** Runs `one` for each campaign the step finds, each on its own; a throw is logged and skipped. */
  private async each(
    step: Exclude<SmsRecoveryStep, 'dlrTimeout'>,
    windowMs: number,
    one: (found: LoadedStream<CampaignState>) => Promise<boolean>,
  ): Promise<StepResult> {
    const found = (await findRecoverable(this.deps.db, step, windowMs, this.batchSize)).map(
      ({ state, version }): LoadedStream<CampaignState> => ({ streamId: state.campaignId, state, version }),
    );
    let processed = 0;
    let failed = 0;
    for (const stream of found) {
      try {
        if (await one(stream)) processed++;
      } catch (error) {
        failed++;
        this.poisoned(step, stream.streamId, error);
      }
    }
    return { processed, failed, more: found.length === this.batchSize && processed > 0 };
  }

  private async lock(
    tx: SqlClient,
    step: Exclude<SmsRecoveryStep, 'dlrTimeout'>,
    windowMs: number,
    found: LoadedStream<CampaignState>,
  ) {
    return lockRecoverable(tx, step, windowMs, found.streamId, found.version);
  }

  /** Rows PENDING/DEFERRED/RETRY_PENDING → CANCELLED and WithdrawUnsent with their count and summed cost. */
  private async withdraw(
    tx: SqlClient,
    state: ExistingCampaign,
    reason: 'cancelled' | 'expired',
  ): Promise<CommandResult<CampaignState, CampaignEvent>> {
    const id = state.campaignId;
    const rows = await withdrawUnsentRecipients(tx, id);
    return this.campaigns.handleInTransaction(
      tx,
      id,
      (now) => ({
        type: 'WithdrawUnsent',
        campaignId: id,
        now,
        reason,
        recipients: rows.recipients,
        amount: rows.amount,
        key: withdrawalKey(id, reason, state.resendAttempt),
      }),
      { meta: { actor: SMS_RECOVERY_ACTOR } },
    );
  }

  /**
   * The withdrawal's refund with its stable key (nothing to call for a zero amount), then in one
   * transaction RecordWithdrawalRefund and, for a cancellation, SettleCancellation → CANCELLED.
   */
  private async refundWithdrawal(state: ExistingCampaign, options: { settle: boolean }): Promise<void> {
    const id = state.campaignId;
    const withdrawal = state.sms?.withdrawal;
    if (!withdrawal) throw new Error(`campaign ${id} has no withdrawal to refund`);
    if (withdrawal.refundedAt === null && toUnits(withdrawal.amount) > 0) {
      await this.deps.billing.refund({
        organizationId: state.organizationId,
        key: withdrawal.key,
        amount: withdrawal.amount,
        reason: `${withdrawal.recipients} unsent recipients of sms campaign ${id} ${withdrawal.reason}`,
      });
    }
    const results = await this.deps.db.transaction(async (tx) => {
      const current = await campaignAggregate.store.load(tx, id, { forUpdate: true });
      const s = current?.state;
      if (!s || s.status === 'NONE' || !s.sms?.withdrawal) return [];
      const done: CommandResult<CampaignState, CampaignEvent>[] = [];
      const meta = { meta: { actor: SMS_RECOVERY_ACTOR } };
      if (s.sms.withdrawal.refundedAt === null) {
        done.push(
          await this.campaigns.handleInTransaction(
            tx,
            id,
            (now) => ({
              type: 'RecordWithdrawalRefund',
              campaignId: id,
              now,
              key: withdrawal.key,
              amount: withdrawal.amount,
            }),
            meta,
          ),
        );
      }
      if (options.settle && s.status === 'CANCELLING') {
        done.push(
          await this.campaigns.handleInTransaction(
            tx,
            id,
            (now) => ({ type: 'SettleCancellation', campaignId: id, now }),
            meta,
          ),
        );
      }
      return done;
    });
    this.campaigns.signalAfterCommit(results, this.deps.wakeups);
    if (results.length > 0) {
      this.count(options.settle ? 'cancelled' : 'withdrawalRefunded');
      this.logger.info(
        {
          aggregateId: id,
          key: withdrawal.key,
          amount: withdrawal.amount,
          recipients: withdrawal.recipients,
        },
        options.settle
          ? 'sms cancellation settled: unsent recipients refunded'
          : 'sms expiry: unsent recipients refunded',
      );
    }
  }

  private count(counter: string, n = 1): void {
    this.stats[counter] = (this.stats[counter] ?? 0) + n;
  }

  private poisoned(step: string, campaignId: string, error: unknown): void {
    this.count('poisoned');
    this.logger.error(
      { aggregateId: campaignId, err: error, step },
      `sms recovery (${step}) failed for one campaign, skipped: ${errorMessage(error)}`,
    );
  }
}

/** The recovery as a sweeper of `herald scanner` (to be wrapped by the `sms:recovery` lease). */
export function smsRecoverySweeper(deps: SmsRecoveryDeps): CountingSweeper & { recovery: SmsRecovery } {
  const recovery = new SmsRecovery(deps);
  return {
    name: 'campaign.sms-recovery',
    recovery,
    get stats() {
      return recovery.stats;
    },
    sweep: () => recovery.runAll(),
    nextDueInMs: () => recovery.nextDueInMs(),
  };
}

export const SMS_RECOVERY_LEASES: readonly RequiredLease[] = [
  {
    name: SMS_RECOVERY_LEASE,
    role: 'scanner',
    description: 'SMS cancellation settlement, expiry, stale recovery and DLR timeouts',
  },
];

/** The scanner's `sms:recovery` poller, under its lease (TTL HERALD_SMS_LEASE_TTL_SECONDS). */
export function smsRecoverySweepers({
  config,
  db,
  handler,
  logger,
  wakeups,
  ports,
}: CampaignContext): Sweeper[] {
  const owner = `${config.pod}:${randomUUID().slice(0, 8)}`;
  return [
    leasedSweeper(
      smsRecoverySweeper({
        db,
        handler,
        logger,
        billing: ports.billing,
        settings: config.sms,
        ...(wakeups ? { wakeups } : {}),
        batchSize: config.scanner.batchSize,
      }),
      { db, lease: SMS_RECOVERY_LEASE, owner, ttlMs: config.sms.leaseTtlMs, logger },
    ),
  ];
}
