/**
 * Retention statements of the maintenance services (src/maintenance/): each deletes at most `limit`
 * rows past their retention, guarded by age (and status) in its WHERE clause and skipping rows another
 * transaction holds, so any number of maintenance replicas may run them at once. The outbox's sent-row
 * pruning and dead-row recovery stay in outbox-queries.ts next to the relay's statements; receipts'
 * in receipt-queries.ts.
 */
import type { SqlClient } from '../../ports/database.js';

/** `skipped` outbox rows (never published, never re-queued) after their retention. */
export const PRUNE_SKIPPED_OUTBOX = `
  with prunable as (
    select id from outbox
     where status = 'skipped' and skipped_at < now() - make_interval(days => $1)
     limit $2
     for update skip locked
  )
  delete from outbox o using prunable where o.id = prunable.id and o.status = 'skipped'`;

/**
 * Inbox rows after their retention. Only settled outcomes: a `dead` row is kept, so a message shovelled
 * back from the dead-letter queue still finds its history (and is claimed again).
 */
export const PRUNE_INBOX = `
  with prunable as (
    select consumer, message_id from inbox
     where processed_at < now() - make_interval(days => $1) and status <> 'dead'
     limit $2
     for update skip locked
  )
  delete from inbox i using prunable
   where i.consumer = prunable.consumer and i.message_id = prunable.message_id
     and i.processed_at < now() - make_interval(days => $1)`;

/** Idempotency keys past their expiry (the HTTP API reserves them; a request after expiry is new). */
export const EXPIRE_IDEMPOTENCY_KEYS = `
  with expired as (
    select scope, key from idempotency_key
     where expires_at < now()
     limit $1
     for update skip locked
  )
  delete from idempotency_key k using expired
   where k.scope = expired.scope and k.key = expired.key and k.expires_at < now()`;

/**
 * Events of one side stream (a stream no state row depends on, such as the per-minute tick) recorded
 * before the retention, unless an outbox row still refers to one (it is kept until that row is pruned).
 */
export const PRUNE_STREAM_EVENTS = `
  with prunable as (
    select e.position from event e
     where e.stream_type = $1 and e.recorded_at < now() - make_interval(days => $2)
       and not exists (select 1 from outbox o where o.event_position = e.position)
     order by e.position
     limit $3
     for update skip locked
  )
  delete from event e using prunable where e.position = prunable.position and e.stream_type = $1`;

export async function pruneSkippedOutbox(
  sql: SqlClient,
  params: { retentionDays: number; limit: number },
): Promise<number> {
  return (await sql.query(PRUNE_SKIPPED_OUTBOX, [params.retentionDays, params.limit])).rowCount;
}

export async function pruneInbox(
  sql: SqlClient,
  params: { retentionDays: number; limit: number },
): Promise<number> {
  return (await sql.query(PRUNE_INBOX, [params.retentionDays, params.limit])).rowCount;
}

export async function expireIdempotencyKeys(sql: SqlClient, params: { limit: number }): Promise<number> {
  return (await sql.query(EXPIRE_IDEMPOTENCY_KEYS, [params.limit])).rowCount;
}

export async function pruneStreamEvents(
  sql: SqlClient,
  params: { streamType: string; retentionDays: number; limit: number },
): Promise<number> {
  return (await sql.query(PRUNE_STREAM_EVENTS, [params.streamType, params.retentionDays, params.limit]))
    .rowCount;
}
