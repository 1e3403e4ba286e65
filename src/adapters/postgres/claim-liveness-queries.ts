/**
 * Liveness of a claim's messages, for stale recovery (src/scanner/sweeper.ts): which of the given
 * message ids are still in flight — pending in the outbox (the relay's to publish), or published and
 * not yet settled by any consumer (no inbox record) within the lost-message horizon. Everything else
 * (dead or skipped rows, settled messages, messages published before the horizon, ids with no row) is
 * not in flight. Index look-ups only: outbox.message_id is unique; the inbox is probed by its primary
 * key (consumer, message_id) for each of its few consumers, found by a loose index scan (it has no
 * index on message_id alone since migration 000022, ADR 0032).
 */
import type { SqlClient } from '../../ports/database.js';
import { distinctLeadingValues } from './loose-index-scan.js';

/**
 * The bound a claimed_at column is compared with for "stale", exactly as the deciders' reclaim commands
 * judge it: whole milliseconds (deciders see times as ISO strings), `now - claimedAt > staleAfterMs`.
 * Both sides truncated to the millisecond, the test is `claimed_at < date_trunc('milliseconds', now()) -
 * staleAfterMs` (the bound is whole milliseconds, so the untruncated column compares the same), and an
 * index on claimed_at still serves it. `$1` is staleAfterMs.
 */
export const STALE_CLAIMED_AT = `date_trunc('milliseconds', now()) - make_interval(secs => $1 / 1000.0)`;

export const MESSAGES_IN_FLIGHT = `
  ${distinctLeadingValues('consumers', 'inbox', 'consumer')}
  select o.message_id::text as message_id
    from unnest($1::uuid[]) as m(id)
    join outbox o on o.message_id = m.id
   where o.status = 'pending'
      or (o.status = 'sent'
          and o.sent_at > now() - make_interval(secs => $2 / 1000.0)
          and not exists (select 1 from consumers c
                            join inbox i on i.consumer = c.consumer and i.message_id = o.message_id::text))`;

export async function messagesInFlight(
  sql: SqlClient,
  messageIds: readonly string[],
  lostAfterMs: number,
): Promise<string[]> {
  if (messageIds.length === 0) return [];
  const { rows } = await sql.query<{ message_id: string }>(MESSAGES_IN_FLIGHT, [messageIds, lostAfterMs]);
  return rows.map((row) => row.message_id);
}
