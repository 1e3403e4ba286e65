/**
 * The consumer contract (test/worker/consumer-contract.ts) over Kafka: `consumeKafka` on a fresh topic
 * (created with its `.retry` and `.dead` topics, deleted when the KafkaFixture closes), raw messages
 * produced with kafkajs through the KafkaFixture (the message id in the `x-herald-message-id` header),
 * `<topic>.dead` read by a throwaway group from the beginning, and the
 * backlog counted as the messages past the consumer groups' committed offsets on `<topic>` and
 * `<topic>.retry` (an offset moves only for a settled delivery).
 */
import type { Admin } from 'kafkajs';
import { silentLogger } from '../../src/logger.js';
import { HEADER } from '../../src/messaging/headers.js';
import {
  type DeadLetter,
  describeConsumerContract,
  type TransportFixture,
} from '../../src/testing/consumer-contract.js';
import { waitFor } from '../../src/testing/wait.js';
import { consumeKafka, deadTopicName, retryTopicName } from '../../src/worker/consume-kafka.js';
import { createTestDatabase, uniqueName } from '../support/services.js';
import { type KafkaDelivery, KafkaFixture } from './support/kafka-fixture.js';

class KafkaContractFixture implements TransportFixture {
  /** A database of its own for the suite, migrated (test/support/services.ts). */
  database = () => createTestDatabase();

  private kafka: KafkaFixture | undefined;
  private admin: Admin | undefined;
  private readonly dead = new Map<string, Promise<KafkaDelivery[]>>();

  async open(): Promise<void> {
    this.kafka = await KafkaFixture.open();
    this.admin = this.kafka.kafka.admin();
    await this.admin.connect();
  }

  async close(): Promise<void> {
    await this.admin?.disconnect();
    await this.kafka?.close();
  }

  /**
   * The topic and its `.retry` and `.dead` topics, with `partitions` partitions each, made here rather
   * than by the consumer: kafkajs' own wait for leaders gives up ("does not host this topic-partition")
   * when the broker's metadata does not know a new topic yet, which happens on a loaded broker.
   */
  async newSource(options: { partitions?: number } = {}): Promise<string> {
    const partitions = options.partitions ?? 2;
    const topic = uniqueName('herald_test_contract');
    const topics = [topic, retryTopicName(topic), deadTopicName(topic)];
    this.kafka!.adopt(...topics);
    await this.admin!.createTopics({
      waitForLeaders: false,
      topics: topics.map((name) => ({ topic: name, numPartitions: partitions })),
    });
    await waitFor(
      async () => {
        const metadata = await this.admin!.fetchTopicMetadata({ topics });
        return (
          metadata.topics.length === topics.length &&
          metadata.topics.every(
            (t) => t.partitions.length === partitions && t.partitions.every((p) => p.leader >= 0),
          )
        );
      },
      { what: `leaders for ${topics.join(', ')}`, timeoutMs: 30_000 },
    );
    return topic;
  }

  start: TransportFixture['start'] = (db, source, handler, options) =>
    consumeKafka({ db, brokers: this.kafka!.brokers, logger: silentLogger }, source, handler, {
      consumer: options.consumer,
      ...(options.maxAttempts !== undefined ? { maxAttempts: options.maxAttempts } : {}),
      ...(options.retryDelayMs !== undefined ? { retryDelayMs: options.retryDelayMs } : {}),
      ...(options.parse ? { parse: options.parse } : {}),
      ...(options.oneAtATime ? { concurrency: 1 } : {}),
    });

  async publish(source: string, messages: Parameters<TransportFixture['publish']>[1]): Promise<void> {
    await this.kafka!.produce(
      source,
      messages.map((message) => ({
        key: message.key ?? 'k',
        value: Buffer.isBuffer(message.body) ? message.body.toString('utf8') : message.body,
        headers: {
          ...(message.headers ?? {}),
          ...(message.messageId !== undefined ? { [HEADER.messageId]: message.messageId } : {}),
        },
      })),
    );
  }

  /** Starts a reader of `<source>.dead` on the first call (the consumer created the topic by then). */
  async deadLetters(source: string): Promise<DeadLetter[]> {
    let reader = this.dead.get(source);
    if (!reader) {
      reader = this.kafka!.consume(deadTopicName(source));
      this.dead.set(source, reader);
    }
    return (await reader).map((delivery) => ({
      messageId: delivery.messageId === '' ? undefined : delivery.messageId,
      body: delivery.body,
      headers: { ...delivery.headers },
    }));
  }

  async backlog(source: string, consumer: string): Promise<number> {
    // consumeKafka's groups: the consumer name on the topic, `<name>.retry` on the retry topic.
    return (await this.lag(consumer, source)) + (await this.lag(`${consumer}.retry`, retryTopicName(source)));
  }

  async cleanup(): Promise<void> {
    // Topics are deleted when the KafkaFixture closes; the dead-letter readers stay until then.
  }

  /** Messages of `topic` past the group's committed offsets (all of them when it committed none). */
  private async lag(groupId: string, topic: string): Promise<number> {
    const admin = this.admin!;
    const ends = await admin.fetchTopicOffsets(topic);
    const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
    let total = 0;
    for (const { partition, high, low } of ends) {
      const offset = Number(committed?.partitions.find((p) => p.partition === partition)?.offset ?? -1);
      total += Number(high) - Math.max(offset, Number(low));
    }
    return total;
  }
}

describeConsumerContract('Kafka', new KafkaContractFixture());
