/**
 * `herald projector`: runs every registered asynchronous projection (src/projections/registry.ts), one
 * Projector per projection. Run as many replicas as you like: per projection one is active, through a
 * lease on the database clock; the others wait and take over when it stops or its lease expires
 * (invariant 7). The role also applies the publish receipts' retention (HERALD_RECEIPT_RETENTION_DAYS)
 * every few minutes; deletes are guarded by age, so several replicas doing it is harmless. On SIGTERM
 * each projector finishes its batch, releases its lease and the process exits 0.
 */
import { pruneReceipts } from '../adapters/postgres/receipt-queries.js';
import type { HeraldConfig } from '../config.js';
import type { Logger } from '../logger.js';
import { Projector } from '../projections/projector.js';
import { PROJECTIONS } from '../projections/registry.js';
import { aborted, createRuntime } from './runtime.js';

/** Receipts deleted per statement, and how often retention runs. */
const PRUNE_LIMIT = 10_000;
const RETENTION_INTERVAL_MS = 10 * 60_000;

export async function runProjector(config: HeraldConfig, logger: Logger, signal: AbortSignal): Promise<void> {
  const log = logger.child({ role: 'projector' });
  const runtime = createRuntime(config, log, 'herald-projector');
  const projectors = [...PROJECTIONS.values()].map(
    (projection) =>
      new Projector({
        db: runtime.db,
        projection,
        pod: config.pod,
        batchSize: config.projector.batchSize,
        pollMs: config.projector.pollMs,
        leaseMs: config.projector.leaseMs,
        logger: log,
      }),
  );
  const retention = async () => {
    try {
      let pruned = 0;
      for (let round = 0; round < 50; round++) {
        const count = await pruneReceipts(runtime.db, {
          retentionDays: config.projector.receiptRetentionDays,
          limit: PRUNE_LIMIT,
        });
        pruned += count;
        if (count < PRUNE_LIMIT) break;
      }
      if (pruned > 0) log.info({ pruned }, 'publish receipts past retention deleted');
    } catch (error) {
      log.warn({ err: error }, 'receipt retention failed; will retry');
    }
  };
  let pruning: Promise<void> | undefined;
  const runRetention = () => {
    pruning ??= retention().finally(() => {
      pruning = undefined;
    });
  };
  runRetention();
  const timer = setInterval(runRetention, RETENTION_INTERVAL_MS);
  timer.unref();
  try {
    for (const projector of projectors) projector.start();
    log.info({ projections: [...PROJECTIONS.keys()], settings: config.projector }, 'projector started');
    await aborted(signal);
  } finally {
    clearInterval(timer);
    await Promise.all(projectors.map((p) => p.stop()));
    await pruning;
    await runtime.close();
  }
}
