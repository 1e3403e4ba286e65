/**
 * `herald scanner`: runs the sweepers of every registered aggregate in one Scanner loop. Wakes on
 * NOTIFY of the due channel, on a timer armed at the next due time, on the registry's wake-up queues
 * (the campaign tick), and on the fallback poll. Any number of scanner pods may run (invariant 7).
 *
 * The loop starts at once, whatever is down: the LISTEN subscription and the wake-up consumers connect
 * in the background (each retries on its own), so a scanner started while PostgreSQL or RabbitMQ is
 * down begins claiming as soon as the database answers and stops promptly on SIGTERM.
 */
import { CoalescingNotifier } from '../adapters/postgres/notifications.js';
import { errorMessage } from '../errors.js';
import { channels } from '../ports/wakeups.js';
import type { RoleDefinition } from '../registry/role.js';
import { Scanner } from '../scanner/scanner.js';
import { type Consumer, consume } from '../worker/consume.js';
import { aborted } from './runtime.js';

export const scannerRole: RoleDefinition = {
  summary: 'claim due work of every registered aggregate into the outbox (any number of replicas)',
  async run(runtime, signal) {
    const { config, logger: log, registry } = runtime;
    // The relay's wake-up after a claim transaction gets no time window (interval 0: only signals of the
    // same event-loop turn are merged). One claim transaction already carries up to batchSize claims, so
    // this sends at most one NOTIFY per claim transaction; the shared notifier's window
    // (HERALD_NOTIFY_COALESCE_MS) would hold back the NOTIFY of a claim that follows another within it
    // until the window closes, adding up to that much to due → published.
    const claimWakeups = new CoalescingNotifier(runtime.db, 0, log);
    const sweepers = registry.sweepers({
      config,
      db: runtime.db,
      handler: runtime.handler,
      logger: log,
      wakeups: claimWakeups,
    });
    const scanner = new Scanner({ sweepers, pollIntervalMs: config.scanner.pollMs, logger: log });
    const wakeConsumers: Promise<Consumer | undefined>[] = [];
    try {
      scanner.start();
      runtime.listener
        .subscribe(channels.due(config.schema), () => scanner.wake())
        .catch((error: unknown) =>
          log.warn({ err: error }, 'scanner cannot listen for wake-ups; polling only'),
        );
      for (const { queue, consumer } of registry.scannerWakeQueues) {
        if (!config.amqpUrl) {
          log.warn({ queue }, 'AMQP_URL not set: wake-up messages are not consumed');
          continue;
        }
        // Ticks are only wake-ups: correctness never depends on them (invariant 7).
        wakeConsumers.push(
          consume({ db: runtime.db, amqp: config.amqpUrl, logger: log }, queue, async () => scanner.wake(), {
            consumer,
            queueType: config.amqpQueueType,
            signal,
            prefetch: 1,
            maxAttempts: 1,
          }).catch((error: unknown) => {
            if (!signal.aborted)
              log.error({ err: error, queue }, `wake-up consumer failed: ${errorMessage(error)}`);
            return undefined;
          }),
        );
      }
      log.info(
        {
          pollMs: config.scanner.pollMs,
          batchSize: config.scanner.batchSize,
          sweepers: sweepers.map((s) => s.name),
        },
        'scanner started',
      );
      await aborted(signal);
    } finally {
      for (const consumer of await Promise.all(wakeConsumers)) await consumer?.stop({ timeoutMs: 5_000 });
      await scanner.stop();
      claimWakeups.close();
      log.info(
        { ...scanner.stats, sweepers: sweepers.map((s) => ({ name: s.name, ...s.stats })) },
        'scanner stopped',
      );
    }
  },
};
