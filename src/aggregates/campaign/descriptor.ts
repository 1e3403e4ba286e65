/**
 * The campaign aggregate's descriptor: the pure decider, its state table (the inline projection and
 * the mapping replay, verify and the sandbox use), the outbox messages its events cause, and when a
 * campaign is due (QUEUED now, SCHEDULED at its startAt). A claim of a LINE campaign causes
 * exactly one message to line_broadcast_rich_message / line_multicast_rich_message carrying the
 * claim's epoch (invariant 5: the destination accepts it only while the campaign is DISPATCHING
 * with that epoch). Written in the claim's transaction (invariant 1), published by the relay only.
 */

import { campaignTable } from '../../adapters/postgres/campaign-queries.js';
import { tableBackedState } from '../../adapters/postgres/state-table.js';
import {
  CAMPAIGN_STREAM_TYPE,
  type CampaignChannel,
  type CampaignCommand,
  type CampaignEvent,
  type CampaignState,
  type CastType,
  campaignDecider,
  campaignDestination,
  parseCampaignEvent,
} from '../../domain/campaign.js';
import { ValidationError } from '../../errors.js';
import type { ClaimedAggregate } from '../../eventstore/aggregate.js';
import { HEADER } from '../../messaging/headers.js';
import { derivedMessageId, type OutboxMessageSpec } from '../../outbox/outbox-writer.js';
import type { StateStore } from '../../ports/state-store.js';
import { completionNoticesFor, smsSinkOf } from './sms/completion-notice.js';
import { LINE_DELIVERY_STREAM_TYPE } from './topology.js';

/** The payload seed 000's LINE delivery workers consume, plus the fencing epoch. */
export interface LineDispatchPayload {
  campaignId: string;
  audienceId: string | null;
  organizationId: string;
  lineOaId: string | null;
  castType: CastType;
  epoch: number;
}

/** Dispatch messages outrank reporting-style traffic (seed 003: priorities 1–3 vs 5). */
export const DISPATCH_PRIORITY = 1;

const campaignState = tableBackedState<CampaignState, CampaignEvent>(campaignTable, parseCampaignEvent);

export const campaignStore: StateStore<CampaignState> = campaignState.store;

/**
 * The claim message's id, derived from the claim (campaign and epoch: each claim has its own epoch),
 * so stale recovery can tell from the campaign row whether its claim's message is still in flight.
 */
export function claimMessageId(campaignId: string, epoch: number): string {
  return derivedMessageId(CAMPAIGN_STREAM_TYPE, campaignId.toLowerCase(), 'claim', epoch);
}

/** The messages a DISPATCHING campaign's liveness rests on: its claim's dispatch message (LINE). */
export function claimMessageIds(state: CampaignState): string[] {
  if (state.status !== 'DISPATCHING' || state.channel !== 'line') return [];
  return [claimMessageId(state.campaignId, state.claimEpoch)];
}

export function dispatchMessagesFor(event: CampaignEvent, state: CampaignState): OutboxMessageSpec[] {
  if (event.type !== 'CampaignClaimed' || state.status !== 'DISPATCHING' || state.channel !== 'line')
    return [];
  const payload: LineDispatchPayload = {
    campaignId: state.campaignId,
    audienceId: state.audienceId,
    organizationId: state.organizationId,
    lineOaId: state.lineOaId,
    castType: state.castType ?? 'multicast',
    epoch: state.claimEpoch,
  };
  return [
    {
      messageId: claimMessageId(state.campaignId, state.claimEpoch),
      destination: campaignDestination(state),
      payload,
      priority: DISPATCH_PRIORITY,
      headers: { [HEADER.epoch]: state.claimEpoch, [HEADER.organizationId]: state.organizationId },
    },
  ];
}

/**
 * Which campaigns have a dispatch plan. A LINE claim publishes one message (above); an SMS campaign is
 * dispatched in recipient batches by the SMS dispatch sweep (sms/dispatch.ts) — but only one created
 * with an SMS definition has recipients to dispatch. An sms campaign without one (a bare draft, as the
 * generic CampaignService can create) would be activated and never sent, so it may be created and
 * edited as a draft, not activated, scheduled or sent.
 */
const CHANNELS_WITH_DISPATCH_PLAN: ReadonlySet<CampaignChannel> = new Set(['line', 'sms']);
const hasDispatchPlan = (state: Exclude<CampaignState, { status: 'NONE' }>) =>
  CHANNELS_WITH_DISPATCH_PLAN.has(state.channel) && (state.channel !== 'sms' || state.sms !== null);
const DISPATCH_COMMANDS: ReadonlySet<CampaignCommand['type']> = new Set([
  'ActivateCampaign',
  'ScheduleCampaign',
  'SendNow',
]);

/** The campaign decider, refusing to put a campaign without a dispatch plan on its way to dispatch. */
export const campaignDeciderWithDispatchPlans: typeof campaignDecider = {
  ...campaignDecider,
  decide(command, state) {
    if (DISPATCH_COMMANDS.has(command.type) && state.status !== 'NONE' && !hasDispatchPlan(state)) {
      throw new ValidationError(
        `campaign ${state.campaignId} cannot be ${command.type === 'ScheduleCampaign' ? 'scheduled' : command.type === 'SendNow' ? 'sent' : 'activated'}: ` +
          `channel '${state.channel}' has no dispatch plan (an sms campaign needs an SMS definition and recipients: SmsCampaignService)`,
        { field: 'channel', channel: state.channel, command: command.type, campaignId: state.campaignId },
      );
    }
    return campaignDecider.decide(command, state);
  },
};

/**
 * QUEUED campaigns are due now, SCHEDULED ones at their startAt, and a CSV campaign's build when it was
 * uploaded (until a build attempt takes it), so the commit that creates one wakes the build workers.
 * A DISPATCHING SMS campaign is not: the scanner that claimed it dispatches it in the same pass, and the
 * dispatch sweep's own next-due time covers recipients deferred by their send window.
 */
export function campaignDueAt(state: CampaignState): string | null {
  if (state.status === 'NONE' || state.deletedAt !== null) return null;
  if (state.status === 'QUEUED') return state.statusChangedAt;
  if (state.status === 'SCHEDULED') return state.startAt;
  if (state.status === 'BUILDING' && state.sms?.source === 'csv' && state.sms.buildAttempt === 0) {
    return state.statusChangedAt;
  }
  // A charged SMS cancellation is the sms:recovery poller's to settle at once (the commit wakes it).
  if (state.status === 'CANCELLING' && state.sms?.chargeKey != null && state.sms.withdrawal === null) {
    return state.statusChangedAt;
  }
  return null;
}

export const campaignAggregate: ClaimedAggregate<CampaignState, CampaignCommand, CampaignEvent> = {
  streamType: CAMPAIGN_STREAM_TYPE,
  // Seed 000's destination re-check: a LINE dispatch message is delivered only while its campaign is
  // DISPATCHING with the message's epoch.
  claim: {
    noun: 'campaign',
    idField: 'campaignId',
    liveStatuses: ['DISPATCHING'],
    discard: {
      streamType: LINE_DELIVERY_STREAM_TYPE,
      eventType: 'LineDeliveryDiscarded',
      description:
        'LineDeliveryDiscarded: a message the destination re-check refused (stale epoch, not DISPATCHING)',
    },
  },
  decider: campaignDeciderWithDispatchPlans,
  store: campaignStore,
  messagesFor: ({ event, state, config }) => [
    ...dispatchMessagesFor(event, state),
    // SMS part 2: a charged SMS campaign's final status is announced on the reporting topic, through the
    // SMS sink the deployment configured (HERALD_SMS_SINK; Kafka by default).
    ...completionNoticesFor(event, state, smsSinkOf(config)),
  ],
  dueAt: campaignDueAt,
  stateTable: campaignState.stateTable,
};
