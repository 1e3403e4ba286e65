/**
 * `herald sms-simulator`: a test double for the operator network, for the demo, tests and benchmarks. It
 * consumes the SMS submit topic in a consumer group and, after a latency drawn per recipient, writes one
 * delivery report per recipient to the DLR topic with a configurable mix of outcomes. Like a real gateway
 * it is at-least-once (a redelivered chunk is reported again) and its reports come late and out of order;
 * an outcome is a pure function of (submission id, recipient id), so a duplicate agrees with the first. It
 * needs no database; a deployment replaces it with an SMPP or HTTP gateway adapter. ADR 0014, ADR 0019.
 */

import { createKafka } from '../../../adapters/kafka/kafka-client.js';
import { KafkaTopicConsumer } from '../../../adapters/kafka/kafka-consumer.js';
import { KafkaSink } from '../../../adapters/kafka/kafka-sink.js';
import { KafkaTopicAdmin } from '../../../adapters/kafka/kafka-topics.js';
import { ConfigError, TransientError } from '../../../errors.js';
import type { Logger } from '../../../logger.js';
import { HEADER } from '../../../messaging/headers.js';
import { derivedMessageId } from '../../../outbox/outbox-writer.js';
import type { OutboundMessage } from '../../../ports/message-sink.js';
import type { RoleDefinition } from '../../../registry/role.js';
import { aborted } from '../../../roles/runtime.js';
import type { KafkaSettings } from '../../../settings/core.js';
import type { CampaignConfig } from '../settings.js';
import type { SmsSubmission } from './dispatch.js';
import type { SmsSettings } from './settings.js';

export const DLR_OUTCOMES = ['DELIVERED', 'FAILED', 'EXPIRED', 'REJECTED', 'NOT_AVAILABLE'] as const;
export type DlrOutcome = (typeof DLR_OUTCOMES)[number];
export const SMS_SIMULATOR_GROUP = 'herald-sms-simulator';

/** One delivery report, as the DLR topic carries it (key: the campaign id). */
export interface DeliveryReport {
  /** Stable per (submission, recipient): a duplicate report has the same id. */
  dlrId: string;
  submissionId: string;
  campaignId: string;
  organizationId: string;
  recipientId: string;
  msisdn: string;
  operator: string;
  status: DlrOutcome;
  /** The MNPSP error code of a FAILED report; null otherwise. */
  errorCode: string | null;
  /** The submission's claim epoch. */
  epoch: number;
  receivedAt: string;
  doneAt: string;
}

export interface SimulatorOptions {
  brokers: readonly string[];
  /** TLS and SASL (config.kafka.security); absent: PLAINTEXT. */
  security?: KafkaSettings['security'] | undefined;
  settings: Pick<SmsSettings, 'submitTopic' | 'dlrTopic' | 'simulator'>;
  logger: Logger;
  groupId?: string;
  /** Partitions handled at once. Default 4. */
  concurrency?: number;
  /** Create the two topics when missing (the relay does not create the DLR topic). Default true. */
  createTopics?: boolean;
  topicPartitions?: number | undefined;
  /** A new consumer group starts at the earliest offset (default) or only sees chunks written after it joined. */
  fromBeginning?: boolean;
  signal?: AbortSignal;
}

/** FNV-1a of a string, as a fraction in [0, 1). */
function unitHash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) / 4294967296;
}

/**
 * The outcome, error code and latency of one recipient: a pure function of its submission and id, or
 * the fixed outcome of its number (HERALD_SMS_SIMULATOR_FIXED_OUTCOMES: a sandbox's test numbers).
 */
export function simulatedOutcome(
  submissionId: string,
  recipientId: string,
  simulator: SmsSettings['simulator'],
  msisdn?: string,
): { status: DlrOutcome; errorCode: string | null; latencyMs: number } {
  const { min, max } = simulator.latencyMs;
  const latencyMs = min + Math.floor(unitHash(`${submissionId}/${recipientId}/latency`) * (max - min + 1));
  const fixed = msisdn === undefined ? undefined : simulator.fixed?.get(msisdn.replace(/^\+/, ''));
  if (fixed) return { status: fixed.status as DlrOutcome, errorCode: fixed.errorCode, latencyMs };
  const total = simulator.outcomes.reduce((sum, o) => sum + o.weight, 0);
  let point = unitHash(`${submissionId}/${recipientId}/outcome`) * total;
  let status: DlrOutcome = 'DELIVERED';
  for (const o of simulator.outcomes) {
    if (point < o.weight) {
      status = o.outcome as DlrOutcome;
      break;
    }
    point -= o.weight;
  }
  const codes = simulator.failedCodes;
  const errorCode =
    status === 'FAILED'
      ? codes[Math.floor(unitHash(`${submissionId}/${recipientId}/code`) * codes.length)]!
      : null;
  return { status, errorCode, latencyMs };
}

export class SmsGatewaySimulator {
  private consumer: KafkaTopicConsumer | undefined;
  private readonly sink: KafkaSink;
  private nextId = 1;
  readonly stats = {
    submissions: 0,
    recipients: 0,
    reports: Object.fromEntries(DLR_OUTCOMES.map((o) => [o, 0])) as Record<DlrOutcome, number>,
    /** Reports written per campaign id. */
    byCampaign: new Map<string, number>(),
  };

  constructor(private readonly options: SimulatorOptions) {
    this.sink = new KafkaSink({
      brokers: options.brokers,
      security: options.security,
      clientId: 'herald-sms-simulator',
      maxBatchMessages: 1_000,
      logger: options.logger,
    });
  }

  async start(): Promise<void> {
    const { settings } = this.options;
    if (this.options.createTopics ?? true) {
      const kafka = createKafka({
        brokers: this.options.brokers,
        security: this.options.security,
        clientId: 'herald-sms-simulator-admin',
        logger: this.options.logger,
      });
      const admin = new KafkaTopicAdmin(kafka, { create: { partitions: this.options.topicPartitions } });
      try {
        await admin.ensure([settings.submitTopic, settings.dlrTopic]);
      } finally {
        await admin.close();
      }
    }
    this.consumer = await KafkaTopicConsumer.start({
      brokers: this.options.brokers,
      security: this.options.security,
      clientId: 'herald-sms-simulator',
      groupId: this.options.groupId ?? SMS_SIMULATOR_GROUP,
      topic: settings.submitTopic,
      concurrency: this.options.concurrency ?? 4,
      fromBeginning: this.options.fromBeginning ?? true,
      logger: this.options.logger.child({ component: 'sms-simulator' }),
      signal: this.options.signal,
      onDelivery: (delivery, control) => this.handle(delivery.body, delivery.messageId, control),
    });
  }

  async stop(): Promise<void> {
    await this.consumer?.stop();
    await this.sink.close();
  }

  private async handle(
    body: Buffer,
    messageId: string | undefined,
    control: { stopping: boolean },
  ): Promise<void> {
    let submission: SmsSubmission;
    try {
      submission = JSON.parse(body.toString('utf8')) as SmsSubmission;
      if (!Array.isArray(submission.recipients)) throw new Error('no recipients');
    } catch (error) {
      // A gateway rejects what it cannot read; nothing to report.
      this.options.logger.warn({ err: error, messageId }, 'sms simulator: unreadable submission skipped');
      return;
    }
    const received = Date.now();
    const pending = submission.recipients
      .map((r) => ({
        r,
        ...simulatedOutcome(
          submission.submissionId,
          r.recipientId,
          this.options.settings.simulator,
          r.msisdn,
        ),
      }))
      .sort((a, b) => a.latencyMs - b.latencyMs);
    let index = 0;
    while (index < pending.length) {
      if (control.stopping)
        throw new TransientError('sms simulator stopping; the submission will be redelivered');
      const dueAt = received + pending[index]!.latencyMs;
      const wait = dueAt - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const now = Date.now();
      const batch: OutboundMessage[] = [];
      const reports: DeliveryReport[] = [];
      while (index < pending.length && received + pending[index]!.latencyMs <= now) {
        const { r, status, errorCode } = pending[index++]!;
        const report: DeliveryReport = {
          dlrId: derivedMessageId('sms_dlr', submission.submissionId, r.recipientId),
          submissionId: submission.submissionId,
          campaignId: submission.campaignId,
          organizationId: submission.organizationId,
          recipientId: r.recipientId,
          msisdn: r.msisdn,
          operator: submission.route.operator,
          status,
          errorCode,
          epoch: submission.epoch,
          receivedAt: new Date(received).toISOString(),
          doneAt: new Date(now).toISOString(),
        };
        reports.push(report);
        batch.push({
          id: this.nextId++,
          messageId: report.dlrId,
          destination: this.options.settings.dlrTopic,
          routingKey: null,
          partitionKey: submission.campaignId,
          headers: { [HEADER.organizationId]: submission.organizationId, [HEADER.epoch]: submission.epoch },
          body: Buffer.from(JSON.stringify(report), 'utf8'),
          priority: 5,
          timestamp: new Date(now),
        });
      }
      const outcomes = await this.sink.publish(batch);
      const failed = outcomes.find((o) => !o.ok);
      if (failed && !failed.ok)
        throw new TransientError(`sms simulator: delivery reports not written: ${failed.error}`);
      for (const report of reports) this.stats.reports[report.status]++;
      const byCampaign = this.stats.byCampaign;
      byCampaign.set(submission.campaignId, (byCampaign.get(submission.campaignId) ?? 0) + reports.length);
    }
    this.stats.submissions++;
    this.stats.recipients += submission.recipients.length;
  }
}

/** `herald sms-simulator`: runs the simulator until the signal (SIGTERM/SIGINT). */
export const smsSimulatorRole: RoleDefinition<CampaignConfig> = {
  summary: 'test double of the operator network: consume the SMS submit topic, produce delivery reports',
  async run(runtime, signal) {
    const { config, logger } = runtime;
    if (config.kafkaBrokers.length === 0) {
      throw new ConfigError(
        'KAFKA_BROKERS',
        'is required by the sms-simulator (it consumes the SMS submit topic)',
      );
    }
    const simulator = new SmsGatewaySimulator({
      brokers: config.kafkaBrokers,
      security: config.kafka.security,
      settings: config.sms,
      logger,
      topicPartitions: config.kafka.topicPartitions,
      signal,
    });
    try {
      await simulator.start();
      logger.info(
        {
          submitTopic: config.sms.submitTopic,
          dlrTopic: config.sms.dlrTopic,
          mix: config.sms.simulator.outcomes,
        },
        'sms simulator started',
      );
      await aborted(signal);
    } finally {
      await simulator.stop();
      const { byCampaign: _byCampaign, ...stats } = simulator.stats;
      logger.info(stats, 'sms simulator stopped');
    }
  },
};
