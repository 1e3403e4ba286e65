/**
 * The test side of the real Kafka broker: raw kafkajs (not Herald's code) to create uniquely named
 * topics, read them back from the beginning with a throwaway consumer group, and delete them. Tests
 * count and order deliveries through this, so a bug in Herald's consumer cannot hide one in the sink.
 */

import { type Admin, type Consumer, type ITopicConfig, Kafka, logLevel } from 'kafkajs';
import { waitFor } from '../../../src/testing/wait.js';
import { requireEnv, uniqueName } from '../../support/services.js';

export interface KafkaDelivery {
  topic: string;
  partition: number;
  offset: number;
  key: string | null;
  messageId: string;
  headers: Record<string, string>;
  body: string;
  timestamp: number;
}

export class KafkaFixture {
  readonly kafka: Kafka;
  private readonly topics = new Set<string>();
  private readonly consumers: Consumer[] = [];

  private constructor(
    readonly brokers: string[],
    private readonly admin: Admin,
    kafka: Kafka,
  ) {
    this.kafka = kafka;
  }

  /** On KAFKA_BROKERS, or on `brokers` (the HA tests' cluster). */
  static async open(brokers: string[] = requireEnv('KAFKA_BROKERS').split(',')): Promise<KafkaFixture> {
    const kafka = new Kafka({
      clientId: 'herald-test-fixture',
      brokers,
      logLevel: logLevel.NOTHING,
      connectionTimeout: 3_000,
      retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2_000 },
    });
    const admin = kafka.admin();
    await admin.connect();
    return new KafkaFixture(brokers, admin, kafka);
  }

  /** A fresh topic (deleted by close()). */
  async topic(
    prefix = 'topic',
    options: { partitions?: number; configEntries?: ITopicConfig['configEntries']; name?: string } = {},
  ): Promise<string> {
    const topic = options.name ?? uniqueName(`herald_test_${prefix}`);
    // kafkajs' own leader wait gives up ("does not host this topic-partition") while a busy broker's
    // metadata does not know the new topic yet: wait for the leaders here, as the product does.
    await this.admin.createTopics({
      waitForLeaders: false,
      topics: [
        {
          topic,
          numPartitions: options.partitions ?? 4,
          ...(options.configEntries ? { configEntries: options.configEntries } : {}),
        },
      ],
    });
    this.topics.add(topic);
    await waitFor(
      async () => {
        const metadata = await this.admin.fetchTopicMetadata({ topics: [topic] }).catch(() => null);
        const partitions = metadata?.topics[0]?.partitions ?? [];
        return partitions.length > 0 && partitions.every((p) => p.leader >= 0);
      },
      { what: `leaders for topic ${topic}`, timeoutMs: 30_000, intervalMs: 100 },
    );
    return topic;
  }

  /** Deletes `topic` (and names like it, e.g. its .retry/.dead) when this fixture closes. */
  adopt(...topics: string[]): void {
    for (const topic of topics) this.topics.add(topic);
  }

  async topicExists(topic: string): Promise<boolean> {
    return (await this.admin.listTopics()).includes(topic);
  }

  /** Reads `topics` from the beginning; resolves once the consumer joined its group. */
  async consume(...topics: string[]): Promise<KafkaDelivery[]> {
    const received: KafkaDelivery[] = [];
    const consumer = this.kafka.consumer({
      groupId: uniqueName('herald_test_reader'),
      sessionTimeout: 10_000,
      heartbeatInterval: 1_000,
      maxWaitTimeInMs: 100,
    });
    await consumer.connect();
    await consumer.subscribe({ topics, fromBeginning: true });
    const joined = new Promise<void>((resolve) => consumer.on(consumer.events.GROUP_JOIN, () => resolve()));
    await consumer.run({
      eachMessage: async ({ topic, partition, message }) => {
        const headers: Record<string, string> = {};
        for (const [name, value] of Object.entries(message.headers ?? {})) {
          if (value !== undefined)
            headers[name] = Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
        }
        received.push({
          topic,
          partition,
          offset: Number(message.offset),
          key: message.key ? message.key.toString('utf8') : null,
          messageId: headers['x-herald-message-id'] ?? '',
          headers,
          body: message.value ? message.value.toString('utf8') : '',
          timestamp: Number(message.timestamp),
        });
      },
    });
    await joined;
    this.consumers.push(consumer);
    return received;
  }

  /** The group's committed offsets (the next offset to read) per partition of `topic`; -1: none. */
  async committedOffsets(groupId: string, topic: string): Promise<number[]> {
    const [entry] = await this.admin.fetchOffsets({ groupId, topics: [topic] });
    return (entry?.partitions ?? []).map((p) => Number(p.offset));
  }

  /** Publishes raw messages (not through Herald). */
  async produce(
    topic: string,
    messages: { key?: string; value: string; headers?: Record<string, string> }[],
  ): Promise<void> {
    const producer = this.kafka.producer();
    await producer.connect();
    try {
      await producer.send({ topic, acks: -1, messages });
    } finally {
      await producer.disconnect();
    }
  }

  async close(): Promise<void> {
    for (const consumer of this.consumers.splice(0)) await consumer.disconnect().catch(() => {});
    const existing = new Set(await this.admin.listTopics().catch(() => [] as string[]));
    const doomed = [...this.topics].filter((topic) => existing.has(topic));
    if (doomed.length > 0) await this.admin.deleteTopics({ topics: doomed }).catch(() => {});
    await this.admin.disconnect().catch(() => {});
  }
}

/** First delivery of each message id, in the order the reader saw them per key. */
export function firstDeliveriesByKey(deliveries: readonly KafkaDelivery[]): Map<string, KafkaDelivery[]> {
  const seen = new Set<string>();
  const byKey = new Map<string, KafkaDelivery[]>();
  for (const delivery of deliveries) {
    if (seen.has(delivery.messageId)) continue;
    seen.add(delivery.messageId);
    const key = delivery.key ?? '';
    let list = byKey.get(key);
    if (!list) {
      list = [];
      byKey.set(key, list);
    }
    list.push(delivery);
  }
  return byKey;
}
