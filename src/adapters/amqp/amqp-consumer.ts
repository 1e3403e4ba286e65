/**
 * The RabbitMQ side of the consumer toolkit (src/worker/delivery-policy.ts holds the rules): declares a
 * consumer's queues on every (re)connect, receives with manual acknowledgement under a prefetch bound,
 * publishes confirmed copies to the retry and dead-letter queues (invariant 3 for its own copies), and
 * reconnects with backoff. The retry queue carries its delay in its name (`<queue>.retry.<delay>ms`):
 * queue arguments are fixed at declaration, so a new delay is a new queue. A delivery is acknowledged only
 * on the channel it arrived on; after a reconnect the broker redelivers it and the inbox de-duplicates it
 * (invariant 4). ADR 0005.
 */
import type { ConsumeMessage, Options } from 'amqplib';
import { BrokerUnavailableError, ConfigError, PublishRejectedError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type {
  ConsumerTransport,
  CopyTarget,
  TransportDelivery,
  TransportState,
} from '../../ports/consumer-transport.js';
import { abortableDelay, retryDelayMs } from '../../runtime/backoff.js';
import { AmqpConnection, type ConfirmChannel, type QueueType, queueOptions } from './amqp-connection.js';

export interface ConsumerTopologySpec {
  queue: string;
  queueType: QueueType;
  retryDelayMs: number;
}

/**
 * The retry queue for one delay. The delay is part of the name because a queue's TTL argument is
 * fixed when it is declared: pods with different retry delays (a config change mid-rollout) each get
 * their own retry queue, and both flow back into the same main queue.
 */
export function retryQueueName(queue: string, retryDelayMs: number): string {
  return `${queue}.retry.${retryDelayMs}ms`;
}

export function deadQueueName(queue: string): string {
  return `${queue}.dead`;
}

/** The three queues of a consumer and their exact declaration arguments. */
export function consumerQueues(spec: ConsumerTopologySpec): { name: string; options: Options.AssertQueue }[] {
  const retryArguments: Record<string, unknown> = {
    'x-message-ttl': spec.retryDelayMs,
    'x-dead-letter-exchange': '',
    'x-dead-letter-routing-key': spec.queue,
  };
  if (spec.queueType === 'quorum') {
    retryArguments['x-dead-letter-strategy'] = 'at-least-once';
    retryArguments['x-overflow'] = 'reject-publish';
  }
  return [
    { name: spec.queue, options: queueOptions(spec.queueType) },
    {
      name: retryQueueName(spec.queue, spec.retryDelayMs),
      options: queueOptions(spec.queueType, retryArguments),
    },
    { name: deadQueueName(spec.queue), options: queueOptions(spec.queueType) },
  ];
}

/** Declares the consumer's queues. An argument mismatch with an existing queue is a ConfigError. */
export async function declareConsumerTopology(
  channel: ConfirmChannel,
  spec: ConsumerTopologySpec,
): Promise<void> {
  for (const { name, options } of consumerQueues(spec)) {
    try {
      await channel.assertQueue(name, options);
    } catch (error) {
      if ((error as { code?: unknown }).code === 406) {
        throw new ConfigError(
          `queue ${name}`,
          `exists with different arguments (${(error as Error).message}); queue arguments are fixed when a queue is ` +
            'created: use the same queue type and retry delay, or delete the empty queue to change them',
        );
      }
      throw new BrokerUnavailableError(`cannot declare queue ${name}: ${(error as Error).message}`, error);
    }
  }
}

/** AMQP properties carried over to retry and dead-letter copies. */
export interface CopiedProperties {
  contentType?: string;
  contentEncoding?: string;
  correlationId?: string;
  type?: string;
  appId?: string;
  timestamp?: number;
  replyTo?: string;
}

/** One message as the toolkit sees it (no driver types). */
export interface InboundDelivery extends TransportDelivery {
  readonly properties: CopiedProperties;
}

export type AmqpConsumerState = 'starting' | 'consuming' | 'reconnecting' | 'stopping' | 'stopped' | 'failed';

export interface AmqpQueueConsumerOptions {
  /** A URL (the consumer owns its connection and replaces it after a loss) or a caller-owned connection. */
  amqp: AmqpConnection | string;
  connectionName: string;
  topology: ConsumerTopologySpec;
  prefetch: number;
  logger: Logger;
  onDelivery: (delivery: InboundDelivery) => void;
  /** A copy not confirmed within this time counts as failed. */
  confirmTimeoutMs?: number;
  reconnectMaxDelayMs?: number;
  /** Aborts the initial connection attempts. */
  signal?: AbortSignal;
}

interface Session {
  readonly id: number;
  readonly connection: AmqpConnection;
  readonly channel: ConfirmChannel;
  readonly openedAt: number;
  consumerTag: string | undefined;
  ended: boolean;
  /** basic.return notifications not yet matched with their confirm, keyed by routing key + message id. */
  readonly returned: Map<string, number>;
}

// Why these values: a publisher confirm normally takes milliseconds; 30 s only trips when the broker
// is blocked (memory/disk alarm) or the link is dead, and then the channel is replaced anyway.
const DEFAULT_CONFIRM_TIMEOUT_MS = 30_000;
const DEFAULT_RECONNECT_MAX_DELAY_MS = 5_000;
const RECONNECT_BASE_DELAY_MS = 200;
/** A session that lived this long counts as healthy: the next failure starts the backoff from the bottom. */
const STABLE_SESSION_MS = 10_000;

export class AmqpQueueConsumer {
  private session: Session | undefined;
  private sessionSeq = 0;
  private ownedConnection: AmqpConnection | undefined;
  private readonly lostConnections = new WeakSet<AmqpConnection>();
  private readonly watchedConnections = new WeakSet<AmqpConnection>();
  private readonly raw = new WeakMap<InboundDelivery, { session: Session; message: ConsumeMessage }>();
  private readonly abort = new AbortController();
  private consecutiveFailures = 0;
  private currentState: AmqpConsumerState = 'starting';
  private reconnectCount = 0;
  /** Since when the channel is lost (an outage in progress) and how many connects failed since. */
  private lost: { since: number; failedConnects: number } | undefined;
  /** True while openWithRetry runs: a session lost meanwhile must not start a second loop. */
  private opening = false;

  private constructor(private readonly options: AmqpQueueConsumerOptions) {}

  /**
   * Connects, declares the topology and starts consuming. Retries broker unavailability with backoff
   * until `options.signal` aborts; a topology mismatch (ConfigError) fails at once.
   */
  static async start(options: AmqpQueueConsumerOptions): Promise<AmqpQueueConsumer> {
    const consumer = new AmqpQueueConsumer(options);
    const onAbort = () => consumer.abort.abort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await consumer.openWithRetry(true);
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
    }
    if (!consumer.session) {
      await consumer.close();
      throw new BrokerUnavailableError(
        `consumer for ${options.topology.queue} was stopped before it connected`,
      );
    }
    return consumer;
  }

  get state(): AmqpConsumerState {
    return this.currentState;
  }

  get reconnects(): number {
    return this.reconnectCount;
  }

  /** Acknowledges on the delivery's own channel. False when that channel is gone (the broker redelivers). */
  ack(delivery: InboundDelivery): boolean {
    const entry = this.raw.get(delivery);
    if (!entry || entry.session.ended) return false;
    try {
      entry.session.channel.ack(entry.message);
      this.raw.delete(delivery);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Publishes a persistent copy of `delivery` (same body, messageId and properties, the given headers)
   * to `queue` through the default exchange and waits for the broker's confirm. Only on the delivery's
   * own, still open channel: otherwise the original is redelivered anyway and a copy would duplicate it.
   */
  publishCopy(delivery: InboundDelivery, queue: string, headers: Record<string, unknown>): Promise<void> {
    const entry = this.raw.get(delivery);
    const session = entry?.session;
    if (!session || session.ended || session !== this.session) {
      return Promise.reject(
        new BrokerUnavailableError(
          'the channel this message arrived on is closed; the broker will redeliver it',
        ),
      );
    }
    const key = returnKey(queue, delivery.messageId);
    const timeoutMs = this.options.confirmTimeoutMs ?? DEFAULT_CONFIRM_TIMEOUT_MS;
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (error?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (error) reject(error);
        else resolve();
      };
      const timer = setTimeout(
        () =>
          settle(
            new BrokerUnavailableError(`no publisher confirm for a copy to ${queue} within ${timeoutMs} ms`),
          ),
        timeoutMs,
      );
      const options: Options.Publish = {
        ...definedProperties(delivery.properties),
        ...(delivery.messageId ? { messageId: delivery.messageId } : {}),
        headers,
        persistent: true,
        mandatory: true,
      };
      try {
        session.channel.publish('', queue, delivery.body, options, (error: unknown) => {
          if (takeReturn(session, key)) {
            settle(new PublishRejectedError(`copy to ${queue} was unroutable`, { queue }));
          } else if (error) {
            const message = (error as Error).message ?? String(error);
            settle(
              /nack/i.test(message)
                ? new PublishRejectedError(`broker refused the copy to ${queue}`, { queue })
                : new BrokerUnavailableError(`copy to ${queue} not confirmed: ${message}`, error),
            );
          } else {
            settle();
          }
        });
      } catch (error) {
        settle(
          new BrokerUnavailableError(`cannot publish a copy to ${queue}: ${(error as Error).message}`, error),
        );
      }
    });
  }

  /**
   * Closes the current channel on purpose (unacknowledged deliveries go back to the queue) and
   * reconnects after a backoff. Used when a copy cannot be published: the backoff, not a nack-requeue,
   * spaces out the redeliveries while the broker is in trouble.
   */
  recycle(reason: Error): void {
    const session = this.session;
    if (!session || this.abort.signal.aborted) return;
    this.options.logger.warn(
      { err: reason, queue: this.options.topology.queue },
      'recycling the consumer channel',
    );
    this.endSession(session, reason);
    session.channel.close().catch(() => {});
  }

  /** Stops receiving (basic.cancel); deliveries already received stay acknowledgeable. No reconnects after this. */
  async cancel(): Promise<void> {
    if (this.currentState !== 'stopped' && this.currentState !== 'failed') this.currentState = 'stopping';
    this.abort.abort();
    const session = this.session;
    if (!session?.consumerTag || session.ended) return;
    try {
      await session.channel.cancel(session.consumerTag);
    } catch (error) {
      this.options.logger.debug({ err: error }, 'basic.cancel failed (channel already closed)');
    }
  }

  /** Closes the channel (unacknowledged deliveries return to the queue) and an owned connection. */
  async close(): Promise<void> {
    this.abort.abort();
    const session = this.session;
    this.session = undefined;
    if (session && !session.ended) {
      session.ended = true;
      try {
        await session.channel.close();
      } catch {
        // already closed
      }
    }
    if (this.ownedConnection) {
      await this.ownedConnection.close();
      this.ownedConnection = undefined;
    }
    if (this.currentState !== 'failed') this.currentState = 'stopped';
  }

  private async openWithRetry(initial: boolean): Promise<void> {
    if (this.opening) return;
    this.opening = true;
    try {
      let first = initial;
      do {
        await this.openLoop(first);
        first = false;
      } while (!this.session && !this.abort.signal.aborted);
    } finally {
      this.opening = false;
    }
  }

  private async openLoop(initial: boolean): Promise<void> {
    for (let attempt = 0; !this.abort.signal.aborted; attempt++) {
      if (!initial || attempt > 0) {
        const delay = backoff(this.consecutiveFailures++, this.options.reconnectMaxDelayMs);
        await abortableDelay(delay, this.abort.signal);
        if (this.abort.signal.aborted) return;
      }
      try {
        if (await this.openSession()) return;
      } catch (error) {
        if (error instanceof ConfigError) {
          this.currentState = 'failed';
          this.abort.abort();
          if (initial) {
            await this.close();
            throw error;
          }
          this.options.logger.error({ err: error }, 'consumer topology mismatch; consumer stopped');
          await this.close();
          return;
        }
        if (typeof this.options.amqp !== 'string' && this.lostConnections.has(this.options.amqp)) {
          // A caller-owned connection cannot be re-opened from here; its owner must start a new consumer.
          this.currentState = 'failed';
          this.abort.abort();
          const lost = new BrokerUnavailableError('the caller-owned AMQP connection was lost', error);
          if (initial) throw lost;
          this.options.logger.error(
            { err: lost },
            'consumer stopped: pass a URL to let it reconnect on its own',
          );
          return;
        }
        // One warn per outage; the attempts after it are debug lines (the recovery says how many).
        if (this.lost) this.lost.failedConnects++;
        const level = this.lost && this.lost.failedConnects > 1 ? 'debug' : 'warn';
        this.options.logger[level](
          { err: error, attempt, queue: this.options.topology.queue },
          'consumer cannot connect',
        );
      }
    }
  }

  private async connection(): Promise<AmqpConnection> {
    if (typeof this.options.amqp !== 'string') {
      this.watch(this.options.amqp);
      return this.options.amqp;
    }
    if (this.ownedConnection && !this.lostConnections.has(this.ownedConnection)) return this.ownedConnection;
    const previous = this.ownedConnection;
    this.ownedConnection = undefined;
    if (previous) await previous.close();
    const connection = await AmqpConnection.connect({
      url: this.options.amqp,
      name: this.options.connectionName,
      logger: this.options.logger,
    });
    this.watch(connection);
    this.ownedConnection = connection;
    return connection;
  }

  private watch(connection: AmqpConnection): void {
    if (this.watchedConnections.has(connection)) return;
    this.watchedConnections.add(connection);
    connection.onLost((error) => {
      this.lostConnections.add(connection);
      const session = this.session;
      if (session?.connection === connection) this.endSession(session, error);
    });
  }

  /** Opens a channel and starts consuming. False when the session was lost again before it was up. */
  private async openSession(): Promise<boolean> {
    const connection = await this.connection();
    const channel = await connection.confirmChannel();
    const session: Session = {
      id: ++this.sessionSeq,
      connection,
      channel,
      openedAt: Date.now(),
      consumerTag: undefined,
      ended: false,
      returned: new Map(),
    };
    channel.on('error', (error: Error) =>
      this.options.logger.warn({ err: error }, 'amqp consumer channel error'),
    );
    channel.on('close', () => this.endSession(session, new Error('channel closed')));
    channel.on('return', (message: ConsumeMessage) => {
      const key = returnKey(message.fields.routingKey, message.properties.messageId);
      session.returned.set(key, (session.returned.get(key) ?? 0) + 1);
    });
    try {
      await declareConsumerTopology(channel, this.options.topology);
      await channel.prefetch(this.options.prefetch);
      this.session = session;
      const { consumerTag } = await channel.consume(
        this.options.topology.queue,
        (message) => {
          if (!message) {
            // The broker cancelled the consumer (queue deleted, node down): re-declare and resume.
            this.endSession(session, new Error('consumer cancelled by the broker'));
            channel.close().catch(() => {});
            return;
          }
          if (session.ended) return; // its channel is closing; the broker redelivers it
          this.options.onDelivery(this.toDelivery(session, message));
        },
        { noAck: false },
      );
      session.consumerTag = consumerTag;
    } catch (error) {
      session.ended = true;
      if (this.session === session) this.session = undefined;
      channel.close().catch(() => {});
      throw error instanceof ConfigError || error instanceof BrokerUnavailableError
        ? error
        : new BrokerUnavailableError(`cannot start consuming: ${(error as Error).message}`, error);
    }
    if (this.abort.signal.aborted) {
      // stop() ran while we were connecting: do not keep receiving.
      session.ended = true;
      this.session = undefined;
      await channel.close().catch(() => {});
      return true;
    }
    if (session.ended) return false;
    this.currentState = 'consuming';
    this.options.logger.info(
      { queue: this.options.topology.queue, prefetch: this.options.prefetch, session: session.id },
      'consuming',
    );
    if (this.lost) {
      const outageMs = Date.now() - this.lost.since;
      this.options.logger.warn(
        { queue: this.options.topology.queue, outageMs, failedConnects: this.lost.failedConnects },
        `consumer recovered after ${(outageMs / 1000).toFixed(1)} s (${this.lost.failedConnects} failed connects)`,
      );
      this.lost = undefined;
    }
    return true;
  }

  private endSession(session: Session, reason: Error): void {
    if (session.ended) return;
    session.ended = true;
    if (this.session !== session) return;
    this.session = undefined;
    if (this.abort.signal.aborted) return;
    if (Date.now() - session.openedAt >= STABLE_SESSION_MS) this.consecutiveFailures = 0;
    this.currentState = 'reconnecting';
    this.reconnectCount++;
    this.lost ??= { since: Date.now(), failedConnects: 0 };
    this.options.logger.warn(
      { err: reason, queue: this.options.topology.queue },
      'consumer channel lost; reconnecting',
    );
    // While a loop is already opening a session, that loop notices (openSession returns false) and retries.
    if (!this.opening) void this.openWithRetry(false);
  }

  private toDelivery(session: Session, message: ConsumeMessage): InboundDelivery {
    const p = message.properties;
    const messageId = typeof p.messageId === 'string' && p.messageId !== '' ? p.messageId : undefined;
    const delivery: InboundDelivery = {
      body: message.content,
      messageId,
      headers: { ...(p.headers ?? {}) },
      logFields: {},
      correlationId: stringOrUndefined(p.correlationId),
      properties: {
        contentType: stringOrUndefined(p.contentType),
        contentEncoding: stringOrUndefined(p.contentEncoding),
        correlationId: stringOrUndefined(p.correlationId),
        type: stringOrUndefined(p.type),
        appId: stringOrUndefined(p.appId),
        timestamp: typeof p.timestamp === 'number' ? p.timestamp : undefined,
        replyTo: stringOrUndefined(p.replyTo),
      },
      redelivered: message.fields.redelivered,
    };
    this.raw.set(delivery, { session, message });
    return delivery;
  }
}

/** Reconnect delay after `failures` consecutive failures; jittered so consumers of a restarted broker do not reconnect in lockstep. */
function backoff(failures: number, maxDelayMs = DEFAULT_RECONNECT_MAX_DELAY_MS): number {
  return retryDelayMs(failures + 1, { baseMs: RECONNECT_BASE_DELAY_MS, maxMs: maxDelayMs, jitter: 'equal' });
}

function returnKey(routingKey: string, messageId: unknown): string {
  return `${routingKey}\u0000${typeof messageId === 'string' ? messageId : ''}`;
}

/** RabbitMQ sends basic.return before the confirm of the same message, so the confirm callback can check. */
function takeReturn(session: Session, key: string): boolean {
  const count = session.returned.get(key);
  if (!count) return false;
  if (count === 1) session.returned.delete(key);
  else session.returned.set(key, count - 1);
  return true;
}

function stringOrUndefined(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function definedProperties(properties: CopiedProperties): Options.Publish {
  const result: Options.Publish = {};
  for (const [name, value] of Object.entries(properties)) {
    if (value !== undefined) (result as Record<string, unknown>)[name] = value;
  }
  return result;
}

/** Broker-added headers not carried over to copies (a copy is a new message, not a dead-lettering). */
const BROKER_DEATH_HEADER = /^x-(death|first-death-|last-death-)/;

function copyHeaders(headers: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !BROKER_DEATH_HEADER.test(name)));
}

/**
 * The consumer toolkit's transport over RabbitMQ: one AmqpQueueConsumer, its retry queue (named by
 * its delay) and its dead-letter queue. Copies go out on the delivery's own channel; a copy that
 * cannot be confirmed recycles the channel (after a backoff the broker redelivers the original: no
 * nack-requeue, so a failing broker is not hammered).
 */
export class AmqpConsumerTransport implements ConsumerTransport {
  private consumer: AmqpQueueConsumer | undefined;
  readonly messageIdLabel = 'messageId';

  constructor(private readonly options: Omit<AmqpQueueConsumerOptions, 'onDelivery'>) {}

  get source(): string {
    return this.options.topology.queue;
  }

  get state(): TransportState {
    return this.consumer?.state ?? 'starting';
  }

  get reconnects(): number {
    return this.consumer?.reconnects ?? 0;
  }

  async start(onDelivery: (delivery: TransportDelivery) => Promise<void>): Promise<void> {
    this.consumer = await AmqpQueueConsumer.start({
      ...this.options,
      onDelivery: (delivery) => {
        void onDelivery(delivery);
      },
    });
  }

  settle(delivery: TransportDelivery): boolean {
    return this.consumer?.ack(delivery as InboundDelivery) ?? false;
  }

  async publishCopy(
    delivery: TransportDelivery,
    target: CopyTarget,
    headers: Record<string, string | number>,
  ): Promise<boolean> {
    const { queue, retryDelayMs } = this.options.topology;
    const destination = target === 'retry' ? retryQueueName(queue, retryDelayMs) : deadQueueName(queue);
    const consumer = this.consumer;
    if (!consumer) return false;
    try {
      await consumer.publishCopy(delivery as InboundDelivery, destination, {
        ...copyHeaders(delivery.headers),
        ...headers,
      });
      return true;
    } catch (error) {
      consumer.recycle(error instanceof Error ? error : new Error(String(error)));
      return false;
    }
  }

  release(_delivery: TransportDelivery, error: Error): void {
    this.consumer?.recycle(error);
  }

  async cancel(): Promise<void> {
    await this.consumer?.cancel();
  }

  async close(): Promise<void> {
    await this.consumer?.close();
  }
}
