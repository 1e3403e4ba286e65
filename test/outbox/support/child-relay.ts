/**
 * The relay of a crash-test child process: config from the environment the parent passes (loadConfig,
 * as the real role), its own database pool and AMQP sink, and the test's hooks.
 */
import { AmqpSink } from '../../../src/adapters/amqp/amqp-sink.js';
import { createDatabase } from '../../../src/adapters/postgres/database.js';
import { loadConfig } from '../../../src/config.js';
import { OutboxRelay, type OutboxRelayHooks } from '../../../src/outbox/relay.js';

export function childRelay(pod: string, hooks: OutboxRelayHooks) {
  const config = loadConfig(process.env, { pod });
  const db = createDatabase({ url: config.databaseUrl, schema: config.schema, poolSize: 2 });
  const sink = new AmqpSink({ url: config.amqpUrl!, inFlight: config.relay.inFlight, name: `herald-${pod}` });
  const relay = new OutboxRelay({
    db,
    sinks: { amqp: sink },
    settings: config.relay,
    owner: config.pod,
    hooks,
  });
  return { db, relay };
}
