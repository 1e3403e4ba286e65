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

/** The batch form of CLAIM_INBOX: returns the message ids this transaction now owns (the others are duplicates). */
export const CLAIM_INBOX_MANY = `
  insert into inbox (consumer, message_id, status, attempts)
  select $1, m.message_id, 'processed', m.attempt
    from unnest($2::text[], $3::int[]) with ordinality as m(message_id, attempt, n)
   order by m.n
  on conflict (consumer, message_id) do update
     set status = 'processed', attempts = excluded.attempts, error = null, processed_at = now()
   where inbox.status = 'dead'
  returning message_id`;

/** The batch form of MARK_DISCARDED. */
export const MARK_DISCARDED_MANY = `
  update inbox i
     set status = 'discarded', error = left(d.reason, ${MAX_ERROR_CHARS}), processed_at = now()
    from unnest($2::text[], $3::text[]) as d(message_id, reason)
   where i.consumer = $1 and i.message_id = d.message_id and i.status = 'processed'`;

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

/**
 * Claims several messages (distinct ids, in the given order: concurrent batches lock in one order).
 * Returns the ids `tx` now owns.
 */
export async function claimInboxMany(
  tx: SqlClient,
  consumer: string,
  messages: readonly { messageId: string; attempt: number }[],
): Promise<Set<string>> {
  if (messages.length === 0) return new Set();
  const { rows } = await tx.query<{ message_id: string }>(CLAIM_INBOX_MANY, [
    consumer,
    messages.map((m) => m.messageId),
    messages.map((m) => m.attempt),
  ]);
  return new Set(rows.map((row) => row.message_id));
}

export async function markDiscardedMany(
  tx: SqlClient,
  consumer: string,
  discards: readonly { messageId: string; reason: string }[],
): Promise<void> {
  if (discards.length === 0) return;
  await tx.query(MARK_DISCARDED_MANY, [
    consumer,
    discards.map((d) => d.messageId),
    discards.map((d) => d.reason),
  ]);
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
