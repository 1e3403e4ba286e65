/**
 * LINE directory queries (ADR 0021): channels with their sealed credentials, and multicast audiences —
 * uploaded in pages, then sealed, after which nothing changes them (so a planned chunk names the same
 * recipients on every attempt). Every change is guarded in its WHERE: a channel is replaced or removed
 * only by its own organization, an issued token only replaces an older one, a re-seal only a row whose sealed
 * values are still the ones it read, members join only an unsealed audience (its row locked for the insert), a seal only
 * an unsealed audience with members.
 */
import type { SqlClient } from '../../ports/database.js';

export interface LineChannelRow {
  lineOaId: string;
  organizationId: string;
  channelId: string;
  tokenKind: 'long_lived' | 'short_lived';
  sealedToken: string | null;
  clientId: string | null;
  sealedClientSecret: string | null;
  sealedIssuedToken: string | null;
  issuedExpiresAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface LineAudienceRow {
  audienceId: string;
  organizationId: string;
  name: string;
  members: number;
  sealedAt: Date | null;
  createdAt: Date;
}

const CHANNEL_COLUMNS = `line_oa_id as "lineOaId", organization_id as "organizationId", channel_id as "channelId",
  token_kind as "tokenKind", sealed_token as "sealedToken", client_id as "clientId",
  sealed_client_secret as "sealedClientSecret", sealed_issued_token as "sealedIssuedToken",
  issued_expires_at as "issuedExpiresAt", created_at as "createdAt", updated_at as "updatedAt"`;

const AUDIENCE_COLUMNS = `audience_id as "audienceId", organization_id as "organizationId", name, members,
  sealed_at as "sealedAt", created_at as "createdAt"`;

/** Registers a channel, or replaces the credentials of the organization's own one (another's: no row). */
export const UPSERT_LINE_CHANNEL = `
  insert into line_channel (line_oa_id, organization_id, channel_id, token_kind, sealed_token, client_id,
                            sealed_client_secret)
  values ($1, $2, $3, $4, $5, $6, $7)
  on conflict (line_oa_id) do update
     set channel_id = excluded.channel_id, token_kind = excluded.token_kind,
         sealed_token = excluded.sealed_token, client_id = excluded.client_id,
         sealed_client_secret = excluded.sealed_client_secret,
         sealed_issued_token = null, issued_expires_at = null, updated_at = now()
   where line_channel.organization_id = excluded.organization_id
  returning ${CHANNEL_COLUMNS}`;

export const SELECT_LINE_CHANNEL = `select ${CHANNEL_COLUMNS} from line_channel where line_oa_id = $1`;

export const LIST_LINE_CHANNELS = `
  select ${CHANNEL_COLUMNS} from line_channel
   where ($1::text is null or organization_id = $1)
   order by line_oa_id`;

export const DELETE_LINE_CHANNEL = `
  delete from line_channel where line_oa_id = $1 and ($2::text is null or organization_id = $2)
  returning ${CHANNEL_COLUMNS}`;

/** Caches an issued short-lived token: only one that outlives the cached one replaces it. */
export const STORE_ISSUED_TOKEN = `
  update line_channel set sealed_issued_token = $2, issued_expires_at = $3, updated_at = now()
   where line_oa_id = $1 and token_kind = 'short_lived'
     and (issued_expires_at is null or issued_expires_at < $3)`;

/** Forgets an issued token LINE refused (401), unless another pod already replaced it. */
export const FORGET_ISSUED_TOKEN = `
  update line_channel set sealed_issued_token = null, issued_expires_at = null, updated_at = now()
   where line_oa_id = $1 and sealed_issued_token = $2`;

/** A key rotation's re-seal of one row, only if its sealed values are still the ones it read. */
export const RESEAL_LINE_CHANNEL = `
  update line_channel
     set sealed_token = $2, sealed_client_secret = $3, sealed_issued_token = $4, updated_at = now()
   where line_oa_id = $1 and sealed_token is not distinct from $5
     and sealed_client_secret is not distinct from $6 and sealed_issued_token is not distinct from $7`;

export const INSERT_LINE_AUDIENCE = `
  insert into line_audience (audience_id, organization_id, name) values ($1, $2, $3)
  on conflict (audience_id) do nothing
  returning ${AUDIENCE_COLUMNS}`;

export const SELECT_LINE_AUDIENCE = `select ${AUDIENCE_COLUMNS} from line_audience where audience_id = $1`;

export const LOCK_LINE_AUDIENCE = `select ${AUDIENCE_COLUMNS} from line_audience where audience_id = $1 for update`;

/** The organization's audiences after the cursor, by id. */
export const LIST_LINE_AUDIENCES = `
  select ${AUDIENCE_COLUMNS} from line_audience
   where organization_id = $1 and ($2::text is null or audience_id > $2)
   order by audience_id limit $3`;

/** Adds members to an unsealed audience (its row is locked by the caller); repeats are ignored. */
export const ADD_LINE_AUDIENCE_MEMBERS = `
  with added as (
    insert into line_audience_member (audience_id, user_id)
    select $1, u from unnest($2::text[]) as u
    on conflict do nothing
    returning 1
  )
  update line_audience set members = members + (select count(*) from added)
   where audience_id = $1 and sealed_at is null
  returning members`;

export const SEAL_LINE_AUDIENCE = `
  update line_audience set sealed_at = now()
   where audience_id = $1 and organization_id = $2 and sealed_at is null and members > 0
  returning ${AUDIENCE_COLUMNS}`;

/**
 * Keyset pages of an audience's user ids in byte order (the chunk cursor's order): the first page, and
 * the page after a cursor. Two statements rather than one with `($2 is null or user_id > $2)`: both are
 * prepared statements, and that OR has no index condition in a generic plan (PostgreSQL reads the whole
 * audience up to the cursor and filters, O(members) per page), so the planner had to re-plan it on every
 * execution to stay on the primary key's range; each of these is a range scan of that index as it stands.
 */
export const LINE_AUDIENCE_FIRST_MEMBERS = `
  select user_id from line_audience_member
   where audience_id = $1
   order by user_id collate "C" limit $2`;

export const LINE_AUDIENCE_MEMBERS_AFTER = `
  select user_id from line_audience_member
   where audience_id = $1 and user_id > $2::text collate "C"
   order by user_id collate "C" limit $3`;

export async function upsertLineChannel(
  sql: SqlClient,
  c: Pick<
    LineChannelRow,
    | 'lineOaId'
    | 'organizationId'
    | 'channelId'
    | 'tokenKind'
    | 'sealedToken'
    | 'clientId'
    | 'sealedClientSecret'
  >,
): Promise<LineChannelRow | null> {
  const { rows } = await sql.query<LineChannelRow>(UPSERT_LINE_CHANNEL, [
    c.lineOaId,
    c.organizationId,
    c.channelId,
    c.tokenKind,
    c.sealedToken,
    c.clientId,
    c.sealedClientSecret,
  ]);
  return rows[0] ?? null;
}

export async function selectLineChannel(sql: SqlClient, lineOaId: string): Promise<LineChannelRow | null> {
  const { rows } = await sql.query<LineChannelRow>(SELECT_LINE_CHANNEL, [lineOaId]);
  return rows[0] ?? null;
}

export async function listLineChannels(
  sql: SqlClient,
  organizationId: string | null,
): Promise<LineChannelRow[]> {
  return (await sql.query<LineChannelRow>(LIST_LINE_CHANNELS, [organizationId])).rows;
}

export async function deleteLineChannel(
  sql: SqlClient,
  lineOaId: string,
  organizationId: string | null,
): Promise<LineChannelRow | null> {
  const { rows } = await sql.query<LineChannelRow>(DELETE_LINE_CHANNEL, [lineOaId, organizationId]);
  return rows[0] ?? null;
}

export async function storeIssuedToken(sql: SqlClient, lineOaId: string, sealed: string, expiresAt: Date) {
  await sql.query(STORE_ISSUED_TOKEN, [lineOaId, sealed, expiresAt]);
}

export async function forgetIssuedToken(sql: SqlClient, lineOaId: string, sealed: string) {
  await sql.query(FORGET_ISSUED_TOKEN, [lineOaId, sealed]);
}

type SealedValues = Pick<LineChannelRow, 'sealedToken' | 'sealedClientSecret' | 'sealedIssuedToken'>;

export async function resealLineChannel(
  sql: SqlClient,
  lineOaId: string,
  resealed: SealedValues,
  read: SealedValues,
): Promise<boolean> {
  const { rowCount } = await sql.query(RESEAL_LINE_CHANNEL, [
    lineOaId,
    resealed.sealedToken,
    resealed.sealedClientSecret,
    resealed.sealedIssuedToken,
    read.sealedToken,
    read.sealedClientSecret,
    read.sealedIssuedToken,
  ]);
  return rowCount === 1;
}

export async function insertLineAudience(
  sql: SqlClient,
  a: Pick<LineAudienceRow, 'audienceId' | 'organizationId' | 'name'>,
): Promise<LineAudienceRow | null> {
  const { rows } = await sql.query<LineAudienceRow>(INSERT_LINE_AUDIENCE, [
    a.audienceId,
    a.organizationId,
    a.name,
  ]);
  return rows[0] ?? null;
}

export async function selectLineAudience(
  sql: SqlClient,
  audienceId: string,
  options: { lock?: boolean } = {},
): Promise<LineAudienceRow | null> {
  const { rows } = await sql.query<LineAudienceRow>(
    options.lock ? LOCK_LINE_AUDIENCE : SELECT_LINE_AUDIENCE,
    [audienceId],
  );
  return rows[0] ?? null;
}

export async function listLineAudiences(
  sql: SqlClient,
  organizationId: string,
  after: string | null,
  limit: number,
): Promise<LineAudienceRow[]> {
  return (await sql.query<LineAudienceRow>(LIST_LINE_AUDIENCES, [organizationId, after, limit])).rows;
}

/** The audience's member count after the insert (null: sealed meanwhile — the caller holds the lock). */
export async function addLineAudienceMembers(
  sql: SqlClient,
  audienceId: string,
  userIds: readonly string[],
): Promise<number | null> {
  const { rows } = await sql.query<{ members: number }>(ADD_LINE_AUDIENCE_MEMBERS, [audienceId, userIds]);
  return rows[0]?.members ?? null;
}

export async function sealLineAudience(
  sql: SqlClient,
  audienceId: string,
  organizationId: string,
): Promise<LineAudienceRow | null> {
  const { rows } = await sql.query<LineAudienceRow>(SEAL_LINE_AUDIENCE, [audienceId, organizationId]);
  return rows[0] ?? null;
}

export async function lineAudienceMembersPage(
  sql: SqlClient,
  audienceId: string,
  after: string | null,
  limit: number,
): Promise<string[]> {
  const { rows } =
    after === null
      ? await sql.query<{ user_id: string }>(LINE_AUDIENCE_FIRST_MEMBERS, [audienceId, limit])
      : await sql.query<{ user_id: string }>(LINE_AUDIENCE_MEMBERS_AFTER, [audienceId, after, limit]);
  return rows.map((row) => row.user_id);
}
