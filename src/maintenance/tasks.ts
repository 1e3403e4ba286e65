/**
 * Herald's upkeep tasks, each with its own settings (docs/operations.md; docs/reference/configuration.md, Maintenance):
 * - `outbox-recovery`: dead rows past the cooldown go back to pending, for a bounded number of rounds
 *   (the relay's automatic retry of a whole row); wakes the relays.
 * - `outbox-ordered-heads`: ordered key heads a crashed relay left waiting are woken (ADR 0007).
 * - `outbox-sent-pruning` / `outbox-skipped-pruning`: sent and skipped rows after their retention (the
 *   event log and the publish receipts keep the audit).
 * - `receipt-retention`, `inbox-retention`, `idempotency-expiry`.
 * - `stream-retention:<type>`: old events of side streams that declare a retention (the per-minute
 *   `campaign_tick`): no state row depends on them, so verify is unaffected (ADR 0009).
 * - the tasks an aggregate registers for its own tables (the campaign's `sms-report-retention`).
 */
import { wakeWaitingHeads } from '../adapters/postgres/outbox-order-queries.js';
import { pruneSent, recoverDead } from '../adapters/postgres/outbox-queries.js';
import { pruneReceipts } from '../adapters/postgres/receipt-queries.js';
import {
  expireIdempotencyKeys,
  pruneInbox,
  pruneSkippedOutbox,
  pruneStreamEvents,
} from '../adapters/postgres/retention-queries.js';
import { channels, type WakeupSignal } from '../ports/wakeups.js';
import type { HeraldConfig } from '../settings/core.js';
import type { MaintenanceTask } from './maintenance-service.js';

/** What maintenance reads of a registry: side streams with a retention, and the slices' own tasks. */
export interface MaintenanceSources {
  readonly sideStreams: readonly {
    readonly streamType: string;
    readonly retentionDays?: (config: HeraldConfig) => number | undefined;
  }[];
  maintenanceTasks(config: HeraldConfig): MaintenanceTask[];
}

export function maintenanceTasks(
  config: HeraldConfig,
  registry: MaintenanceSources,
  wakeups: WakeupSignal,
): MaintenanceTask[] {
  const m = config.maintenance;
  const wakeRelays = () => wakeups.signal(channels.outbox(config.schema));
  const tasks: MaintenanceTask[] = [
    {
      name: 'outbox-recovery',
      intervalMs: m.outboxRecoveryIntervalMs,
      describe: 'dead outbox rows re-queued after cooldown',
      runBatch: (db, limit) =>
        recoverDead(db, {
          cooldownSeconds: config.relay.recoveryCooldownSeconds,
          maxRounds: config.relay.recoveryMaxRounds,
          limit,
        }),
      afterChange: wakeRelays,
    },
    {
      name: 'outbox-ordered-heads',
      intervalMs: m.outboxRecoveryIntervalMs,
      describe: 'ordered key heads were left waiting; woken',
      level: 'warn',
      // One statement over every key (a loose index scan of the ordered-key index).
      runBatch: async (db) => (await wakeWaitingHeads(db)).length,
      afterChange: wakeRelays,
    },
    {
      name: 'outbox-sent-pruning',
      intervalMs: m.outboxPruneIntervalMs,
      describe: 'sent outbox rows pruned',
      level: 'debug',
      runBatch: (db, limit) => pruneSent(db, { retentionHours: config.relay.retentionHours, limit }),
    },
    {
      name: 'outbox-skipped-pruning',
      intervalMs: m.outboxPruneIntervalMs,
      describe: 'skipped outbox rows pruned',
      runBatch: (db, limit) => pruneSkippedOutbox(db, { retentionDays: m.skippedRetentionDays, limit }),
    },
    {
      name: 'receipt-retention',
      intervalMs: m.receiptPruneIntervalMs,
      describe: 'publish receipts past retention deleted',
      runBatch: (db, limit) =>
        pruneReceipts(db, { retentionDays: config.projector.receiptRetentionDays, limit }),
    },
    {
      name: 'inbox-retention',
      intervalMs: m.inboxPruneIntervalMs,
      describe: 'inbox rows past retention deleted',
      runBatch: (db, limit) => pruneInbox(db, { retentionDays: m.inboxRetentionDays, limit }),
    },
    {
      name: 'idempotency-expiry',
      intervalMs: m.idempotencyExpiryIntervalMs,
      describe: 'expired idempotency keys deleted',
      runBatch: (db, limit) => expireIdempotencyKeys(db, { limit }),
    },
  ];
  for (const side of registry.sideStreams) {
    const retentionDays = side.retentionDays?.(config);
    if (retentionDays === undefined) continue;
    tasks.push({
      name: `stream-retention:${side.streamType}`,
      intervalMs: m.streamPruneIntervalMs,
      describe: `${side.streamType} events past retention deleted`,
      // Each deleted event costs a foreign-key look-up in the outbox: smaller statements.
      batchSize: 1_000,
      runBatch: (db, limit) => pruneStreamEvents(db, { streamType: side.streamType, retentionDays, limit }),
    });
  }
  tasks.push(...registry.maintenanceTasks(config));
  return tasks;
}
