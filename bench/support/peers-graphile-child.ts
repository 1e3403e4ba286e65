/**
 * One graphile-worker process for bench/peers.bench.ts: `run()` with one task, `publish`, which sends
 * the job's payload as one persistent, mandatory message to a quorum queue on a confirm channel and
 * returns once the broker confirmed it (what Herald's relay does for each outbox row: ADR 0004). One
 * AMQP connection and confirm channel per process, opened before the runner starts.
 *
 * Configured through the environment (the benchmark sets it): DATABASE_URL (the run's fresh database),
 * AMQP_URL, PEERS_QUEUE, PEERS_CONCURRENCY (concurrentJobs), PEERS_POOL (maxPoolSize),
 * PEERS_LOCAL_QUEUE (localQueue.size; -1, the default, is off) and PEERS_COMPLETE_BATCH_MS
 * (completeJobBatchDelay; -1, the default, is off). Everything else is graphile-worker's default,
 * its logger too (one info line per completed job, as Herald's roles log at info).
 *
 * Prints `{"peers":"ready"}` once the runner is looking for jobs; on SIGTERM stops the runner
 * gracefully and prints `{"peers":"done","confirmed":n,"warmUp":w,"lastConfirmedMs":t}` (t: epoch ms
 * of the last measured job's confirm, or 0), then exits 0.
 */
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { run } from 'graphile-worker';
import { queueOptions } from '../../src/adapters/amqp/amqp-connection.js';

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const queue = env('PEERS_QUEUE');
const connection = await amqp.connect(env('AMQP_URL'));
const channel = await connection.createConfirmChannel();
await channel.assertQueue(queue, queueOptions('quorum'));
const returned: string[] = [];
channel.on('return', (message: { properties: { messageId?: string } }) => {
  returned.push(String(message.properties.messageId));
});

let confirmed = 0;
let warmUp = 0;
let lastConfirmedMs = 0;

const runner = await run({
  connectionString: env('DATABASE_URL'),
  concurrency: Number(env('PEERS_CONCURRENCY')),
  maxPoolSize: Number(env('PEERS_POOL')),
  noHandleSignals: true,
  crontab: '',
  preset: {
    worker: {
      localQueue: { size: Number(process.env.PEERS_LOCAL_QUEUE ?? -1) },
      completeJobBatchDelay: Number(process.env.PEERS_COMPLETE_BATCH_MS ?? -1),
    },
  },
  taskList: {
    publish: async (payload) => {
      const messageId = randomUUID();
      await new Promise<void>((resolve, reject) => {
        channel.publish(
          '',
          queue,
          Buffer.from(JSON.stringify(payload), 'utf8'),
          {
            persistent: true,
            mandatory: true,
            messageId,
            contentType: 'application/json',
            timestamp: Math.floor(Date.now() / 1000),
            appId: 'graphile-worker',
          },
          (error: unknown) => (error ? reject(new Error('nacked by broker')) : resolve()),
        );
      });
      // A returned (unroutable) message arrives before its confirm: fail the job, as Herald's sink does.
      if (returned.includes(messageId)) throw new Error(`unroutable: ${queue}`);
      if ((payload as { warmUp?: boolean }).warmUp) warmUp++;
      else {
        confirmed++;
        lastConfirmedMs = Date.now();
      }
    },
  },
});
process.stdout.write(`${JSON.stringify({ peers: 'ready' })}\n`);

process.once('SIGTERM', async () => {
  await runner.stop();
  await connection.close().catch(() => {});
  process.stdout.write(`${JSON.stringify({ peers: 'done', confirmed, warmUp, lastConfirmedMs })}\n`);
  process.exit(0);
});
