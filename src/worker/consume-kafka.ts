/**
 * The consumer toolkit over Kafka: `consumeKafka(deps, topic, handler, options)`, the same delivery
 * policy as `consume` over RabbitMQ (delivery-policy.ts, ADR 0005; invariant 4), on the Kafka
 * transport: a consumer group on `<topic>` (each partition in offset order; offsets move only after the
 * handler's transaction committed), `<topic>.retry` read by a second group that waits until a copy is
 * `retryDelayMs` old, and `<topic>.dead`.
 */
import { KafkaConsumerTransport } from '../adapters/kafka/kafka-transport.js';
import type { Logger } from '../logger.js';
import type { MessageSchema } from '../messaging/message-schemas.js';
import type { Database } from '../ports/database.js';
import type { KafkaSecurity } from '../settings/connections.js';
import { type Consumer, DeliveryPolicy, type Handler, validateConsumerOptions } from './delivery-policy.js';

export { deadTopicName, retryTopicName } from '../adapters/kafka/kafka-transport.js';

export interface KafkaConsumeDeps {
  db: Database;
  /** KAFKA_BROKERS. */
  brokers: readonly string[];
  /** TLS and SASL (config.kafka.security); absent: PLAINTEXT. */
  security?: KafkaSecurity | undefined;
  logger: Logger;
}

export interface KafkaConsumeOptions<T> {
  /** Name recorded as `inbox.consumer`; de-duplication is per consumer name. */
  consumer: string;
  /** Kafka consumer group. Default: the consumer name. Replicas share it and split the partitions. */
  groupId?: string;
  /** Attempts before dead-lettering. Default 5. */
  maxAttempts?: number;
  /** How old a retry copy must be before it is handled again. Default 10 000 ms. */
  retryDelayMs?: number;
  /** Validates the JSON payload; a throw is permanent (the message is rejected, never retried). */
  parse?: (payload: unknown) => T;
  /**
   * The message schema versions it reads (ADR 0039): older versions are upcast before `parse`, a newer
   * one is dead-lettered naming the version. Default: version 1 only.
   */
  messages?: MessageSchema;
  /** Partitions handled at once per topic (each in offset order). Default 4. */
  concurrency?: number;
  /** A new group starts at the earliest offset. Default true: nothing published before it joined is missed. */
  fromBeginning?: boolean;
  /** Partitions (and replication factor) of topics the toolkit creates: the topic, `.retry`, `.dead`. */
  topicPartitions?: number | undefined;
  replicationFactor?: number | undefined;
  /** Aborts waiting for the first group join. */
  signal?: AbortSignal;
  /** Clock for retry delays and `x-herald-failed-at` (informational; no correctness rests on it). */
  now?: () => number;
  /**
   * Most deliveries in one transaction when the handler has a batch form (the fenced handler of a
   * set-based effect). Default 32; 1 turns batching off. A failing batch is handled one message at a time.
   */
  batchSize?: number;
}

/** Starts consuming `topic` (and its retry topic). Resolves once both consumer groups were joined. */
export async function consumeKafka<T = unknown>(
  deps: KafkaConsumeDeps,
  topic: string,
  handler: Handler<T>,
  options: KafkaConsumeOptions<T>,
): Promise<Consumer> {
  const concurrency = options.concurrency ?? 4;
  const common = validateConsumerOptions(topic, options, (problems, retryDelayMs) => {
    // Kafka's limit on a topic name is 249 characters; `.retry` adds 6.
    if (!/^[a-zA-Z0-9._-]{1,243}$/.test(topic)) problems.push('topic must be 1..243 of [a-zA-Z0-9._-]');
    if (retryDelayMs < 0) problems.push('retryDelayMs must be a non-negative integer');
    if (!Number.isInteger(concurrency) || concurrency < 1)
      problems.push('concurrency must be a positive integer');
  });
  const logger = deps.logger.child({ consumer: options.consumer, topic });
  const transport = new KafkaConsumerTransport({
    brokers: deps.brokers,
    security: deps.security,
    clientId: `herald-consumer-${options.consumer}`,
    groupId: options.groupId ?? options.consumer,
    topic,
    concurrency,
    fromBeginning: options.fromBeginning ?? true,
    retryDelayMs: common.retryDelayMs,
    topicPartitions: options.topicPartitions,
    replicationFactor: options.replicationFactor,
    logger,
    signal: options.signal,
    ...(options.now ? { now: options.now } : {}),
  });
  return new DeliveryPolicy(
    deps.db,
    transport,
    handler,
    {
      ...common,
      parse: options.parse,
      ...(options.messages ? { messages: options.messages } : {}),
      ...(options.now ? { now: options.now } : {}),
      ...(options.batchSize ? { batchSize: options.batchSize } : {}),
    },
    logger,
  ).start();
}
