/**
 * Per-key ordering queries (ADR 0007): waking the next head of a key, the liveness sweep, the operator
 * view of parked keys and the operator's skip. The claim itself (the safety rule: only a key's head is
 * ever claimed) is CLAIM_OUTBOX_FOR_PUBLISH in outbox-queries.ts; everything here only moves rows
 * between "waiting" and "due", or a dead row to `skipped`, so none of it can publish a row out of order.
 *
 * A key is (sink, destination, partition_key) among `ordered` rows; its head is its earliest unsent
 * row (pending or dead) in (tx, id) order. Waiting rows have next_attempt_at = 'infinity'. Waking sets
 * a waiting head due; it is always safe (the claim re-checks the head rule), so the statements here
 * may run late, twice, or concurrently. Every state change is guarded in its WHERE clause.
 */

import type { SqlClient } from '../../ports/database.js';
import type { Sink } from '../../ports/outbox.js';

/**
 * After heads were marked sent (or skipped): for each given key, its current head, if it is waiting,
 * becomes due. Runs after the mark committed, in its own statement, so its snapshot sees the mark and
 * any deferral that had to wait for it (the claim holds the earlier row FOR SHARE while deferring).
 */
export const WAKE_KEY_HEADS = `
  with keys as (
    select distinct sink, destination, partition_key
      from unnest($1::text[], $2::text[], $3::text[]) as k(sink, destination, partition_key)
  ),
  heads as (
    select (select h.id from outbox h
             where h.ordered and h.status in ('pending', 'dead') and h.sink = k.sink
               and h.destination = k.destination and h.partition_key = k.partition_key
             order by h.tx, h.id
             limit 1) as id
      from keys k
  )
  update outbox o set next_attempt_at = now()
    from heads
   where o.id = heads.id and o.status = 'pending' and o.next_attempt_at = 'infinity'
  returning o.id`;

/**
 * The key heads, one per key with unsent ordered rows, found by a loose index scan over
 * outbox_ordered_key_idx: one index descent per key, whatever the depth of each key's backlog, so a
 * parked key with a million waiting rows costs what a key with one row costs.
 */
const KEY_HEADS = `
  with recursive head(sink, destination, partition_key, id) as (
    (select sink, destination, partition_key, id from outbox
      where ordered and status in ('pending', 'dead')
      order by sink, destination, partition_key, tx, id
      limit 1)
    union all
    select later.sink, later.destination, later.partition_key, later.id
      from head h
     cross join lateral (
       select sink, destination, partition_key, id from outbox
        where ordered and status in ('pending', 'dead')
          and (sink, destination, partition_key) > (h.sink, h.destination, h.partition_key)
        order by sink, destination, partition_key, tx, id
        limit 1) later
  )`;

/**
 * Liveness sweep (relay maintenance): any waiting head becomes due. A head is left waiting only when a
 * relay died between marking the previous head and waking the next one, or after manual SQL.
 */
export const WAKE_WAITING_HEADS = `
  ${KEY_HEADS}
  update outbox o set next_attempt_at = now()
    from head
   where o.id = head.id and o.status = 'pending' and o.next_attempt_at = 'infinity'
  returning o.id`;

/** Keys parked behind a dead head, oldest first, with how many rows wait behind each. */
export const PARKED_KEYS = `
  ${KEY_HEADS}
  select o.id, o.message_id, o.sink, o.destination, o.partition_key, o.attempts, o.recovery_count,
         o.last_error, o.dead_at,
         (select count(*) from outbox w
           where w.ordered and w.status in ('pending', 'dead') and w.sink = o.sink
             and w.destination = o.destination and w.partition_key = o.partition_key)::int - 1 as waiting
    from head join outbox o on o.id = head.id
   where o.status = 'dead'
   order by o.dead_at, o.id
   limit $1`;

/**
 * Operator: gives up on dead rows. Each becomes `skipped` (never re-queued by recovery, never
 * published) with who, why and the last failure in last_error. Only a dead row can be skipped.
 */
export const SKIP_DEAD = `
  update outbox
     set status = 'skipped', skipped_at = now(), locked_until = null, locked_by = null,
         last_error = left('skipped by ' || $2 || ': ' || $3 || coalesce('; last error: ' || last_error, ''), 2000)
   where id = any($1::bigint[]) and status = 'dead' and ($4::text is null or organization_id = $4)
  returning id, message_id, sink, destination, partition_key, ordered`;

/**
 * An organization's parked keys (the API): its dead ordered rows that are their key's head (no earlier
 * unsent row of the key), after a cursor in id order, through the dead-row organization index.
 */
export const ORGANIZATION_PARKED_KEYS = `
  select o.id, o.message_id, o.sink, o.destination, o.partition_key, o.attempts, o.recovery_count,
         o.last_error, o.dead_at,
         (select count(*) from outbox w
           where w.ordered and w.status in ('pending', 'dead') and w.sink = o.sink
             and w.destination = o.destination and w.partition_key = o.partition_key)::int - 1 as waiting
    from outbox o
   where o.organization_id = $1 and o.status = 'dead' and o.organization_id is not null and o.ordered
     and o.id > $2
     and not exists (
       select 1 from outbox e
        where e.ordered and e.status in ('pending', 'dead') and e.sink = o.sink
          and e.destination = o.destination and e.partition_key = o.partition_key
          and (e.tx, e.id) < (o.tx, o.id))
   order by o.id
   limit $3`;

/** Wakes idle relays at once (they also poll): after an operator re-queued or skipped a row. */
export const NOTIFY_CHANNEL = 'select pg_notify($1, $2)';

export interface OrderKey {
  sink: Sink;
  destination: string;
  partitionKey: string;
}

export interface ParkedKey extends OrderKey {
  /** The dead head row. */
  id: number;
  messageId: string;
  attempts: number;
  recoveryCount: number;
  lastError: string | null;
  deadAt: Date;
  /** Rows waiting behind the head. */
  waiting: number;
}

export interface SkippedRow {
  id: number;
  messageId: string;
  sink: Sink;
  destination: string;
  partitionKey: string | null;
  ordered: boolean;
}

/** Wakes the current head of each key if it waits. Returns the woken row ids. */
export async function wakeKeyHeads(sql: SqlClient, keys: readonly OrderKey[]): Promise<number[]> {
  if (keys.length === 0) return [];
  const { rows } = await sql.query<{ id: number }>(WAKE_KEY_HEADS, [
    keys.map((k) => k.sink),
    keys.map((k) => k.destination),
    keys.map((k) => k.partitionKey),
  ]);
  return rows.map((row) => row.id);
}

export async function wakeWaitingHeads(sql: SqlClient): Promise<number[]> {
  const { rows } = await sql.query<{ id: number }>(WAKE_WAITING_HEADS);
  return rows.map((row) => row.id);
}

interface ParkedKeyRow {
  id: number;
  message_id: string;
  sink: Sink;
  destination: string;
  partition_key: string;
  attempts: number;
  recovery_count: number;
  last_error: string | null;
  dead_at: Date;
  waiting: number;
}

export async function listParkedKeys(sql: SqlClient, limit = 100): Promise<ParkedKey[]> {
  const { rows } = await sql.query<ParkedKeyRow>(PARKED_KEYS, [limit]);
  return rows.map(parkedKey);
}

export async function listOrganizationParkedKeys(
  sql: SqlClient,
  params: { organizationId: string; afterId: number; limit: number },
): Promise<ParkedKey[]> {
  const { rows } = await sql.query<ParkedKeyRow>(ORGANIZATION_PARKED_KEYS, [
    params.organizationId,
    params.afterId,
    params.limit,
  ]);
  return rows.map(parkedKey);
}

function parkedKey(row: ParkedKeyRow): ParkedKey {
  return {
    id: row.id,
    messageId: row.message_id,
    sink: row.sink,
    destination: row.destination,
    partitionKey: row.partition_key,
    attempts: row.attempts,
    recoveryCount: row.recovery_count,
    lastError: row.last_error,
    deadAt: row.dead_at,
    waiting: row.waiting,
  };
}

/** Skips the dead rows among `ids` (of `organizationId` when given); rows missing or not dead are left out. */
export async function skipDead(
  sql: SqlClient,
  params: { ids: readonly number[]; actor: string; reason: string; organizationId?: string | null },
): Promise<SkippedRow[]> {
  const { rows } = await sql.query<{
    id: number;
    message_id: string;
    sink: Sink;
    destination: string;
    partition_key: string | null;
    ordered: boolean;
  }>(SKIP_DEAD, [params.ids, params.actor, params.reason, params.organizationId ?? null]);
  return rows.map((row) => ({
    id: row.id,
    messageId: row.message_id,
    sink: row.sink,
    destination: row.destination,
    partitionKey: row.partition_key,
    ordered: row.ordered,
  }));
}

/** NOTIFY on `channel` (sent when the caller's transaction commits); `payload` as the channel wants it. */
export async function notifyChannel(sql: SqlClient, channel: string, payload = ''): Promise<void> {
  await sql.query(NOTIFY_CHANNEL, [channel, payload]);
}
