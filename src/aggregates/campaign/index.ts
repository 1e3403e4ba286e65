/**
 * The campaign aggregate's registration (seed 000 whole-campaign LINE dispatch, and the lifecycle
 * seed 003's per-recipient campaigns share): its descriptor, the sweeper that claims due campaigns
 * and recovers stale claims, the SMS dispatch sweep (scanner) and CSV build sweep (worker), the LINE
 * delivery consumers, the queues and topics it publishes to, the tick queue that wakes the scanners,
 * its side streams, the dispatch_stats projection and the tick role.
 */

import { pruneRolledUpReports } from '../../adapters/postgres/sms-delivery-queries.js';
import { defineAggregate, defineConsumer } from '../../eventstore/registry.js';
import { campaignAggregate } from './descriptor.js';
import { dispatchStatsProjection } from './dispatch-stats.js';
import { LineDeliveryWorker, lineDispatchPayload } from './line-delivery.js';
import { PostgresLedger } from './sms/billing.js';
import { smsBuildSweeper } from './sms/build.js';
import { smsDispatchSweeper } from './sms/dispatch.js';
import { SMS_DELIVERY_LEASES, smsDeliverySweepers, smsDlrConsumers } from './sms/pollers.js';
import { SMS_RECOVERY_LEASES, smsRecoverySweepers } from './sms/recovery.js';
import { SMS_REPORTING_TOPIC, SMS_SUBMIT_TOPIC } from './sms/topology.js';
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
  sideStreams: [
    {
      streamType: LINE_DELIVERY_STREAM_TYPE,
      description:
        'LineDeliveryDiscarded: a message the destination re-check refused (stale epoch, not DISPATCHING)',
      effectsOfMessages: true,
    },
    {
      streamType: TICK_STREAM_TYPE,
      description: 'CampaignTickEmitted: one per tick period, the event behind each process_campaign message',
      retentionDays: (config) => config.maintenance.tickRetentionDays,
    },
  ],
  topology: {
    // The SMS submit topic is also declared as a queue for deployments that send SMS over RabbitMQ
    // (HERALD_SMS_SINK=amqp with the default topic name).
    amqpQueues: [...HERALD_QUEUES.filter((q) => q !== PROCESS_CAMPAIGN_QUEUE), SMS_SUBMIT_TOPIC],
    // Completion notices (priority 5, reporting).
    kafkaTopics: [SMS_SUBMIT_TOPIC, SMS_REPORTING_TOPIC],
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
        staleClaimMs: config.scanner.staleClaimMs,
        messageLostAfterMs: config.scanner.messageLostAfterMs,
        maxReclaimsPerPass: config.scanner.maxReclaimsPerPass,
      }),
      // After the campaign sweeper: a campaign it just claimed is dispatched in the same scanner pass.
      smsDispatchSweeper({ db, handler, wakeups, logger, settings: config.sms }),
      // SMS part 2: DLR roll-up, retry dispatcher, refund retry poller, each under its lease.
      ...smsDeliverySweepers(context),
      // SMS part 2: cancellation settlement, expiry, stale recovery and DLR timeouts (`sms:recovery`).
      ...smsRecoverySweepers(context),
    ];
  },
  workerSweepers: ({ config, db, handler, logger, wakeups }) => [
    smsBuildSweeper({
      db,
      handler,
      wakeups,
      logger,
      billing: new PostgresLedger(db),
      settings: config.sms,
      owner: config.pod,
    }),
  ],
  consumers: (context) => [
    defineConsumer({
      consumer: LINE_DELIVERY_CONSUMER,
      transport: 'amqp',
      sources: LINE_QUEUES,
      parse: (payload) => lineDispatchPayload.parse(payload),
      handler: new LineDeliveryWorker({
        handler: context.handler,
        logger: context.logger,
        heartbeatMs: context.config.scanner.heartbeatMs,
      }).handle,
    }),
    // SMS part 2: delivery reports from the gateway (or the simulator) into sms_delivery_report.
    ...smsDlrConsumers(context),
  ],
  projections: [dispatchStatsProjection],
  roles: { tick: tickRole },
});
