/**
 * The Campaign aggregate: one lifecycle (seed 003's superset) for whole-campaign LINE broadcasts /
 * multicasts (seed 000) and per-recipient SMS campaigns (seed 003). Pure decider: commands carry
 * `now`, events are plain JSON, state is a union keyed on `status`. Upholds invariant 5 (every claim
 * and every revocation of a live claim changes `claimEpoch`; commands from a claim must carry the
 * current epoch) and invariant 8 (`evolve` folds a stream into exactly its state row).
 * Decisions: docs/decisions/0003-campaign-lifecycle.md.
 */
import { IllegalStateError } from '../errors.js';
import type { CampaignCommand } from './campaign/commands.js';
import { decideCampaign } from './campaign/decide.js';
import type { CampaignEvent } from './campaign/events.js';
import {
  type CampaignState,
  type ExistingCampaign,
  evolveCampaign,
  initialCampaignState,
} from './campaign/state.js';
import type { Decider } from './decider.js';

export * from './campaign/commands.js';
export { decideCampaign } from './campaign/decide.js';
export * from './campaign/events.js';
export * from './campaign/operations.js';
export * from './campaign/sms.js';
export * from './campaign/state.js';
export * from './campaign/status.js';

export const CAMPAIGN_STREAM_TYPE = 'campaign';

export const campaignDecider: Decider<CampaignState, CampaignCommand, CampaignEvent> = {
  decide: decideCampaign,
  evolve: evolveCampaign,
  initialState: initialCampaignState,
};

/** Seed 000's delivery queues, spelled exactly as the existing LINE workers consume them. */
export const LINE_BROADCAST_QUEUE = 'line_broadcast_rich_message';
export const LINE_MULTICAST_QUEUE = 'line_multicast_rich_message';
export type LineCampaignDestination = typeof LINE_BROADCAST_QUEUE | typeof LINE_MULTICAST_QUEUE;

/**
 * Where a LINE campaign's single dispatch message goes: broadcasts to line_broadcast_rich_message,
 * everything else to line_multicast_rich_message (seed 000). SMS campaigns are dispatched in
 * recipient batches and have no whole-campaign destination: asking for one is a programming error.
 */
export function campaignDestination(
  state: Pick<ExistingCampaign, 'campaignId' | 'channel' | 'castType'>,
): LineCampaignDestination {
  if (state.channel !== 'line') {
    throw new IllegalStateError(
      `campaign ${state.campaignId} is an ${state.channel} campaign: no LINE destination`,
      {
        campaignId: state.campaignId,
        channel: state.channel,
      },
    );
  }
  return state.castType === 'broadcast' ? LINE_BROADCAST_QUEUE : LINE_MULTICAST_QUEUE;
}
