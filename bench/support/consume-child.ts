/**
 * One consumer of the consumer benchmark, as its own process (`node --import tsx`, as `herald worker`
 * runs from source), driven over IPC: it builds everything, reports `ready`, starts consuming on
 * `go`, and on `stop` reports its CPU time since `go` and its counters, stops and exits.
 *
 * BENCH_MODE=herald: the real LINE delivery consumer, wired as the worker role wires it (runtime.ts,
 * worker-role.ts): a pool of HERALD_DB_POOL_SIZE connections, a coalescing notifier, the command
 * handler, and the campaign slice's `line-delivery` consumer definition from Herald's registry (the
 * fenced LINE delivery on its default ports: the @line/bot-sdk adapter at HERALD_LINE_API_BASE_URL —
 * the benchmark's LINE test server —, the LINE directory, the per-channel rate limiter) consumed through
 * `consume()` with the definition's prefetch (HERALD_LINE_DELIVERY_CONCURRENCY) and the config's
 * attempts, retry delay and queue type, a pino logger at HERALD_LOG_LEVEL on stdout.
 *
 * BENCH_MODE=baseline: the floor any at-least-once consumer with a database effect pays: raw amqplib
 * on one channel with the same prefetch, and per message one transaction on a pg pool of the same
 * size (BEGIN; one inbox-style insert … on conflict do nothing; COMMIT), then the ack.
 *
 * BENCH_TRACE=1 times every inbox transaction's phases (bench/support/consume-trace.ts).
 * BENCH_EFFECT_MS > 0 stands in for a slower remote API: the baseline waits that long inside its
 * transaction before its insert; for the herald consumer the benchmark makes the LINE test server hold
 * each answer as long (the delivery waits for it inside the inbox transaction).
 */
import amqp from 'amqplib';
import pg from 'pg';
import { connectionConfig, createDatabase } from '../../src/adapters/postgres/database.js';
import { CoalescingNotifier } from '../../src/adapters/postgres/notifications.js';
import { LINE_DELIVERY_CONSUMER } from '../../src/aggregates/campaign/topology.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { loadConfig } from '../../src/config.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { createLogger } from '../../src/logger.js';
import { type Consumer, consume } from '../../src/worker/consume.js';
import { BEGIN_PHASE, COMMIT_PHASE, TOTAL_PHASE, TransactionTracer } from './consume-trace.js';

export type ParentMessage = { type: 'go' } | { type: 'stop' };
export type ChildMessage =
  | { type: 'ready' }
  | { type: 'consuming' }
  | {
      type: 'stopped';
      cpuMs: number;
      stats: Record<string, unknown>;
      trace?: ReturnType<TransactionTracer['report']>;
    };

const mode = process.env.BENCH_MODE;
const queue = process.env.BENCH_QUEUE!;
if (mode !== 'herald' && mode !== 'baseline') throw new Error(`BENCH_MODE=${mode}: herald or baseline`);
const config = loadConfig(process.env, { pod: 'bench-consumer' });
const tracer = process.env.BENCH_TRACE === '1' ? new TransactionTracer() : undefined;
const effectMs = Number(process.env.BENCH_EFFECT_MS ?? 0);
const effectDelay = () => new Promise((resolve) => setTimeout(resolve, effectMs));
const send = (message: ChildMessage) => process.send!(message);

interface Running {
  stats(): Record<string, unknown>;
  stop(): Promise<void>;
}

async function startHerald(): Promise<Running> {
  const logger = createLogger({ level: config.logLevel, pod: config.pod, role: 'worker' });
  const db = createDatabase({
    url: config.databaseUrl,
    schema: config.schema,
    poolSize: config.dbPoolSize,
    applicationName: config.pod,
  });
  const notifier = new CoalescingNotifier(db, config.notifyCoalesceMs, logger);
  const handler = new CommandHandler({
    db,
    wakeups: notifier,
    pod: config.pod,
    wakeHorizonMs: config.scanner.pollMs,
  });
  const definition = heraldRegistry
    .consumers({ config, db, handler, logger, wakeups: notifier })
    .find((candidate) => candidate.consumer === LINE_DELIVERY_CONSUMER);
  if (!definition) throw new Error(`no ${LINE_DELIVERY_CONSUMER} consumer in Herald's registry`);
  // The inbox transaction is traced; the delivery's own steps (plan, each chunk) commit on other
  // connections of the same pool while it is open.
  const consumer: Consumer = await consume(
    { db: tracer ? tracer.wrap(db) : db, amqp: config.amqpUrl!, logger },
    queue,
    definition.handler,
    {
      consumer: definition.consumer,
      parse: definition.parse,
      prefetch: definition.prefetch ?? config.consumer.prefetch,
      maxAttempts: config.consumer.maxAttempts,
      retryDelayMs: config.consumer.retryDelayMs,
      queueType: config.amqpQueueType,
      batchSize: config.consumer.batchSize,
    },
  );
  return {
    stats: () => ({ ...consumer.stats }),
    async stop() {
      await consumer.stop({ timeoutMs: 30_000 });
      notifier.close();
      await db.close();
    },
  };
}

const INBOX_INSERT = `
  insert into inbox (consumer, message_id, status, attempts) values ($1, $2, 'processed', 1)
  on conflict do nothing`;

async function startBaseline(): Promise<Running> {
  const pool = new pg.Pool({
    ...connectionConfig({ url: config.databaseUrl, schema: config.schema, applicationName: config.pod }),
    max: config.dbPoolSize,
  });
  const model = await amqp.connect(config.amqpUrl!);
  const channel = await model.createChannel();
  // The herald consumer's prefetch: the LINE delivery's concurrency.
  await channel.prefetch(config.line.deliveryConcurrency);
  const stats = { received: 0, processed: 0, inserted: 0 };
  let inFlight = 0;
  let idle: (() => void) | undefined;
  const transaction = async (messageId: string) => {
    const called = tracer ? performance.now() : 0;
    const client = await pool.connect();
    try {
      await client.query('begin');
      const began = tracer ? performance.now() : 0;
      if (effectMs > 0) await effectDelay();
      const { rowCount } = await client.query(INBOX_INSERT, [LINE_DELIVERY_CONSUMER, messageId]);
      const inserted = tracer ? performance.now() : 0;
      await client.query('commit');
      stats.inserted += rowCount ?? 0;
      if (tracer) {
        const done = performance.now();
        tracer.add(BEGIN_PHASE, began - called);
        tracer.add('inbox insert … on conflict do nothing', inserted - began);
        tracer.add(COMMIT_PHASE, done - inserted);
        tracer.add(TOTAL_PHASE, done - called);
        tracer.countTransaction(3);
      }
    } catch (error) {
      await client.query('rollback').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  };
  const { consumerTag } = await channel.consume(
    queue,
    (message) => {
      if (!message) return;
      stats.received++;
      inFlight++;
      transaction(String(message.properties.messageId))
        .then(
          () => {
            stats.processed++;
            channel.ack(message);
          },
          (error: unknown) => {
            process.stderr.write(`baseline transaction failed: ${String(error)}\n`);
            channel.nack(message, false, true);
          },
        )
        .finally(() => {
          if (--inFlight === 0) idle?.();
        });
    },
    { noAck: false },
  );
  return {
    stats: () => ({ ...stats }),
    async stop() {
      await channel.cancel(consumerTag);
      if (inFlight > 0) await new Promise<void>((resolve) => (idle = resolve));
      await model.close();
      await pool.end();
    },
  };
}

let running: Running | undefined;
let cpuAtGo: NodeJS.CpuUsage | undefined;

process.on('message', (message: ParentMessage) => {
  if (message.type === 'go') {
    cpuAtGo = process.cpuUsage();
    (mode === 'herald' ? startHerald() : startBaseline()).then(
      (started) => {
        running = started;
        send({ type: 'consuming' });
      },
      (error: unknown) => {
        process.stderr.write(`consumer failed to start: ${String(error)}\n`);
        process.exit(1);
      },
    );
  } else if (message.type === 'stop') {
    const cpu = process.cpuUsage(cpuAtGo);
    const stats = running?.stats() ?? {};
    (running?.stop() ?? Promise.resolve()).then(
      () => {
        send({
          type: 'stopped',
          cpuMs: (cpu.user + cpu.system) / 1000,
          stats,
          ...(tracer ? { trace: tracer.report() } : {}),
        });
        process.disconnect();
      },
      (error: unknown) => {
        process.stderr.write(`consumer failed to stop: ${String(error)}\n`);
        process.exit(1);
      },
    );
  }
});

send({ type: 'ready' });
