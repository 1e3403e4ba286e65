/**
 * Campaign state table queries: the inline projection of campaign streams (invariant 1), batch
 * claims for the scanner and the reaper (FOR UPDATE SKIP LOCKED: any number of scanners, invariant
 * 7), and the due-time look-ups that arm the scanner's timer. Writes are guarded by the stream
 * version they expect; a row that moved on makes the whole transaction fail with ConcurrencyError.
 * Time comparisons use the database's now() (invariant 6).
 */
import type { ExistingCampaign } from '../../domain/campaign.js';
import { ConcurrencyError, ConflictError } from '../../errors.js';
import type { SqlClient } from '../../ports/database.js';

/** Column ↔ state field, with the array type used by batch statements. */
const COLUMNS = [
  ['id', 'uuid', 'campaignId'],
  ['organization_id', 'text', 'organizationId'],
  ['channel', 'text', 'channel'],
  ['cast_type', 'text', 'castType'],
  ['audience_id', 'text', 'audienceId'],
  ['line_oa_id', 'text', 'lineOaId'],
  ['name', 'text', 'name'],
  ['idempotency_key', 'text', 'idempotencyKey'],
  ['status', 'text', 'status'],
  ['start_at', 'timestamptz', 'startAt'],
  ['dispatch_deadline', 'timestamptz', 'dispatchDeadline'],
  ['claim_epoch', 'int', 'claimEpoch'],
  ['claimed_at', 'timestamptz', 'claimedAt'],
  ['paused_from', 'text', 'pausedFrom'],
  ['deleted_at', 'timestamptz', 'deletedAt'],
  ['resend_attempt', 'int', 'resendAttempt'],
  ['failure_reason', 'text', 'failureReason'],
  ['created_at', 'timestamptz', 'createdAt'],
  ['status_changed_at', 'timestamptz', 'statusChangedAt'],
] as const satisfies readonly (readonly [string, string, keyof ExistingCampaign])[];

const TIME_FIELDS = new Set(COLUMNS.filter(([, type]) => type === 'timestamptz').map(([, , field]) => field));
const columnList = COLUMNS.map(([column]) => column).join(', ');
const unnestArgs = COLUMNS.map(([, type], i) => `$${i + 1}::${type}[]`).join(', ');
const VERSION_ARG = COLUMNS.length + 1;
const EXPECTED_ARG = COLUMNS.length + 2;

export const SELECT_CAMPAIGN = `select ${columnList}, version from campaign where id = $1`;
export const SELECT_CAMPAIGN_FOR_UPDATE = `${SELECT_CAMPAIGN} for update`;

export const INSERT_CAMPAIGNS = `
  insert into campaign (${columnList}, version)
  select * from unnest(${unnestArgs}, $${VERSION_ARG}::int[])`;

export const UPDATE_CAMPAIGNS = `
  update campaign c
     set ${COLUMNS.filter(([column]) => column !== 'id')
       .map(([column]) => `${column} = s.${column}`)
       .join(', ')}, version = s.version
    from unnest(${unnestArgs}, $${VERSION_ARG}::int[], $${EXPECTED_ARG}::int[])
           as s(${columnList}, version, expected_version)
   where c.id = s.id and c.version = s.expected_version`;

/** Due campaigns (SCHEDULED at or past start_at, or QUEUED), oldest first, locked for this claim. */
export const LOCK_DUE_CAMPAIGNS = `
  select ${columnList}, version from campaign
   where status in ('SCHEDULED', 'QUEUED') and deleted_at is null
     and (start_at is null or start_at <= now() or status = 'QUEUED')
   order by start_at nulls first, id
   limit $1
   for update skip locked`;

/**
 * "Stale" exactly as the decider's ReclaimCampaign judges it: whole milliseconds (the decider sees times
 * as ISO strings), `now - claimedAt > staleAfterMs`. Both sides truncated to the millisecond, the test
 * is `claimed_at < date_trunc('milliseconds', now()) - staleAfterMs` (the bound is whole milliseconds,
 * so the untruncated column compares the same) — and the index on claimed_at still serves it.
 */
const STALE_CLAIMED_AT = `date_trunc('milliseconds', now()) - make_interval(secs => $1 / 1000.0)`;

/** Live claims whose claim or last heartbeat is older than the stale threshold, oldest first (no lock). */
export const FIND_STALE_CLAIMS = `
  select ${columnList}, version from campaign
   where status = 'DISPATCHING' and claimed_at < ${STALE_CLAIMED_AT}
   order by claimed_at
   limit $2`;

/** Locks the given stale claims, each only while still stale and at the version it was found at. */
export const LOCK_STALE_CLAIMS = `
  select ${COLUMNS.map(([column]) => `c.${column}`).join(', ')}, c.version
    from campaign c
    join unnest($2::uuid[], $3::int[]) as found(id, version) on c.id = found.id and c.version = found.version
   where c.status = 'DISPATCHING' and c.claimed_at < ${STALE_CLAIMED_AT}
   order by c.claimed_at
   for update of c skip locked`;

/** CANCELLING campaigns, oldest first, locked for settling their cancellation. */
export const LOCK_CANCELLING_CAMPAIGNS = `
  select ${columnList}, version from campaign
   where status = 'CANCELLING'
   order by status_changed_at
   limit $1
   for update skip locked`;

/** Milliseconds until the next SCHEDULED campaign becomes due (null: none), by the database clock. */
export const NEXT_CAMPAIGN_DUE_IN_MS = `
  select (extract(epoch from (min(start_at) - now())) * 1000)::float8 as due_in_ms
    from campaign where status = 'SCHEDULED' and deleted_at is null`;

/**
 * Several campaign rows by id (verify compares them with the folded streams). A join with unnest()
 * rather than `id = any($1)`: for a few thousand ids the planner prefers a (parallel) sequential scan
 * of the whole table for `= any`, ~6× slower than the index look-ups the join gets.
 */
export const SELECT_CAMPAIGNS = `
  select ${COLUMNS.map(([column]) => `c.${column}`).join(', ')}, c.version
    from unnest($1::uuid[]) as wanted(id) join campaign c on c.id = wanted.id`;

/** The same, locked, in id order (concurrent batches lock in one order). */
export const SELECT_CAMPAIGNS_FOR_UPDATE = `${SELECT_CAMPAIGNS} order by c.id for update of c`;

/** Campaign rows that no campaign event stream explains (verify: a state row without events). */
export const CAMPAIGNS_WITHOUT_EVENTS = `
  select c.id::text as id from campaign c
   where not exists (select 1 from event e where e.stream_type = 'campaign' and e.stream_id = c.id::text)
   order by c.id
   limit $1`;

/** The immutable fields that place a campaign in dispatch statistics (organization, channel, cast type). */
export const SELECT_CAMPAIGN_DISPATCH_KEYS = `
  select c.id::text as id, c.organization_id, c.channel, c.cast_type
    from unnest($1::uuid[]) as wanted(id) join campaign c on c.id = wanted.id`;

type CampaignRow = Record<(typeof COLUMNS)[number][0], unknown> & { version: number };

export function campaignFromRow(row: CampaignRow): { state: ExistingCampaign; version: number } {
  const state: Record<string, unknown> = {};
  for (const [column, , field] of COLUMNS) {
    const value = row[column];
    state[field] = value instanceof Date ? value.toISOString() : (value ?? null);
  }
  return { state: state as unknown as ExistingCampaign, version: row.version };
}

function columnArrays(states: readonly ExistingCampaign[]): unknown[][] {
  return COLUMNS.map(([, , field]) =>
    states.map((state) => {
      const value = (state as unknown as Record<string, unknown>)[field];
      return TIME_FIELDS.has(field) || value !== undefined ? (value ?? null) : null;
    }),
  );
}

export async function loadCampaign(
  sql: SqlClient,
  id: string,
  options: { forUpdate?: boolean } = {},
): Promise<{ state: ExistingCampaign; version: number } | null> {
  if (!/^[0-9a-f-]{36}$/i.test(id)) return null;
  const { rows } = await sql.query<CampaignRow>(
    options.forUpdate ? SELECT_CAMPAIGN_FOR_UPDATE : SELECT_CAMPAIGN,
    [id],
  );
  return rows[0] ? campaignFromRow(rows[0]) : null;
}

export interface CampaignWrite {
  state: ExistingCampaign;
  version: number;
  expectedVersion: number;
}

/** Inserts new campaign rows and updates existing ones, each guarded by its expected version. */
export async function saveCampaigns(sql: SqlClient, writes: readonly CampaignWrite[]): Promise<void> {
  const inserts = writes.filter((w) => w.expectedVersion === 0);
  const updates = writes.filter((w) => w.expectedVersion > 0);
  if (inserts.length > 0) {
    try {
      await sql.query(INSERT_CAMPAIGNS, [
        ...columnArrays(inserts.map((w) => w.state)),
        inserts.map((w) => w.version),
      ]);
    } catch (error) {
      const pgError = error as { code?: string; constraint?: string };
      if (pgError.code === '23505' && pgError.constraint === 'campaign_idempotency_idx') {
        const keyed = inserts.find((w) => w.state.idempotencyKey !== null)?.state;
        throw new ConflictError(
          `organization ${keyed?.organizationId} already has a campaign with idempotency key '${keyed?.idempotencyKey}'`,
          {
            field: 'idempotencyKey',
            organizationId: keyed?.organizationId,
            idempotencyKey: keyed?.idempotencyKey,
          },
        );
      }
      throw error;
    }
  }
  if (updates.length > 0) {
    const { rowCount } = await sql.query(UPDATE_CAMPAIGNS, [
      ...columnArrays(updates.map((w) => w.state)),
      updates.map((w) => w.version),
      updates.map((w) => w.expectedVersion),
    ]);
    if (rowCount !== updates.length) {
      throw new ConcurrencyError(`${updates.length - rowCount} campaign row(s) changed concurrently`);
    }
  }
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

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Loads campaign rows by id; ids that are not uuids or have no row are absent from the map. */
export async function loadCampaigns(
  sql: SqlClient,
  ids: readonly string[],
  options: { forUpdate?: boolean } = {},
): Promise<Map<string, { state: ExistingCampaign; version: number }>> {
  const valid = [...new Set(ids.filter((id) => UUID.test(id)))];
  if (valid.length === 0) return new Map();
  const { rows } = await sql.query<CampaignRow>(
    options.forUpdate ? SELECT_CAMPAIGNS_FOR_UPDATE : SELECT_CAMPAIGNS,
    [valid],
  );
  return new Map(rows.map((row) => [String(row.id), campaignFromRow(row)]));
}

export async function campaignsWithoutEvents(sql: SqlClient, limit: number): Promise<string[]> {
  const { rows } = await sql.query<{ id: string }>(CAMPAIGNS_WITHOUT_EVENTS, [limit]);
  return rows.map((row) => row.id);
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
  const valid = [...new Set(ids.filter((id) => UUID.test(id)))];
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
