/**
 * The retry dispatcher (seed 003's CampaignRetryDispatcher), a claim sweep run under the lease
 * `sms:retry-dispatcher`: one SMS campaign per transaction (FOR UPDATE SKIP LOCKED), its ready
 * RETRY_PENDING recipients (next_retry_at ≤ the database's now(), SKIP LOCKED, a batch) → PENDING, and
 * `ReleaseRetries` on the campaign in the same transaction (invariant 1): a DISPATCHING campaign goes
 * back to QUEUED, so the campaign claim takes it again with a new epoch and the dispatch sweep submits
 * them (the only place an attempt is counted). The scanner's timer is armed at the earliest
 * next_retry_at. Rows are changed only while still RETRY_PENDING (guarded), so the lease only saves
 * duplicate work (invariant 7).
 */
import {
  lockCampaignsWithDueRetries,
  lockDueRetries,
  nextRetryDueInMs,
  releaseRetries,
} from '../../../adapters/postgres/sms-delivery-queries.js';
import type { CampaignCommand, CampaignEvent, CampaignState } from '../../../domain/campaign.js';
import { type ClaimSweepDefinition, defineClaimSweeper, type SweeperDeps } from '../../../scanner/sweeper.js';
import { campaignAggregate } from '../descriptor.js';

export const SMS_RETRY_LEASE = 'sms:retry-dispatcher';

export interface SmsRetryDeps extends Omit<SweeperDeps, 'batchSize'> {
  /** Recipients released per transaction (default the dispatch batch, 999). */
  batchSize?: number;
}

export function smsRetryDispatcher(deps: SmsRetryDeps) {
  const batchSize = deps.batchSize ?? 999;
  // Recipients locked for the campaign of the transaction in progress (one per transaction).
  let locked = new Map<string, string[]>();
  const definition: ClaimSweepDefinition<CampaignState, CampaignCommand, CampaignEvent> = {
    name: 'campaign.sms-retries',
    aggregate: campaignAggregate,
    actor: 'sms-retry-dispatcher',
    async lockDue(tx, limit) {
      const campaigns = await lockCampaignsWithDueRetries(tx, limit);
      const found = new Map<string, string[]>();
      const due = [];
      for (const { state, version } of campaigns) {
        const ids = await lockDueRetries(tx, state.campaignId, batchSize);
        if (ids.length === 0) continue; // locked by another dispatcher right now
        found.set(state.campaignId, ids);
        due.push({ streamId: state.campaignId, state: state as CampaignState, version });
      }
      locked = found;
      return due;
    },
    command(stream, now) {
      const ids = locked.get(stream.streamId);
      if (!ids) return null;
      return { type: 'ReleaseRetries', campaignId: stream.streamId, now, recipients: ids.length };
    },
    nextDueInMs: (sql) => nextRetryDueInMs(sql),
    async followUp(tx, results) {
      for (const result of results) {
        const ids = locked.get(result.streamId) ?? [];
        const released = await releaseRetries(tx, ids);
        if (released !== ids.length) {
          throw new Error(`campaign ${result.streamId}: retry recipients changed under their row locks`);
        }
      }
      return undefined;
    },
    outcome: (result) => ({
      counter: 'retriesReleased',
      message: `sms retries released (campaign ${result.state.status})`,
      level: 'info',
    }),
  };
  return defineClaimSweeper(definition, { ...deps, batchSize: 1 });
}
