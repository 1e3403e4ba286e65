/**
 * The `herald relay` role: wires the relay to PostgreSQL, LISTEN/NOTIFY and RabbitMQ and runs it until
 * the caller's AbortSignal fires (the CLI wires SIGTERM/SIGINT to it). On abort it stops claiming,
 * lets in-flight publishes confirm and get marked, releases anything claimed but unpublished, closes
 * its connections and resolves: a clean exit (invariant 2: a stopped relay leaves every row either
 * sent or pending, never lost).
 *
 * Queues named in `options.queues` are declared (durable, of the configured type) before the first
 * claim; a destination that does not exist is unroutable and would burn the rows' attempts.
 */
import { AmqpConnection, declareQueues } from '../adapters/amqp/amqp-connection.js';
import { AmqpSink } from '../adapters/amqp/amqp-sink.js';
import { createDatabase } from '../adapters/postgres/database.js';
import { PgWakeupListener } from '../adapters/postgres/notifications.js';
import type { HeraldConfig } from '../config.js';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import { OutboxRelay } from './relay.js';

export interface RunRelayOptions {
  /** Queue names to declare before relaying (the topology the relay publishes to). */
  queues?: readonly string[];
}

export async function runRelay(
  config: HeraldConfig,
  logger: Logger,
  signal: AbortSignal,
  options: RunRelayOptions = {},
): Promise<void> {
  const amqpUrl = config.amqpUrl;
  if (!amqpUrl) throw new ConfigError('AMQP_URL', 'is required by the relay');
  const log = logger.child({ role: 'relay' });

  const queues = options.queues ?? [];
  if (queues.length > 0) {
    let topology: AmqpConnection;
    try {
      topology = await AmqpConnection.connectWithRetry(
        { url: amqpUrl, name: 'herald-relay-topology', logger: log },
        signal,
      );
    } catch (error) {
      if (signal.aborted) return;
      throw error;
    }
    try {
      const channel = await topology.channel();
      await declareQueues(channel, queues, config.amqpQueueType);
      log.info({ queues, queueType: config.amqpQueueType }, 'queues declared');
    } finally {
      await topology.close();
    }
  }
  if (signal.aborted) return;

  const databaseOptions = {
    url: config.databaseUrl,
    schema: config.schema,
    poolSize: config.dbPoolSize,
    applicationName: 'herald-relay',
  };
  const db = createDatabase(databaseOptions);
  const listener = new PgWakeupListener(databaseOptions, log);
  const sink = new AmqpSink({
    url: amqpUrl,
    name: `herald-relay-${config.pod}`,
    inFlight: config.relay.inFlight,
    logger: log,
  });
  const relay = new OutboxRelay({
    db,
    sinks: { amqp: sink },
    settings: config.relay,
    owner: config.pod,
    listener,
    logger: log,
  });
  try {
    const started = relay.start();
    started.catch((error: unknown) => log.warn({ err: error }, 'relay start incomplete'));
    await new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      signal.addEventListener('abort', () => resolve(), { once: true });
    });
    log.info('stopping relay: finishing in-flight publishes');
    await relay.stop();
  } finally {
    await sink.close();
    await listener.close();
    await db.close();
  }
}
