/**
 * Lease queries (river-style leadership): a named lease held by one owner at a time, timed by the
 * database clock (invariant 6). Acquiring succeeds when the lease is free, expired, or already ours;
 * taking it from someone else bumps `term`, the fencing token. Renew, release and the in-transaction
 * check are guarded by owner AND term, so a holder that lost its lease (paused past expiry, then
 * taken over) can neither extend it nor act under it. Leases only cut duplicate work (invariant 7):
 * the writes they protect are guarded on their own.
 */
import type { SqlClient } from '../../ports/database.js';

export const ACQUIRE_LEASE = `
  insert into lease as l (name, owner, term, acquired_at, renewed_at, expires_at)
  values ($1, $2, 1, now(), now(), now() + make_interval(secs => $3 / 1000.0))
  on conflict (name) do update
     set term = case when l.owner = excluded.owner and l.expires_at > now() then l.term else l.term + 1 end,
         acquired_at = case when l.owner = excluded.owner and l.expires_at > now() then l.acquired_at else now() end,
         owner = excluded.owner,
         renewed_at = now(),
         expires_at = excluded.expires_at
   where l.expires_at <= now() or l.owner = excluded.owner
  returning term, expires_at`;

export const RENEW_LEASE = `
  update lease
     set renewed_at = now(), expires_at = now() + make_interval(secs => $4 / 1000.0)
   where name = $1 and owner = $2 and term = $3
  returning expires_at`;

/** Ends the lease now, so another replica can take it at once (graceful stop). */
export const RELEASE_LEASE = `
  update lease set expires_at = now()
   where name = $1 and owner = $2 and term = $3 and expires_at > now()`;

/** The fencing check a holder runs inside the transaction its lease protects. */
export const HOLDS_LEASE = `
  select 1 from lease where name = $1 and owner = $2 and term = $3 and expires_at > now()`;

export const SELECT_LEASE = `
  select name, owner, term, acquired_at, renewed_at, expires_at from lease where name = $1`;

export interface LeaseGrant {
  name: string;
  owner: string;
  term: number;
  expiresAt: Date;
}

export interface LeaseRow {
  name: string;
  owner: string;
  term: number;
  acquiredAt: Date;
  renewedAt: Date;
  expiresAt: Date;
}

/** Takes the lease if it is free, expired or ours; null when someone else holds it. */
export async function acquireLease(
  sql: SqlClient,
  name: string,
  owner: string,
  ttlMs: number,
): Promise<LeaseGrant | null> {
  const { rows } = await sql.query<{ term: number; expires_at: Date }>(ACQUIRE_LEASE, [name, owner, ttlMs]);
  const row = rows[0];
  return row ? { name, owner, term: row.term, expiresAt: row.expires_at } : null;
}

/** Extends our lease; false when it is no longer ours (another owner took it: a new term). */
export async function renewLease(sql: SqlClient, grant: LeaseGrant, ttlMs: number): Promise<boolean> {
  const { rows } = await sql.query<{ expires_at: Date }>(RENEW_LEASE, [
    grant.name,
    grant.owner,
    grant.term,
    ttlMs,
  ]);
  if (!rows[0]) return false;
  grant.expiresAt = rows[0].expires_at;
  return true;
}

export async function releaseLease(sql: SqlClient, grant: LeaseGrant): Promise<void> {
  await sql.query(RELEASE_LEASE, [grant.name, grant.owner, grant.term]);
}

export async function holdsLease(sql: SqlClient, grant: LeaseGrant): Promise<boolean> {
  const { rowCount } = await sql.query(HOLDS_LEASE, [grant.name, grant.owner, grant.term]);
  return rowCount === 1;
}

export async function findLease(sql: SqlClient, name: string): Promise<LeaseRow | null> {
  const { rows } = await sql.query<{
    name: string;
    owner: string;
    term: number;
    acquired_at: Date;
    renewed_at: Date;
    expires_at: Date;
  }>(SELECT_LEASE, [name]);
  const row = rows[0];
  return row
    ? {
        name: row.name,
        owner: row.owner,
        term: row.term,
        acquiredAt: row.acquired_at,
        renewedAt: row.renewed_at,
        expiresAt: row.expires_at,
      }
    : null;
}
