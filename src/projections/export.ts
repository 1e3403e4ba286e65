/**
 * `herald export`: the event log (and publish receipts) as JSON Lines, by time range and stream type,
 * for offline analysis. Streams through server-side cursors in one read-only snapshot (bounded memory,
 * consistent across both kinds), one JSON object per line, with a `kind` field ('event' | 'receipt').
 * Events are ordered by (recorded_at, position), receipts by (recorded_at, id); events come first.
 */
import { SNAPSHOT_READ_ONLY } from '../adapters/postgres/cursor-queries.js';
import { exportEvents } from '../adapters/postgres/event-queries.js';
import { exportReceipts, type PublishReceipt } from '../adapters/postgres/receipt-queries.js';
import type { Database } from '../ports/database.js';
import type { StoredEvent } from '../ports/events.js';
import type { Upcast } from './projector.js';

export interface ExportOptions {
  /** Inclusive lower bound, ISO 8601 with an offset; null: from the beginning. */
  from: string | null;
  /** Exclusive upper bound; null: everything so far. */
  to: string | null;
  /** Only these stream types (receipts: of the event that caused the message); null: all. */
  streamTypes: readonly string[] | null;
  events: boolean;
  receipts: boolean;
  batchSize?: number;
  /** Events in the current shape of their stream type (the registry's `upcast`; ADR 0039). */
  upcast?: Upcast;
}

export interface ExportCounts {
  events: number;
  receipts: number;
}

export function eventLine(e: StoredEvent): string {
  return JSON.stringify({
    kind: 'event',
    position: e.position,
    tx: e.tx,
    streamType: e.streamType,
    streamId: e.streamId,
    version: e.version,
    type: e.type,
    data: e.data,
    schemaVersion: e.schemaVersion,
    meta: e.meta,
    recordedAt: e.recordedAt.toISOString(),
  });
}

export function receiptLine(r: PublishReceipt): string {
  return JSON.stringify({
    kind: 'receipt',
    id: r.id,
    tx: r.tx,
    messageId: r.messageId,
    outboxId: r.outboxId,
    eventPosition: r.eventPosition,
    streamType: r.streamType,
    streamId: r.streamId,
    sink: r.sink,
    destination: r.destination,
    routingKey: r.routingKey,
    partitionKey: r.partitionKey,
    outcome: r.outcome,
    brokerRef: r.brokerRef,
    attempts: r.attempts,
    recoveryCount: r.recoveryCount,
    error: r.error,
    confirmedAt: r.confirmedAt?.toISOString() ?? null,
    recordedAt: r.recordedAt.toISOString(),
  });
}

/** Writes one line per event / receipt through `write` (which may wait for the output to drain). */
export async function exportJsonLines(
  db: Database,
  options: ExportOptions,
  write: (chunk: string) => Promise<void> | void,
): Promise<ExportCounts> {
  const counts: ExportCounts = { events: 0, receipts: 0 };
  const filter = { from: options.from, to: options.to, streamTypes: options.streamTypes };
  const batchSize = options.batchSize ?? 5_000;
  await db.transaction(async (tx) => {
    await tx.query(SNAPSHOT_READ_ONLY);
    if (options.events) {
      await exportEvents(tx, filter, batchSize, async (events) => {
        counts.events += events.length;
        const current = options.upcast ? events.map(options.upcast) : events;
        await write(`${current.map(eventLine).join('\n')}\n`);
      });
    }
    if (options.receipts) {
      await exportReceipts(tx, filter, batchSize, async (receipts) => {
        counts.receipts += receipts.length;
        await write(`${receipts.map(receiptLine).join('\n')}\n`);
      });
    }
  });
  return counts;
}
