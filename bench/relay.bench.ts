/**
 * Relay throughput and memory benchmark (docs/benchmarks.md has results and how to read them).
 *
 *   npm run bench:relay -- [--n 100000] [--sink amqp] [--batch 500] [--in-flight 2000] [--pad 120]
 *     (a) raw ceiling: N messages of the same size and headers published from memory with amqplib on
 *         one confirm channel, same in-flight window, no database, to its own quorum queue;
 *     (b) the relay draining N outbox rows end to end (until every row is `sent`) to a quorum queue.
 *     Prints `raw msg/s=…`, `relay msg/s=…` and, last, `ratio=<relay/raw>`.
 *
 *   npm run bench:relay -- --sink kafka [--n 100000] [--keys 1000] [--ordered-n 100000] [--batch 500]
 *     (a) raw ceiling: N messages of the same size, keys and headers sent from memory with kafkajs
 *         (idempotent, acks -1), one sendBatch of `batch` messages at a time, no database;
 *     (b) the relay draining N outbox rows to a topic through the KafkaSink, in the same run.
 *     Prints `raw msg/s=…`, `relay msg/s=…` and `ratio=<relay/raw>` (before any other ratio), then
 *     (c) per-key ordered relaying: `ordered-n` rows over `keys` keys (ADR 0007), `ordered msg/s=…`.
 *
 *   npm run bench:relay -- --backlog 1000000 --rss
 *     drains a backlog of that many rows with the relay in a child process and prints its peak RSS
 *     (`peak_rss_mb=…`), sampled from /proc and reported by the child itself.
 *
 * Setup (database, rows, queues) is not timed. Needs the services (npm run bench:relay starts them).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import { AmqpSink } from '../src/adapters/amqp/amqp-sink.js';
import { KafkaSink } from '../src/adapters/kafka/kafka-sink.js';
import { createDatabase } from '../src/adapters/postgres/database.js';
import type { HeraldSettings as HeraldConfig } from '../src/config.js';
import { OutboxRelay } from '../src/outbox/relay.js';
import { createTestDatabase, requireEnv, uniqueName } from '../test/support/services.js';
import { rawKafkaPublish } from './support/raw-kafka-publisher.js';
import { rawPublish } from './support/raw-publisher.js';
import { countSent, seedBenchOutbox } from './support/seed.js';

const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '100000' },
    sink: { type: 'string', default: 'amqp' },
    batch: { type: 'string' },
    'in-flight': { type: 'string' },
    pad: { type: 'string', default: '120' },
    backlog: { type: 'string' },
    rss: { type: 'boolean', default: false },
    keys: { type: 'string', default: '1000' },
    'ordered-n': { type: 'string' },
  },
});
if (values.sink !== 'amqp' && values.sink !== 'kafka')
  throw new Error(`--sink ${values.sink}: amqp or kafka`);

const amqpUrl = values.sink === 'amqp' ? requireEnv('AMQP_URL') : '';
const relayEnv: Record<string, string> = {
  ...(values.batch ? { HERALD_RELAY_BATCH_SIZE: values.batch } : {}),
  ...(values['in-flight'] ? { HERALD_RELAY_IN_FLIGHT: values['in-flight'] } : {}),
};
const padBytes = Number(values.pad);
const HERE = dirname(fileURLToPath(import.meta.url));

const log = (line: string) => process.stdout.write(`${line}\n`);
const rate = (messages: number, ms: number) => Math.round((messages / ms) * 1000);

async function declareQueues(names: string[]) {
  const model = await amqp.connect(amqpUrl);
  const channel = await model.createChannel();
  for (const name of names) {
    await channel.assertQueue(name, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  }
  return {
    delete: async (name: string) => {
      await channel.deleteQueue(name);
    },
    close: async () => {
      try {
        await model.close();
      } catch {
        // the broker closed it first (e.g. restarted during the run)
      }
    },
  };
}

async function throughput(messages: number) {
  const database = await createTestDatabase();
  const rawQueue = uniqueName('herald_bench_raw');
  const relayQueue = uniqueName('herald_bench_relay');
  const queues = await declareQueues([rawQueue, relayQueue]);
  try {
    const config = database.config(relayEnv);
    log(`setup: ${messages} rows, batch=${config.relay.batchSize} in_flight=${config.relay.inFlight}`);
    const setupStarted = performance.now();
    const sample = await seedBenchOutbox(database.db, { rows: messages, destination: relayQueue, padBytes });
    log(
      `setup: seeded in ${Math.round(performance.now() - setupStarted)} ms; body=${Buffer.byteLength(sample.payloadText)} B, headers=${Object.keys(sample.headers).length}`,
    );

    const raw = await rawPublish({
      url: amqpUrl,
      queue: rawQueue,
      messages,
      inFlight: config.relay.inFlight,
      sample,
    });
    if (raw.nacked > 0) throw new Error(`raw run: ${raw.nacked} nacks`);
    await queues.delete(rawQueue);
    const rawRate = rate(messages, raw.elapsedMs);
    log(`raw: ${messages} in ${Math.round(raw.elapsedMs)} ms`);

    const db = createDatabase({ url: database.url, schema: database.schema, poolSize: config.dbPoolSize });
    const sink = new AmqpSink({ url: amqpUrl, inFlight: config.relay.inFlight, name: 'herald-bench' });
    const relay = new OutboxRelay({ db, sinks: { amqp: sink }, settings: config.relay, owner: 'bench' });
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    await relay.start();
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        if (relay.counters.published >= messages) {
          clearInterval(timer);
          resolve();
        }
      }, 2);
    });
    const relayMs = performance.now() - started;
    const cpu = process.cpuUsage(cpuBefore);
    await relay.stop();
    await sink.close();
    const sent = await countSent(db);
    await db.close();
    if (sent !== messages) throw new Error(`relay run: ${sent} of ${messages} rows sent`);
    log(
      `relay: ${messages} in ${Math.round(relayMs)} ms, ${relay.counters.batches} batches, relay process cpu=${Math.round((cpu.user + cpu.system) / 1000)} ms`,
    );

    const relayRate = rate(messages, relayMs);
    log(`raw msg/s=${rawRate}`);
    log(`relay msg/s=${relayRate}`);
    log(`ratio=${(relayRate / rawRate).toFixed(2)}`);
  } finally {
    await queues.delete(relayQueue).catch(() => {});
    await queues.close();
    await database.drop();
  }
}

interface ChildRun {
  published: number;
  elapsedMs: number;
  /** The child's own process.resourceUsage().maxRSS. */
  maxRssKb: number;
  /** VmRSS sampled from /proc every 100 ms. */
  sampledPeakKb: number;
  timelineMb: number[];
}

/** Runs the relay in a child process (tsx, like `herald relay` from source) until `rows` are published. */
async function runRelayChild(database: { url: string; schema: string }, rows: number): Promise<ChildRun> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(HERE, 'support', 'relay-child.ts')], {
    env: {
      ...process.env,
      ...relayEnv,
      DATABASE_URL: database.url,
      HERALD_SCHEMA: database.schema,
      AMQP_URL: amqpUrl,
      HERALD_LOG_LEVEL: 'silent',
      BENCH_ROWS: String(rows),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let sampledPeakKb = 0;
  const timelineMb: number[] = [];
  const sampler = setInterval(() => {
    try {
      const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
      const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
      sampledPeakKb = Math.max(sampledPeakKb, kb);
      timelineMb.push(Math.round(kb / 1024));
    } catch {
      // the child is gone
    }
  }, 100);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  clearInterval(sampler);
  if (code !== 0) throw new Error(`relay child exited with ${code}`);
  const report = JSON.parse(output.trim().split('\n').pop()!) as Omit<
    ChildRun,
    'sampledPeakKb' | 'timelineMb'
  >;
  return { ...report, sampledPeakKb, timelineMb };
}

async function backlogMemory(rows: number) {
  const database = await createTestDatabase();
  const queue = uniqueName('herald_bench_backlog');
  const queues = await declareQueues([queue]);
  try {
    // The same process with nothing to do: what the runtime and loader cost before any relaying.
    const idle = await runRelayChild(database, 0);
    log(
      `baseline_rss_mb=${(Math.max(idle.maxRssKb, idle.sampledPeakKb) / 1024).toFixed(1)} (relay started, no rows)`,
    );

    log(`setup: ${rows} rows`);
    const setupStarted = performance.now();
    await seedBenchOutbox(database.db, { rows, destination: queue, padBytes });
    log(`setup: seeded in ${Math.round(performance.now() - setupStarted)} ms`);

    const run = await runRelayChild(database, rows);
    const sent = await countSent(database.db);
    if (sent !== rows) throw new Error(`backlog run: ${sent} of ${rows} rows sent`);
    log(`relay msg/s=${rate(rows, run.elapsedMs)} (backlog of ${rows}, ${Math.round(run.elapsedMs)} ms)`);
    // Every ~5 s: flat means the relay's memory does not grow with the backlog.
    log(`rss_mb_timeline=${run.timelineMb.filter((_, i) => i % 50 === 0).join(',')}`);
    log(`sampled_peak_rss_mb=${(run.sampledPeakKb / 1024).toFixed(1)}`);
    log(`peak_rss_mb=${(Math.max(run.maxRssKb, run.sampledPeakKb) / 1024).toFixed(1)}`);
  } finally {
    await queues.delete(queue).catch(() => {});
    await queues.close();
    await database.drop();
  }
}

/** Drains the outbox through an OutboxRelay with a KafkaSink; returns the elapsed time and the relay. */
async function relayToKafka(
  database: { url: string; schema: string },
  config: HeraldConfig,
  messages: number,
) {
  const db = createDatabase({ url: database.url, schema: database.schema, poolSize: config.dbPoolSize });
  const sink = new KafkaSink({
    brokers: kafkaBrokers(),
    clientId: 'herald-bench',
    maxBatchMessages: config.relay.inFlight,
  });
  const relay = new OutboxRelay({ db, sinks: { kafka: sink }, settings: config.relay, owner: 'bench' });
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  await relay.start();
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      if (relay.counters.published >= messages) {
        clearInterval(timer);
        resolve();
      }
    }, 2);
  });
  const elapsedMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  await relay.stop();
  await sink.close();
  const sent = await countSent(db);
  await db.close();
  if (sent !== messages) throw new Error(`relay run: ${sent} of ${messages} rows sent`);
  return { elapsedMs, cpuMs: Math.round((cpu.user + cpu.system) / 1000), counters: relay.counters };
}

const kafkaBrokers = () => requireEnv('KAFKA_BROKERS').split(',');

async function kafkaThroughput(messages: number, orderedMessages: number, keys: number) {
  const kafka = new Kafka({
    clientId: 'herald-bench-admin',
    brokers: kafkaBrokers(),
    logLevel: logLevel.ERROR,
  });
  const admin = kafka.admin();
  await admin.connect();
  const topics = {
    raw: uniqueName('herald_bench_raw'),
    relay: uniqueName('herald_bench_relay'),
    ordered: uniqueName('herald_bench_ordered'),
  };
  await admin.createTopics({
    waitForLeaders: true,
    topics: Object.values(topics).map((topic) => ({ topic, numPartitions: 8 })),
  });
  let database = await createTestDatabase();
  try {
    const config = database.config(relayEnv);
    log(
      `setup: kafka, ${messages} rows, batch=${config.relay.batchSize} in_flight=${config.relay.inFlight}, 8 partitions`,
    );
    const setupStarted = performance.now();
    const sample = await seedBenchOutbox(database.db, {
      rows: messages,
      destination: topics.relay,
      padBytes,
      sink: 'kafka',
    });
    log(
      `setup: seeded in ${Math.round(performance.now() - setupStarted)} ms; body=${Buffer.byteLength(sample.payloadText)} B, headers=${Object.keys(sample.headers).length}`,
    );

    const raw = await rawKafkaPublish({
      brokers: kafkaBrokers(),
      topic: topics.raw,
      messages,
      batchSize: config.relay.batchSize,
      sample,
    });
    log(`raw: ${messages} in ${Math.round(raw.elapsedMs)} ms`);
    const relay = await relayToKafka(database, config, messages);
    log(
      `relay: ${messages} in ${Math.round(relay.elapsedMs)} ms, ${relay.counters.batches} batches, relay process cpu=${relay.cpuMs} ms`,
    );
    const rawRate = rate(messages, raw.elapsedMs);
    const relayRate = rate(messages, relay.elapsedMs);
    log(`raw msg/s=${rawRate}`);
    log(`relay msg/s=${relayRate}`);
    log(`ratio=${(relayRate / rawRate).toFixed(2)}`);

    // Per-key ordered relaying, on a fresh database: `orderedMessages` rows over `keys` keys.
    await database.drop();
    database = await createTestDatabase();
    const orderedStarted = performance.now();
    await seedBenchOutbox(database.db, {
      rows: orderedMessages,
      destination: topics.ordered,
      padBytes,
      sink: 'kafka',
      orderedKeys: keys,
    });
    log(
      `setup: ${orderedMessages} ordered rows over ${keys} keys seeded in ${Math.round(performance.now() - orderedStarted)} ms`,
    );
    const ordered = await relayToKafka(database, database.config(relayEnv), orderedMessages);
    log(
      `ordered: ${orderedMessages} in ${Math.round(ordered.elapsedMs)} ms, ${ordered.counters.batches} batches, ${ordered.counters.deferred} deferred, relay process cpu=${ordered.cpuMs} ms`,
    );
    const orderedRate = rate(orderedMessages, ordered.elapsedMs);
    log(`ordered msg/s=${orderedRate} (${keys} keys)`);
    log(`ordered_ratio=${(orderedRate / rawRate).toFixed(2)} (ordered relay / raw)`);
  } finally {
    await database.drop();
    await admin.deleteTopics({ topics: Object.values(topics) }).catch(() => {});
    await admin.disconnect();
  }
}

if (values.sink === 'kafka') {
  const n = Number(values.n);
  await kafkaThroughput(n, Number(values['ordered-n'] ?? n), Number(values.keys));
} else if (values.rss || values.backlog) {
  await backlogMemory(Number(values.backlog ?? '1000000'));
} else {
  await throughput(Number(values.n));
}
