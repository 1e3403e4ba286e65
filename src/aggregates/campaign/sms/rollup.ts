/**
 * The DLR roll-up (seed 003's CampaignDlrRollupPoller), run by `herald scanner` under the lease
 * `sms:dlr-rollup`: copies stored delivery reports onto the recipient rows and the campaign's counters,
 * per campaign in ONE transaction (invariant 1). A report applies only to the SUBMITTED row with its
 * recipient id and submission id, never by MSISDN; any other is marked 'ignored', so a report arriving
 * twice changes nothing (invariant 4). Failed recipients that owe a refund are refunded after the commit;
 * submissions whose outbox row went dead get synthetic SEND_FAILED reports. Correctness rests on row locks
 * and guarded statements; the lease only keeps one replica at the work (invariant 7). ADR 0019.
 */
import {
  type AppliedReport,
  applyReports,
  campaignsWithUnrolledReports,
  insertSendFailedReports,
  lockReportedRecipients,
  lockUnrolledReports,
  markReportsRolledUp,
  owedRefunds,
} from '../../../adapters/postgres/sms-delivery-queries.js';
import type { CampaignEvent, CampaignState } from '../../../domain/campaign.js';
import { type DeliveryPolicy, decideReport, type ReportStatus } from '../../../domain/sms/delivery.js';
import { addMoney, ZERO_MONEY } from '../../../domain/sms/money.js';
import { errorMessage } from '../../../errors.js';
import { type CommandHandler, type CommandResult, databaseNow } from '../../../eventstore/command-handler.js';
import type { Logger } from '../../../logger.js';
import type { Database } from '../../../ports/database.js';
import type { WakeupSignal } from '../../../ports/wakeups.js';
import type { Sweeper, SweepResult } from '../../../scanner/scanner.js';
import { campaignAggregate, campaignStore } from '../descriptor.js';
import { evaluateAutoPause } from './auto-pause.js';
import type { BillingPort } from './billing.js';
import { refundRecipients } from './refunds.js';
import type { SmsSettings } from './settings.js';

export const SMS_ROLLUP_LEASE = 'sms:dlr-rollup';

export type RollupSettings = Pick<
  SmsSettings,
  'maxAttempts' | 'retryMs' | 'retryJitterMs' | 'retryableCodes' | 'rollupBatchSize' | 'sink' | 'submitTopic'
>;

export interface SmsRollupDeps {
  db: Database;
  handler: CommandHandler;
  billing: BillingPort;
  logger: Logger;
  wakeups?: WakeupSignal | undefined;
  settings: RollupSettings;
  /** The retry jitter's randomness (tests inject it). */
  random?: () => number;
  /**
   * The relay's recovery rounds (HERALD_RELAY_RECOVERY_MAX_ROUNDS): a dead submission is a send
   * failure once they are used up (default 0: as soon as it is dead).
   */
  relayRecoveryRounds?: number;
  /** Campaigns rolled up per sweep call (default 50). */
  campaignsPerSweep?: number;
}

export interface CampaignRollup {
  campaignId: string;
  /** Reports handled (applied or ignored). */
  reports: number;
  applied: number;
  ignored: number;
  /** The batch was full: more reports may be waiting. */
  full: boolean;
  status: string | null;
  refunded: number;
}

export interface SmsRollup extends Sweeper {
  readonly stats: Record<string, number>;
  /** One batch of one campaign (tests drive it directly). */
  rollUpCampaign(campaignId: string): Promise<CampaignRollup>;
}

export function policyOf(settings: RollupSettings): DeliveryPolicy {
  return {
    maxAttempts: settings.maxAttempts,
    retryMs: settings.retryMs,
    jitterMs: settings.retryJitterMs,
    retryableCodes: settings.retryableCodes,
  };
}

export function smsRollupSweeper(deps: SmsRollupDeps): SmsRollup {
  const policy = policyOf(deps.settings);
  const random = deps.random ?? Math.random;
  const commands = deps.handler.for(campaignAggregate);
  const logger = deps.logger.child({ sweeper: 'campaign.sms-rollup' });
  const stats: Record<string, number> = {
    reportsApplied: 0,
    reportsIgnored: 0,
    sendFailedReports: 0,
    rollupsRefused: 0,
    refunded: 0,
  };

  async function rollUpCampaign(campaignId: string): Promise<CampaignRollup> {
    const batch = await deps.db.transaction(async (tx) => {
      const loaded = await campaignStore.load(tx, campaignId, { forUpdate: true });
      const reports = await lockUnrolledReports(tx, campaignId, deps.settings.rollupBatchSize);
      if (reports.length === 0) return null;
      const state = loaded?.state;
      const campaign = state && state.status !== 'NONE' && state.sms !== null ? state : null;
      const rows = campaign
        ? await lockReportedRecipients(tx, campaignId, [...new Set(reports.map((r) => r.recipientId))])
        : [];
      const byId = new Map(rows.map((r) => [r.id, r]));
      const now = (await databaseNow(tx)).getTime();
      const seen = new Set<string>();
      const applied: (AppliedReport & { cost: string })[] = [];
      const outcomes: { dlrId: string; outcome: string }[] = [];
      for (const report of reports) {
        const row = byId.get(report.recipientId);
        if (
          !campaign ||
          !row ||
          row.status !== 'SUBMITTED' ||
          row.submissionId !== report.submissionId ||
          seen.has(row.id)
        ) {
          outcomes.push({ dlrId: report.dlrId, outcome: 'ignored' });
          continue;
        }
        seen.add(row.id);
        const decision = decideReport(
          { status: report.status as ReportStatus, errorCode: report.errorCode },
          row,
          campaign.status,
          policy,
          now,
          random,
        );
        outcomes.push({ dlrId: report.dlrId, outcome: decision.status });
        applied.push({
          id: row.id,
          submissionId: report.submissionId,
          status: decision.status,
          dlrStatus: report.status,
          dlrCode: report.errorCode,
          failureClass: decision.status === 'DELIVERED' ? null : decision.failureClass,
          unconfirmed: decision.status === 'FAILED' && decision.unconfirmed,
          nextRetryAt: decision.status === 'RETRY_PENDING' ? new Date(decision.nextRetryAt) : null,
          refundRequired: decision.status === 'FAILED' && decision.refundRequired,
          cost: row.cost,
        });
      }
      const changed = await applyReports(tx, applied);
      if (changed.size !== applied.length) {
        throw new Error(`campaign ${campaignId}: recipients changed under their row locks`);
      }
      await markReportsRolledUp(tx, outcomes);
      let result: CommandResult<CampaignState, CampaignEvent> | null = null;
      let paused: CommandResult<CampaignState, CampaignEvent> | null = null;
      if (applied.length > 0) {
        const counts = {
          delivered: 0,
          deliveredCost: ZERO_MONEY,
          failed: 0,
          failedCost: ZERO_MONEY,
          unconfirmed: 0,
          unconfirmedCost: ZERO_MONEY,
          retryPending: 0,
        };
        for (const a of applied) {
          if (a.status === 'DELIVERED') {
            counts.delivered++;
            counts.deliveredCost = addMoney(counts.deliveredCost, a.cost);
          } else if (a.status === 'FAILED') {
            counts.failed++;
            counts.failedCost = addMoney(counts.failedCost, a.cost);
            if (a.unconfirmed) {
              counts.unconfirmed++;
              counts.unconfirmedCost = addMoney(counts.unconfirmedCost, a.cost);
            }
          } else counts.retryPending++;
        }
        result = await commands.handleInTransaction(
          tx,
          campaignId,
          (at) => ({ type: 'RecordDeliveryReports', campaignId, now: at, ...counts }),
          { meta: { actor: 'sms-rollup' } },
        );
        // Auto-pause on error rate, in the roll-up transaction (the pause commits with its reports).
        paused = await evaluateAutoPause(tx, result.state, { handler: deps.handler, logger });
      }
      return {
        result: paused ?? result,
        reports: reports.length,
        applied: applied.length,
        refundIds: applied.filter((a) => a.refundRequired).map((a) => a.id),
      };
    });
    if (!batch) {
      return { campaignId, reports: 0, applied: 0, ignored: 0, full: false, status: null, refunded: 0 };
    }
    if (batch.result) commands.signalAfterCommit([batch.result], deps.wakeups);
    stats.reportsApplied! += batch.applied;
    stats.reportsIgnored! += batch.reports - batch.applied;
    let refunded = 0;
    if (batch.refundIds.length > 0) {
      const owed = await owedRefunds(deps.db, { ids: batch.refundIds, limit: batch.refundIds.length });
      refunded = (await refundRecipients({ ...deps, logger }, owed, 'recipient failed')).refunded;
      stats.refunded! += refunded;
    }
    const status = batch.result ? batch.result.state : null;
    return {
      campaignId,
      reports: batch.reports,
      applied: batch.applied,
      ignored: batch.reports - batch.applied,
      full: batch.reports === deps.settings.rollupBatchSize,
      status: status && status.status !== 'NONE' ? status.status : null,
      refunded,
    };
  }

  return {
    name: 'campaign.sms-rollup',
    stats,
    rollUpCampaign,
    async sweep(): Promise<SweepResult> {
      stats.sendFailedReports! += await insertSendFailedReports(deps.db, {
        sink: deps.settings.sink,
        topic: deps.settings.submitTopic,
        recoveryRounds: deps.relayRecoveryRounds ?? 0,
      });
      const campaigns = await campaignsWithUnrolledReports(deps.db, deps.campaignsPerSweep ?? 50);
      let processed = 0;
      let more = false;
      for (const campaignId of campaigns) {
        try {
          const rolled = await rollUpCampaign(campaignId);
          processed += rolled.reports;
          more ||= rolled.full;
        } catch (error) {
          // One campaign's failure (a refused command, a lock timeout) leaves its reports for the
          // next pass and does not hold back the others.
          stats.rollupsRefused!++;
          logger.error(
            { aggregateId: campaignId, err: error },
            `sms roll-up of campaign ${campaignId} failed: ${errorMessage(error)}`,
          );
        }
      }
      const full = campaigns.length === (deps.campaignsPerSweep ?? 50);
      return { processed, more: processed > 0 && (more || full) };
    },
    // Woken by the DLR consumer's NOTIFY and the scanner's poll; nothing is due at a known time.
    nextDueInMs: () => Promise.resolve(null),
  };
}
