/**
 * The relay as its own process, for the memory benchmark: drains BENCH_ROWS rows, then reports its
 * own peak RSS (process.resourceUsage().maxRSS) and elapsed time as one JSON line and exits.
 * Configured like the real role, through loadConfig (DATABASE_URL, HERALD_SCHEMA, AMQP_URL,
 * HERALD_RELAY_*), plus BENCH_ROWS.
 */
import { AmqpSink } from '../../src/adapters/amqp/amqp-sink.js';
import { createDatabase } from '../../src/adapters/postgres/database.js';
import { loadConfig } from '../../src/config.js';
import { OutboxRelay } from '../../src/outbox/relay.js';

const rows = Number(process.env.BENCH_ROWS);
const config = loadConfig(process.env, { pod: 'bench-relay' });
const db = createDatabase({ url: config.databaseUrl, schema: config.schema, poolSize: config.dbPoolSize });
const sink = new AmqpSink({ url: config.amqpUrl!, inFlight: config.relay.inFlight, name: 'herald-bench' });
const relay = new OutboxRelay({ db, sinks: { amqp: sink }, settings: config.relay, owner: config.pod });

const started = performance.now();
await relay.start();
await new Promise<void>((resolve) => {
  const timer = setInterval(() => {
    if (relay.counters.published >= rows) {
      clearInterval(timer);
      resolve();
    }
  }, 5);
});
const elapsedMs = performance.now() - started;
await relay.stop();
await sink.close();
await db.close();
process.stdout.write(
  `${JSON.stringify({ published: relay.counters.published, elapsedMs, maxRssKb: process.resourceUsage().maxRSS })}\n`,
);
