/**
 * The campaign's sweeps (seed 000's ProcessCampaign, made durable), as definitions of the generic
 * sweepers (src/scanner/sweeper.ts):
 * - claim: due campaigns (SCHEDULED at or past startAt, or QUEUED) → DISPATCHING with a new epoch and
 *   one outbox message each (invariant 1); a SCHEDULED campaign past its dispatch deadline expires
 *   instead.
 * - settle cancellations: a CANCELLING campaign with nothing left to refund becomes CANCELLED (today
 *   every one: no per-recipient charges exist yet; a LINE cancellation settles in its own command).
 * - recover (the reaper): a DISPATCHING campaign with no sign of life for the stale window whose claim
 *   message is no longer in flight goes back to QUEUED with a new epoch (invariant 5: the presumed-dead
 *   holder's late message is then discarded at the destination), and the next claim takes it at once.
 */
import {
  findStaleClaims,
  lockCancellingCampaigns,
  lockDueCampaigns,
  lockStaleClaims,
  nextCampaignDueInMs,
} from '../../adapters/postgres/campaign-queries.js';
import type { CampaignCommand, CampaignEvent, CampaignState } from '../../domain/campaign.js';
import type { LoadedStream } from '../../eventstore/aggregate.js';
import {
  type ClaimSweepDefinition,
  defineClaimSweeper,
  defineStaleRecovery,
  type StaleRecoveryDefinition,
  type StaleRecoverySettings,
  type SweeperDeps,
  sweepInOrder,
} from '../../scanner/sweeper.js';
import { campaignAggregate, claimMessageIds } from './descriptor.js';

/** Seed 000: a DISPATCHING campaign whose heartbeat is older than 15 minutes is presumed dead. */
export const DEFAULT_STALE_CLAIM_MS = 15 * 60_000;

function streamOf(loaded: { state: CampaignState; version: number }): LoadedStream<CampaignState> {
  const streamId = loaded.state.status === 'NONE' ? '' : loaded.state.campaignId;
  return { streamId, state: loaded.state, version: loaded.version };
}

const epochOf = (state: CampaignState) => (state.status === 'NONE' ? undefined : state.claimEpoch);

export const campaignClaimSweep: ClaimSweepDefinition<CampaignState, CampaignCommand, CampaignEvent> = {
  name: 'campaign.claim',
  aggregate: campaignAggregate,
  actor: 'scanner',
  lockDue: async (tx, limit) => (await lockDueCampaigns(tx, limit)).map(streamOf),
  command(stream, now) {
    const s = stream.state;
    const pastDeadline =
      s.status === 'SCHEDULED' &&
      s.dispatchDeadline !== null &&
      Date.parse(s.dispatchDeadline) < now.getTime();
    // An SMS campaign's expiry withdraws and refunds its unsent recipients: the sms:recovery poller's.
    if (pastDeadline && s.status === 'SCHEDULED' && s.sms !== null) return null;
    return pastDeadline
      ? { type: 'ExpireCampaign', campaignId: stream.streamId, now }
      : { type: 'ClaimCampaign', campaignId: stream.streamId, now };
  },
  nextDueInMs: nextCampaignDueInMs,
  outcome: (result) =>
    result.state.status === 'EXPIRED'
      ? { counter: 'expired', message: 'campaign expired: dispatch deadline passed', level: 'info' }
      : { counter: 'claimed', message: `campaign claimed (epoch ${epochOf(result.state)})`, level: 'info' },
};

export const campaignCancellationSettlement: ClaimSweepDefinition<
  CampaignState,
  CampaignCommand,
  CampaignEvent
> = {
  name: 'campaign.settle-cancellations',
  aggregate: campaignAggregate,
  actor: 'scanner',
  lockDue: async (tx, limit) => (await lockCancellingCampaigns(tx, limit)).map(streamOf),
  command: (stream, now) => ({ type: 'SettleCancellation', campaignId: stream.streamId, now }),
  outcome: () => ({
    counter: 'cancelled',
    message: 'campaign cancellation settled: nothing to refund',
    level: 'info',
  }),
};

export const campaignStaleRecovery: StaleRecoveryDefinition<CampaignState, CampaignCommand, CampaignEvent> = {
  name: 'campaign.recover',
  aggregate: campaignAggregate,
  actor: 'reaper',
  findStale: async (sql, { staleAfterMs, limit }) =>
    (await findStaleClaims(sql, staleAfterMs, limit)).map(streamOf),
  lockStale: async (tx, found, staleAfterMs) =>
    (await lockStaleClaims(tx, found, staleAfterMs)).map(streamOf),
  claimMessageIds,
  command: (stream, now, staleAfterMs) => ({
    type: 'ReclaimCampaign',
    campaignId: stream.streamId,
    now,
    staleAfterMs,
    reason: `no heartbeat for ${Math.round(staleAfterMs / 1000)} s and no message in flight: claiming worker presumed dead`,
  }),
  outcome: (result) => ({
    counter: 'reclaimed',
    message: `reclaimed stale campaign (epoch ${epochOf(result.state)})`,
    level: 'warn',
  }),
};

export interface CampaignSweeperOptions extends Omit<SweeperDeps, 'batchSize'> {
  /** Campaigns claimed per transaction (seed 002/003 use 500). */
  batchSize?: number;
  /** Seed 000: 15 minutes. */
  staleClaimMs?: number;
  messageLostAfterMs?: number;
  maxReclaimsPerPass?: number;
}

/** The campaign's sweeper: claim, settle cancellations, then stale recovery, in one sweep. */
export function campaignSweeper(options: CampaignSweeperOptions) {
  const deps: SweeperDeps = { ...options, batchSize: options.batchSize ?? 500 };
  const settings: StaleRecoverySettings = {
    staleAfterMs: options.staleClaimMs ?? DEFAULT_STALE_CLAIM_MS,
    messageLostAfterMs: options.messageLostAfterMs ?? 24 * 3_600_000,
    maxReclaimsPerPass: options.maxReclaimsPerPass ?? 100,
  };
  const claim = defineClaimSweeper(campaignClaimSweep, deps);
  const settle = defineClaimSweeper(campaignCancellationSettlement, deps);
  const recover = defineStaleRecovery(campaignStaleRecovery, deps, settings);
  return Object.assign(sweepInOrder('campaign', claim, settle, recover), { claim, settle, recover });
}
