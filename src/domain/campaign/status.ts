/**
 * Campaign lifecycle statuses (seed 003's superset, which also covers seed 000's LINE campaigns; see
 * docs/decisions/0003-campaign-lifecycle.md). Pure data: the scanner, the state table and the API
 * share these spellings, so they are the single source of truth for status names.
 */
export const CAMPAIGN_STATUSES = [
  'DRAFT',
  'BUILDING',
  'QUEUED',
  'SCHEDULED',
  'DISPATCHING',
  'PAUSED',
  'COMPLETED',
  'PARTIAL',
  'FAILED',
  'EXPIRED',
  'CANCELLING',
  'CANCELLED',
] as const;

export type CampaignStatus = (typeof CAMPAIGN_STATUSES)[number];

/** Final statuses. PARTIAL and FAILED can still be reopened by ResendFailed (→ QUEUED). */
export const FINAL_CAMPAIGN_STATUSES = ['COMPLETED', 'PARTIAL', 'FAILED', 'CANCELLED', 'EXPIRED'] as const;
export type FinalCampaignStatus = (typeof FINAL_CAMPAIGN_STATUSES)[number];

/** Statuses a campaign can be paused from; PAUSED remembers which one in `pausedFrom`. */
export const PAUSABLE_CAMPAIGN_STATUSES = ['SCHEDULED', 'QUEUED', 'DISPATCHING'] as const;
export type PausableCampaignStatus = (typeof PAUSABLE_CAMPAIGN_STATUSES)[number];

const finalStatuses: ReadonlySet<string> = new Set(FINAL_CAMPAIGN_STATUSES);

export function isFinalStatus(status: CampaignStatus | 'NONE'): status is FinalCampaignStatus {
  return finalStatuses.has(status);
}

export const CAMPAIGN_CHANNELS = ['line', 'sms'] as const;
export type CampaignChannel = (typeof CAMPAIGN_CHANNELS)[number];

/** LINE cast types: every friend, the sealed audience's user ids in chunks of 500, or a LINE audience group. */
export const CAST_TYPES = ['broadcast', 'multicast', 'narrowcast'] as const;
export type CastType = (typeof CAST_TYPES)[number];

export const CLAIM_TRIGGERS = ['scanner', 'send_now'] as const;
export type ClaimTrigger = (typeof CLAIM_TRIGGERS)[number];
