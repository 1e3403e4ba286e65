/**
 * Campaign state table queries: the inline projection of campaign streams (invariant 1), batch
 * claims for the scanner and the reaper (FOR UPDATE SKIP LOCKED: any number of scanners, invariant
 * 7), and the due-time look-ups that arm the scanner's timer. Writes are guarded by the stream
 * version they expect; a row that moved on makes the whole transaction fail with ConcurrencyError.
 * Time comparisons use the database's now() (invariant 6).
 */
import { type ExistingCampaign, normalizeSmsFacts, unsent } from '../../domain/campaign.js';
import { ConflictError } from '../../errors.js';
import type { SqlClient } from '../../ports/database.js';
import { STALE_CLAIMED_AT } from './claim-liveness-queries.js';
import { isUuid, stateTable } from './state-table.js';

/** The state table: one column per state field (src/adapters/postgres/state-table.ts). */
export const campaignTable = stateTable<ExistingCampaign>({
  table: 'campaign',
  streamType: 'campaign',
  key: { column: 'id', type: 'uuid', field: 'campaignId' },
  columns: [
    { column: 'organization_id', type: 'text', field: 'organizationId' },
    { column: 'channel', type: 'text', field: 'channel' },
    { column: 'cast_type', type: 'text', field: 'castType' },
    { column: 'audience_id', type: 'text', field: 'audienceId' },
    { column: 'line_oa_id', type: 'text', field: 'lineOaId' },
    { column: 'name', type: 'text', field: 'name' },
    { column: 'idempotency_key', type: 'text', field: 'idempotencyKey' },
    { column: 'request_idempotency_key', type: 'text', field: 'requestIdempotencyKey' },
    { column: 'status', type: 'text', field: 'status' },
    { column: 'start_at', type: 'timestamptz', field: 'startAt' },
    { column: 'dispatch_deadline', type: 'timestamptz', field: 'dispatchDeadline' },
    { column: 'claim_epoch', type: 'int', field: 'claimEpoch' },
    { column: 'claimed_at', type: 'timestamptz', field: 'claimedAt' },
    { column: 'paused_from', type: 'text', field: 'pausedFrom' },
    { column: 'pause_reason', type: 'text', field: 'pauseReason' },
    { column: 'deleted_at', type: 'timestamptz', field: 'deletedAt' },
    { column: 'resend_attempt', type: 'int', field: 'resendAttempt' },
    { column: 'failure_reason', type: 'text', field: 'failureReason' },
    { column: 'created_at', type: 'timestamptz', field: 'createdAt' },
    { column: 'status_changed_at', type: 'timestamptz', field: 'statusChangedAt' },
    // Facts stored before SMS part 2 lack its fields: read back with their defaults (what a replay gives).
    { column: 'sms', type: 'jsonb', field: 'sms', read: normalizeSmsFacts },
    { column: 'line', type: 'jsonb', field: 'line' },
    // Written from the SMS facts for the dispatch sweep's index (pending + deferred recipients).
    { column: 'sms_unsent', type: 'int', compute: (state) => unsent(state.sms) },
  ],
  onUniqueViolation(constraint, inserted) {
    if (constraint !== 'campaign_idempotency_idx') return undefined;
    const keyed = inserted.find((state) => state.idempotencyKey !== null);
    return new ConflictError(
      `organization ${keyed?.organizationId} already has a campaign with idempotency key '${keyed?.idempotencyKey}'`,
      {
        field: 'idempotencyKey',
        organizationId: keyed?.organizationId,
        idempotencyKey: keyed?.idempotencyKey,
      },
    );
  },
});

const columnList = campaignTable.columnList;
export const SELECT_CAMPAIGN = campaignTable.select;
export const SELECT_CAMPAIGN_FOR_UPDATE = campaignTable.selectForUpdate;
export const UPDATE_CAMPAIGNS = campaignTable.update;

/**
 * Due campaigns (SCHEDULED at or past start_at, or QUEUED), oldest first, locked for this claim. An SMS
 * campaign past its dispatch deadline is not this claim's to expire: the `sms:recovery` poller expires
 * it together with the withdrawal and refund of its unsent recipients.
 */
export const LOCK_DUE_CAMPAIGNS = `
  select ${columnList}, version from campaign
   where status in ('SCHEDULED', 'QUEUED') and deleted_at is null
     and (start_at is null or start_at <= now() or status = 'QUEUED')
     and not (channel = 'sms' and sms is not null and status = 'SCHEDULED'
              and dispatch_deadline is not null and dispatch_deadline < now())
   order by start_at nulls first, id
   limit $1
   for update skip locked`;

/**
 * Live LINE claims whose claim or last heartbeat is older than the stale threshold, oldest first (no
 * lock). SMS campaigns are not this reaper's: their dispatch holds no process-bound claim (each batch is
 * its own transaction, any scanner continues it), and their stale recovery is seed 003's (ADR 0014).
 */
export const FIND_STALE_CLAIMS = `
  select ${columnList}, version from campaign
   where status = 'DISPATCHING' and channel = 'line' and claimed_at < ${STALE_CLAIMED_AT}
   order by claimed_at
   limit $2`;

/** Locks the given stale claims, each only while still stale and at the version it was found at. */
export const LOCK_STALE_CLAIMS = `
  select ${campaignTable.qualified}, t.version
    from campaign t
    join unnest($2::uuid[], $3::int[]) as found(id, version) on t.id = found.id and t.version = found.version
   where t.status = 'DISPATCHING' and t.channel = 'line' and t.claimed_at < ${STALE_CLAIMED_AT}
   order by t.claimed_at
   for update of t skip locked`;

/**
 * CANCELLING campaigns with nothing to refund (LINE, uncharged SMS), oldest first, locked for settling
 * their cancellation; a charged SMS campaign settles when its refunds do (ADR 0014).
 */
export const LOCK_CANCELLING_CAMPAIGNS = `
  select ${columnList}, version from campaign
   where status = 'CANCELLING' and (sms is null or sms->>'chargeKey' is null)
   order by status_changed_at
   limit $1
   for update skip locked`;

/** Milliseconds until the next SCHEDULED campaign becomes due (null: none), by the database clock. */
export const NEXT_CAMPAIGN_DUE_IN_MS = `
  select (extract(epoch from (min(start_at) - now())) * 1000)::float8 as due_in_ms
    from campaign where status = 'SCHEDULED' and deleted_at is null`;

/** The immutable fields that place a campaign in dispatch statistics (organization, channel, cast type). */
export const SELECT_CAMPAIGN_DISPATCH_KEYS = `
  select c.id::text as id, c.organization_id, c.channel, c.cast_type
    from unnest($1::uuid[]) as wanted(id) join campaign c on c.id = wanted.id`;

type CampaignRow = Record<string, unknown> & { version: number };

export const campaignFromRow = campaignTable.fromRow;

export function loadCampaign(sql: SqlClient, id: string, options: { forUpdate?: boolean } = {}) {
  return campaignTable.load(sql, id, options);
}

export interface CampaignWrite {
  state: ExistingCampaign;
  version: number;
  expectedVersion: number;
}

/** Inserts new campaign rows and updates existing ones, each guarded by its expected version. */
export function saveCampaigns(sql: SqlClient, writes: readonly CampaignWrite[]): Promise<void> {
  return campaignTable.save(sql, writes);
}

export async function lockDueCampaigns(sql: SqlClient, limit: number) {
  const { rows } = await sql.query<CampaignRow>(LOCK_DUE_CAMPAIGNS, [limit]);
  return rows.map(campaignFromRow);
}

export async function lockCancellingCampaigns(sql: SqlClient, limit: number) {
  const { rows } = await sql.query<CampaignRow>(LOCK_CANCELLING_CAMPAIGNS, [limit]);
  return rows.map(campaignFromRow);
}

export async function findStaleClaims(sql: SqlClient, staleAfterMs: number, limit: number) {
  const { rows } = await sql.query<CampaignRow>(FIND_STALE_CLAIMS, [staleAfterMs, limit]);
  return rows.map(campaignFromRow);
}

export async function lockStaleClaims(
  sql: SqlClient,
  found: readonly { streamId: string; version: number }[],
  staleAfterMs: number,
) {
  if (found.length === 0) return [];
  const { rows } = await sql.query<CampaignRow>(LOCK_STALE_CLAIMS, [
    staleAfterMs,
    found.map((f) => f.streamId),
    found.map((f) => f.version),
  ]);
  return rows.map(campaignFromRow);
}

export async function nextCampaignDueInMs(sql: SqlClient): Promise<number | null> {
  const { rows } = await sql.query<{ due_in_ms: number | null }>(NEXT_CAMPAIGN_DUE_IN_MS);
  const dueInMs = rows[0]?.due_in_ms ?? null;
  // Not greatest(0, …) in SQL: it ignores NULL, and "nothing scheduled" would read as "due now".
  return dueInMs === null ? null : Math.max(0, dueInMs);
}

export const SELECT_CAMPAIGN_BY_IDEMPOTENCY_KEY = `
  select id::text as id from campaign where organization_id = $1 and idempotency_key = $2`;

/** The campaign an organization created with an idempotency key, if any. */
export async function findCampaignByIdempotencyKey(
  sql: SqlClient,
  organizationId: string,
  idempotencyKey: string,
): Promise<string | null> {
  const { rows } = await sql.query<{ id: string }>(SELECT_CAMPAIGN_BY_IDEMPOTENCY_KEY, [
    organizationId,
    idempotencyKey,
  ]);
  return rows[0]?.id ?? null;
}

/**
 * An organization's campaigns, newest first, after a keyset cursor (created_at, id), optionally of one
 * status and channel, without soft-deleted ones unless asked: an index range scan of
 * campaign_organization_idx or, with a status, campaign_organization_status_idx (migration 000009), or
 * with a channel campaign_organization_channel_idx; the dashboard's search (migration 000013) is an id
 * (the primary key) or a case-insensitive name prefix (campaign_organization_name_idx), and a creation
 * time range.
 */
const LIST_FILTERS = `organization_id = $1
     and ($2::text is null or status = $2)
     and ($3::text is null or channel = $3)
     and ($4::boolean or deleted_at is null)
     and ($5::timestamptz is null or (created_at, id) < ($5, $6::uuid))
     and ($8::uuid is null or id = $8)
     and ($9::text is null or lower(name) like $9 escape '\\')
     and ($10::timestamptz is null or created_at >= $10)
     and ($11::timestamptz is null or created_at < $11)`;

export const LIST_ORGANIZATION_CAMPAIGNS = `
  select ${columnList}, version from campaign
   where ${LIST_FILTERS}
   order by created_at desc, id desc
   limit $7`;

/**
 * A name search with few matches (at most NAME_SEARCH_FENCE): the matches first, from
 * campaign_organization_name_idx, then sorted. Without the fence the planner walks the whole
 * organization newest first, filtering, when the matches are old (87,000 rows for 51 matches).
 */
export const NAME_SEARCH_FENCE = 2_000;
export const COUNT_NAME_MATCHES = `
  select count(*)::int as n from (
    select 1 from campaign where organization_id = $1 and lower(name) like $2 escape '\\'
     limit ${NAME_SEARCH_FENCE + 1}) matches`;
export const LIST_ORGANIZATION_CAMPAIGNS_BY_NAME = `
  with campaign as materialized (
    select * from campaign where organization_id = $1 and lower(name) like $9 escape '\\')
  select ${columnList}, version from campaign
   where ${LIST_FILTERS}
   order by created_at desc, id desc
   limit $7`;

export interface CampaignListFilter {
  organizationId: string;
  status?: ExistingCampaign['status'];
  channel?: ExistingCampaign['channel'];
  includeDeleted?: boolean;
  /** The last campaign of the previous page. */
  before?: { createdAt: string; id: string } | null;
  limit: number;
  /** Exactly this campaign id. */
  id?: string;
  /** Names starting with this, case-insensitive. */
  namePrefix?: string;
  createdFrom?: string;
  createdTo?: string;
}

/** A LIKE pattern matching names that start with `prefix` (its wildcards taken literally). */
const prefixPattern = (prefix: string) => `${prefix.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

export async function listOrganizationCampaigns(
  sql: SqlClient,
  filter: CampaignListFilter,
): Promise<ExistingCampaign[]> {
  const pattern = filter.namePrefix === undefined ? null : prefixPattern(filter.namePrefix);
  let query = LIST_ORGANIZATION_CAMPAIGNS;
  if (pattern !== null) {
    const { rows: counted } = await sql.query<{ n: number }>(COUNT_NAME_MATCHES, [
      filter.organizationId,
      pattern,
    ]);
    if (counted[0]!.n <= NAME_SEARCH_FENCE) query = LIST_ORGANIZATION_CAMPAIGNS_BY_NAME;
  }
  const { rows } = await sql.query<CampaignRow>(query, [
    filter.organizationId,
    filter.status ?? null,
    filter.channel ?? null,
    filter.includeDeleted ?? false,
    filter.before?.createdAt ?? null,
    filter.before?.id ?? null,
    filter.limit,
    filter.id ?? null,
    pattern,
    filter.createdFrom ?? null,
    filter.createdTo ?? null,
  ]);
  return rows.map((row) => campaignFromRow(row).state);
}

/** Loads campaign rows by id; ids that are not uuids or have no row are absent from the map. */
export function loadCampaigns(sql: SqlClient, ids: readonly string[], options: { forUpdate?: boolean } = {}) {
  return campaignTable.loadMany(sql, ids, options);
}

export function campaignsWithoutEvents(sql: SqlClient, limit: number): Promise<string[]> {
  return campaignTable.rowsWithoutEvents(sql, limit);
}

export interface CampaignDispatchKey {
  organizationId: string;
  channel: ExistingCampaign['channel'];
  castType: ExistingCampaign['castType'];
}

export async function campaignDispatchKeys(
  sql: SqlClient,
  ids: readonly string[],
): Promise<Map<string, CampaignDispatchKey>> {
  const valid = [...new Set(ids.filter(isUuid))];
  if (valid.length === 0) return new Map();
  const { rows } = await sql.query<{
    id: string;
    organization_id: string;
    channel: ExistingCampaign['channel'];
    cast_type: ExistingCampaign['castType'];
  }>(SELECT_CAMPAIGN_DISPATCH_KEYS, [valid]);
  return new Map(
    rows.map((row) => [
      row.id,
      { organizationId: row.organization_id, channel: row.channel, castType: row.cast_type },
    ]),
  );
}
