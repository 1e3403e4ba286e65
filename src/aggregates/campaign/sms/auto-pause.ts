/**
 * Auto-pause on error rate (ADR 0019, beyond the seed): a campaign created with `autoPause:
 * {maxFailureRate, window}` is paused when more than `maxFailureRate` of its last `window` rolled-up
 * delivery reports did not end DELIVERED (failed, unconfirmed or retried alike; duplicates the roll-up
 * ignored do not count). The DLR roll-up calls `evaluateAutoPause` inside its transaction right after
 * RecordDeliveryReports, so the measurement and the pause commit with the reports that caused them
 * (invariant 1); the read is bounded (`window` rows on the (campaign_id, rolled_up_at desc) index).
 * The pause is an ordinary PauseCampaign (a DISPATCHING campaign's claim is revoked with a new epoch:
 * no new recipient claims, nothing recalled, nothing refunded) whose event records the measured rate,
 * the window and the threshold; actor `herald:auto-pause`. Resuming is an operator's decision.
 */
import { recentReportOutcomes } from '../../../adapters/postgres/sms-recovery-queries.js';
import type { CampaignEvent, CampaignState } from '../../../domain/campaign.js';
import type { CommandHandler, CommandResult } from '../../../eventstore/command-handler.js';
import type { Logger } from '../../../logger.js';
import type { SqlClient } from '../../../ports/database.js';
import { campaignAggregate } from '../descriptor.js';

export const AUTO_PAUSE_ACTOR = 'herald:auto-pause';

export interface AutoPauseDeps {
  handler: CommandHandler;
  logger?: Logger;
}

/** 0.234 → "23.4%", 0.2 → "20%". */
const percent = (x: number, digits?: number) =>
  `${digits === undefined ? Number((x * 100).toFixed(2)) : (x * 100).toFixed(digits)}%`;

/** The pause reason (also what the event and `herald campaigns show` say). */
export function autoPauseReason(rate: number, window: number, maxFailureRate: number): string {
  return `auto-pause: ${percent(rate, 1)} of the last ${window} delivery reports failed (threshold ${percent(maxFailureRate)})`;
}

/**
 * Pauses the campaign in `tx` when its rule is crossed; returns the pause's result (the caller signals
 * after its commit) or null. `state` is the campaign after RecordDeliveryReports.
 */
export async function evaluateAutoPause(
  tx: SqlClient,
  state: CampaignState,
  deps: AutoPauseDeps,
): Promise<CommandResult<CampaignState, CampaignEvent> | null> {
  if (state.status !== 'QUEUED' && state.status !== 'DISPATCHING') return null;
  const rule = state.sms?.autoPause;
  if (!rule || state.deletedAt !== null) return null;
  const { reports, failed } = await recentReportOutcomes(tx, state.campaignId, rule.window);
  if (reports < rule.window) return null;
  const rate = failed / reports;
  if (!(rate > rule.maxFailureRate)) return null;
  const reason = autoPauseReason(rate, rule.window, rule.maxFailureRate);
  const campaignId = state.campaignId;
  const result = await deps.handler.for(campaignAggregate).handleInTransaction(
    tx,
    campaignId,
    (now) => ({
      type: 'PauseCampaign',
      campaignId,
      now,
      reason,
      auto: { rate, window: rule.window, maxFailureRate: rule.maxFailureRate },
    }),
    { meta: { actor: AUTO_PAUSE_ACTOR } },
  );
  deps.logger?.warn(
    { aggregateId: campaignId, rate, window: rule.window, maxFailureRate: rule.maxFailureRate },
    reason,
  );
  return result;
}
