/**
 * The consumer toolkit over RabbitMQ: `consume(deps, queue, handler, options)`. The delivery policy
 * (delivery-policy.ts: inbox de-duplication in the handler's transaction, permanent vs transient
 * errors, retry and dead-letter copies; invariant 4) over the AMQP transport: `<queue>`,
 * `<queue>.retry.<delay>ms` (a TTL queue that dead-letters back to `<queue>` after the delay) and
 * `<queue>.dead`. Prefetch bounds the handlers in flight. A lost broker connection is re-opened with
 * backoff; unacked deliveries are redelivered and the inbox de-duplicates those that had committed. A
 * message shovelled back from `<queue>.dead` keeps its attempt header (one more try; reset it for a full
 * set); its `dead` inbox row may be claimed again.
 */
import type { AmqpConnection, QueueType } from '../adapters/amqp/amqp-connection.js';
import { AmqpConsumerTransport } from '../adapters/amqp/amqp-consumer.js';
import type { Logger } from '../logger.js';
import type { MessageSchema } from '../messaging/message-schemas.js';
import type { Database } from '../ports/database.js';
import { type Consumer, DeliveryPolicy, type Handler, validateConsumerOptions } from './delivery-policy.js';

export type {
  ConsumedMessage,
  Consumer,
  ConsumerState,
  ConsumerStats,
  Handler,
  HandlerOutcome,
} from './delivery-policy.js';
export { attemptOf } from './delivery-policy.js';

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
  /**
   * The message schema versions it reads (ADR 0039): older versions are upcast before `parse`, a newer
   * one is dead-lettered naming the version. Default: version 1 only.
   */
  messages?: MessageSchema;
  /** Publisher-confirm timeout for retry / dead-letter copies. Default 30 s. */
  confirmTimeoutMs?: number;
  /** Aborts the initial connection attempts (consume() retries while the broker is down). */
  signal?: AbortSignal;
  /**
   * Most deliveries in one transaction when the handler has a batch form (the fenced handler of a
   * set-based effect). Default 32; 1 turns batching off. A failing batch is handled one message at a time.
   */
  batchSize?: number;
}

/** Starts consuming `queue`. Resolves once the topology is declared and deliveries flow. */
export async function consume<T = unknown>(
  deps: ConsumeDeps,
  queue: string,
  handler: Handler<T>,
  options: ConsumeOptions<T>,
): Promise<Consumer> {
  const prefetch = options.prefetch ?? 32;
  const queueType = options.queueType ?? 'quorum';
  const common = validateConsumerOptions(queue, options, (problems, retryDelayMs) => {
    // 255 bytes is AMQP's limit for a queue name; the retry/dead queues add up to 6 more.
    if (queue === '' || Buffer.byteLength(queue) > 249) problems.push('queue must be 1..249 bytes');
    if (!Number.isInteger(prefetch) || prefetch < 1 || prefetch > 65_535) {
      problems.push('prefetch must be an integer in 1..65535');
    }
    if (retryDelayMs < 1 || retryDelayMs > 2 ** 31 - 1)
      problems.push('retryDelayMs must be a positive 32-bit integer');
    if (queueType !== 'quorum' && queueType !== 'classic')
      problems.push("queueType must be 'quorum' or 'classic'");
  });
  const logger = deps.logger.child({ consumer: options.consumer, queue });
  const transport = new AmqpConsumerTransport({
    amqp: deps.amqp,
    connectionName: `herald-consumer:${options.consumer}:${queue}`,
    topology: { queue, queueType, retryDelayMs: common.retryDelayMs },
    prefetch,
    logger,
    confirmTimeoutMs: options.confirmTimeoutMs,
    signal: options.signal,
  });
  return new DeliveryPolicy(
    deps.db,
    transport,
    handler,
    {
      ...common,
      parse: options.parse,
      ...(options.messages ? { messages: options.messages } : {}),
      ...(options.batchSize ? { batchSize: options.batchSize } : {}),
    },
    logger,
  ).start();
}
