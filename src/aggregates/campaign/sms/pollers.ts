/**
 * The SMS delivery pollers as the campaign registration runs them: `herald scanner` runs the DLR
 * roll-up, the retry dispatcher and the refund retry poller, each wrapped by a lease on the database
 * clock (`sms:dlr-rollup`, `sms:retry-dispatcher`, `sms:refund-retry`; TTL HERALD_SMS_LEASE_TTL_SECONDS)
 * that readiness requires wherever the scanner runs; `herald worker` runs the DLR consumer. The leases
 * only cut duplicate work (invariant 7): every write underneath is guarded on its own.
 */
import { randomUUID } from 'node:crypto';
import type { RequiredLease } from '../../../registry/module.js';
import { leasedSweeper } from '../../../scanner/leased-sweeper.js';
import type { Sweeper } from '../../../scanner/scanner.js';
import { type ConsumerDefinition, defineConsumer } from '../../../worker/consumer-definition.js';
import type { CampaignContext } from '../ports.js';
import { dlrHandler, SMS_DLR_CONSUMER } from './dlr-consumer.js';
import { SMS_REFUND_RETRY_LEASE, smsRefundRetrySweeper } from './refunds.js';
import { SMS_RETRY_LEASE, smsRetryDispatcher } from './retries.js';
import { SMS_ROLLUP_LEASE, smsRollupSweeper } from './rollup.js';

export const SMS_DELIVERY_LEASES: readonly RequiredLease[] = [
  { name: SMS_ROLLUP_LEASE, role: 'scanner', description: 'the DLR roll-up' },
  { name: SMS_RETRY_LEASE, role: 'scanner', description: 'the retry dispatcher' },
  { name: SMS_REFUND_RETRY_LEASE, role: 'scanner', description: 'the refund retry poller' },
];

/** The scanner's SMS delivery sweepers, each under its lease (one owner per process). */
export function smsDeliverySweepers({
  config,
  db,
  handler,
  logger,
  wakeups,
  ports,
}: CampaignContext): Sweeper[] {
  const owner = `${config.pod}:${randomUUID().slice(0, 8)}`;
  const { billing } = ports;
  const settings = config.sms;
  const lease = (name: string) => ({ db, lease: name, owner, ttlMs: settings.leaseTtlMs, logger });
  return [
    leasedSweeper(
      smsRollupSweeper({
        db,
        handler,
        billing,
        logger,
        wakeups,
        settings,
        relayRecoveryRounds: config.relay.recoveryMaxRounds,
      }),
      lease(SMS_ROLLUP_LEASE),
    ),
    leasedSweeper(
      smsRetryDispatcher({ db, handler, logger, wakeups, batchSize: settings.dispatchBatchSize }),
      lease(SMS_RETRY_LEASE),
    ),
    leasedSweeper(
      smsRefundRetrySweeper({ db, handler, billing, logger, wakeups, settings }),
      lease(SMS_REFUND_RETRY_LEASE),
    ),
  ];
}

/**
 * The worker's DLR consumer on HERALD_SMS_DLR_TOPIC, over the SMS sink's broker (Kafka by default, a
 * RabbitMQ queue of that name with HERALD_SMS_SINK=amqp); none when that broker is not configured (a
 * LINE-only worker).
 */
export function smsDlrConsumers({ config, db, wakeups }: CampaignContext): ConsumerDefinition[] {
  const transport = config.sms.sink;
  const available = transport === 'kafka' ? config.kafkaBrokers.length > 0 : config.amqpUrl !== undefined;
  if (!available) return [];
  return [
    defineConsumer<unknown>({
      consumer: SMS_DLR_CONSUMER,
      transport,
      sources: [config.sms.dlrTopic],
      parse: (payload) => payload,
      handler: dlrHandler({ schema: db.schema, wakeups }),
    }),
  ];
}
