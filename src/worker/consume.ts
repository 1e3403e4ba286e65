/**
 * The consumer toolkit delivery workers use: `consume(deps, queue, handler, options)`. It turns
 * at-least-once delivery from RabbitMQ into an exactly-once *effect* (invariant 4) and keeps the
 * toolkit itself out of business publishing (invariant 2): it only ever re-publishes retry and
 * dead-letter copies of the message it received; business effects (events + outbox rows, e.g.
 * through CommandHandler.handleInTransaction) go through the handler's transaction.
 *
 * Per delivery:
 * 1. No messageId → poison: a copy goes to `<queue>.dead`, the inbox records `dead` under
 *    `missing-id:<sha256 of the body>`, the original is acked.
 * 2. The body is parsed as JSON, then by `options.parse` (e.g. a zod parse). A throw is permanent.
 * 3. In ONE transaction: claim the inbox row `(consumer, messageId)`; if it already exists the message
 *    is a duplicate (commit, ack, count; the handler is not called). Otherwise the handler runs with
 *    the same `tx`, so its effects and the inbox row commit together. `{ discard: reason }` commits
 *    too, with status `discarded` (a quiet, permanent "not for me any more", e.g. a stale epoch at the
 *    destination re-check, invariant 5). Only after the commit is the message acked.
 * 4. PermanentError (or a parse failure): the handler's transaction rolls back, `rejected` is recorded
 *    with the error in a separate statement (never over a processed/discarded row), the message is
 *    acked and never redelivered.
 * 5. Any other throw (TransientError, database loss, bugs): rolled back; below `maxAttempts` a copy
 *    with `x-herald-attempt: attempt + 1` goes to `<queue>.retry.<delay>ms`, whose TTL sends it back to `<queue>`
 *    after `retryDelayMs`; at `maxAttempts` the copy goes to `<queue>.dead` with `x-herald-error` and
 *    `x-herald-failed-at`, and the inbox records `dead`. The original is acked only after the broker
 *    confirmed the copy. Nothing is ever nack-requeued (no hot loop).
 * 6. If a copy cannot be published (broker trouble), the original is not acked: the channel is closed
 *    and re-opened after a backoff, so the broker redelivers it later. A nack-requeue would redeliver
 *    it at once, and the handler would spin on the same failure while the broker is unwell.
 *
 * `attempt` comes from the `x-herald-attempt` header (default 1). Prefetch bounds the handlers in
 * flight; handlers for different messages run concurrently up to it. Two deliveries of one id at the
 * same time serialize on the inbox row: the second waits for the first transaction, then sees it.
 * A `dead` row may be claimed again: an operator can shovel a message back from `<queue>.dead`
 * (with its attempt header, it gets one more try; reset the header for a full set).
 * Broker connection loss: the consumer reconnects with backoff; unacked deliveries are redelivered and
 * the inbox de-duplicates those whose transaction had committed. `stop()` cancels the consumer, lets
 * in-flight handlers finish and ack, then closes.
 *
 * One handler call is one attempt: the transaction is not retried in-process on serialization
 * failures or deadlocks (those go through the retry queue like any transient error), so a handler that
 * also talks to the outside world is called exactly once per attempt.
 */
import { createHash } from 'node:crypto';
import type { AmqpConnection, QueueType } from '../adapters/amqp/amqp-connection.js';
import {
  type AmqpConsumerState,
  AmqpQueueConsumer,
  deadQueueName,
  type InboundDelivery,
  retryQueueName,
} from '../adapters/amqp/amqp-consumer.js';
import { claimInbox, markDiscarded, recordInboxFailure } from '../adapters/postgres/inbox-queries.js';
import { PermanentError, ValidationError } from '../errors.js';
import type { Logger } from '../logger.js';
import { HEADER } from '../messaging/headers.js';
import type { Database, SqlClient } from '../ports/database.js';
import {
  countOutcome,
  type DeliveryOutcome,
  decodePayload,
  describeError,
  isDiscard,
} from './delivery-policy.js';

/** Broker-added headers not carried over to copies (a copy is a new message, not a dead-lettering). */
const BROKER_DEATH_HEADER = /^x-(death|first-death-|last-death-)/;

/** Longest error text put in a dead-letter header. */
const MAX_ERROR_HEADER_CHARS = 1000;

export interface ConsumedMessage<T = unknown> {
  messageId: string;
  payload: T;
  headers: Record<string, unknown>;
  /** 1 for the first delivery, +1 per pass through the retry queue. */
  attempt: number;
  queue: string;
  /** The broker's redelivered flag (an earlier delivery of this very copy was not acked). */
  redelivered: boolean;
  correlationId?: string;
  aggregateId?: string;
}

/** 'processed' (also when the handler returns nothing) or a recorded, permanent discard. */
export type HandlerOutcome = 'processed' | { discard: string };

// `void` (not `undefined`) so that handlers declared as `async (…): Promise<void>` are accepted as-is.
// biome-ignore lint/suspicious/noConfusingVoidType: a handler that returns nothing means 'processed'
export type Handler<T> = (message: ConsumedMessage<T>, tx: SqlClient) => Promise<HandlerOutcome | void>;

export interface ConsumeDeps {
  db: Database;
  /** A URL (the consumer owns its connection and reconnects after a loss) or a caller-owned connection. */
  amqp: AmqpConnection | string;
  logger: Logger;
}

export interface ConsumeOptions<T> {
  /** Name recorded as `inbox.consumer`; de-duplication is per consumer name. */
  consumer: string;
  /** Handlers in flight (basic.qos). Default 32, like HERALD_CONSUMER_PREFETCH. */
  prefetch?: number;
  /** Attempts before dead-lettering. Default 5. */
  maxAttempts?: number;
  /** Delay between attempts (the retry queue's TTL). Default 10 000 ms. */
  retryDelayMs?: number;
  /** Type of the three queues; must match the relay's declaration of the main queue. Default quorum. */
  queueType?: QueueType;
  /** Validates the JSON payload; a throw is permanent (the message is rejected, never retried). */
  parse?: (payload: unknown) => T;
  /** Publisher-confirm timeout for retry / dead-letter copies. Default 30 s. */
  confirmTimeoutMs?: number;
  /** Aborts the initial connection attempts (consume() retries while the broker is down). */
  signal?: AbortSignal;
}

export type ConsumerState = AmqpConsumerState;

export interface ConsumerStats {
  state: ConsumerState;
  received: number;
  processed: number;
  discarded: number;
  duplicates: number;
  rejected: number;
  retried: number;
  deadLettered: number;
  /** Deliveries left unacked for redelivery because their copy or ack could not go out. */
  redeliveryPending: number;
  inFlight: number;
  reconnects: number;
}

export interface Consumer {
  readonly queue: string;
  readonly consumer: string;
  /** A snapshot of the counters. */
  readonly stats: ConsumerStats;
  /**
   * Graceful stop: cancels the consumer, waits for in-flight handlers to finish and ack, closes the
   * channel. With `timeoutMs`, closes after that long even if handlers still run (their messages are
   * then redelivered to another consumer and de-duplicated by the inbox).
   */
  stop(options?: { timeoutMs?: number }): Promise<void>;
}

type Counter = Exclude<keyof ConsumerStats, 'state' | 'inFlight' | 'reconnects'>;

/** Starts consuming `queue`. Resolves once the topology is declared and deliveries flow. */
export async function consume<T = unknown>(
  deps: ConsumeDeps,
  queue: string,
  handler: Handler<T>,
  options: ConsumeOptions<T>,
): Promise<Consumer> {
  const settings = validate(queue, options);
  const worker = new QueueWorker<T>(deps, queue, handler, options, settings);
  await worker.start();
  return worker;
}

interface Settings {
  prefetch: number;
  maxAttempts: number;
  retryDelayMs: number;
  queueType: QueueType;
}

function validate(queue: string, options: ConsumeOptions<unknown>): Settings {
  const settings: Settings = {
    prefetch: options.prefetch ?? 32,
    maxAttempts: options.maxAttempts ?? 5,
    retryDelayMs: options.retryDelayMs ?? 10_000,
    queueType: options.queueType ?? 'quorum',
  };
  const problems: string[] = [];
  // 255 bytes is AMQP's limit for a queue name; the retry/dead queues add up to 6 more.
  if (queue === '' || Buffer.byteLength(queue) > 249) problems.push('queue must be 1..249 bytes');
  if (!options.consumer) problems.push('consumer name is required');
  if (!Number.isInteger(settings.prefetch) || settings.prefetch < 1 || settings.prefetch > 65_535) {
    problems.push('prefetch must be an integer in 1..65535');
  }
  if (!Number.isInteger(settings.maxAttempts) || settings.maxAttempts < 1) {
    problems.push('maxAttempts must be a positive integer');
  }
  if (
    !Number.isInteger(settings.retryDelayMs) ||
    settings.retryDelayMs < 1 ||
    settings.retryDelayMs > 2 ** 31 - 1
  ) {
    problems.push('retryDelayMs must be a positive 32-bit integer');
  }
  if (settings.queueType !== 'quorum' && settings.queueType !== 'classic') {
    problems.push("queueType must be 'quorum' or 'classic'");
  }
  if (problems.length > 0) {
    throw new ValidationError(`invalid consumer options: ${problems.join('; ')}`, { queue, problems });
  }
  return settings;
}

class QueueWorker<T> implements Consumer {
  private amqp: AmqpQueueConsumer | undefined;
  private readonly inFlight = new Set<Promise<void>>();
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
  private stopping: Promise<void> | undefined;
  private readonly logger: Logger;

  constructor(
    private readonly deps: ConsumeDeps,
    readonly queue: string,
    private readonly handler: Handler<T>,
    private readonly options: ConsumeOptions<T>,
    private readonly settings: Settings,
  ) {
    this.logger = deps.logger.child({ consumer: options.consumer, queue });
  }

  get consumer(): string {
    return this.options.consumer;
  }

  get stats(): ConsumerStats {
    return {
      state: this.amqp?.state ?? 'starting',
      ...this.counters,
      inFlight: this.inFlight.size,
      reconnects: this.amqp?.reconnects ?? 0,
    };
  }

  async start(): Promise<void> {
    this.amqp = await AmqpQueueConsumer.start({
      amqp: this.deps.amqp,
      connectionName: `herald-consumer:${this.options.consumer}:${this.queue}`,
      topology: {
        queue: this.queue,
        queueType: this.settings.queueType,
        retryDelayMs: this.settings.retryDelayMs,
      },
      prefetch: this.settings.prefetch,
      logger: this.logger,
      onDelivery: (delivery) => this.track(delivery),
      confirmTimeoutMs: this.options.confirmTimeoutMs,
      signal: this.options.signal,
    });
  }

  stop(options: { timeoutMs?: number } = {}): Promise<void> {
    this.stopping ??= this.shutdown(options.timeoutMs);
    return this.stopping;
  }

  private async shutdown(timeoutMs: number | undefined): Promise<void> {
    const amqp = this.amqp;
    if (!amqp) return;
    await amqp.cancel();
    const deadline = timeoutMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + timeoutMs;
    // Deliveries that arrived before cancel-ok join the set too, so loop until it is empty.
    while (this.inFlight.size > 0) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        this.logger.warn(
          { inFlight: this.inFlight.size },
          'stop timed out; unfinished messages will be redelivered',
        );
        break;
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        Promise.allSettled([...this.inFlight]),
        ...(Number.isFinite(remaining)
          ? [new Promise((resolve) => (timer = setTimeout(resolve, remaining)))]
          : []),
      ]);
      if (timer) clearTimeout(timer);
    }
    await amqp.close();
    this.logger.info({ stats: this.stats }, 'consumer stopped');
  }

  private track(delivery: InboundDelivery): void {
    const work: Promise<void> = this.process(delivery)
      .catch((error) => {
        // A bug in the toolkit itself: do not leave the delivery holding a prefetch slot forever.
        this.logger.error({ err: error, messageId: delivery.messageId }, 'unexpected consumer failure');
        this.amqp?.recycle(error instanceof Error ? error : new Error(String(error)));
      })
      .finally(() => this.inFlight.delete(work));
    this.inFlight.add(work);
  }

  private async process(delivery: InboundDelivery): Promise<void> {
    this.counters.received++;
    const attempt = attemptOf(delivery.headers);
    const correlationId =
      stringHeader(delivery.headers[HEADER.correlationId]) ?? delivery.properties.correlationId;
    const aggregateId = stringHeader(delivery.headers[HEADER.streamId]);
    const log = this.logger.child({ messageId: delivery.messageId, correlationId, aggregateId, attempt });

    if (!delivery.messageId) {
      const inboxId = `missing-id:${createHash('sha256').update(delivery.body).digest('hex')}`;
      log.warn({ inboxId }, 'message has no messageId; dead-lettering it');
      await this.deadLetter(delivery, inboxId, attempt, new PermanentError('message has no messageId'), log);
      return;
    }
    const messageId = delivery.messageId;

    let payload: T;
    try {
      payload = decodePayload(delivery.body, this.options.parse);
    } catch (error) {
      log.warn({ err: error, preview: delivery.body.subarray(0, 200).toString('utf8') }, 'poison message');
      await this.reject(delivery, messageId, attempt, error, log);
      return;
    }

    const message: ConsumedMessage<T> = {
      messageId,
      payload,
      headers: delivery.headers,
      attempt,
      queue: this.queue,
      redelivered: delivery.redelivered,
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
      if (error instanceof PermanentError) {
        await this.reject(delivery, messageId, attempt, error, log);
      } else {
        await this.retryOrDeadLetter(delivery, messageId, attempt, error, log);
      }
      return;
    }

    countOutcome(this.counters, outcome, reason, log);
    this.ack(delivery, log);
  }

  /** Permanent failure: record `rejected`, ack. If the record cannot be written, retry later instead. */
  private async reject(
    delivery: InboundDelivery,
    messageId: string,
    attempt: number,
    error: unknown,
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
      await this.retryOrDeadLetter(delivery, messageId, attempt, recordError, log);
      return;
    }
    this.counters.rejected++;
    log.warn({ err: error }, 'message rejected (permanent failure)');
    this.ack(delivery, log);
  }

  private async retryOrDeadLetter(
    delivery: InboundDelivery,
    messageId: string,
    attempt: number,
    error: unknown,
    log: Logger,
  ): Promise<void> {
    if (attempt >= this.settings.maxAttempts) {
      await this.deadLetter(delivery, messageId, attempt, error, log);
      return;
    }
    const headers = { ...copyHeaders(delivery.headers), [HEADER.attempt]: attempt + 1 };
    if (
      !(await this.publishCopy(
        delivery,
        retryQueueName(this.queue, this.settings.retryDelayMs),
        headers,
        log,
      ))
    )
      return;
    this.counters.retried++;
    log.warn(
      { err: error, nextAttempt: attempt + 1, delayMs: this.settings.retryDelayMs },
      'transient failure; retrying later',
    );
    this.ack(delivery, log);
  }

  private async deadLetter(
    delivery: InboundDelivery,
    inboxId: string,
    attempt: number,
    error: unknown,
    log: Logger,
  ): Promise<void> {
    const text = describeError(error);
    const headers = {
      ...copyHeaders(delivery.headers),
      [HEADER.attempt]: attempt,
      [HEADER.error]: text.slice(0, MAX_ERROR_HEADER_CHARS),
      [HEADER.failedAt]: new Date().toISOString(),
      [HEADER.consumer]: this.options.consumer,
      [HEADER.queue]: this.queue,
    };
    if (!(await this.publishCopy(delivery, deadQueueName(this.queue), headers, log))) return;
    try {
      await recordInboxFailure(this.deps.db, {
        consumer: this.options.consumer,
        messageId: inboxId,
        status: 'dead',
        attempts: attempt,
        error: text,
      });
    } catch (recordError) {
      // The copy in the dead-letter queue is the durable record; re-running the handler would only
      // add another copy there.
      log.error({ err: recordError }, 'message dead-lettered but the inbox record failed');
    }
    this.counters.deadLettered++;
    log.error({ err: error, attempts: attempt }, 'message dead-lettered');
    this.ack(delivery, log);
  }

  /** True once the broker confirmed the copy; otherwise recycles the channel so the original comes back. */
  private async publishCopy(
    delivery: InboundDelivery,
    target: string,
    headers: Record<string, unknown>,
    log: Logger,
  ): Promise<boolean> {
    try {
      await this.amqp!.publishCopy(delivery, target, headers);
      return true;
    } catch (error) {
      this.counters.redeliveryPending++;
      log.warn({ err: error, target }, 'cannot publish the copy; leaving the message for redelivery');
      this.amqp!.recycle(error as Error);
      return false;
    }
  }

  private ack(delivery: InboundDelivery, log: Logger): void {
    if (!this.amqp!.ack(delivery)) {
      this.counters.redeliveryPending++;
      log.warn('channel closed before the ack; the broker will redeliver and the inbox de-duplicates');
    }
  }
}

/** `x-herald-attempt` as a positive integer; anything else counts as the first attempt. */
export function attemptOf(headers: Record<string, unknown>): number {
  const raw = headers[HEADER.attempt];
  const value = typeof raw === 'number' ? raw : typeof raw === 'string' ? Number(raw) : Number.NaN;
  return Number.isInteger(value) && value >= 1 ? value : 1;
}

function copyHeaders(headers: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !BROKER_DEATH_HEADER.test(name)));
}

function stringHeader(value: unknown): string | undefined {
  if (typeof value === 'string' && value !== '') return value;
  if (Buffer.isBuffer(value) && value.length > 0) return value.toString('utf8');
  return undefined;
}
