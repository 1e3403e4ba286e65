/**
 * The campaign slice's registration (seed 000's whole-campaign LINE dispatch, and the lifecycle seed
 * 003's per-recipient SMS campaigns share; ADR 0003, 0014, 0019, 0020): its descriptor (with its
 * fenced claim), settings, ports, the sweeper that claims due campaigns and recovers stale claims, the
 * SMS dispatch, delivery and recovery pollers (scanner) and CSV build sweep (worker), the LINE
 * delivery and DLR consumers, its queues and topics, the tick queue that wakes the scanners, the tick
 * side stream, the dispatch_stats projection, report retention, its services, routes, live-stream
 * topic, CLI verbs (with `herald sms-gateway`, the SMPP operator path, and the SMS simulators), the tick
 * role and its part of the demo.
 */
import { pruneRolledUpReports } from '../../adapters/postgres/sms-delivery-queries.js';
import { defineAggregate } from '../../registry/module.js';
import { defineConsumer } from '../../worker/consumer-definition.js';
import { campaignRoles } from './cli.js';
import { campaignDashboardRoutes } from './dashboard-routes.js';
import { campaignDemo } from './demo.js';
import { campaignAggregate } from './descriptor.js';
import { dispatchStatsProjection } from './dispatch-stats.js';
import { lineRoles } from './line/cli.js';
import { lineDeliveryHandler, lineDispatchPayload } from './line/delivery.js';
import { lineRoutes } from './line/routes.js';
import { lineSettings } from './line/settings.js';
import { lineSimulatorRole } from './line/simulator/role.js';
import { campaignPorts } from './ports.js';
import { type CampaignServices, campaignRoutes } from './routes.js';
import { CampaignService } from './service.js';
import { campaignSettings } from './settings.js';
import { billingSettings } from './sms/billing-settings.js';
import { billingSimulatorRole } from './sms/billing-simulator-role.js';
import { smsBuildSweeper, smsChargeRetrySweeper } from './sms/build.js';
import { smsDispatchSweeper } from './sms/dispatch.js';
import { SMS_GATEWAY_STREAM_TYPE } from './sms/gateway/reports.js';
import { smsGatewaySettings } from './sms/gateway/settings.js';
import { SMS_DELIVERY_LEASES, smsDeliverySweepers, smsDlrConsumers } from './sms/pollers.js';
import { SMS_RECOVERY_LEASES, smsRecoverySweepers } from './sms/recovery.js';
import { smsCampaignRoutes } from './sms/routes.js';
import { SmsCampaignService } from './sms/service.js';
import { smsSettings } from './sms/settings.js';
import { SMS_DLR_TOPIC, SMS_REPORTING_TOPIC, SMS_SUBMIT_TOPIC } from './sms/topology.js';
import { campaignSweeper } from './sweepers.js';
import { tickRole } from './tick.js';
import {
  HERALD_QUEUES,
  LINE_DELIVERY_CONSUMER,
  LINE_DELIVERY_STREAM_TYPE,
  LINE_QUEUES,
  PROCESS_CAMPAIGN_QUEUE,
  SCANNER_TICK_CONSUMER,
  TICK_STREAM_TYPE,
} from './topology.js';

export const campaignRegistration = defineAggregate({
  aggregate: campaignAggregate,
  settings: [campaignSettings, smsSettings, smsGatewaySettings, billingSettings, lineSettings],
  ports: campaignPorts,
  sideStreams: [
    {
      streamType: TICK_STREAM_TYPE,
      description: 'CampaignTickEmitted: one per tick period, the event behind each process_campaign message',
      retentionDays: (config) => config.campaign.tickRetentionDays,
    },
    {
      streamType: SMS_GATEWAY_STREAM_TYPE,
      description:
        'SmsGatewayReported: one per `herald sms-gateway` transaction that wrote delivery reports to the DLR topic (ADR 0022)',
      retentionDays: (config) => config.sms.reportRetentionDays,
    },
  ],
  topology: {
    // The SMS submit and reporting topics are also declared as queues for deployments that send SMS over
    // RabbitMQ (HERALD_SMS_SINK=amqp with the default topic name; completion notices follow the sink).
    // The DLR topic too: `herald sms-gateway` writes delivery reports through the outbox (ADR 0022).
    amqpQueues: [
      ...HERALD_QUEUES.filter((q) => q !== PROCESS_CAMPAIGN_QUEUE),
      SMS_SUBMIT_TOPIC,
      SMS_DLR_TOPIC,
      SMS_REPORTING_TOPIC,
    ],
    // Completion notices (priority 5, reporting).
    kafkaTopics: [SMS_SUBMIT_TOPIC, SMS_DLR_TOPIC, SMS_REPORTING_TOPIC],
    scannerWakeQueues: [{ queue: PROCESS_CAMPAIGN_QUEUE, consumer: SCANNER_TICK_CONSUMER }],
  },
  maintenance: (config) => [
    {
      name: 'sms-report-retention',
      intervalMs: config.maintenance.inboxPruneIntervalMs,
      describe: 'rolled-up SMS delivery reports past retention deleted',
      runBatch: (db, limit) =>
        pruneRolledUpReports(db, { retentionDays: config.sms.reportRetentionDays, limit }),
    },
  ],
  // The SMS delivery pollers' leases (readiness requires them wherever the scanner runs).
  leases: [...SMS_DELIVERY_LEASES, ...SMS_RECOVERY_LEASES],
  sweepers: (context) => {
    const { config, db, handler, logger, wakeups } = context;
    return [
      campaignSweeper({
        db,
        handler,
        wakeups,
        logger,
        batchSize: config.scanner.batchSize,
        staleClaimMs: config.campaign.staleClaimMs,
        messageLostAfterMs: config.scanner.messageLostAfterMs,
        maxReclaimsPerPass: config.scanner.maxReclaimsPerPass,
      }),
      // After the campaign sweeper: a campaign it just claimed is dispatched in the same scanner pass.
      smsDispatchSweeper({ db, handler, wakeups, logger, settings: config.sms }),
      // DLR roll-up, retry dispatcher, refund retry poller, each under its lease.
      ...smsDeliverySweepers(context),
      // Cancellation settlement, expiry, stale recovery and DLR timeouts (`sms:recovery`).
      ...smsRecoverySweepers(context),
    ];
  },
  workerSweepers: ({ config, db, handler, logger, wakeups, ports }) => {
    const charge = { retryMs: config.billing.chargeRetryMs, giveUpMs: config.billing.chargeGiveUpMs };
    return [
      smsBuildSweeper({
        db,
        handler,
        wakeups,
        logger,
        billing: ports.billing,
        settings: config.sms,
        owner: config.pod,
        charge,
      }),
      // A build whose charge billing did not answer: asked again with the same key (ADR 0023).
      smsChargeRetrySweeper({
        db,
        handler,
        wakeups,
        logger,
        billing: ports.billing,
        settings: config.sms,
        charge,
      }),
    ];
  },
  consumers: (context) => [
    defineConsumer({
      consumer: LINE_DELIVERY_CONSUMER,
      transport: 'amqp',
      sources: LINE_QUEUES,
      parse: (payload) => lineDispatchPayload.parse(payload),
      // Each delivery holds its inbox transaction and records chunks on a second connection.
      prefetch: context.config.line.deliveryConcurrency,
      handler: lineDeliveryHandler({
        handler: context.handler,
        logger: context.logger,
        messaging: context.ports.lineMessaging,
        directory: context.ports.lineDirectory,
        rateLimiter: context.ports.lineRateLimiter,
        settings: context.config.line,
        heartbeatMs: context.config.campaign.heartbeatMs,
      }),
    }),
    // Delivery reports from the gateway (or the simulator) into sms_delivery_report.
    ...smsDlrConsumers(context),
  ],
  projections: [dispatchStatsProjection],
  service: ({ config, db, handler, ports }): CampaignServices => ({
    campaigns: new CampaignService({
      db,
      handler,
      lineReadiness: (campaign) => ports.lineDirectory.readiness(campaign),
      maxStartAheadMs: config.campaign.maxStartAheadMs,
    }),
    line: ports.lineDirectory,
    sms: new SmsCampaignService({
      db,
      handler,
      billing: ports.billing,
      routing: ports.routing,
      settings: config.sms,
      idempotencyTtlMs: config.api.idempotencyTtlMs,
    }),
  }),
  api: {
    routes: async (app, deps) => {
      await app.register(campaignRoutes, deps);
      await app.register(smsCampaignRoutes, deps);
      await app.register(campaignDashboardRoutes, deps);
      await app.register(lineRoutes, deps);
    },
    topics: { campaigns: [campaignAggregate.streamType, LINE_DELIVERY_STREAM_TYPE] },
  },
  cli: {
    ...campaignRoles,
    ...lineRoles,
    'line-simulator': lineSimulatorRole,
    'billing-simulator': billingSimulatorRole,
  },
  roles: { tick: tickRole },
  demo: campaignDemo,
});

export type { LineMessagingPort, LineOutcome } from '../../adapters/line/messaging-api.js';
// The slice's public surface (re-exported by the package's root entry).
export type { CampaignCommand, CampaignCommandType, CreateCampaign } from '../../domain/campaign/commands.js';
export type { CampaignEvent, CampaignEventType } from '../../domain/campaign/events.js';
export { CAMPAIGN_OPERATIONS, type CampaignOperation } from '../../domain/campaign/operations.js';
export type { SmsCampaignFacts, SmsDefinition, SmsProgress } from '../../domain/campaign/sms.js';
export type { CampaignState, ExistingCampaign } from '../../domain/campaign/state.js';
export {
  CAMPAIGN_CHANNELS,
  CAMPAIGN_STATUSES,
  CAST_TYPES,
  type CampaignChannel,
  type CampaignStatus,
  type CastType,
  FINAL_CAMPAIGN_STATUSES,
  type FinalCampaignStatus,
  isFinalStatus,
} from '../../domain/campaign/status.js';
export {
  type InlineCampaignRequest,
  type RuleIssue,
  SmsValidationError,
} from '../../domain/sms/campaign-request.js';
export { LineDirectory } from './line/directory.js';
export { type LineSettings, lineSettings } from './line/settings.js';
export type { CampaignPorts } from './ports.js';
export type { CampaignServices } from './routes.js';
export { CampaignService, type CampaignServiceDeps, type NewCampaign } from './service.js';
export { type CampaignConfig, type CampaignSettings, campaignSettings } from './settings.js';
export {
  type BillingOperation,
  type BillingPort,
  type BillingReceipt,
  type BillingRequestOptions,
  configuredBilling,
  PostgresLedger,
} from './sms/billing.js';
export { type BillingSettings, billingSettings } from './sms/billing-settings.js';
export { postgresSmsRouting, type SmsRoutingPort } from './sms/routing.js';
export {
  type BulkCreated,
  SmsCampaignService,
  type SmsCampaignServiceDeps,
  type SmsPreview,
  type SmsRequestOptions,
  type UploadView,
} from './sms/service.js';
export { type SmsSettings, smsSettings } from './sms/settings.js';
