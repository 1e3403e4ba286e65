/**
 * Ordered outbox rows for the per-key ordering tests (ADR 0007), written through the production writer
 * (one event, its outbox rows, one transaction). Row `n` of key `k` carries payload { key, seq: n },
 * so a reader can check each key's messages arrive in outbox order.
 */
import { appendEvents } from '../../../src/adapters/postgres/event-queries.js';
import { type OutboxMessageSpec, toOutboxRows, writeOutbox } from '../../../src/outbox/outbox-writer.js';
import type { Database, SqlClient } from '../../../src/ports/database.js';
import type { Sink } from '../../../src/ports/outbox.js';
import { uniqueName } from '../../support/services.js';

export interface OrderedSeed {
  sink?: Sink;
  destination: string;
  /** Key names; rows are interleaved across keys (key 0 seq 0, key 1 seq 0, …, key 0 seq 1, …). */
  keys: readonly string[];
  perKey: number;
  /** Sequence number to start at (for a second batch of the same keys). */
  firstSeq?: number;
  ordered?: boolean;
  payload?: (key: string, seq: number) => unknown;
}

export interface OrderedRows {
  messageIds: string[];
  /** message id → { key, seq } */
  byMessageId: Map<string, { key: string; seq: number }>;
}

/** Writes the rows inside `tx` (the caller's transaction). */
export async function writeOrdered(tx: SqlClient, seed: OrderedSeed): Promise<OrderedRows> {
  const streamId = uniqueName('ordered');
  const [event] = await appendEvents(tx, [
    { streamType: 'test', streamId, version: 1, type: 'OrderedHappened', data: {}, meta: {} },
  ]);
  const origin = {
    eventPosition: event!.position,
    eventType: 'OrderedHappened',
    streamType: 'test',
    streamId,
    meta: { correlationId: streamId },
  };
  const result: OrderedRows = { messageIds: [], byMessageId: new Map() };
  const first = seed.firstSeq ?? 0;
  const chunk: OutboxMessageSpec[] = [];
  const chunkMeta: { key: string; seq: number }[] = [];
  const flush = async () => {
    const rows = toOutboxRows(origin, chunk);
    await writeOutbox(tx, rows);
    rows.forEach((row, i) => {
      result.messageIds.push(row.messageId);
      result.byMessageId.set(row.messageId, chunkMeta[i]!);
    });
    chunk.length = 0;
    chunkMeta.length = 0;
  };
  for (let seq = first; seq < first + seed.perKey; seq++) {
    for (const key of seed.keys) {
      chunk.push({
        sink: seed.sink ?? 'amqp',
        destination: seed.destination,
        partitionKey: key,
        ordered: seed.ordered ?? true,
        payload: seed.payload ? seed.payload(key, seq) : { key, seq },
      });
      chunkMeta.push({ key, seq });
      if (chunk.length >= 5_000) await flush();
    }
  }
  if (chunk.length > 0) await flush();
  return result;
}

export function seedOrdered(db: Database, seed: OrderedSeed): Promise<OrderedRows> {
  return db.transaction((tx) => writeOrdered(tx, seed));
}

export function keyNames(count: number, prefix = 'key'): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
}
