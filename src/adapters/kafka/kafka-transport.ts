/**
 * The consumer toolkit's transport over Kafka: a consumer group on `<topic>`, a second group on
 * `<topic>.retry` that holds each copy until it is `retryDelayMs` old (its Kafka timestamp), and copies
 * written to `<topic>.retry` / `<topic>.dead` by an idempotent producer (acks from all in-sync replicas:
 * confirmed before the original's offset moves). The three topics are created when missing.
 *
 * A delivery is settled when its offset may move: the offset is resolved only after the policy settled
 * it (so after the handler's transaction committed, invariant 4). A copy that cannot be written is
 * retried with backoff while heartbeating; if the consumer stops meanwhile the delivery stays
 * unsettled, its offset stays, and the message comes back. A waiting retry copy blocks only its retry
 * partition, never the main topic; retries trade the key's order for progress (as on RabbitMQ).
 */

import { BrokerUnavailableError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { HEADER } from '../../messaging/headers.js';
import type {
  ConsumerTransport,
  CopyTarget,
  TransportDelivery,
  TransportState,
} from '../../ports/consumer-transport.js';
import type { OutboundMessage } from '../../ports/message-sink.js';
import { abortableDelay, type BackoffSettings, retryDelayMs } from '../../runtime/backoff.js';
import type { KafkaSecurity } from '../../settings/connections.js';
import { createKafka } from './kafka-client.js';
import { type KafkaDelivery, type KafkaDeliveryControl, KafkaTopicConsumer } from './kafka-consumer.js';
import { KafkaSink } from './kafka-sink.js';
import { KafkaTopicAdmin } from './kafka-topics.js';

export const retryTopicName = (topic: string) => `${topic}.retry`;
export const deadTopicName = (topic: string) => `${topic}.dead`;

export interface KafkaTransportOptions {
  brokers: readonly string[];
  /** TLS and SASL (config.kafka.security). */
  security?: KafkaSecurity | undefined;
  clientId: string;
  groupId: string;
  topic: string;
  /** Partitions handled at once per topic (each in offset order). */
  concurrency: number;
  fromBeginning: boolean;
  retryDelayMs: number;
  topicPartitions?: number | undefined;
  replicationFactor?: number | undefined;
  logger: Logger;
  signal?: AbortSignal | undefined;
  /** Clock for retry delays (injectable in tests). */
  now?: () => number;
}

interface Received {
  delivery: KafkaDelivery;
  control: KafkaDeliveryControl;
  settled: boolean;
}

const COPY_RETRY: BackoffSettings = { baseMs: 200, maxMs: 5_000, jitter: 'equal' };
/** After stop: how long closing waits for the groups to leave before closing the producer anyway. */
const LEAVE_TIMEOUT_MS = 10_000;

export class KafkaConsumerTransport implements ConsumerTransport {
  private main: KafkaTopicConsumer | undefined;
  private retry: KafkaTopicConsumer | undefined;
  private readonly sink: KafkaSink;
  private readonly received = new WeakMap<TransportDelivery, Received>();
  private copySeq = 0;
  private leaving: Promise<unknown> | undefined;
  readonly messageIdLabel = 'message id';

  constructor(private readonly options: KafkaTransportOptions) {
    this.sink = new KafkaSink({
      brokers: options.brokers,
      security: options.security,
      clientId: options.clientId,
      maxBatchMessages: 1,
      logger: options.logger,
    });
  }

  get source(): string {
    return this.options.topic;
  }

  get state(): TransportState {
    const states = [this.main?.state, this.retry?.state];
    if (states.includes('failed')) return 'failed';
    if (states.includes('reconnecting')) return 'reconnecting';
    return this.main?.state ?? 'starting';
  }

  get reconnects(): number {
    return (this.main?.reconnects ?? 0) + (this.retry?.reconnects ?? 0);
  }

  async start(onDelivery: (delivery: TransportDelivery) => Promise<void>): Promise<void> {
    const { topic } = this.options;
    const admin = new KafkaTopicAdmin(
      createKafka({
        brokers: this.options.brokers,
        security: this.options.security,
        clientId: this.options.clientId,
        logger: this.options.logger,
      }),
      {
        create: {
          partitions: this.options.topicPartitions,
          replicationFactor: this.options.replicationFactor,
        },
        logger: this.options.logger,
      },
    );
    try {
      await admin.missing([topic, retryTopicName(topic), deadTopicName(topic)]); // creates what is missing
    } finally {
      await admin.close();
    }
    const deliver = async (delivery: KafkaDelivery, control: KafkaDeliveryControl) => {
      const transportDelivery: TransportDelivery = {
        body: delivery.body,
        messageId: delivery.messageId,
        headers: delivery.headers,
        redelivered: false,
        logFields: { partition: delivery.partition, offset: delivery.offset },
      };
      const received: Received = { delivery, control, settled: false };
      this.received.set(transportDelivery, received);
      await onDelivery(transportDelivery);
      // Unsettled (a copy could not be written before the stop): keep the offset, deliver it again.
      if (!received.settled) {
        throw new BrokerUnavailableError(
          `message at ${delivery.partition}/${delivery.offset} left for redelivery`,
        );
      }
    };
    const common = {
      brokers: this.options.brokers,
      security: this.options.security,
      clientId: this.options.clientId,
      fromBeginning: this.options.fromBeginning,
      concurrency: this.options.concurrency,
      logger: this.options.logger,
      onDelivery: deliver,
      ...(this.options.now ? { now: this.options.now } : {}),
      ...(this.options.signal ? { signal: this.options.signal } : {}),
    };
    const [main, retry] = await Promise.allSettled([
      KafkaTopicConsumer.start({ ...common, groupId: this.options.groupId, topic }),
      KafkaTopicConsumer.start({
        ...common,
        groupId: `${this.options.groupId}.retry`,
        topic: retryTopicName(topic),
        notBefore: (delivery) => delivery.timestamp + this.options.retryDelayMs,
      }),
    ]);
    if (main.status === 'fulfilled') this.main = main.value;
    if (retry.status === 'fulfilled') this.retry = retry.value;
    if (main.status === 'rejected') throw main.reason;
    if (retry.status === 'rejected') throw retry.reason;
    this.options.logger.info({ groupId: this.options.groupId }, 'consuming');
  }

  settle(delivery: TransportDelivery): boolean {
    const received = this.received.get(delivery);
    if (!received) return false;
    received.settled = true;
    return true;
  }

  /** Writes a copy (same key, body and headers, plus `headers`), retrying with backoff until confirmed or stopped. */
  async publishCopy(
    delivery: TransportDelivery,
    target: CopyTarget,
    headers: Record<string, string | number>,
  ): Promise<boolean> {
    const received = this.received.get(delivery);
    if (!received) return false;
    const { [HEADER.messageId]: _id, ...original } = received.delivery.headers;
    const now = this.options.now ?? Date.now;
    const copy: OutboundMessage = {
      id: ++this.copySeq,
      messageId: delivery.messageId ?? '',
      destination: target === 'retry' ? retryTopicName(this.source) : deadTopicName(this.source),
      routingKey: null,
      partitionKey: received.delivery.key,
      headers: {
        ...original,
        ...Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, String(v)])),
      },
      body: delivery.body,
      priority: 3,
      timestamp: new Date(now()),
    };
    for (let failures = 1; ; failures++) {
      const [outcome] = await this.sink.publish([copy]);
      if (outcome?.ok) return true;
      const delayMs = retryDelayMs(failures, COPY_RETRY);
      this.options.logger.warn(
        { err: outcome && !outcome.ok ? outcome.error : 'no outcome', target: copy.destination, delayMs },
        'cannot write the copy; retrying before the offset moves',
      );
      const until = Date.now() + delayMs;
      while (Date.now() < until) {
        if (received.control.stopping) return false;
        await abortableDelay(Math.min(250, until - Date.now()));
        await received.control.heartbeat().catch(() => {});
      }
    }
  }

  release(): void {
    // Nothing to do: an unsettled delivery throws out of its handler, and its offset stays.
  }

  async cancel(): Promise<void> {
    this.leaving ??= Promise.all([this.main?.stop(), this.retry?.stop()]);
  }

  async close(): Promise<void> {
    await this.cancel();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.leaving,
      new Promise((resolve) => (timer = setTimeout(resolve, LEAVE_TIMEOUT_MS))),
    ]);
    clearTimeout(timer);
    await this.sink.close();
  }
}
