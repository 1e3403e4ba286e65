/**
 * The `herald relay` role: runs the relay with the configured sinks (RabbitMQ with AMQP_URL, Kafka with
 * KAFKA_BROKERS) until its signal fires. The registry's queues are declared before the first claim, since
 * a missing destination is unroutable and would burn the rows' attempts. On abort it stops claiming, lets
 * in-flight publishes confirm and get marked, releases what it claimed but did not publish and closes its
 * sinks (invariant 2: every row is left sent or pending, never lost). Readiness reports each sink's
 * connection state. ADR 0004, ADR 0007, ADR 0013.
 */
import { ConfigError } from '../errors.js';
import { OutboxRelay, type RelaySinks } from '../outbox/relay.js';
import type { MessageSink } from '../ports/message-sink.js';
import type { RoleDefinition } from '../registry/role.js';
import { aborted } from './runtime.js';
import { closeSinks, createSinks, declareRegistryQueues } from './sinks.js';

function sinkReadiness(sink: MessageSink | undefined): { ok: boolean; detail: string } {
  if (!sink) return { ok: false, detail: 'starting: declaring the queues' };
  switch (sink.connectionState) {
    case 'lost':
      sink.ensureConnected?.().catch(() => {});
      return {
        ok: false,
        detail: 'no connection to the broker (lost, or the last attempt failed): reconnecting',
      };
    case 'idle':
      return { ok: true, detail: 'not connected yet: connects on its first publish' };
    default:
      return { ok: true, detail: 'connected' };
  }
}

export const relayRole: RoleDefinition = {
  summary: 'publish outbox rows to the broker (any number of replicas)',
  inlinePublish: false,
  async run(runtime, signal) {
    const { config, logger: log, registry } = runtime;
    const amqpUrl = config.amqpUrl;
    const kafkaBrokers = config.kafkaBrokers;
    if (!amqpUrl && kafkaBrokers.length === 0) {
      throw new ConfigError('AMQP_URL', 'is required by the relay (or KAFKA_BROKERS for a Kafka-only relay)');
    }
    const created: RelaySinks = {};
    if (amqpUrl) runtime.probes.add('broker:amqp', () => sinkReadiness(created.amqp));
    if (kafkaBrokers.length > 0) runtime.probes.add('broker:kafka', () => sinkReadiness(created.kafka));

    if (!(await declareRegistryQueues(config, registry.amqpQueues, log, signal, 'herald-relay-topology')))
      return;
    const sinks = createSinks(config, log, `herald-relay-${config.pod}`);
    Object.assign(created, sinks);
    const relay = new OutboxRelay({
      db: runtime.db,
      sinks,
      settings: config.relay,
      owner: config.pod,
      listener: runtime.listener,
      changes: runtime.notifier,
      logger: log,
    });
    try {
      const started = relay.start();
      started.catch((error: unknown) => log.warn({ err: error }, 'relay start incomplete'));
      await aborted(signal);
      log.info('stopping relay: finishing in-flight publishes');
      await relay.stop();
    } finally {
      await closeSinks(sinks);
    }
  },
};
