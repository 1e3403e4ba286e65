/**
 * The campaign slice's ports and their default adapters (ADR 0020, ADR 0021): the LINE Messaging API
 * (the SDK adapter at HERALD_LINE_API_BASE_URL), the LINE directory (channel credentials and audiences
 * in PostgreSQL), the per-channel LINE rate limiter shared by a process's deliveries, SMS billing (the
 * PostgreSQL ledger) and SMS routing (the organization's routing table). A library user replaces one
 * with `campaignRegistration.withPorts`.
 */
import { type LineMessagingPort, lineMessagingApi } from '../../adapters/line/messaging-api.js';
import type { AggregateContext, PortContext } from '../../registry/module.js';
import { LineDirectory } from './line/directory.js';
import { LineRateLimiter } from './line/rate-limit.js';
import type { CampaignConfig } from './settings.js';
import { type BillingPort, configuredBilling } from './sms/billing.js';
import { postgresSmsRouting, type SmsRoutingPort } from './sms/routing.js';

export interface CampaignPorts {
  /** LINE calls, each carrying its retry key; outcomes, never exceptions, for HTTP answers. */
  readonly lineMessaging: LineMessagingPort;
  readonly lineDirectory: LineDirectory;
  readonly lineRateLimiter: LineRateLimiter;
  /** Charges and refunds of SMS campaigns, each once by its stable key (invariant 9). */
  readonly billing: BillingPort;
  readonly routing: SmsRoutingPort;
}

export const campaignPorts = {
  lineMessaging: ({ config }: PortContext<CampaignConfig>): LineMessagingPort =>
    lineMessagingApi({ baseUrl: config.line.apiBaseUrl, timeoutMs: config.line.requestTimeoutMs }),
  lineDirectory: ({ config, db, logger }: PortContext<CampaignConfig>): LineDirectory =>
    new LineDirectory({ db, settings: config.line, logger }),
  lineRateLimiter: ({ config }: PortContext<CampaignConfig>): LineRateLimiter =>
    new LineRateLimiter({ limits: config.line.rateLimits }),
  billing: ({ config, db, logger }: PortContext<CampaignConfig>): BillingPort =>
    configuredBilling(config.billing, db, logger),
  routing: (): SmsRoutingPort => postgresSmsRouting,
};

/** What the campaign slice's sweepers and consumers are built from. */
export type CampaignContext = AggregateContext<CampaignConfig, CampaignPorts>;
