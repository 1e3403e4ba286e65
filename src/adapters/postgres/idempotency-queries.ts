/**
 * Idempotency-Key queries of the HTTP API, run inside the transaction of the command the key guards
 * (invariant 1: the key's row commits with the command's events and outbox rows, or neither does, so a
 * retry can never enqueue twice). RESERVE takes a transaction-scoped advisory lock on (scope, key) without
 * waiting (a key held elsewhere is in flight: 409), then inserts the row; an unexpired row wins, an expired
 * one is taken over, judged on the database clock (invariant 6). A reservation expires after a lease (a
 * request that reserved in a transaction of its own and was cut before it completed or released the key,
 * e.g. by a database failover, does not hold the key for the whole TTL); completing or suspending the key
 * keeps it for the TTL. ADR 0012.
 */
import type { SqlClient } from '../../ports/database.js';

/** 64-bit lock key from (scope, key); the second argument seeds hashtextextended apart from other locks. */
const LOCK_KEY = `hashtextextended($1 || chr(31) || $2, 12)`;

export const RESERVE_IDEMPOTENCY_KEY = `
  with lock as (select pg_try_advisory_xact_lock(${LOCK_KEY}) as held),
  reserved as (
    insert into idempotency_key as k (scope, key, request_hash, state, expires_at)
    select $1, $2, $3, 'in_progress', now() + make_interval(secs => $4 / 1000.0)
      from lock where lock.held
    on conflict (scope, key) do update
       set request_hash = excluded.request_hash, state = 'in_progress', response = null,
           created_at = now(), expires_at = excluded.expires_at
     where k.expires_at <= now()
    returning 1
  )
  select (select held from lock) as held, exists (select 1 from reserved) as reserved`;

export const SELECT_IDEMPOTENCY_KEY = `
  select request_hash, state, response from idempotency_key
   where scope = $1 and key = $2 and expires_at > now()`;

export const COMPLETE_IDEMPOTENCY_KEY = `
  update idempotency_key
     set state = 'completed', response = $3::jsonb, expires_at = now() + make_interval(secs => $4 / 1000.0)
   where scope = $1 and key = $2 and state = 'in_progress'`;

export type Reservation =
  | { kind: 'reserved' }
  | { kind: 'in-flight' }
  | { kind: 'existing'; requestHash: string; state: 'in_progress' | 'completed'; response: unknown };

/**
 * Reserves the key for this transaction, or says why not (in flight elsewhere, or already used); the
 * reservation lasts `leaseMs` unless completed or suspended.
 */
export async function reserveIdempotencyKey(
  tx: SqlClient,
  params: { scope: string; key: string; requestHash: string; leaseMs: number },
): Promise<Reservation> {
  const { rows } = await tx.query<{ held: boolean; reserved: boolean }>(RESERVE_IDEMPOTENCY_KEY, [
    params.scope,
    params.key,
    params.requestHash,
    params.leaseMs,
  ]);
  const { held, reserved } = rows[0]!;
  if (!held) return { kind: 'in-flight' };
  if (reserved) return { kind: 'reserved' };
  const existing = await tx.query<{
    request_hash: string;
    state: 'in_progress' | 'completed';
    response: unknown;
  }>(SELECT_IDEMPOTENCY_KEY, [params.scope, params.key]);
  const row = existing.rows[0];
  // Expired between the two statements: nothing to replay, and the lock is ours; reserve it again.
  if (!row) return reserveIdempotencyKey(tx, params);
  return { kind: 'existing', requestHash: row.request_hash, state: row.state, response: row.response };
}

/** Stores the response of the request that reserved the key (same transaction as its command), for `ttlMs`. */
export async function completeIdempotencyKey(
  tx: SqlClient,
  params: { scope: string; key: string; response: unknown; ttlMs: number },
): Promise<void> {
  const { rowCount } = await tx.query(COMPLETE_IDEMPOTENCY_KEY, [
    params.scope,
    params.key,
    JSON.stringify(params.response),
    params.ttlMs,
  ]);
  if (rowCount !== 1) throw new Error(`idempotency key ${params.key} was not reserved by this transaction`);
}

/**
 * Releases a key reserved by a request that failed (seed 003: "Release reservation"), so the client may
 * retry with it; a completed key is never released.
 */
export const RELEASE_IDEMPOTENCY_KEY = `delete from idempotency_key where scope = $1 and key = $2 and state = 'in_progress'`;

export async function releaseIdempotencyKey(sql: SqlClient, scope: string, key: string): Promise<void> {
  await sql.query(RELEASE_IDEMPOTENCY_KEY, [scope, key]);
}

/**
 * Suspends a key whose request failed in a way the same request may finish (ADR 0023: an SMS creation
 * whose charge billing did not answer): it stays reserved, holding `token` (what the retry resumes), so a
 * retry with the same key and request continues that operation instead of starting another.
 */
export const SUSPEND_IDEMPOTENCY_KEY = `
  update idempotency_key
     set response = jsonb_build_object('resume', $3::jsonb), expires_at = now() + make_interval(secs => $4 / 1000.0)
   where scope = $1 and key = $2 and state = 'in_progress'`;

export async function suspendIdempotencyKey(
  sql: SqlClient,
  params: { scope: string; key: string; token: unknown; ttlMs: number },
): Promise<boolean> {
  const { rowCount } = await sql.query(SUSPEND_IDEMPOTENCY_KEY, [
    params.scope,
    params.key,
    JSON.stringify(params.token),
    params.ttlMs,
  ]);
  return rowCount === 1;
}

/**
 * Takes a suspended key over for the retry that resumes it (the same request): its token, or null when
 * it is not suspended (any more), it expired, or it was reserved by another request. The row lock makes
 * one of two concurrent retries the resumer; the other then finds the key in flight. The resumer holds the
 * key for a lease again, as a new reservation does.
 */
export const RESUME_IDEMPOTENCY_KEY = `
  update idempotency_key k set response = null, expires_at = now() + make_interval(secs => $4 / 1000.0)
    from (select scope, key, response -> 'resume' as token from idempotency_key
           where scope = $1 and key = $2 and state = 'in_progress' and request_hash = $3
             and response ? 'resume' and expires_at > now()
           for update) s
   where k.scope = s.scope and k.key = s.key
  returning s.token`;

export async function resumeIdempotencyKey(
  sql: SqlClient,
  params: { scope: string; key: string; requestHash: string; leaseMs: number },
): Promise<unknown | null> {
  const { rows } = await sql.query<{ token: unknown }>(RESUME_IDEMPOTENCY_KEY, [
    params.scope,
    params.key,
    params.requestHash,
    params.leaseMs,
  ]);
  return rows[0]?.token ?? null;
}
