/**
 * The `herald relay` role: wires the relay to PostgreSQL, LISTEN/NOTIFY and RabbitMQ and runs it until
 * the caller's AbortSignal fires (the CLI wires SIGTERM/SIGINT to it). On abort it stops claiming,
 * lets in-flight publishes confirm and get marked, releases anything claimed but unpublished, closes
 * its connections and resolves: a clean exit (invariant 2: a stopped relay leaves every row either
 * sent or pending, never lost).
 *
 * Queues named in `options.queues` are declared (durable, of the configured type) before the first
 * claim; a destination that does not exist is unroutable and would burn the rows' attempts.
 *
 * Sinks: RabbitMQ when AMQP_URL is set, Kafka when KAFKA_BROKERS is set (at least one is required);
 * the relay claims only rows whose sink it has. Kafka topics are created on first use when
 * HERALD_KAFKA_CREATE_TOPICS is true, otherwise a missing topic is unroutable like a missing queue.
 */
import { AmqpConnection, declareQueues } from '../adapters/amqp/amqp-connection.js';
import { AmqpSink } from '../adapters/amqp/amqp-sink.js';
import { KafkaSink } from '../adapters/kafka/kafka-sink.js';
import { createDatabase } from '../adapters/postgres/database.js';
import { PgWakeupListener } from '../adapters/postgres/notifications.js';
import type { HeraldConfig } from '../config.js';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import { OutboxRelay, type RelaySinks } from './relay.js';

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
  const kafkaBrokers = config.kafkaBrokers;
  if (!amqpUrl && kafkaBrokers.length === 0) {
    throw new ConfigError('AMQP_URL', 'is required by the relay (or KAFKA_BROKERS for a Kafka-only relay)');
  }
  const log = logger.child({ role: 'relay' });

  const queues = options.queues ?? [];
  if (amqpUrl && queues.length > 0) {
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
  const amqp = amqpUrl
    ? new AmqpSink({
        url: amqpUrl,
        name: `herald-relay-${config.pod}`,
        inFlight: config.relay.inFlight,
        logger: log,
      })
    : undefined;
  const kafka =
    kafkaBrokers.length > 0
      ? new KafkaSink({
          brokers: kafkaBrokers,
          clientId: `herald-relay-${config.pod}`,
          maxBatchMessages: config.relay.inFlight,
          createTopics: config.kafka.createTopics
            ? { partitions: config.kafka.topicPartitions, replicationFactor: config.kafka.replicationFactor }
            : undefined,
          logger: log,
        })
      : undefined;
  const sinks: RelaySinks = { ...(amqp ? { amqp } : {}), ...(kafka ? { kafka } : {}) };
  const relay = new OutboxRelay({
    db,
    sinks,
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
    await amqp?.close();
    await kafka?.close();
    await listener.close();
    await db.close();
  }
}
