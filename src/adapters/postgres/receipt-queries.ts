/**
 * Publish receipt queries. Receipts are appended by the relay's own statements (MARK_SENT and
 * SCHEDULE_RETRY in outbox-queries.ts), never here. Readers: projectors follow them gap-safely (like the
 * event log: only `tx < pg_snapshot_xmin(pg_current_snapshot())`, in (tx, id) order, so a receipt whose
 * transaction commits late is never skipped); replay finds them by event position; export reads them
 * by time range. Retention deletes old receipts, guarded by their age in the WHERE clause.
 */

import type { SqlClient } from '../../ports/database.js';
import type { LogCursor } from '../../ports/events.js';
import { forEachBatch } from './cursor-queries.js';

const RECEIPT_COLUMNS = `r.id, r.tx::text as tx, r.message_id, r.outbox_id, r.event_position, r.sink,
  r.destination, r.routing_key, r.partition_key, r.outcome, r.broker_ref, r.attempts, r.recovery_count,
  r.error, r.confirmed_at, r.recorded_at`;

/** Next receipts after the cursor, with the stream of the event that caused each message. */
export const READ_RECEIPTS_AFTER = `
  select ${RECEIPT_COLUMNS}, e.stream_type, e.stream_id
    from publish_receipt r
    left join event e on e.position = r.event_position
   where (r.tx, r.id) > ($1::xid8, $2::bigint)
     and r.tx < pg_snapshot_xmin(pg_current_snapshot())
   order by r.tx, r.id
   limit $3`;

export const RECEIPTS_FOR_EVENTS = `
  select ${RECEIPT_COLUMNS}, e.stream_type, e.stream_id
    from publish_receipt r
    left join event e on e.position = r.event_position
   where r.event_position = any($1::bigint[])
   order by r.recorded_at, r.id`;

/** Export: receipts recorded in [from, to), optionally of messages caused by these stream types (a cursor query). */
export const EXPORT_RECEIPTS = `
  select ${RECEIPT_COLUMNS}, e.stream_type, e.stream_id
    from publish_receipt r
    left join event e on e.position = r.event_position
   where ($1::timestamptz is null or r.recorded_at >= $1)
     and ($2::timestamptz is null or r.recorded_at < $2)
     and ($3::text[] is null or e.stream_type = any($3))
   order by r.recorded_at, r.id`;

export const PRUNE_RECEIPTS = `
  with prunable as (
    select tx, id from publish_receipt
     where recorded_at < now() - make_interval(days => $1)
     limit $2
  )
  delete from publish_receipt r using prunable
   where r.tx = prunable.tx and r.id = prunable.id and r.recorded_at < now() - make_interval(days => $1)`;

export type ReceiptOutcome = 'sent' | 'dead';

export interface PublishReceipt {
  id: number;
  tx: string;
  messageId: string;
  outboxId: number;
  eventPosition: number;
  sink: string;
  destination: string;
  routingKey: string | null;
  partitionKey: string | null;
  outcome: ReceiptOutcome;
  brokerRef: string | null;
  attempts: number;
  recoveryCount: number;
  error: string | null;
  confirmedAt: Date | null;
  recordedAt: Date;
  /** The stream of the event that caused the message (null if that event is unknown). */
  streamType: string | null;
  streamId: string | null;
}

interface ReceiptRow {
  id: number;
  tx: string;
  message_id: string;
  outbox_id: number;
  event_position: number;
  sink: string;
  destination: string;
  routing_key: string | null;
  partition_key: string | null;
  outcome: ReceiptOutcome;
  broker_ref: string | null;
  attempts: number;
  recovery_count: number;
  error: string | null;
  confirmed_at: Date | null;
  recorded_at: Date;
  stream_type: string | null;
  stream_id: string | null;
}

const toReceipt = (row: ReceiptRow): PublishReceipt => ({
  id: row.id,
  tx: row.tx,
  messageId: row.message_id,
  outboxId: row.outbox_id,
  eventPosition: row.event_position,
  sink: row.sink,
  destination: row.destination,
  routingKey: row.routing_key,
  partitionKey: row.partition_key,
  outcome: row.outcome,
  brokerRef: row.broker_ref,
  attempts: row.attempts,
  recoveryCount: row.recovery_count,
  error: row.error,
  confirmedAt: row.confirmed_at,
  recordedAt: row.recorded_at,
  streamType: row.stream_type,
  streamId: row.stream_id,
});

/** Committed receipts after `cursor` that no running transaction can still precede. */
export async function readReceiptsAfter(
  sql: SqlClient,
  cursor: LogCursor,
  limit: number,
): Promise<PublishReceipt[]> {
  const { rows } = await sql.query<ReceiptRow>(READ_RECEIPTS_AFTER, [cursor.tx, cursor.position, limit]);
  return rows.map(toReceipt);
}

export async function receiptsForEvents(
  sql: SqlClient,
  positions: readonly number[],
): Promise<PublishReceipt[]> {
  if (positions.length === 0) return [];
  const { rows } = await sql.query<ReceiptRow>(RECEIPTS_FOR_EVENTS, [positions]);
  return rows.map(toReceipt);
}

export interface ExportFilter {
  /** Inclusive lower bound (ISO 8601 with offset); null: from the beginning. */
  from: string | null;
  /** Exclusive upper bound; null: up to now. */
  to: string | null;
  /** Only these stream types (for receipts: of the event that caused the message); null: all. */
  streamTypes: readonly string[] | null;
}

/** Streams the receipts in the filter through a cursor, in (recorded_at, id) order. Run inside a transaction. */
export function exportReceipts(
  tx: SqlClient,
  filter: ExportFilter,
  batchSize: number,
  handle: (receipts: PublishReceipt[]) => Promise<void> | void,
): Promise<void> {
  return forEachBatch<ReceiptRow>(
    tx,
    {
      name: 'herald_export_receipts',
      query: EXPORT_RECEIPTS,
      params: [filter.from, filter.to, filter.streamTypes],
      batchSize,
    },
    (rows) => handle(rows.map(toReceipt)),
  );
}

/** Deletes up to `limit` receipts older than the retention; returns how many. */
export async function pruneReceipts(
  sql: SqlClient,
  params: { retentionDays: number; limit: number },
): Promise<number> {
  const { rowCount } = await sql.query(PRUNE_RECEIPTS, [params.retentionDays, params.limit]);
  return rowCount;
}
