/**
 * The consumer toolkit's one delivery policy, over any ConsumerTransport (RabbitMQ or Kafka). It turns
 * at-least-once delivery into an exactly-once effect (invariant 4): the inbox row `(consumer, messageId)`
 * is claimed in the handler's transaction, so effects and inbox row commit together and a duplicate never
 * reaches the handler. It writes only retry and dead-letter copies of the message it received
 * (invariant 2): a permanent error is recorded and settled, any other retried through the retry
 * destination up to `maxAttempts`, then dead-lettered; a delivery is settled only after the commit or the
 * copy's confirm. One handler call is one attempt. Every outcome is counted here. ADR 0005, ADR 0009.
 */
import { createHash } from 'node:crypto';
import {
  claimInbox,
  claimInboxMany,
  markDiscarded,
  markDiscardedMany,
  recordInboxFailure,
} from '../adapters/postgres/inbox-queries.js';
import { DeadLetterError, PermanentError, ValidationError } from '../errors.js';
import type { Logger } from '../logger.js';
import { HEADER } from '../messaging/headers.js';
import { type MessageSchema, messageVersionOf, VERSION_ONE } from '../messaging/message-schemas.js';
import { type ConsumerMeters, heraldMetrics } from '../observability/metrics.js';
import { contextOf, inSpan, SpanKind, tracingOn } from '../observability/tracing.js';
import type { ConsumerTransport, TransportDelivery, TransportState } from '../ports/consumer-transport.js';
import type { Database, SqlClient } from '../ports/database.js';

export interface ConsumedMessage<T = unknown> {
  messageId: string;
  payload: T;
  headers: Record<string, unknown>;
  /** 1 for the first delivery, +1 per pass through the retry destination. */
  attempt: number;
  /** The queue or topic it was consumed from. */
  queue: string;
  /** The broker's redelivered flag (an earlier delivery of this very copy was not acked). */
  redelivered: boolean;
  correlationId?: string;
  aggregateId?: string;
  /** Runs `callback` after the handler's transaction committed (e.g. wake-ups); never if it rolls back. */
  afterCommit(callback: () => void): void;
}

/** 'processed' (also when the handler returns nothing) or a recorded, permanent discard. */
export type HandlerOutcome = 'processed' | { discard: string };

// `void` (not `undefined`) so that handlers declared as `async (…): Promise<void>` are accepted as-is.
// biome-ignore lint/suspicious/noConfusingVoidType: a handler that returns nothing means 'processed'
export type Handler<T> = (message: ConsumedMessage<T>, tx: SqlClient) => Promise<HandlerOutcome | void>;

/**
 * A handler's set-based form: several new (already inbox-claimed) messages in one transaction, an
 * outcome for each, in order. It may decline a batch (null); it must throw rather than leave one
 * message half-handled: the policy then handles each message of the batch on its own.
 */
export type BatchHandler<T> = (
  messages: readonly ConsumedMessage<T>[],
  tx: SqlClient,
) => Promise<readonly HandlerOutcome[] | null>;

/** A handler that can also take a batch (the fenced handler of an effect that has a set-based form). */
export type BatchingHandler<T> = Handler<T> & { batch: BatchHandler<T> };

export type ConsumerState = TransportState;

export interface ConsumerStats {
  state: ConsumerState;
  received: number;
  processed: number;
  discarded: number;
  duplicates: number;
  rejected: number;
  retried: number;
  deadLettered: number;
  /** Deliveries left unsettled for redelivery because their copy or settle could not go out. */
  redeliveryPending: number;
  inFlight: number;
  reconnects: number;
}

export interface Consumer {
  /** The queue (or topic) consumed. */
  readonly queue: string;
  readonly consumer: string;
  /** A snapshot of the counters. */
  readonly stats: ConsumerStats;
  /**
   * Graceful stop: stops receiving, waits for in-flight handlers to finish and settle, closes. With
   * `timeoutMs`, closes after that long even if handlers still run (their messages are then delivered
   * again, to another consumer, and de-duplicated by the inbox).
   */
  stop(options?: { timeoutMs?: number }): Promise<void>;
}

export interface DeliveryPolicyOptions<T> {
  /** Name recorded as `inbox.consumer`; de-duplication is per consumer name. */
  consumer: string;
  /** Attempts before dead-lettering. */
  maxAttempts: number;
  /** The retry destination's delay (for log lines; the transport applies it). */
  retryDelayMs: number;
  /** Validates the JSON payload; a throw is permanent (the message is rejected, never retried). */
  parse?: ((payload: unknown) => T) | undefined;
  /**
   * The message schema versions the consumer reads (ADR 0039): an older payload is upcast before
   * `parse`; a newer version is dead-lettered with the reason. Default: version 1 only.
   */
  messages?: MessageSchema | undefined;
  /** Clock for `x-herald-failed-at` (informational; no decision rests on it). */
  now?: () => number;
  /**
   * Most deliveries handled in one transaction when the handler has a batch form (default 32; 1 turns
   * batching off). Deliveries that arrive together are batched; a batch that fails is handled again
   * one message at a time, so batching never changes an outcome.
   */
  batchSize?: number;
}

/** A delivery ready for the inbox transaction: decoded, with its message and log context. */
interface Prepared<T> {
  delivery: TransportDelivery;
  message: ConsumedMessage<T>;
  committed: (() => void)[];
  log: Logger;
}

interface Waiting {
  delivery: TransportDelivery;
  done: () => void;
  failed: (error: unknown) => void;
}

type Counter = Exclude<keyof ConsumerStats, 'state' | 'inFlight' | 'reconnects'>;
type Outcome = 'processed' | 'discarded' | 'duplicate';

/** Longest error text put in a dead-letter header. */
const MAX_ERROR_HEADER_CHARS = 1000;

/**
 * Checks the options every toolkit shares (consumer name, attempts, retry delay) plus the transport's
 * own (`check` adds problems); throws one ValidationError naming them all. Returns the settled values.
 */
export function validateConsumerOptions(
  source: string,
  options: { consumer: string; maxAttempts?: number | undefined; retryDelayMs?: number | undefined },
  check: (problems: string[], retryDelayMs: number) => void,
): { consumer: string; maxAttempts: number; retryDelayMs: number } {
  const maxAttempts = options.maxAttempts ?? 5;
  const retryDelayMs = options.retryDelayMs ?? 10_000;
  const problems: string[] = [];
  if (!options.consumer) problems.push('consumer name is required');
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1)
    problems.push('maxAttempts must be a positive integer');
  if (!Number.isInteger(retryDelayMs)) problems.push('retryDelayMs must be an integer');
  check(problems, retryDelayMs);
  if (problems.length > 0) {
    throw new ValidationError(`invalid consumer options: ${problems.join('; ')}`, { source, problems });
  }
  return { consumer: options.consumer, maxAttempts, retryDelayMs };
}

export function describeError(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

/** JSON, then the caller's `parse` (e.g. a zod parse); either failing is permanent. */
export function decodePayload<T>(
  body: Buffer,
  parse?: (payload: unknown) => T,
  upcast?: (payload: unknown) => unknown,
): T {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw new PermanentError(`payload is not valid JSON: ${describeError(error)}`);
  }
  if (upcast) json = upcast(json);
  if (!parse) return json as T;
  try {
    return parse(json);
  } catch (error) {
    throw new PermanentError(`payload rejected by parse: ${describeError(error)}`);
  }
}

/** Batches handled at once per consumer; more deliveries wait for the next batch. */
const BATCHES_IN_FLIGHT = 1;
/** How long the first delivery of an idle consumer waits for others to join its batch. */
const BATCH_LINGER_MS = 1;

/** The handler declined the batch: handle its messages one at a time. */
class BatchDeclined extends Error {}

function isDiscard(result: unknown): result is { discard: string } {
  return (
    typeof result === 'object' &&
    result !== null &&
    typeof (result as { discard?: unknown }).discard === 'string'
  );
}

/** The attempt header as a positive integer; anything else counts as the first attempt. */
export function attemptOf(headers: Record<string, unknown>): number {
  const raw = headers[HEADER.attempt];
  const value = typeof raw === 'number' ? raw : typeof raw === 'string' ? Number(raw) : Number.NaN;
  return Number.isInteger(value) && value >= 1 ? value : 1;
}

function stringHeader(value: unknown): string | undefined {
  if (typeof value === 'string' && value !== '') return value;
  if (Buffer.isBuffer(value) && value.length > 0) return value.toString('utf8');
  return undefined;
}

export class DeliveryPolicy<T> implements Consumer {
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
  private readonly now: () => number;
  private readonly batchSize: number;
  private waiting: Waiting[] = [];
  private flushScheduled: NodeJS.Timeout | undefined;
  /** Batches being handled; while BATCHES_IN_FLIGHT are, new deliveries gather into the next one. */
  private batchesInFlight = 0;
  private readonly meters: ConsumerMeters;

  constructor(
    private readonly db: Database,
    private readonly transport: ConsumerTransport,
    private readonly handler: Handler<T>,
    private readonly options: DeliveryPolicyOptions<T>,
    logger: Logger,
  ) {
    this.logger = logger;
    this.now = options.now ?? Date.now;
    this.batchSize = 'batch' in handler ? Math.max(1, options.batchSize ?? 32) : 1;
    this.meters = heraldMetrics.consumer(transport.source, options.consumer);
  }

  get queue(): string {
    return this.transport.source;
  }

  get consumer(): string {
    return this.options.consumer;
  }

  get stats(): ConsumerStats {
    return {
      state: this.transport.state,
      ...this.counters,
      inFlight: this.inFlight.size,
      reconnects: this.transport.reconnects,
    };
  }

  /** Starts the transport; resolves once deliveries flow. On failure the transport is closed. */
  async start(): Promise<this> {
    try {
      await this.transport.start((delivery) => this.track(delivery));
    } catch (error) {
      await this.transport.close().catch(() => {});
      throw error;
    }
    return this;
  }

  stop(options: { timeoutMs?: number } = {}): Promise<void> {
    this.stopping ??= this.shutdown(options.timeoutMs);
    return this.stopping;
  }

  private async shutdown(timeoutMs: number | undefined): Promise<void> {
    await this.transport.cancel();
    const deadline = timeoutMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + timeoutMs;
    // Deliveries that arrived while cancelling join the set too, so loop until it is empty.
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
    await this.transport.close();
    this.logger.info({ stats: this.stats }, 'consumer stopped');
  }

  private track(delivery: TransportDelivery): Promise<void> {
    const work: Promise<void> = this.enqueue(delivery)
      .catch((error: unknown) => {
        // A bug in the toolkit itself: give the delivery back rather than hold it for ever.
        this.logger.error({ err: error, messageId: delivery.messageId }, 'unexpected consumer failure');
        this.transport.release(delivery, error instanceof Error ? error : new Error(String(error)));
      })
      .finally(() => this.inFlight.delete(work));
    this.inFlight.add(work);
    return work;
  }

  /**
   * Without a batch form, each delivery is processed at once. With one, batches adapt to the load: a
   * delivery that arrives while no batch runs waits BATCH_LINGER_MS for others to join it (so an idle
   * consumer adds at most that much latency); while a batch runs, deliveries gather, up to the batch
   * size, into the next one, which starts when the running one ends.
   */
  private enqueue(delivery: TransportDelivery): Promise<void> {
    if (this.batchSize === 1) return this.process([delivery]);
    return new Promise<void>((done, failed) => {
      this.waiting.push({ delivery, done, failed });
      if (this.waiting.length >= this.batchSize) this.flush();
      else if (this.batchesInFlight < BATCHES_IN_FLIGHT)
        this.flushScheduled ??= setTimeout(() => this.flush(), BATCH_LINGER_MS);
    });
  }

  private flush(): void {
    if (this.flushScheduled) clearTimeout(this.flushScheduled);
    this.flushScheduled = undefined;
    const batch = this.waiting.splice(0, this.batchSize);
    if (batch.length === 0) return;
    this.batchesInFlight++;
    this.process(batch.map((w) => w.delivery))
      .then(
        () => {
          for (const w of batch) w.done();
        },
        (error: unknown) => {
          for (const w of batch) w.failed(error);
        },
      )
      .finally(() => {
        this.batchesInFlight--;
        if (this.waiting.length > 0) this.flush();
      });
  }

  private async process(deliveries: readonly TransportDelivery[]): Promise<void> {
    const prepared: Prepared<T>[] = [];
    const seen = new Map<string, Prepared<T>>();
    const repeats: Prepared<T>[] = [];
    for (const delivery of deliveries) {
      const ready = await this.prepare(delivery);
      if (!ready) continue;
      // The same id twice in one batch: the second is a duplicate of the first (settled after it).
      if (seen.has(ready.message.messageId)) repeats.push(ready);
      else {
        seen.set(ready.message.messageId, ready);
        prepared.push(ready);
      }
    }
    // While tracing, one at a time: each message's handling is a span of its own trace (ADR 0017).
    if (prepared.length > 1 && !tracingOn() && (await this.processBatch(prepared))) {
      for (const repeat of repeats) {
        this.count('duplicate', undefined, repeat.log);
        this.settle(repeat.delivery, repeat.log);
      }
      return;
    }
    // One at a time: alone, or a batch that could not be handled as one (nothing of it committed).
    await Promise.all([...prepared, ...repeats].map((ready) => this.processOne(ready)));
  }

  /** Poison is settled here (dead-lettered or rejected); the rest is returned ready for its transaction. */
  private async prepare(delivery: TransportDelivery): Promise<Prepared<T> | null> {
    this.counters.received++;
    const attempt = attemptOf(delivery.headers);
    const correlationId = stringHeader(delivery.headers[HEADER.correlationId]) ?? delivery.correlationId;
    const aggregateId = stringHeader(delivery.headers[HEADER.streamId]);
    const log = this.logger.child({
      messageId: delivery.messageId,
      correlationId,
      aggregateId,
      attempt,
      ...delivery.logFields,
    });

    if (!delivery.messageId) {
      const inboxId = `missing-id:${createHash('sha256').update(delivery.body).digest('hex')}`;
      const missing = `message has no ${this.transport.messageIdLabel}`;
      log.warn({ inboxId }, `${missing}; dead-lettering it`);
      await this.deadLetter(delivery, inboxId, attempt, new PermanentError(missing), log);
      return null;
    }
    const messageId = delivery.messageId;

    let payload: T;
    try {
      const version = messageVersionOf(delivery.headers);
      const schema = this.options.messages ?? VERSION_ONE;
      payload = decodePayload(delivery.body, this.options.parse, (json) => schema.upcast(json, version));
    } catch (error) {
      if (error instanceof DeadLetterError) {
        // A version this consumer does not read yet: kept for a re-drive once it is upgraded.
        log.warn({ err: error }, 'message version not read by this consumer; dead-lettering it');
        await this.deadLetter(delivery, messageId, attempt, error, log);
        return null;
      }
      log.warn({ err: error, preview: delivery.body.subarray(0, 200).toString('utf8') }, 'poison message');
      await this.reject(delivery, messageId, attempt, error, log);
      return null;
    }

    const committed: (() => void)[] = [];
    const message: ConsumedMessage<T> = {
      messageId,
      payload,
      headers: delivery.headers,
      attempt,
      queue: this.transport.source,
      redelivered: delivery.redelivered,
      ...(correlationId ? { correlationId } : {}),
      ...(aggregateId ? { aggregateId } : {}),
      afterCommit: (callback) => committed.push(callback),
    };
    return { delivery, message, committed, log };
  }

  private processOne(ready: Prepared<T>): Promise<void> {
    if (!tracingOn()) return this.handleOne(ready);
    const traceparent = ready.delivery.headers[HEADER.traceparent];
    return inSpan(
      `process ${this.transport.source}`,
      {
        kind: SpanKind.CONSUMER,
        parent: contextOf(typeof traceparent === 'string' ? traceparent : undefined),
        attributes: {
          'messaging.consumer.group.name': this.options.consumer,
          'messaging.message.id': ready.message.messageId,
        },
      },
      () => this.handleOne(ready),
    );
  }

  private async handleOne({ delivery, message, committed, log }: Prepared<T>): Promise<void> {
    committed.length = 0;
    const { messageId, attempt } = message;
    const key = { consumer: this.options.consumer, messageId };
    let outcome: Outcome;
    let reason: string | undefined;
    try {
      outcome = await this.db.transaction(
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
      if (error instanceof DeadLetterError) await this.deadLetter(delivery, messageId, attempt, error, log);
      else if (error instanceof PermanentError) await this.reject(delivery, messageId, attempt, error, log);
      else await this.retryOrDeadLetter(delivery, messageId, attempt, error, log);
      return;
    }
    this.committed(committed, log);
    this.count(outcome, reason, log);
    this.settle(delivery, log);
  }

  /**
   * The batch in one transaction: claim every inbox row in one statement, hand the new messages to the
   * handler's batch form, record the discards. False (nothing committed) when it could not: the
   * caller then handles each message on its own.
   */
  private async processBatch(batch: readonly Prepared<T>[]): Promise<boolean> {
    const batchHandler = (this.handler as BatchingHandler<T>).batch;
    // Inbox rows in message id order: concurrent batches lock them in one order.
    const ordered = [...batch].sort((a, b) => (a.message.messageId < b.message.messageId ? -1 : 1));
    let outcomes: Map<string, HandlerOutcome | 'duplicate'>;
    try {
      outcomes = await this.db.transaction(
        async (tx) => {
          const claimed = await claimInboxMany(
            tx,
            this.options.consumer,
            ordered.map((p) => ({ messageId: p.message.messageId, attempt: p.message.attempt })),
          );
          const fresh = ordered.filter((p) => claimed.has(p.message.messageId));
          const result = new Map<string, HandlerOutcome | 'duplicate'>(
            ordered
              .filter((p) => !claimed.has(p.message.messageId))
              .map((p) => [p.message.messageId, 'duplicate']),
          );
          if (fresh.length === 0) return result;
          const handled = await batchHandler(
            fresh.map((p) => p.message),
            tx,
          );
          if (handled === null || handled.length !== fresh.length) throw new BatchDeclined();
          const discards: { messageId: string; reason: string }[] = [];
          for (const [index, p] of fresh.entries()) {
            const outcome = handled[index]!;
            result.set(p.message.messageId, outcome);
            if (isDiscard(outcome))
              discards.push({ messageId: p.message.messageId, reason: outcome.discard });
          }
          await markDiscardedMany(tx, this.options.consumer, discards);
          return result;
        },
        { retryOnConflict: false },
      );
    } catch (error) {
      if (!(error instanceof BatchDeclined)) {
        this.logger.debug(
          { err: error, messages: batch.length },
          'batch failed; handling its messages one by one',
        );
      }
      for (const p of batch) p.committed.length = 0;
      return false;
    }
    for (const p of batch) {
      const outcome = outcomes.get(p.message.messageId)!;
      if (outcome !== 'duplicate') this.committed(p.committed, p.log);
      this.count(
        outcome === 'duplicate' ? 'duplicate' : isDiscard(outcome) ? 'discarded' : 'processed',
        isDiscard(outcome) ? outcome.discard : undefined,
        p.log,
      );
      this.settle(p.delivery, p.log);
    }
    return true;
  }

  private committed(callbacks: readonly (() => void)[], log: Logger): void {
    for (const callback of callbacks) {
      try {
        callback();
      } catch (error) {
        log.warn({ err: error }, 'after-commit callback failed');
      }
    }
  }

  private count(outcome: Outcome, reason: string | undefined, log: Logger): void {
    this.meters.count(outcome);
    if (outcome === 'duplicate') {
      this.counters.duplicates++;
      log.info('duplicate message; already handled');
    } else if (outcome === 'discarded') {
      this.counters.discarded++;
      log.info({ reason }, 'message discarded');
    } else {
      this.counters.processed++;
      log.debug('message processed');
    }
  }

  /** Permanent failure: record `rejected`, settle. If the record cannot be written, retry later instead. */
  private async reject(
    delivery: TransportDelivery,
    messageId: string,
    attempt: number,
    error: unknown,
    log: Logger,
  ): Promise<void> {
    try {
      await recordInboxFailure(this.db, {
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
    this.meters.count('rejected');
    log.warn({ err: error }, 'message rejected (permanent failure)');
    this.settle(delivery, log);
  }

  private async retryOrDeadLetter(
    delivery: TransportDelivery,
    messageId: string,
    attempt: number,
    error: unknown,
    log: Logger,
  ): Promise<void> {
    if (attempt >= this.options.maxAttempts) {
      await this.deadLetter(delivery, messageId, attempt, error, log);
      return;
    }
    if (!(await this.copy(delivery, 'retry', { [HEADER.attempt]: attempt + 1 }, log))) return;
    this.counters.retried++;
    this.meters.count('retried');
    log.warn(
      { err: error, nextAttempt: attempt + 1, delayMs: this.options.retryDelayMs },
      'transient failure; retrying later',
    );
    this.settle(delivery, log);
  }

  private async deadLetter(
    delivery: TransportDelivery,
    inboxId: string,
    attempt: number,
    error: unknown,
    log: Logger,
  ): Promise<void> {
    const text = describeError(error);
    const headers = {
      [HEADER.attempt]: attempt,
      [HEADER.error]: text.slice(0, MAX_ERROR_HEADER_CHARS),
      [HEADER.failedAt]: new Date(this.now()).toISOString(),
      [HEADER.consumer]: this.options.consumer,
      [HEADER.queue]: this.transport.source,
    };
    if (!(await this.copy(delivery, 'dead', headers, log))) return;
    try {
      await recordInboxFailure(this.db, {
        consumer: this.options.consumer,
        messageId: inboxId,
        status: 'dead',
        attempts: attempt,
        error: text,
      });
    } catch (recordError) {
      // The dead-letter copy is the durable record; handling the message again would only add another.
      log.error({ err: recordError }, 'message dead-lettered but the inbox record failed');
    }
    this.counters.deadLettered++;
    this.meters.count('dead');
    log.error({ err: error, attempts: attempt }, 'message dead-lettered');
    this.settle(delivery, log);
  }

  private async copy(
    delivery: TransportDelivery,
    target: 'retry' | 'dead',
    headers: Record<string, string | number>,
    log: Logger,
  ): Promise<boolean> {
    if (await this.transport.publishCopy(delivery, target, headers)) return true;
    this.counters.redeliveryPending++;
    log.warn({ target }, 'cannot write the copy; leaving the message for redelivery');
    return false;
  }

  private settle(delivery: TransportDelivery, log: Logger): void {
    if (!this.transport.settle(delivery)) {
      this.counters.redeliveryPending++;
      log.warn(
        'cannot settle the delivery (channel closed); the broker redelivers and the inbox de-duplicates',
      );
    }
  }
}
