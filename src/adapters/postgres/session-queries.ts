/**
 * Dashboard session queries (ADR 0018, migration 000013): a session is found by the SHA-256 of its
 * cookie value joined to its API key, so a revoked key's sessions stop working at once (invariant:
 * the key decides, the session only carries it). Expiry is idle-based and judged on the database clock
 * (invariant 6): `expires_at` moves forward on use, at most once per touch interval per session (the
 * guard is in the WHERE, so replicas and concurrent requests touch it once).
 */

import type { SqlClient } from '../../ports/database.js';
import type { ApiKeyRole } from './api-key-queries.js';

export const INSERT_SESSION = `
  insert into api_session (id_hash, key_id, csrf_token, expires_at)
  values ($1, $2, $3, now() + make_interval(secs => $4))
  returning created_at, expires_at`;

/** A key's expired sessions (pruned at each sign-in of the key: bounded, no sweeper needed). */
export const PRUNE_KEY_SESSIONS = `delete from api_session where key_id = $1 and expires_at <= now()`;

/**
 * A live session: of a live key, or of an issuer's subject whose token has not expired (`not_after`);
 * `stale` says whether it is due a touch.
 */
export const FIND_SESSION = `
  select s.key_id::text as key_id, s.csrf_token, least(s.expires_at, s.not_after) as expires_at,
         coalesce(k.organization_id, s.organization_id) as organization_id, coalesce(k.role, s.role) as role,
         s.subject, s.last_seen_at < now() - make_interval(secs => $2) as stale
    from api_session s left join api_key k on k.id = s.key_id
   where s.id_hash = $1 and s.expires_at > now()
     and ((s.key_id is not null and k.revoked_at is null) or (s.key_id is null and s.not_after > now()))`;

/** A sign-in through the issuer: the claims' organization, role and subject, until its token expires. */
export const INSERT_SUBJECT_SESSION = `
  insert into api_session (id_hash, key_id, csrf_token, expires_at, organization_id, role, subject, not_after)
  values ($1, null, $2, now() + make_interval(secs => $3), $4, $5, $6, $7)
  returning created_at, least(expires_at, not_after) as expires_at`;

/** A subject's ended sessions (pruned at each of its sign-ins). */
export const PRUNE_SUBJECT_SESSIONS = `
  delete from api_session where subject = $1 and (expires_at <= now() or not_after <= now())`;

export const TOUCH_SESSION = `
  update api_session set last_seen_at = now(), expires_at = now() + make_interval(secs => $2)
   where id_hash = $1 and expires_at > now() and last_seen_at < now() - make_interval(secs => $3)
  returning expires_at`;

export const DELETE_SESSION = `delete from api_session where id_hash = $1`;

export interface SessionRecord {
  /** The API key of a key sign-in; null for a sign-in through the issuer. */
  keyId: string | null;
  /** The issuer's subject of a sign-in through it; null for a key's session. */
  subject: string | null;
  organizationId: string;
  role: ApiKeyRole;
  csrfToken: string;
  expiresAt: Date;
  /** Last touched longer ago than the touch interval. */
  stale: boolean;
}

export async function insertSession(
  sql: SqlClient,
  params: { idHash: Buffer; keyId: string; csrfToken: string; idleSeconds: number },
): Promise<{ createdAt: Date; expiresAt: Date }> {
  await sql.query(PRUNE_KEY_SESSIONS, [params.keyId]);
  const { rows } = await sql.query<{ created_at: Date; expires_at: Date }>(INSERT_SESSION, [
    params.idHash,
    params.keyId,
    params.csrfToken,
    params.idleSeconds,
  ]);
  return { createdAt: rows[0]!.created_at, expiresAt: rows[0]!.expires_at };
}

export async function insertSubjectSession(
  sql: SqlClient,
  params: {
    idHash: Buffer;
    csrfToken: string;
    idleSeconds: number;
    organizationId: string;
    role: ApiKeyRole;
    subject: string;
    notAfter: Date;
  },
): Promise<{ createdAt: Date; expiresAt: Date }> {
  await sql.query(PRUNE_SUBJECT_SESSIONS, [params.subject]);
  const { rows } = await sql.query<{ created_at: Date; expires_at: Date }>(INSERT_SUBJECT_SESSION, [
    params.idHash,
    params.csrfToken,
    params.idleSeconds,
    params.organizationId,
    params.role,
    params.subject,
    params.notAfter,
  ]);
  return { createdAt: rows[0]!.created_at, expiresAt: rows[0]!.expires_at };
}

export async function findSession(
  sql: SqlClient,
  idHash: Buffer,
  touchAfterSeconds: number,
): Promise<SessionRecord | null> {
  const { rows } = await sql.query<{
    key_id: string | null;
    subject: string | null;
    csrf_token: string;
    expires_at: Date;
    organization_id: string;
    role: ApiKeyRole;
    stale: boolean;
  }>(FIND_SESSION, [idHash, touchAfterSeconds]);
  const row = rows[0];
  if (!row) return null;
  return {
    keyId: row.key_id,
    subject: row.subject,
    organizationId: row.organization_id,
    role: row.role,
    csrfToken: row.csrf_token,
    expiresAt: row.expires_at,
    stale: row.stale,
  };
}

/** Pushes the idle expiry forward; null when the session expired meanwhile or was touched recently. */
export async function touchSession(
  sql: SqlClient,
  idHash: Buffer,
  idleSeconds: number,
  touchAfterSeconds: number,
): Promise<Date | null> {
  const { rows } = await sql.query<{ expires_at: Date }>(TOUCH_SESSION, [
    idHash,
    idleSeconds,
    touchAfterSeconds,
  ]);
  return rows[0]?.expires_at ?? null;
}

export async function deleteSession(sql: SqlClient, idHash: Buffer): Promise<boolean> {
  return (await sql.query(DELETE_SESSION, [idHash])).rowCount > 0;
}
