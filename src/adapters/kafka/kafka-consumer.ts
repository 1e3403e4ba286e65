/**
 * Kafka mechanics of the consumer toolkit (src/worker/consume-kafka.ts holds the per-message rules): one
 * kafkajs consumer group per topic, each partition handed over in offset order, and an offset resolved only
 * once `onDelivery` resolved, after the handler's transaction committed (invariant 4: a crash redelivers and
 * the inbox de-duplicates). `onDelivery` throws only to leave a message unresolved while stopping; kafkajs
 * then re-fetches it from the last resolved offset. `notBefore` (the retry topic's delay) blocks only its
 * partition and keeps heartbeating. kafkajs reconnects and re-joins by itself. ADR 0007.
 */
import type { Consumer, IHeaders, KafkaMessage } from 'kafkajs';
import { BrokerUnavailableError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { HEADER } from '../../messaging/headers.js';
import type { KafkaSecurity } from '../../settings/connections.js';
import { createKafka } from './kafka-client.js';

export interface KafkaDelivery {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly key: string | null;
  readonly body: Buffer;
  /** The `x-herald-message-id` header; undefined when missing or empty. */
  readonly messageId: string | undefined;
  /** Header values as text (Kafka headers are bytes). */
  readonly headers: Record<string, string>;
  /** The message timestamp (ms): for Herald's messages, when the outbox row (or the copy) was written. */
  readonly timestamp: number;
}

export interface KafkaDeliveryControl {
  heartbeat(): Promise<void>;
  /** True once stop() began: waits should give up (throw) so the message is redelivered later. */
  readonly stopping: boolean;
}

export type KafkaConsumerState =
  | 'starting'
  | 'consuming'
  | 'reconnecting'
  | 'stopping'
  | 'stopped'
  | 'failed';

export interface KafkaTopicConsumerOptions {
  brokers: readonly string[];
  /** TLS and SASL (config.kafka.security). */
  security?: KafkaSecurity | undefined;
  clientId: string;
  groupId: string;
  topic: string;
  /** A new group starts at the earliest offset (default) or only sees messages written after it joined. */
  fromBeginning?: boolean;
  /** Partitions handled at once (each one still in offset order). Default 1. */
  concurrency?: number;
  logger: Logger;
  onDelivery: (delivery: KafkaDelivery, control: KafkaDeliveryControl) => Promise<void>;
  /** Epoch ms before which a delivery must not be handled (retry topics). */
  notBefore?: (delivery: KafkaDelivery) => number | undefined;
  /** Clock for `notBefore` (injectable in tests). */
  now?: () => number;
  /** Aborts waiting for the first group join. */
  signal?: AbortSignal | undefined;
  /** kafkajs session timeout. Default 10 s (a dead member's partitions move on after this). */
  sessionTimeoutMs?: number;
  /** How long `start` keeps trying again after retriable errors. Default 60 s. */
  startTimeoutMs?: number;
}

/** Longest sleep between heartbeats while a delivery waits for its due time. */
const WAIT_SLICE_MS = 500;
/** How long a start is tried again on retriable errors, and the longest wait between tries. */
const START_TIMEOUT_MS = 60_000;
const START_RETRY_MAX_MS = 5_000;

/** True when the error, or one it wraps, is one kafkajs marks retriable. */
function isRetriable(error: unknown): boolean {
  for (let e = error, depth = 0; e && depth < 5; depth++) {
    if ((e as { retriable?: unknown }).retriable === true) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

export class KafkaTopicConsumer {
  private readonly consumer: Consumer;
  private currentState: KafkaConsumerState = 'starting';
  private crashes = 0;
  private stopRequested = false;
  private readonly inFlight = new Set<Promise<void>>();

  private constructor(private readonly options: KafkaTopicConsumerOptions) {
    const kafka = createKafka({
      brokers: options.brokers,
      security: options.security,
      clientId: options.clientId,
      logger: options.logger,
      retry: { retries: 5, initialRetryTime: 200, maxRetryTime: 5_000 },
    });
    this.consumer = kafka.consumer({
      groupId: options.groupId,
      sessionTimeout: options.sessionTimeoutMs ?? 10_000,
      heartbeatInterval: 1_000,
      maxWaitTimeInMs: 200,
      allowAutoTopicCreation: false,
    });
  }

  /**
   * Connects, subscribes and resolves once the consumer joined its group (deliveries flow). A start
   * that fails on an error Kafka calls retriable (a topic created a moment ago that a broker's metadata
   * does not know yet: "does not host this topic-partition"; a leader election) is tried again with a
   * fresh consumer until `startTimeoutMs`, so a role does not exit over what a cluster settles in seconds.
   */
  static async start(options: KafkaTopicConsumerOptions): Promise<KafkaTopicConsumer> {
    const deadline = Date.now() + (options.startTimeoutMs ?? START_TIMEOUT_MS);
    for (let attempt = 1; ; attempt++) {
      const self = new KafkaTopicConsumer(options);
      try {
        await self.run();
        return self;
      } catch (error) {
        const wait = Math.min(START_RETRY_MAX_MS, 250 * 2 ** attempt);
        if (!isRetriable(error) || options.signal?.aborted || Date.now() + wait > deadline) throw error;
        options.logger.warn(
          { err: error, topic: options.topic, attempt, retryInMs: wait },
          'kafka consumer could not start; trying again',
        );
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  get state(): KafkaConsumerState {
    return this.currentState;
  }

  get reconnects(): number {
    return this.crashes;
  }

  /**
   * Stops fetching, lets the delivery being handled in each partition finish (waits give up), commits
   * resolved offsets and leaves the group.
   */
  async stop(): Promise<void> {
    if (this.currentState === 'stopped') return;
    this.stopRequested = true;
    this.currentState = 'stopping';
    await this.consumer.disconnect().catch((error: unknown) => {
      this.options.logger.warn({ err: error }, 'kafka consumer disconnect failed');
    });
    await Promise.allSettled([...this.inFlight]);
    this.currentState = 'stopped';
  }

  private async run(): Promise<void> {
    const { consumer, options } = this;
    const joined = new Promise<void>((resolve, reject) => {
      consumer.on(consumer.events.GROUP_JOIN, () => {
        if (!this.stopRequested) this.currentState = 'consuming';
        resolve();
      });
      consumer.on(consumer.events.CRASH, (event) => {
        this.crashes++;
        const restart = event.payload.restart;
        if (!this.stopRequested) this.currentState = restart ? 'reconnecting' : 'failed';
        options.logger.warn(
          { err: event.payload.error, restart, topic: options.topic },
          'kafka consumer crashed; kafkajs restarts it',
        );
      });
      options.signal?.addEventListener(
        'abort',
        () =>
          reject(new BrokerUnavailableError(`consumer for ${options.topic} was stopped before it joined`)),
        { once: true },
      );
    });
    joined.catch(() => {}); // awaited below; an abort during connect must not surface as unhandled
    try {
      await consumer.connect();
      await consumer.subscribe({ topics: [options.topic], fromBeginning: options.fromBeginning ?? true });
      await consumer.run({
        autoCommit: true,
        partitionsConsumedConcurrently: options.concurrency ?? 1,
        eachMessage: ({ topic, partition, message, heartbeat }) =>
          this.deliver(toDelivery(topic, partition, message), heartbeat),
      });
      await joined;
    } catch (error) {
      this.stopRequested = true;
      await consumer.disconnect().catch(() => {});
      this.currentState = 'failed';
      throw error instanceof BrokerUnavailableError
        ? error
        : new BrokerUnavailableError(`cannot consume ${options.topic}: ${(error as Error).message}`, error);
    }
  }

  private async deliver(delivery: KafkaDelivery, heartbeat: () => Promise<void>): Promise<void> {
    const isStopping = () => this.stopRequested;
    const control: KafkaDeliveryControl = {
      heartbeat,
      get stopping() {
        return isStopping();
      },
    };
    const work = (async () => {
      const due = this.options.notBefore?.(delivery);
      if (due !== undefined) await this.waitUntil(due, control);
      await this.options.onDelivery(delivery, control);
    })();
    this.inFlight.add(work);
    try {
      await work;
    } finally {
      this.inFlight.delete(work);
    }
  }

  private async waitUntil(due: number, control: KafkaDeliveryControl): Promise<void> {
    const now = this.options.now ?? Date.now;
    for (let remaining = due - now(); remaining > 0; remaining = due - now()) {
      if (control.stopping)
        throw new BrokerUnavailableError('consumer stopping; the message will be redelivered');
      await new Promise((resolve) => setTimeout(resolve, Math.min(remaining, WAIT_SLICE_MS)));
      await control.heartbeat();
    }
  }
}

function toDelivery(topic: string, partition: number, message: KafkaMessage): KafkaDelivery {
  const headers = headerText(message.headers);
  const messageId = headers[HEADER.messageId];
  return {
    topic,
    partition,
    offset: message.offset,
    key: message.key ? message.key.toString('utf8') : null,
    body: message.value ?? Buffer.alloc(0),
    messageId: messageId ? messageId : undefined,
    headers,
    timestamp: Number(message.timestamp),
  };
}

function headerText(headers: IHeaders | undefined): Record<string, string> {
  const text: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (value === undefined) continue;
    const first = Array.isArray(value) ? value[0] : value;
    if (first !== undefined) text[name] = Buffer.isBuffer(first) ? first.toString('utf8') : String(first);
  }
  return text;
}
