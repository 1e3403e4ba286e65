/**
 * The campaign slice's ports and their default adapters (ADR 0020): LINE delivery (a recording
 * adapter until the LINE adapter lands), SMS billing (the PostgreSQL ledger) and SMS routing (the
 * organization's routing table). A library user replaces one with `campaignRegistration.withPorts`.
 */
import type { AggregateContext, PortContext } from '../../registry/module.js';
import { type LineDeliveryPort, recordingLineDeliveryPort } from './line-delivery.js';
import type { CampaignConfig } from './settings.js';
import { type BillingPort, PostgresLedger } from './sms/billing.js';
import { postgresSmsRouting, type SmsRoutingPort } from './sms/routing.js';

export interface CampaignPorts {
  readonly lineDelivery: LineDeliveryPort;
  /** Charges and refunds of SMS campaigns, each once by its stable key (invariant 9). */
  readonly billing: BillingPort;
  readonly routing: SmsRoutingPort;
}

export const campaignPorts = {
  lineDelivery: (): LineDeliveryPort => recordingLineDeliveryPort,
  billing: ({ db }: PortContext): BillingPort => new PostgresLedger(db),
  routing: (): SmsRoutingPort => postgresSmsRouting,
};

/** What the campaign slice's sweepers and consumers are built from. */
export type CampaignContext = AggregateContext<CampaignConfig, CampaignPorts>;
