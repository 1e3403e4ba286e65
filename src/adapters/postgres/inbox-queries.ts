/**
 * Inbox queries: the consumer side of invariant 4 (stable message identity → exactly-once effect).
 * A consumer claims `(consumer, message_id)` in the SAME transaction as the handler's effects, so the
 * inbox row and the effects commit or roll back together; a second delivery of the same id finds the
 * row and is acknowledged without running the handler again.
 *
 * Statuses: `processed` and `discarded` mean the handler's transaction committed (effects exist);
 * `rejected` (permanent failure) and `dead` (retries exhausted) mean no effect ever committed. Every
 * statement is guarded in SQL: a failure record never overwrites a committed outcome, and only a
 * `dead` row may be claimed again (an operator re-driving a message from the dead-letter queue).
 */
import type { SqlClient } from '../../ports/database.js';

export type InboxStatus = 'processed' | 'discarded' | 'rejected' | 'dead';
export type InboxFailureStatus = Extract<InboxStatus, 'rejected' | 'dead'>;

/** Longest error text kept in `inbox.error`; enough for a message and a short cause chain. */
const MAX_ERROR_CHARS = 2000;

/**
 * Claims a message for processing inside the handler's transaction. Returns a row when this
 * transaction owns the message, none when it was already handled (duplicate). A concurrent delivery
 * of the same id blocks on the uncommitted row until the first transaction ends, then sees it.
 */
export const CLAIM_INBOX = `
  insert into inbox (consumer, message_id, status, attempts)
  values ($1, $2, 'processed', $3)
  on conflict (consumer, message_id) do update
     set status = 'processed', attempts = excluded.attempts, error = null, processed_at = now()
   where inbox.status = 'dead'
  returning attempts`;

/** The handler chose not to act ("not for me any more"); its transaction still commits. */
export const MARK_DISCARDED = `
  update inbox
     set status = 'discarded', error = left($3, ${MAX_ERROR_CHARS}), processed_at = now()
   where consumer = $1 and message_id = $2 and status = 'processed'
  returning status`;

/**
 * Records a failure in its own transaction (the handler's was rolled back). Never overwrites a row
 * whose effects committed (processed / discarded).
 */
export const RECORD_FAILURE = `
  insert into inbox (consumer, message_id, status, attempts, error)
  values ($1, $2, $3, $4, left($5, ${MAX_ERROR_CHARS}))
  on conflict (consumer, message_id) do update
     set status = excluded.status, attempts = excluded.attempts, error = excluded.error, processed_at = now()
   where inbox.status not in ('processed', 'discarded')
  returning status`;

export const SELECT_INBOX_ENTRY = `
  select consumer, message_id, status, attempts, error, received_at, processed_at
    from inbox
   where consumer = $1 and message_id = $2`;

export interface InboxKey {
  consumer: string;
  messageId: string;
}

export interface InboxEntry extends InboxKey {
  status: InboxStatus;
  attempts: number;
  error: string | null;
  receivedAt: Date;
  processedAt: Date;
}

/** True when `tx` now owns the message; false for a duplicate. */
export async function claimInbox(tx: SqlClient, key: InboxKey & { attempt: number }): Promise<boolean> {
  const { rowCount } = await tx.query(CLAIM_INBOX, [key.consumer, key.messageId, key.attempt]);
  return rowCount === 1;
}

/** Turns the claim made in `tx` into a discard with its reason. */
export async function markDiscarded(tx: SqlClient, key: InboxKey & { reason: string }): Promise<boolean> {
  const { rowCount } = await tx.query(MARK_DISCARDED, [key.consumer, key.messageId, key.reason]);
  return rowCount === 1;
}

/** Records `rejected` or `dead`. Returns false when a committed outcome was already there. */
export async function recordInboxFailure(
  sql: SqlClient,
  entry: InboxKey & { status: InboxFailureStatus; attempts: number; error: string },
): Promise<boolean> {
  const { rowCount } = await sql.query(RECORD_FAILURE, [
    entry.consumer,
    entry.messageId,
    entry.status,
    entry.attempts,
    entry.error,
  ]);
  return rowCount === 1;
}

export async function findInboxEntry(sql: SqlClient, key: InboxKey): Promise<InboxEntry | null> {
  const { rows } = await sql.query<{
    consumer: string;
    message_id: string;
    status: InboxStatus;
    attempts: number;
    error: string | null;
    received_at: Date;
    processed_at: Date;
  }>(SELECT_INBOX_ENTRY, [key.consumer, key.messageId]);
  const row = rows[0];
  if (!row) return null;
  return {
    consumer: row.consumer,
    messageId: row.message_id,
    status: row.status,
    attempts: row.attempts,
    error: row.error,
    receivedAt: row.received_at,
    processedAt: row.processed_at,
  };
}
