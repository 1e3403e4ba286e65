/**
 * The message sinks a process publishes through (RabbitMQ with AMQP_URL, Kafka with KAFKA_BROKERS), built
 * once from the config for the relay role and for a role's in-process publish (ADR 0024), and the
 * registry's queues they need declared before the first publish (a missing queue is unroutable and would
 * burn the rows' attempts). Sinks connect on their first publish.
 */
import { AmqpConnection, declareQueues } from '../adapters/amqp/amqp-connection.js';
import { AmqpSink } from '../adapters/amqp/amqp-sink.js';
import { KafkaSink } from '../adapters/kafka/kafka-sink.js';
import type { Logger } from '../logger.js';
import type { RelaySinks } from '../outbox/relay.js';
import type { MessageSink } from '../ports/message-sink.js';
import type { HeraldConfig } from '../settings/core.js';

export function createSinks(config: HeraldConfig, logger: Logger, clientName: string): RelaySinks {
  const amqp: MessageSink | undefined = config.amqpUrl
    ? new AmqpSink({ url: config.amqpUrl, name: clientName, inFlight: config.relay.inFlight, logger })
    : undefined;
  const kafka: MessageSink | undefined =
    config.kafkaBrokers.length > 0
      ? new KafkaSink({
          brokers: config.kafkaBrokers,
          security: config.kafka.security,
          clientId: clientName,
          maxBatchMessages: config.relay.inFlight,
          createTopics: config.kafka.createTopics
            ? { partitions: config.kafka.topicPartitions, replicationFactor: config.kafka.replicationFactor }
            : undefined,
          logger,
        })
      : undefined;
  return { ...(amqp ? { amqp } : {}), ...(kafka ? { kafka } : {}) };
}

export async function closeSinks(sinks: RelaySinks): Promise<void> {
  await Promise.all([sinks.amqp?.close(), sinks.kafka?.close()]);
}

/**
 * Declares the registry's AMQP queues, retrying while RabbitMQ is away. Returns false when `signal`
 * aborted first.
 */
export async function declareRegistryQueues(
  config: HeraldConfig,
  queues: readonly string[],
  logger: Logger,
  signal: AbortSignal,
  name: string,
): Promise<boolean> {
  if (!config.amqpUrl || queues.length === 0) return !signal.aborted;
  let topology: AmqpConnection;
  try {
    topology = await AmqpConnection.connectWithRetry({ url: config.amqpUrl, name, logger }, signal);
  } catch (error) {
    if (signal.aborted) return false;
    throw error;
  }
  try {
    const channel = await topology.channel();
    await declareQueues(channel, queues, config.amqpQueueType);
    logger.info({ queues, queueType: config.amqpQueueType }, 'queues declared');
  } finally {
    await topology.close();
  }
  return !signal.aborted;
}
