/**
 * `herald worker`: the built-in consumers. For now the LINE delivery worker of seed 000 (destination
 * re-check by status and epoch, heartbeat during sends, completion in the inbox transaction).
 */
import { LineDeliveryWorker } from '../campaigns/line-delivery-worker.js';
import type { HeraldConfig } from '../config.js';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import { aborted, createRuntime } from './runtime.js';

export async function runWorker(config: HeraldConfig, logger: Logger, signal: AbortSignal): Promise<void> {
  if (!config.amqpUrl) throw new ConfigError('AMQP_URL', 'is required by the worker');
  const log = logger.child({ role: 'worker' });
  const runtime = createRuntime(config, log, 'herald-worker');
  const worker = new LineDeliveryWorker({
    handler: runtime.handler,
    logger: log,
    heartbeatMs: config.scanner.heartbeatMs,
  });
  const consumers = await worker.start(
    { db: runtime.db, amqp: config.amqpUrl, logger: log },
    {
      prefetch: config.consumer.prefetch,
      maxAttempts: config.consumer.maxAttempts,
      retryDelayMs: config.consumer.retryDelayMs,
      queueType: config.amqpQueueType,
      signal,
    },
  );
  try {
    log.info({ queues: consumers.map((c) => c.queue) }, 'worker started');
    await aborted(signal);
  } finally {
    await Promise.all(consumers.map((c) => c.stop({ timeoutMs: 30_000 })));
    await runtime.close();
    log.info({ consumers: consumers.map((c) => ({ queue: c.queue, ...c.stats })) }, 'worker stopped');
  }
}
