/**
 * `herald scanner`: runs the sweepers (campaigns) in a Scanner loop. Wakes on NOTIFY of the due
 * channel, on a timer armed at the next due time, on tick messages from process_campaign, and on
 * the fallback poll. Any number of scanner pods may run (invariant 7); on SIGTERM the current pass
 * finishes and the process exits 0.
 */
import { CoalescingNotifier } from '../adapters/postgres/notifications.js';
import { CampaignSweeper } from '../campaigns/campaign-sweeper.js';
import { PROCESS_CAMPAIGN_QUEUE } from '../campaigns/topology.js';
import type { HeraldConfig } from '../config.js';
import type { Logger } from '../logger.js';
import { channels } from '../ports/wakeups.js';
import { Scanner } from '../scanner/scanner.js';
import { type Consumer, consume } from '../worker/consume.js';
import { aborted, createRuntime } from './runtime.js';

export async function runScanner(config: HeraldConfig, logger: Logger, signal: AbortSignal): Promise<void> {
  const log = logger.child({ role: 'scanner' });
  const runtime = createRuntime(config, log, 'herald-scanner');
  // The relay's wake-up after a claim transaction gets no time window (interval 0: only signals of the
  // same event-loop turn are merged). One claim transaction already carries up to batchSize claims, so
  // this sends at most one NOTIFY per claim transaction; the shared notifier's window
  // (HERALD_NOTIFY_COALESCE_MS) would hold back the NOTIFY of a claim that follows another within it
  // until the window closes, adding up to that much to due → published.
  const claimWakeups = new CoalescingNotifier(runtime.db, 0, log);
  const sweeper = new CampaignSweeper({
    db: runtime.db,
    handler: runtime.handler,
    wakeups: claimWakeups,
    logger: log,
    batchSize: config.scanner.batchSize,
    staleClaimMs: config.scanner.staleClaimMs,
  });
  const scanner = new Scanner({ sweepers: [sweeper], pollIntervalMs: config.scanner.pollMs, logger: log });
  let ticks: Consumer | undefined;
  try {
    await runtime.listener.subscribe(channels.due(config.schema), () => scanner.wake());
    scanner.start();
    if (config.amqpUrl) {
      // Ticks are only wake-ups: correctness never depends on them (invariant 7).
      ticks = await consume(
        { db: runtime.db, amqp: config.amqpUrl, logger: log },
        PROCESS_CAMPAIGN_QUEUE,
        async () => scanner.wake(),
        { consumer: 'scanner-tick', queueType: config.amqpQueueType, signal, prefetch: 1, maxAttempts: 1 },
      );
    } else {
      log.warn('AMQP_URL not set: tick messages from process_campaign are not consumed');
    }
    log.info({ pollMs: config.scanner.pollMs, batchSize: config.scanner.batchSize }, 'scanner started');
    await aborted(signal);
  } finally {
    await ticks?.stop({ timeoutMs: 5_000 });
    await scanner.stop();
    claimWakeups.close();
    await runtime.close();
    log.info({ ...scanner.stats, ...sweeper.stats }, 'scanner stopped');
  }
}
