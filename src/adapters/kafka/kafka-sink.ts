/**
 * Kafka implementation of the relay's sink port (invariant 3: confirmed before sent): a message is `ok` only
 * once kafkajs' idempotent producer got acks = -1. Key = the row's partition key, so a key keeps one
 * partition; `x-herald-message-id` carries the message identity (invariant 4). A confirmed message's broker
 * reference is `<partition>/<offset>`: the partitioner records each message's partition, and the response's
 * base offset per partition gives the offsets in send order. Sends are serialized, a refused batch is
 * bisected until the refused messages stand alone, and after any failed send the producer is replaced by a
 * new idempotent session. ADR 0007.
 */
import {
  CompressionTypes,
  type ICustomPartitioner,
  type Kafka,
  type Message,
  Partitioners,
  type Producer,
  type RecordMetadata,
  type TopicMessages,
} from 'kafkajs';
import type { Logger } from '../../logger.js';
import { HEADER } from '../../messaging/headers.js';
import type {
  MessageSink,
  OutboundMessage,
  PublishOutcome,
  SinkConnectionState,
} from '../../ports/message-sink.js';
import type { KafkaSecurity } from '../../settings/connections.js';
import { classifyKafkaError, createKafka, type KafkaFailure } from './kafka-client.js';
import { KafkaTopicAdmin, type TopicCreation } from './kafka-topics.js';

export interface KafkaSinkOptions {
  brokers: readonly string[];
  /** TLS and SASL (config.kafka.security). */
  security?: KafkaSecurity | undefined;
  /** kafkajs clientId, shown by the broker. */
  clientId?: string;
  /** Most messages in one sendBatch; a larger publish call is sent in chunks (relay.inFlight). */
  maxBatchMessages: number;
  /** Create missing topics (HERALD_KAFKA_CREATE_TOPICS); absent: a missing topic is unroutable. */
  createTopics?: TopicCreation | undefined;
  logger?: Logger | undefined;
  /** TCP connect bound. Default 3 s. */
  connectionTimeoutMs?: number;
  /** Produce request bound (and the acks=-1 wait on the broker). Default 10 s. */
  requestTimeoutMs?: number;
  /** How long a positive topic check is trusted. Default 60 s. */
  topicCheckTtlMs?: number;
  /** An existing client (the consumer toolkit shares its own). */
  kafka?: Kafka;
}

/** kafkajs retries inside one send: enough for a leader election, short enough to come back. */
const SEND_RETRY = { retries: 3, initialRetryTime: 100, maxRetryTime: 2_000 };

export class KafkaSink implements MessageSink {
  readonly kind = 'kafka' as const;
  private readonly kafka: Kafka;
  private readonly topics: KafkaTopicAdmin;
  private producer: Producer | undefined;
  private writeTail: Promise<unknown> = Promise.resolve();
  private closed = false;
  private readonly requestTimeoutMs: number;
  /** The partition the partitioner chose for each message of the send in progress. */
  private readonly partitionOf = new WeakMap<Message, number>();
  /** Sends since start, and failed sends (each one replaced the producer): for tests and logs. */
  readonly stats = { sends: 0, failedSends: 0, producers: 0 };
  private state: SinkConnectionState = 'idle';
  private reconnecting: Promise<void> | undefined;

  constructor(private readonly options: KafkaSinkOptions) {
    this.requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
    this.kafka =
      options.kafka ??
      createKafka({
        brokers: options.brokers,
        security: options.security,
        clientId: options.clientId ?? 'herald-relay',
        logger: options.logger,
        connectionTimeoutMs: options.connectionTimeoutMs ?? 3_000,
        requestTimeoutMs: this.requestTimeoutMs,
      });
    this.topics = new KafkaTopicAdmin(this.kafka, {
      create: options.createTopics,
      ttlMs: options.topicCheckTtlMs ?? 60_000,
      logger: options.logger,
    });
  }

  /** `lost` after a connect or send that found no broker, until a producer connects or a send succeeds. */
  get connectionState(): SinkConnectionState {
    return this.state;
  }

  /** Connects a producer if there is none, in turn with the sends (never beside one); one attempt at a time. */
  ensureConnected(): Promise<void> {
    if (!this.reconnecting) {
      const connected = this.writeTail.then(async () => {
        if (!this.closed) await this.connect();
      });
      this.writeTail = connected.catch(() => {});
      this.reconnecting = connected.finally(() => {
        this.reconnecting = undefined;
      });
    }
    return this.reconnecting;
  }

  publish(batch: readonly OutboundMessage[]): Promise<PublishOutcome[]> {
    if (batch.length === 0) return Promise.resolve([]);
    const result = this.writeTail.then(() => this.publishNow(batch));
    this.writeTail = result.catch(() => {});
    return result;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.writeTail;
    await this.discardProducer();
    await this.topics.close();
  }

  private async publishNow(batch: readonly OutboundMessage[]): Promise<PublishOutcome[]> {
    if (this.closed) return batch.map((m) => failed(m.id, unavailable('sink closed')));
    const outcomes = new Map<number, PublishOutcome>();
    let missing: Set<string>;
    try {
      missing = await this.topics.missing(new Set(batch.map((m) => m.destination)));
    } catch (error) {
      const failure = classifyKafkaError(error);
      if (failure.failure === 'unavailable') this.state = 'lost';
      return batch.map((m) => failed(m.id, failure));
    }
    const sendable: OutboundMessage[] = [];
    for (const message of batch) {
      if (missing.has(message.destination)) {
        outcomes.set(message.id, {
          id: message.id,
          ok: false,
          error: `unroutable: unknown topic ${message.destination}`,
          failure: 'rejected',
        });
      } else {
        sendable.push(message);
      }
    }
    const chunk = Math.max(1, this.options.maxBatchMessages);
    for (let start = 0; start < sendable.length; start += chunk) {
      for (const outcome of await this.send(sendable.slice(start, start + chunk))) {
        outcomes.set(outcome.id, outcome);
      }
    }
    return batch.map((m) => outcomes.get(m.id)!);
  }

  /** One sendBatch; on a rejection, bisects until each refused message stands alone. */
  private async send(messages: readonly OutboundMessage[]): Promise<PublishOutcome[]> {
    let producer: Producer;
    try {
      producer = await this.connect();
    } catch (error) {
      return messages.map((m) => failed(m.id, classifyKafkaError(error)));
    }
    this.stats.sends++;
    const kafkaMessages = messages.map(toKafkaMessage);
    try {
      const metadata = await producer.sendBatch({
        acks: -1,
        timeout: this.requestTimeoutMs,
        compression: CompressionTypes.None,
        topicMessages: byTopic(messages, kafkaMessages),
      });
      this.state = 'connected';
      const refs = this.brokerRefs(messages, kafkaMessages, metadata);
      return messages.map((m, index) => ({ id: m.id, ok: true, brokerRef: refs[index] ?? null }));
    } catch (error) {
      this.stats.failedSends++;
      await this.discardProducer(); // its sequence numbers can no longer be trusted (see above)
      const failure = classifyKafkaError(error);
      if (failure.type === 'UNKNOWN_TOPIC_OR_PARTITION') {
        for (const m of messages) this.topics.forget(m.destination);
      }
      if (failure.failure === 'unavailable') {
        this.state = 'lost';
        this.options.logger?.warn({ err: failure.error, messages: messages.length }, 'kafka send failed');
        return messages.map((m) => failed(m.id, failure));
      }
      if (messages.length === 1) {
        const m = messages[0]!;
        this.options.logger?.warn(
          {
            messageId: m.messageId,
            correlationId: m.headers[HEADER.correlationId],
            aggregateId: m.headers[HEADER.streamId],
            destination: m.destination,
            bytes: m.body.length,
            err: failure.error,
          },
          'kafka rejected a message',
        );
        return [failed(m.id, failure)];
      }
      const half = Math.ceil(messages.length / 2);
      return [...(await this.send(messages.slice(0, half))), ...(await this.send(messages.slice(half)))];
    }
  }

  /**
   * `<partition>/<offset>` per message: within one request, the messages of a topic partition are
   * appended in the order sent, from the partition's base offset. Null where it cannot be known.
   */
  private brokerRefs(
    messages: readonly OutboundMessage[],
    kafkaMessages: readonly Message[],
    metadata: readonly RecordMetadata[],
  ): (string | null)[] {
    const base = new Map(metadata.map((r) => [`${r.topicName}\u0000${r.partition}`, r.baseOffset]));
    const next = new Map<string, bigint>();
    return messages.map((m, index) => {
      const partition = this.partitionOf.get(kafkaMessages[index]!);
      if (partition === undefined) return null;
      const key = `${m.destination}\u0000${partition}`;
      const first = base.get(key);
      if (first === undefined || first === null || first === '') return null;
      const offset = next.get(key) ?? BigInt(first);
      next.set(key, offset + 1n);
      return `${partition}/${offset}`;
    });
  }

  private async connect(): Promise<Producer> {
    if (this.producer) return this.producer;
    const producer = this.kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      retry: SEND_RETRY,
      // The default partitioner (murmur2 on the key, as the Java client): named so kafkajs does not
      // warn about its v2 partitioner change. A key always maps to one partition. Each choice is
      // recorded, for the broker references.
      createPartitioner: this.recordingPartitioner,
    });
    try {
      await producer.connect(); // also obtains the producer id (InitProducerId)
    } catch (error) {
      this.state = 'lost';
      await producer.disconnect().catch(() => {});
      throw error;
    }
    this.state = 'connected';
    this.stats.producers++;
    this.producer = producer;
    return producer;
  }

  private readonly recordingPartitioner: ICustomPartitioner = () => {
    const choose = Partitioners.DefaultPartitioner();
    return (args) => {
      const partition = choose(args);
      this.partitionOf.set(args.message, partition);
      return partition;
    };
  };

  private async discardProducer(): Promise<void> {
    const producer = this.producer;
    this.producer = undefined;
    await producer?.disconnect().catch(() => {});
  }
}

/** Groups messages by topic, keeping their order within each topic (and so within each key). */
function byTopic(messages: readonly OutboundMessage[], kafkaMessages: readonly Message[]): TopicMessages[] {
  const topics = new Map<string, Message[]>();
  for (const [index, m] of messages.entries()) {
    let list = topics.get(m.destination);
    if (!list) {
      list = [];
      topics.set(m.destination, list);
    }
    list.push(kafkaMessages[index]!);
  }
  return [...topics].map(([topic, list]) => ({ topic, messages: list }));
}

export function toKafkaMessage(m: OutboundMessage): Message {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(m.headers)) headers[name] = String(value);
  if (m.messageId) headers[HEADER.messageId] = m.messageId;
  headers[HEADER.contentType] ??= 'application/json';
  return {
    key: m.partitionKey,
    value: m.body,
    headers,
    timestamp: String((m.timestamp ?? new Date()).getTime()),
  };
}

function failed(id: number, failure: KafkaFailure): PublishOutcome {
  return { id, ok: false, error: failure.error, failure: failure.failure };
}

function unavailable(reason: string): KafkaFailure {
  return { failure: 'unavailable', error: `broker unavailable: ${reason}` };
}
