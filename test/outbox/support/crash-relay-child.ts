/**
 * Child-process relay for the crash test. It publishes normally, and its `beforeMark` hook reports the
 * confirmed message ids on stdout and then never returns: the process sits exactly in the window
 * between the broker's confirm and the outbox mark, where the parent SIGKILLs it.
 * Configuration comes from the environment the parent passes (DATABASE_URL, HERALD_SCHEMA, AMQP_URL,
 * HERALD_RELAY_*), read through loadConfig like the real role.
 */
import { AmqpSink } from '../../../src/adapters/amqp/amqp-sink.js';
import { createDatabase } from '../../../src/adapters/postgres/database.js';
import { loadConfig } from '../../../src/config.js';
import { OutboxRelay } from '../../../src/outbox/relay.js';

const config = loadConfig(process.env, { pod: 'crash-child' });
const db = createDatabase({ url: config.databaseUrl, schema: config.schema, poolSize: 2 });
const sink = new AmqpSink({
  url: config.amqpUrl!,
  inFlight: config.relay.inFlight,
  name: 'herald-crash-child',
});
const relay = new OutboxRelay({
  db,
  sinks: { amqp: sink },
  settings: config.relay,
  owner: config.pod,
  hooks: {
    beforeMark: async (batch) => {
      process.stdout.write(`${JSON.stringify({ confirmed: batch.messageIds })}\n`);
      await new Promise(() => {}); // wait here for SIGKILL
    },
  },
});
await relay.start();
process.stdout.write(`${JSON.stringify({ started: true })}\n`);
