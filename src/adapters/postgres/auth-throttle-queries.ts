/**
 * Authentication throttle queries (migration 000018, src/api/auth-throttle.ts): failed authentications
 * counted per client address in a fixed window judged on the database clock (invariant 6), so every API
 * process counts into, and refuses from, the same row. A failure is one upsert whose CASE restarts a
 * window that ended; whether an address is blocked is one primary-key probe.
 */
import type { SqlClient } from '../../ports/database.js';

/** Counts a failure: the address's failures in its current window (a new window when the last ended). */
export const RECORD_AUTH_FAILURE = `
  insert into auth_failure as f (client, window_start, failures)
  values ($1, now(), 1)
  on conflict (client) do update
     set failures = case when f.window_start > now() - make_interval(secs => $2) then f.failures + 1 else 1 end,
         window_start = case when f.window_start > now() - make_interval(secs => $2) then f.window_start else now() end
  returning failures,
            extract(epoch from (window_start + make_interval(secs => $2) - now()))::float8 as remaining_seconds`;

/** Seconds until the address's window ends when it has reached the limit in it; no row otherwise. */
export const AUTH_BLOCKED_FOR = `
  select extract(epoch from (window_start + make_interval(secs => $2) - now()))::float8 as remaining_seconds
    from auth_failure
   where client = $1 and failures >= $3 and window_start > now() - make_interval(secs => $2)`;

/** A few rows whose window ended (skipping rows another failure is updating): the table stays small. */
export const PRUNE_AUTH_FAILURES = `
  delete from auth_failure
   where client in (select client from auth_failure
                     where window_start <= now() - make_interval(secs => $1)
                     order by window_start
                     limit $2
                       for update skip locked)`;

export async function recordAuthFailure(
  sql: SqlClient,
  client: string,
  windowSeconds: number,
): Promise<{ failures: number; remainingSeconds: number }> {
  const { rows } = await sql.query<{ failures: number; remaining_seconds: number }>(RECORD_AUTH_FAILURE, [
    client,
    windowSeconds,
  ]);
  return { failures: rows[0]!.failures, remainingSeconds: rows[0]!.remaining_seconds };
}

/** Seconds left in the address's window when it reached `limit` failures in it, else null. */
export async function authBlockedFor(
  sql: SqlClient,
  client: string,
  windowSeconds: number,
  limit: number,
): Promise<number | null> {
  const { rows } = await sql.query<{ remaining_seconds: number }>(AUTH_BLOCKED_FOR, [
    client,
    windowSeconds,
    limit,
  ]);
  return rows[0]?.remaining_seconds ?? null;
}

export async function pruneAuthFailures(
  sql: SqlClient,
  windowSeconds: number,
  limit: number,
): Promise<number> {
  return (await sql.query(PRUNE_AUTH_FAILURES, [windowSeconds, limit])).rowCount;
}
