/**
 * The campaign slice's response views (serialization and the OpenAPI document): a campaign exactly as
 * its state holds it (`sameKeys` fails to compile when the state gains or loses a field), with the
 * operations its state allows (`commands`, from its catalogue).
 */
import { z } from 'zod';
import { instant, json, operationsField, type SameKeys, sameKeys } from '../../api/views.js';
import { lineFactsView } from '../../domain/campaign/line.js';
import {
  CAMPAIGN_CHANNELS,
  CAMPAIGN_STATUSES,
  CAST_TYPES,
  PAUSABLE_CAMPAIGN_STATUSES,
} from '../../domain/campaign/status.js';
import { CAMPAIGN_OPERATIONS, type ExistingCampaign } from '../../domain/campaign.js';
import { availableOperations } from '../../domain/operations.js';

const campaignFields = z.object({
  campaignId: z.uuid(),
  organizationId: z.string(),
  status: z.enum(CAMPAIGN_STATUSES),
  channel: z.enum(CAMPAIGN_CHANNELS),
  castType: z.enum(CAST_TYPES).nullable(),
  audienceId: z.string().nullable(),
  lineOaId: z.string().nullable(),
  name: z.string(),
  idempotencyKey: z
    .string()
    .nullable()
    .describe("the organization's own unique key for the campaign (the create body's `idempotencyKey`)"),
  requestIdempotencyKey: z
    .string()
    .nullable()
    .describe('the Idempotency-Key header of the request that created the campaign (null: none)'),
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
  // The SMS channel's facts (ADR 0014) keep the SMS domain's own shape.
  sms: json.nullable().describe('SMS campaigns: totals, charge, build attempts, progress; null for LINE'),
  line: lineFactsView
    .nullable()
    .describe('LINE campaigns: messages, delivery plan and progress; null for SMS'),
});
sameKeys<SameKeys<ExistingCampaign, z.output<typeof campaignFields>>>(true);

export const campaignView = campaignFields
  .extend({ commands: operationsField(CAMPAIGN_OPERATIONS) })
  .meta({ id: 'Campaign' });

/** A campaign as the API answers it: its state and the operations that state allows. */
export function campaignOut(campaign: ExistingCampaign) {
  return { ...campaign, commands: availableOperations(CAMPAIGN_OPERATIONS, campaign) };
}
