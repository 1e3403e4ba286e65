/**
 * The campaign slice's response views (serialization and the OpenAPI document): a campaign exactly as
 * its state holds it (`sameKeys` fails to compile when the state gains or loses a field).
 */
import { z } from 'zod';
import { instant, json, type SameKeys, sameKeys } from '../../api/views.js';
import {
  CAMPAIGN_CHANNELS,
  CAMPAIGN_STATUSES,
  CAST_TYPES,
  PAUSABLE_CAMPAIGN_STATUSES,
} from '../../domain/campaign/status.js';
import type { ExistingCampaign } from '../../domain/campaign.js';

export const campaignView = z
  .object({
    campaignId: z.uuid(),
    organizationId: z.string(),
    status: z.enum(CAMPAIGN_STATUSES),
    channel: z.enum(CAMPAIGN_CHANNELS),
    castType: z.enum(CAST_TYPES).nullable(),
    audienceId: z.string().nullable(),
    lineOaId: z.string().nullable(),
    name: z.string(),
    idempotencyKey: z.string().nullable(),
    startAt: instant.nullable(),
    dispatchDeadline: instant.nullable(),
    claimEpoch: z.number().int(),
    claimedAt: instant.nullable(),
    pausedFrom: z.enum(PAUSABLE_CAMPAIGN_STATUSES).nullable(),
    pauseReason: z.string().nullable().describe('why a PAUSED campaign was paused; null otherwise'),
    deletedAt: instant.nullable(),
    resendAttempt: z.number().int(),
    failureReason: z.string().nullable(),
    createdAt: instant,
    statusChangedAt: instant,
    // The SMS channel's facts (issue 12) keep the SMS domain's own shape.
    sms: json.nullable().describe('SMS campaigns: totals, charge, build attempts, progress; null for LINE'),
  })
  .meta({ id: 'Campaign' });
sameKeys<SameKeys<ExistingCampaign, z.output<typeof campaignView>>>(true);
