/**
 * `herald worker`: the built-in consumers of every registered aggregate (for campaigns, the LINE
 * delivery worker of seed 000), one consumer per source queue or topic, on RabbitMQ or Kafka as each
 * definition says. Every consumer runs the toolkit's one delivery policy: inbox de-duplication in the
 * handler's transaction (invariant 4), permanent vs transient errors, retry and dead-letter copies.
 * Aggregates whose deployment shape has workers claim their own work (scheduled actions with
 * HERALD_ACTIONS_DISPATCH=in-process) add worker sweeps: the worker runs them in a Scanner loop of its
 * own, woken like the scanner (NOTIFY of the due channel, the next-due timer, the fallback poll).
 * Readiness (ADR 0013): `consumers` is ready once every consumer consumes (not while connecting or
 * reconnecting to its broker).
 */
import { ConfigError } from '../errors.js';
import { channels } from '../ports/wakeups.js';
import type { RoleDefinition, Runtime } from '../registry/role.js';
import { Scanner } from '../scanner/scanner.js';
import { type Consumer, consume } from '../worker/consume.js';
import { consumeKafka } from '../worker/consume-kafka.js';
import type { ConsumerDefinition } from '../worker/consumer-definition.js';
import { aborted } from './runtime.js';

/**
 * Starts one toolkit consumer of `definition` on `source`, on its transport, with the configured
 * attempts, retry delay and batch size (also used by roles that consume one topic of their own, such as
 * `herald sms-gateway`).
 */
export function startConsumer(
  runtime: Pick<Runtime, 'config' | 'db' | 'logger'>,
  definition: ConsumerDefinition,
  source: string,
  signal: AbortSignal,
  options: { concurrency?: number; groupId?: string; fromBeginning?: boolean } = {},
): Promise<Consumer> {
  const { config, db, logger } = runtime;
  const common = {
    consumer: definition.consumer,
    parse: definition.parse,
    ...(definition.messages ? { messages: definition.messages } : {}),
    maxAttempts: config.consumer.maxAttempts,
    retryDelayMs: config.consumer.retryDelayMs,
    batchSize: config.consumer.batchSize,
    signal,
  };
  if (definition.transport === 'kafka') {
    if (config.kafkaBrokers.length === 0) {
      throw new ConfigError(
        'KAFKA_BROKERS',
        `is required by the worker (consumer ${definition.consumer} reads ${source})`,
      );
    }
    const deps = { db, brokers: config.kafkaBrokers, security: config.kafka.security, logger };
    return consumeKafka(deps, source, definition.handler, {
      ...common,
      ...(options.concurrency ? { concurrency: options.concurrency } : {}),
      ...(options.groupId ? { groupId: options.groupId } : {}),
      ...(options.fromBeginning === false ? { fromBeginning: false } : {}),
      topicPartitions: config.kafka.topicPartitions,
      replicationFactor: config.kafka.replicationFactor,
    });
  }
  if (!config.amqpUrl) {
    throw new ConfigError(
      'AMQP_URL',
      `is required by the worker (consumer ${definition.consumer} reads ${source})`,
    );
  }
  return consume({ db, amqp: config.amqpUrl, logger }, source, definition.handler, {
    ...common,
    prefetch: definition.prefetch ?? config.consumer.prefetch,
    queueType: config.amqpQueueType,
  });
}

export const workerRole: RoleDefinition = {
  summary: 'built-in consumers of every registered aggregate (LINE campaign delivery)',
  async run(runtime, signal) {
    const { logger: log, registry } = runtime;
    const context = {
      config: runtime.config,
      db: runtime.db,
      handler: runtime.handler,
      logger: log,
      wakeups: runtime.notifier,
    };
    const definitions = registry.consumers(context);
    const sweepers = registry.workerSweepers(context);
    const scanner =
      sweepers.length > 0
        ? new Scanner({ sweepers, pollIntervalMs: runtime.config.scanner.pollMs, logger: log })
        : undefined;
    if (scanner) {
      scanner.start();
      runtime.listener
        .subscribe(channels.due(runtime.config.schema), () => scanner.wake())
        .catch((error: unknown) =>
          log.warn({ err: error }, 'worker cannot listen for wake-ups; polling only'),
        );
    }
    let running: readonly Consumer[] | undefined;
    runtime.probes.add('consumers', () => {
      if (!running) return { ok: definitions.length === 0, detail: 'starting: connecting to the broker' };
      const waiting = running.filter((c) => c.stats.state !== 'consuming');
      return waiting.length === 0
        ? { ok: true, detail: `${running.length} consuming` }
        : {
            ok: false,
            detail: `not consuming: ${waiting.map((c) => `${c.consumer} on ${c.queue} (${c.stats.state})`).join(', ')}`,
          };
    });
    const started = await Promise.allSettled(
      definitions.flatMap((definition) =>
        definition.sources.map((source) => startConsumer(runtime, definition, source, signal)),
      ),
    );
    const consumers = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    running = consumers;
    try {
      const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (failed && !signal.aborted) throw failed.reason;
      log.info(
        { queues: consumers.map((c) => c.queue), sweepers: sweepers.map((s) => s.name) },
        'worker started',
      );
      await aborted(signal);
    } finally {
      await Promise.all([...consumers.map((c) => c.stop({ timeoutMs: 30_000 })), scanner?.stop()]);
      log.info(
        {
          consumers: consumers.map((c) => ({ queue: c.queue, ...c.stats })),
          sweepers: sweepers.map((s) => ({ name: s.name, ...s.stats })),
        },
        'worker stopped',
      );
    }
  },
};
