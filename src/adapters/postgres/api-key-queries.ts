/**
 * API key queries (the HTTP API's authentication and key management, ADR 0012): a key is found by the
 * SHA-256 of its secret (one unique-index probe per request), listed per organization with a keyset
 * cursor, and revoked or touched only through guarded statements — a revocation changes only a live key
 * of the caller's organization, and `last_used_at` moves at most once a minute per key, however many
 * requests and API replicas use it (the guard is in the WHERE, on the database clock: invariant 6).
 */
import type { SqlClient } from '../../ports/database.js';

export const API_KEY_ROLES = ['viewer', 'operator', 'admin'] as const;
export type ApiKeyRole = (typeof API_KEY_ROLES)[number];

export interface ApiKeyRecord {
  id: string;
  organizationId: string;
  role: ApiKeyRole;
  name: string;
  prefix: string;
  createdAt: string;
  createdBy: string | null;
  revokedAt: string | null;
  lastUsedAt: string | null;
}

const COLUMNS = `id::text as id, organization_id, role, name, prefix, created_at, created_by, revoked_at, last_used_at`;

export const INSERT_API_KEY = `
  insert into api_key (id, organization_id, role, name, prefix, secret_hash, created_by)
  values ($1, $2, $3, $4, $5, $6, $7)
  returning ${COLUMNS}`;

export const SELECT_API_KEY_BY_HASH = `select ${COLUMNS} from api_key where secret_hash = $1`;

export const SELECT_API_KEY = `select ${COLUMNS} from api_key where id = $1 and organization_id = $2`;

/** An organization's keys, oldest first, after the cursor (created_at, id). */
export const LIST_API_KEYS = `
  select ${COLUMNS} from api_key
   where organization_id = $1
     and ($2::timestamptz is null or (created_at, id) > ($2, $3::uuid))
     and ($4::boolean or revoked_at is null)
   order by created_at, id
   limit $5`;

/** Every key (the CLI's `herald api-keys list` without an organization), oldest first. */
export const LIST_ALL_API_KEYS = `
  select ${COLUMNS} from api_key
   where ($1::boolean or revoked_at is null)
   order by created_at, id
   limit $2`;

/**
 * With $3 (the API's revocation), an organization's last live admin key stays: the other live admin keys
 * of its organization are locked first, so two revocations of the last two wait for each other and the
 * second sees the first's (a key revoked meanwhile leaves the locked set when re-checked).
 */
export const REVOKE_API_KEY = `
  with other_admins as (
    select o.id from api_key o
     where o.organization_id = (select organization_id from api_key where id = $1)
       and o.role = 'admin' and o.revoked_at is null and o.id <> $1
       for update
  )
  update api_key set revoked_at = now()
   where id = $1 and ($2::text is null or organization_id = $2) and revoked_at is null
     and (not $3::boolean or role <> 'admin' or exists (select 1 from other_admins))
  returning ${COLUMNS}`;

/** The names of some keys of an organization (the actors `api-key:<id>` the dashboard shows). */
export const API_KEY_NAMES = `
  select id::text as id, name, role, revoked_at from api_key
   where organization_id = $1 and id = any($2::uuid[])`;

export const TOUCH_API_KEY = `
  update api_key set last_used_at = now()
   where id = $1 and (last_used_at is null or last_used_at < now() - interval '1 minute')`;

interface Row {
  id: string;
  organization_id: string;
  role: ApiKeyRole;
  name: string;
  prefix: string;
  created_at: Date;
  created_by: string | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

const iso = (value: Date | null) => (value ? value.toISOString() : null);

function fromRow(row: Row): ApiKeyRecord {
  return {
    id: row.id,
    organizationId: row.organization_id,
    role: row.role,
    name: row.name,
    prefix: row.prefix,
    createdAt: row.created_at.toISOString(),
    createdBy: row.created_by,
    revokedAt: iso(row.revoked_at),
    lastUsedAt: iso(row.last_used_at),
  };
}

export async function insertApiKey(
  sql: SqlClient,
  key: {
    id: string;
    organizationId: string;
    role: ApiKeyRole;
    name: string;
    prefix: string;
    secretHash: Buffer;
    createdBy: string | null;
  },
): Promise<ApiKeyRecord> {
  const { rows } = await sql.query<Row>(INSERT_API_KEY, [
    key.id,
    key.organizationId,
    key.role,
    key.name,
    key.prefix,
    key.secretHash,
    key.createdBy,
  ]);
  return fromRow(rows[0]!);
}

export async function findApiKeyByHash(sql: SqlClient, secretHash: Buffer): Promise<ApiKeyRecord | null> {
  const { rows } = await sql.query<Row>(SELECT_API_KEY_BY_HASH, [secretHash]);
  return rows[0] ? fromRow(rows[0]) : null;
}

export async function findApiKey(
  sql: SqlClient,
  id: string,
  organizationId: string,
): Promise<ApiKeyRecord | null> {
  const { rows } = await sql.query<Row>(SELECT_API_KEY, [id, organizationId]);
  return rows[0] ? fromRow(rows[0]) : null;
}

export async function listApiKeys(
  sql: SqlClient,
  params: {
    organizationId: string;
    after: { createdAt: string; id: string } | null;
    includeRevoked: boolean;
    limit: number;
  },
): Promise<ApiKeyRecord[]> {
  const { rows } = await sql.query<Row>(LIST_API_KEYS, [
    params.organizationId,
    params.after?.createdAt ?? null,
    params.after?.id ?? null,
    params.includeRevoked,
    params.limit,
  ]);
  return rows.map(fromRow);
}

export async function listAllApiKeys(
  sql: SqlClient,
  params: { includeRevoked: boolean; limit: number },
): Promise<ApiKeyRecord[]> {
  const { rows } = await sql.query<Row>(LIST_ALL_API_KEYS, [params.includeRevoked, params.limit]);
  return rows.map(fromRow);
}

/**
 * Revokes a live key (of the organization, when given); null when there is no such live key, or, with
 * `keepLastAdmin`, when it is its organization's last live admin key.
 */
export async function revokeApiKey(
  sql: SqlClient,
  id: string,
  organizationId: string | null,
  options: { keepLastAdmin?: boolean } = {},
): Promise<ApiKeyRecord | null> {
  const { rows } = await sql.query<Row>(REVOKE_API_KEY, [id, organizationId, options.keepLastAdmin ?? false]);
  return rows[0] ? fromRow(rows[0]) : null;
}

/** Records a use of the key, unless one was recorded within the last minute. */
export async function touchApiKey(sql: SqlClient, id: string): Promise<void> {
  await sql.query(TOUCH_API_KEY, [id]);
}

export interface ApiKeyName {
  id: string;
  name: string;
  role: ApiKeyRole;
  revoked: boolean;
}

/** The names of the organization's keys among `ids` (uuids); another organization's keys are absent. */
export async function apiKeyNames(
  sql: SqlClient,
  organizationId: string,
  ids: readonly string[],
): Promise<ApiKeyName[]> {
  if (ids.length === 0) return [];
  const { rows } = await sql.query<{ id: string; name: string; role: ApiKeyRole; revoked_at: Date | null }>(
    API_KEY_NAMES,
    [organizationId, ids],
  );
  return rows.map((r) => ({ id: r.id, name: r.name, role: r.role, revoked: r.revoked_at !== null }));
}
