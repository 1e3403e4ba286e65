/**
 * The consumer toolkit over Kafka: `consumeKafka(deps, topic, handler, options)`, the same contract as
 * `consume` over RabbitMQ (ADR 0005): at-least-once delivery from the relay becomes an exactly-once
 * *effect* (invariant 4), and the toolkit only ever re-publishes retry and dead-letter copies of what it
 * received (invariant 2).
 *
 * Per message (a consumer group reads `<topic>`; each partition in offset order):
 * 1. No `x-herald-message-id` header → poison: a copy goes to `<topic>.dead`, the inbox records `dead`
 *    under `missing-id:<sha256 of the body>`.
 * 2. The body is parsed as JSON, then by `options.parse`; a throw is permanent.
 * 3. In ONE transaction: claim the inbox row (consumer, message id); a duplicate commits and is done
 *    without calling the handler. Otherwise the handler runs with the same `tx`; `{ discard }` records
 *    `discarded`. The offset is resolved only after that commit; kafkajs commits resolved offsets.
 * 4. PermanentError (or a parse failure) → rolled back, `rejected` recorded in its own statement.
 * 5. Anything else → rolled back; below `maxAttempts` a copy with `x-herald-attempt: attempt + 1` goes
 *    to `<topic>.retry`, else a copy with `x-herald-error`, `x-herald-failed-at`, `x-herald-consumer`,
 *    `x-herald-queue` (the topic) goes to `<topic>.dead` and the inbox records `dead`.
 * 6. A copy that cannot be written (broker trouble) is retried with backoff (heartbeating) before the
 *    offset moves; when the consumer stops meanwhile the offset stays and the message comes back.
 *
 * The retry topic is read by a second consumer group (`<group>.retry`) that waits until a copy is
 * `retryDelayMs` old (its Kafka timestamp, by the injected clock) and then runs the same steps. A
 * waiting copy blocks only its retry partition, never the main topic. Retries trade the key's order
 * for progress: a retried message is handled after later messages of its key (as in RabbitMQ).
 */
import { createHash } from 'node:crypto';
import { createKafka } from '../adapters/kafka/kafka-client.js';
import {
  type KafkaDelivery,
  type KafkaDeliveryControl,
  KafkaTopicConsumer,
} from '../adapters/kafka/kafka-consumer.js';
import { KafkaSink } from '../adapters/kafka/kafka-sink.js';
import { KafkaTopicAdmin } from '../adapters/kafka/kafka-topics.js';
import { claimInbox, markDiscarded, recordInboxFailure } from '../adapters/postgres/inbox-queries.js';
import { BrokerUnavailableError, PermanentError, ValidationError } from '../errors.js';
import type { Logger } from '../logger.js';
import { HEADER } from '../messaging/headers.js';
import type { Database } from '../ports/database.js';
import type { OutboundMessage } from '../ports/message-sink.js';
import { type BackoffSettings, retryDelayMs } from '../runtime/backoff.js';
import {
  attemptOf,
  type ConsumedMessage,
  type Consumer,
  type ConsumerStats,
  type Handler,
} from './consume.js';
import {
  countOutcome,
  type DeliveryOutcome,
  decodePayload,
  describeError,
  isDiscard,
} from './delivery-policy.js';

export interface KafkaConsumeDeps {
  db: Database;
  /** KAFKA_BROKERS. */
  brokers: readonly string[];
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
}

export const retryTopicName = (topic: string) => `${topic}.retry`;
export const deadTopicName = (topic: string) => `${topic}.dead`;

type Counter = Exclude<keyof ConsumerStats, 'state' | 'inFlight' | 'reconnects'>;

const MAX_ERROR_HEADER_CHARS = 1000;
const COPY_RETRY: BackoffSettings = { baseMs: 200, maxMs: 5_000, jitter: 'equal' };

/** Starts consuming `topic` (and its retry topic). Resolves once both consumer groups were joined. */
export async function consumeKafka<T = unknown>(
  deps: KafkaConsumeDeps,
  topic: string,
  handler: Handler<T>,
  options: KafkaConsumeOptions<T>,
): Promise<Consumer> {
  const settings = validate(topic, options);
  const worker = new TopicWorker<T>(deps, topic, handler, options, settings);
  try {
    await worker.start();
  } catch (error) {
    await worker.stop();
    throw error;
  }
  return worker;
}

interface Settings {
  groupId: string;
  maxAttempts: number;
  retryDelayMs: number;
  concurrency: number;
}

function validate(topic: string, options: KafkaConsumeOptions<unknown>): Settings {
  const settings: Settings = {
    groupId: options.groupId ?? options.consumer,
    maxAttempts: options.maxAttempts ?? 5,
    retryDelayMs: options.retryDelayMs ?? 10_000,
    concurrency: options.concurrency ?? 4,
  };
  const problems: string[] = [];
  // Kafka's limit on a topic name is 249 characters; `.retry` adds 6.
  if (!/^[a-zA-Z0-9._-]{1,243}$/.test(topic)) problems.push('topic must be 1..243 of [a-zA-Z0-9._-]');
  if (!options.consumer) problems.push('consumer name is required');
  if (!Number.isInteger(settings.maxAttempts) || settings.maxAttempts < 1) {
    problems.push('maxAttempts must be a positive integer');
  }
  if (!Number.isInteger(settings.retryDelayMs) || settings.retryDelayMs < 0) {
    problems.push('retryDelayMs must be a non-negative integer');
  }
  if (!Number.isInteger(settings.concurrency) || settings.concurrency < 1) {
    problems.push('concurrency must be a positive integer');
  }
  if (problems.length > 0) {
    throw new ValidationError(`invalid consumer options: ${problems.join('; ')}`, { topic, problems });
  }
  return settings;
}

class TopicWorker<T> implements Consumer {
  private main: KafkaTopicConsumer | undefined;
  private retry: KafkaTopicConsumer | undefined;
  private readonly sink: KafkaSink;
  private readonly counters: Record<Counter, number> = {
    received: 0,
    processed: 0,
    discarded: 0,
    duplicates: 0,
    rejected: 0,
    retried: 0,
    deadLettered: 0,
    redeliveryPending: 0,
  };
  private inFlightCount = 0;
  private copySeq = 0;
  private stopping: Promise<void> | undefined;
  private readonly logger: Logger;
  private readonly now: () => number;

  constructor(
    private readonly deps: KafkaConsumeDeps,
    readonly queue: string,
    private readonly handler: Handler<T>,
    private readonly options: KafkaConsumeOptions<T>,
    private readonly settings: Settings,
  ) {
    this.logger = deps.logger.child({ consumer: options.consumer, topic: queue });
    this.now = options.now ?? Date.now;
    this.sink = new KafkaSink({
      brokers: deps.brokers,
      clientId: `herald-consumer-${options.consumer}`,
      maxBatchMessages: 1,
      logger: this.logger,
    });
  }

  get consumer(): string {
    return this.options.consumer;
  }

  get stats(): ConsumerStats {
    const states = [this.main?.state, this.retry?.state];
    const state = states.includes('failed')
      ? 'failed'
      : states.includes('reconnecting')
        ? 'reconnecting'
        : (this.main?.state ?? 'starting');
    return {
      state,
      ...this.counters,
      inFlight: this.inFlightCount,
      reconnects: (this.main?.reconnects ?? 0) + (this.retry?.reconnects ?? 0),
    };
  }

  async start(): Promise<void> {
    const topics = [this.queue, retryTopicName(this.queue), deadTopicName(this.queue)];
    const admin = new KafkaTopicAdmin(
      createKafka({
        brokers: this.deps.brokers,
        clientId: `herald-consumer-${this.options.consumer}`,
        logger: this.logger,
      }),
      {
        create: {
          partitions: this.options.topicPartitions,
          replicationFactor: this.options.replicationFactor,
        },
        logger: this.logger,
      },
    );
    try {
      await admin.missing(topics); // creates what is missing: the toolkit's topology
    } finally {
      await admin.close();
    }
    const common = {
      brokers: this.deps.brokers,
      clientId: `herald-consumer-${this.options.consumer}`,
      fromBeginning: this.options.fromBeginning ?? true,
      concurrency: this.settings.concurrency,
      logger: this.logger,
      onDelivery: (delivery: KafkaDelivery, control: KafkaDeliveryControl) => this.track(delivery, control),
      now: this.now,
      ...(this.options.signal ? { signal: this.options.signal } : {}),
    };
    const [main, retry] = await Promise.allSettled([
      KafkaTopicConsumer.start({ ...common, groupId: this.settings.groupId, topic: this.queue }),
      KafkaTopicConsumer.start({
        ...common,
        groupId: `${this.settings.groupId}.retry`,
        topic: retryTopicName(this.queue),
        notBefore: (delivery) => delivery.timestamp + this.settings.retryDelayMs,
      }),
    ]);
    if (main.status === 'fulfilled') this.main = main.value;
    if (retry.status === 'fulfilled') this.retry = retry.value;
    if (main.status === 'rejected') throw main.reason;
    if (retry.status === 'rejected') throw retry.reason;
    this.logger.info({ groupId: this.settings.groupId }, 'consuming');
  }

  stop(options: { timeoutMs?: number } = {}): Promise<void> {
    this.stopping ??= this.shutdown(options.timeoutMs);
    return this.stopping;
  }

  private async shutdown(timeoutMs: number | undefined): Promise<void> {
    const stopped = Promise.all([this.main?.stop(), this.retry?.stop()]);
    if (timeoutMs === undefined) {
      await stopped;
    } else {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        stopped.then(() => false),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(true), timeoutMs);
        }),
      ]);
      clearTimeout(timer);
      if (timedOut) this.logger.warn('stop timed out; unfinished messages will be redelivered');
    }
    await this.sink.close();
    this.logger.info({ stats: this.stats }, 'consumer stopped');
  }

  private async track(delivery: KafkaDelivery, control: KafkaDeliveryControl): Promise<void> {
    this.inFlightCount++;
    try {
      await this.process(delivery, control);
    } finally {
      this.inFlightCount--;
    }
  }

  private async process(delivery: KafkaDelivery, control: KafkaDeliveryControl): Promise<void> {
    this.counters.received++;
    const attempt = attemptOf(delivery.headers);
    const correlationId = delivery.headers[HEADER.correlationId];
    const aggregateId = delivery.headers[HEADER.streamId];
    const log = this.logger.child({
      messageId: delivery.messageId,
      correlationId,
      aggregateId,
      attempt,
      partition: delivery.partition,
      offset: delivery.offset,
    });

    if (!delivery.messageId) {
      const inboxId = `missing-id:${createHash('sha256').update(delivery.body).digest('hex')}`;
      log.warn({ inboxId }, 'message has no message id; dead-lettering it');
      await this.deadLetter(
        delivery,
        inboxId,
        attempt,
        new PermanentError('message has no message id'),
        control,
        log,
      );
      return;
    }
    const messageId = delivery.messageId;

    let payload: T;
    try {
      payload = decodePayload(delivery.body, this.options.parse);
    } catch (error) {
      log.warn({ err: error, preview: delivery.body.subarray(0, 200).toString('utf8') }, 'poison message');
      await this.reject(delivery, messageId, attempt, error, control, log);
      return;
    }

    const message: ConsumedMessage<T> = {
      messageId,
      payload,
      headers: delivery.headers,
      attempt,
      queue: this.queue,
      redelivered: false,
      ...(correlationId ? { correlationId } : {}),
      ...(aggregateId ? { aggregateId } : {}),
    };
    const key = { consumer: this.options.consumer, messageId };
    let outcome: DeliveryOutcome;
    let reason: string | undefined;
    try {
      outcome = await this.deps.db.transaction(
        async (tx) => {
          if (!(await claimInbox(tx, { ...key, attempt }))) return 'duplicate' as const;
          const result = await this.handler(message, tx);
          if (isDiscard(result)) {
            reason = result.discard;
            await markDiscarded(tx, { ...key, reason });
            return 'discarded' as const;
          }
          return 'processed' as const;
        },
        { retryOnConflict: false },
      );
    } catch (error) {
      if (error instanceof PermanentError)
        await this.reject(delivery, messageId, attempt, error, control, log);
      else await this.retryOrDeadLetter(delivery, messageId, attempt, error, control, log);
      return;
    }
    countOutcome(this.counters, outcome, reason, log);
  }

  /** Permanent failure: record `rejected`. If the record cannot be written, retry the message instead. */
  private async reject(
    delivery: KafkaDelivery,
    messageId: string,
    attempt: number,
    error: unknown,
    control: KafkaDeliveryControl,
    log: Logger,
  ): Promise<void> {
    try {
      await recordInboxFailure(this.deps.db, {
        consumer: this.options.consumer,
        messageId,
        status: 'rejected',
        attempts: attempt,
        error: describeError(error),
      });
    } catch (recordError) {
      log.warn(
        { err: recordError, cause: describeError(error) },
        'cannot record the rejection; retrying the message later',
      );
      await this.retryOrDeadLetter(delivery, messageId, attempt, recordError, control, log);
      return;
    }
    this.counters.rejected++;
    log.warn({ err: error }, 'message rejected (permanent failure)');
  }

  private async retryOrDeadLetter(
    delivery: KafkaDelivery,
    messageId: string,
    attempt: number,
    error: unknown,
    control: KafkaDeliveryControl,
    log: Logger,
  ): Promise<void> {
    if (attempt >= this.settings.maxAttempts) {
      await this.deadLetter(delivery, messageId, attempt, error, control, log);
      return;
    }
    const headers = { ...delivery.headers, [HEADER.attempt]: String(attempt + 1) };
    await this.publishCopy(delivery, retryTopicName(this.queue), headers, control, log);
    this.counters.retried++;
    log.warn(
      { err: error, nextAttempt: attempt + 1, delayMs: this.settings.retryDelayMs },
      'transient failure; retrying later',
    );
  }

  private async deadLetter(
    delivery: KafkaDelivery,
    inboxId: string,
    attempt: number,
    error: unknown,
    control: KafkaDeliveryControl,
    log: Logger,
  ): Promise<void> {
    const text = describeError(error);
    const headers = {
      ...delivery.headers,
      [HEADER.attempt]: String(attempt),
      [HEADER.error]: text.slice(0, MAX_ERROR_HEADER_CHARS),
      [HEADER.failedAt]: new Date(this.now()).toISOString(),
      [HEADER.consumer]: this.options.consumer,
      [HEADER.queue]: this.queue,
    };
    await this.publishCopy(delivery, deadTopicName(this.queue), headers, control, log);
    try {
      await recordInboxFailure(this.deps.db, {
        consumer: this.options.consumer,
        messageId: inboxId,
        status: 'dead',
        attempts: attempt,
        error: text,
      });
    } catch (recordError) {
      // The copy in the dead topic is the durable record; handling the message again would only add another.
      log.error({ err: recordError }, 'message dead-lettered but the inbox record failed');
    }
    this.counters.deadLettered++;
    log.error({ err: error, attempts: attempt }, 'message dead-lettered');
  }

  /**
   * Writes a copy (same key, body and headers, plus `headers`) and waits for the broker's ack, retrying
   * with backoff while heartbeating. Throws only when the consumer stops first: the offset then stays
   * where it is and the message is delivered again.
   */
  private async publishCopy(
    delivery: KafkaDelivery,
    topic: string,
    headers: Record<string, string>,
    control: KafkaDeliveryControl,
    log: Logger,
  ): Promise<void> {
    const { [HEADER.messageId]: _id, ...copied } = headers;
    const copy: OutboundMessage = {
      id: ++this.copySeq,
      messageId: delivery.messageId ?? '',
      destination: topic,
      routingKey: null,
      partitionKey: delivery.key,
      headers: copied,
      body: delivery.body,
      priority: 3,
      timestamp: new Date(this.now()),
    };
    for (let failures = 0; ; failures++) {
      const [outcome] = await this.sink.publish([copy]);
      if (outcome?.ok) return;
      if (failures === 0) this.counters.redeliveryPending++;
      const delayMs = retryDelayMs(failures + 1, COPY_RETRY);
      log.warn(
        { err: outcome && !outcome.ok ? outcome.error : 'no outcome', target: topic, delayMs },
        'cannot write the copy; retrying before the offset moves',
      );
      const until = Date.now() + delayMs;
      while (Date.now() < until) {
        if (control.stopping) {
          throw new BrokerUnavailableError(`copy to ${topic} not written; the message will be redelivered`);
        }
        await new Promise((resolve) => setTimeout(resolve, Math.min(250, until - Date.now())));
        await control.heartbeat().catch(() => {});
      }
    }
  }
}
