/**
 * Child process for the in-process publish crash test (ADR 0024): its database publishes the rows it
 * commits itself, and the publisher's `beforePublish` hook reports the committed message ids on stdout
 * and SIGKILLs the process: it dies after the commit and before anything reached the broker.
 */
import { AmqpSink } from '../../../src/adapters/amqp/amqp-sink.js';
import { createDatabase } from '../../../src/adapters/postgres/database.js';
import { loadConfig } from '../../../src/config.js';
import { OutboxRelay } from '../../../src/outbox/relay.js';
import { seedOutbox } from './fixtures.js';

const config = loadConfig(process.env, { pod: 'inline-crash-child' });
const db = createDatabase({ url: config.databaseUrl, schema: config.schema, poolSize: 2 });
const sink = new AmqpSink({
  url: config.amqpUrl!,
  inFlight: config.relay.inFlight,
  name: 'herald-inline-child',
});
const relay = new OutboxRelay({
  db,
  sinks: { amqp: sink },
  settings: config.relay,
  owner: config.pod,
  hooks: {
    beforePublish: (rows) => {
      process.stdout.write(`${JSON.stringify({ committed: rows.map((row) => row.messageId) })}\n`, () =>
        process.kill(process.pid, 'SIGKILL'),
      );
      return new Promise(() => {}); // never publishes
    },
  },
});
db.publishOutboxInline?.(relay.inlinePublisher());
await seedOutbox(db, { count: 1, destination: process.env.TEST_QUEUE! });
