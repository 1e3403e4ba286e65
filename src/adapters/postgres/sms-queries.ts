/**
 * SMS campaign queries (seed 003; ADR 0014): recipients (frozen rows, the dispatcher's claim and its
 * guarded status changes), CSV uploads (stored in chunks and read back one chunk at a time, the build
 * worker's claim and progress), and the due-time look-ups that arm the scanner's timer. Batches take
 * arrays (unnest); every status change is guarded in its WHERE and callers check the row count; times
 * come from the database (invariant 6).
 */
import type { FrozenRecipient } from '../../domain/sms/campaign-request.js';
import type { SqlClient } from '../../ports/database.js';
import { campaignTable } from './campaign-queries.js';

// ─── recipients ─────────────────────────────────────────────────────────────────────────────────────

/**
 * Saves frozen recipients of a campaign in one statement. A batch shares few distinct routes, zones and
 * (for GENERIC campaigns) contents, so those travel once as small dictionaries and each row carries
 * indexes into them; the cost is segments × rate, computed exactly in numeric.
 */
export const INSERT_RECIPIENTS = `
  insert into campaign_recipient (campaign_id, msisdn, operator, timezone, tags, content, encoding, segments,
                                  lang, sender, route_channel, mno_user, rate, cost)
  select $1::uuid, r.msisdn, rt.operator, z.zone, r.tags, c.content, c.encoding, c.segments,
         $2, rt.sender, rt.channel, rt.mno_user, rt.rate, c.segments * rt.rate
    from unnest($3::text[], $4::jsonb[], $5::int[], $6::int[], $7::int[]) with ordinality
           as r(msisdn, tags, content_ix, route_ix, zone_ix, n)
    join unnest($8::text[], $9::text[], $10::smallint[]) with ordinality as c(content, encoding, segments, ix)
      on c.ix = r.content_ix
    join unnest($11::text[], $12::text[], $13::text[], $14::text[], $15::numeric[]) with ordinality
           as rt(operator, sender, channel, mno_user, rate, ix) on rt.ix = r.route_ix
    join unnest($16::text[]) with ordinality as z(zone, ix) on z.ix = r.zone_ix
   order by r.n`;

/** Values → their 1-based position in a list of distinct values. */
class Dictionary<T> {
  readonly values: T[] = [];
  private readonly index = new Map<string, number>();
  constructor(private readonly keyOf: (value: T) => string) {}
  add(value: T): number {
    const key = this.keyOf(value);
    let at = this.index.get(key);
    if (at === undefined) {
      this.values.push(value);
      at = this.values.length;
      this.index.set(key, at);
    }
    return at;
  }
}

export async function insertRecipients(
  sql: SqlClient,
  campaignId: string,
  lang: string,
  recipients: readonly FrozenRecipient[],
): Promise<void> {
  if (recipients.length === 0) return;
  const contents = new Dictionary<FrozenRecipient>((r) => r.content);
  const routes = new Dictionary<FrozenRecipient>(
    (r) => `${r.operator}\u0000${r.sender}\u0000${r.channel}\u0000${r.mnoUser}\u0000${r.rate}`,
  );
  const zones = new Dictionary<string>((z) => z);
  const msisdns: string[] = [];
  const tags: (string | null)[] = [];
  const contentIx: number[] = [];
  const routeIx: number[] = [];
  const zoneIx: number[] = [];
  let anyTags = false;
  for (const r of recipients) {
    msisdns.push(r.msisdn);
    tags.push(r.tags ? JSON.stringify(r.tags) : null);
    anyTags ||= r.tags !== null;
    contentIx.push(contents.add(r));
    routeIx.push(routes.add(r));
    zoneIx.push(zones.add(r.timezone));
  }
  const c = contents.values;
  const rt = routes.values;
  const { rowCount } = await sql.query(INSERT_RECIPIENTS, [
    campaignId,
    lang,
    msisdns,
    anyTags ? tags : [], // unnest pads a shorter array with nulls
    contentIx,
    routeIx,
    zoneIx,
    c.map((r) => r.content),
    c.map((r) => r.encoding),
    c.map((r) => r.segments),
    rt.map((r) => r.operator),
    rt.map((r) => r.sender),
    rt.map((r) => r.channel),
    rt.map((r) => r.mnoUser),
    rt.map((r) => r.rate),
    zones.values,
  ]);
  if (rowCount !== recipients.length) {
    throw new Error(`saved ${rowCount} of ${recipients.length} recipients of campaign ${campaignId}`);
  }
}

export const DELETE_RECIPIENTS = 'delete from campaign_recipient where campaign_id = $1';

/** Clears a campaign's saved recipients (a failed draft or build); returns how many. */
export async function deleteRecipients(sql: SqlClient, campaignId: string): Promise<number> {
  const { rowCount } = await sql.query(DELETE_RECIPIENTS, [campaignId]);
  return rowCount;
}

export interface ReadyRecipient {
  id: string;
  msisdn: string;
  operator: string;
  timezone: string;
  content: string;
  encoding: 'GSM7' | 'UCS2';
  segments: number;
  lang: string;
  sender: string;
  routeChannel: string;
  mnoUser: string;
  status: 'PENDING' | 'DEFERRED';
}

/** A campaign's unsent recipients that may be sent now, in order, locked (SKIP LOCKED: any number of dispatchers). */
export const LOCK_READY_RECIPIENTS = `
  select r.id::text as id, r.msisdn, r.operator, r.timezone, r.content, r.encoding, r.segments, r.lang, r.sender,
         r.route_channel as "routeChannel", r.mno_user as "mnoUser", r.status
    from campaign_recipient r
   where r.campaign_id = $1 and r.status in ('PENDING', 'DEFERRED') and r.next_allowed_at <= now()
   order by r.next_allowed_at, r.id
   limit $2
   for update of r skip locked`;

export async function lockReadyRecipients(
  sql: SqlClient,
  campaignId: string,
  limit: number,
): Promise<ReadyRecipient[]> {
  const { rows } = await sql.query<ReadyRecipient>(LOCK_READY_RECIPIENTS, [campaignId, limit]);
  return rows;
}

/** Submitted: linked to its submission, attempt counted (seed 003: only a submission counts an attempt). */
export const MARK_SUBMITTED = `
  update campaign_recipient r
     set status = 'SUBMITTED', submission_id = s.submission_id, attempts = r.attempts + 1,
         submitted_at = now(), next_allowed_at = '-infinity'
    from unnest($1::bigint[], $2::uuid[]) as s(id, submission_id)
   where r.id = s.id and r.status in ('PENDING', 'DEFERRED')`;

/** Deferred until its window opens (never dropped), each deferral counted on the row. */
export const MARK_DEFERRED = `
  update campaign_recipient r
     set status = 'DEFERRED', next_allowed_at = s.next_allowed_at, deferrals = r.deferrals + 1
    from unnest($1::bigint[], $2::timestamptz[]) as s(id, next_allowed_at)
   where r.id = s.id and r.status in ('PENDING', 'DEFERRED')`;

export async function markSubmitted(
  sql: SqlClient,
  rows: readonly { id: string; submissionId: string }[],
): Promise<number> {
  if (rows.length === 0) return 0;
  const { rowCount } = await sql.query(MARK_SUBMITTED, [
    rows.map((r) => r.id),
    rows.map((r) => r.submissionId),
  ]);
  return rowCount;
}

export async function markDeferred(
  sql: SqlClient,
  rows: readonly { id: string; nextAllowedAt: Date }[],
): Promise<number> {
  if (rows.length === 0) return 0;
  const { rowCount } = await sql.query(MARK_DEFERRED, [
    rows.map((r) => r.id),
    rows.map((r) => r.nextAllowedAt),
  ]);
  return rowCount;
}

/** DISPATCHING SMS campaigns with a recipient that may be sent now, least recently progressed first, locked. */
export const LOCK_DISPATCHABLE_CAMPAIGNS = `
  select ${campaignTable.qualified}, t.version from campaign t
   where t.status = 'DISPATCHING' and t.channel = 'sms' and t.sms_unsent > 0 and t.deleted_at is null
     and exists (select 1 from campaign_recipient r
                  where r.campaign_id = t.id and r.status in ('PENDING', 'DEFERRED') and r.next_allowed_at <= now())
   order by t.claimed_at
   limit $1
   for update of t skip locked`;

export async function lockDispatchableCampaigns(sql: SqlClient, limit: number) {
  const { rows } = await sql.query<Record<string, unknown> & { version: number }>(
    LOCK_DISPATCHABLE_CAMPAIGNS,
    [limit],
  );
  return campaignTable.rows(rows);
}

/**
 * Milliseconds until a DISPATCHING SMS campaign next has a recipient to send (null: none): its earliest
 * unsent recipient's next_allowed_at, but not before `activeGraceMs` after its last dispatch batch —
 * a campaign another scanner is dispatching right now (batch after batch) is left to it.
 */
export const NEXT_DISPATCH_DUE_IN_MS = `
  select (extract(epoch from (min(greatest(
            (select r.next_allowed_at from campaign_recipient r
              where r.campaign_id = c.id and r.status in ('PENDING', 'DEFERRED')
              order by r.next_allowed_at limit 1),
            c.claimed_at + make_interval(secs => $1 / 1000.0))) - now())) * 1000)::float8 as due_in_ms
    from campaign c
   where c.status = 'DISPATCHING' and c.channel = 'sms' and c.sms_unsent > 0 and c.deleted_at is null`;

export async function nextDispatchDueInMs(sql: SqlClient, activeGraceMs: number): Promise<number | null> {
  const { rows } = await sql.query<{ due_in_ms: number | null }>(NEXT_DISPATCH_DUE_IN_MS, [activeGraceMs]);
  const due = rows[0]?.due_in_ms ?? null;
  return due === null ? null : Math.max(0, due);
}

export interface RecipientRow {
  id: string;
  msisdn: string;
  operator: string;
  timezone: string;
  tags: Record<string, string> | null;
  content: string;
  encoding: string;
  segments: number;
  sender: string;
  routeChannel: string;
  mnoUser: string;
  rate: string;
  cost: string;
  status: string;
  nextAllowedAt: Date | null;
  deferrals: number;
  attempts: number;
  submissionId: string | null;
  submittedAt: Date | null;
}

export const SELECT_RECIPIENTS = `
  select r.id::text as id, r.msisdn, r.operator, r.timezone, r.tags, r.content, r.encoding, r.segments, r.sender,
         r.route_channel as "routeChannel", r.mno_user as "mnoUser", r.rate::text as rate, r.cost::text as cost,
         r.status, case when r.next_allowed_at = '-infinity' then null else r.next_allowed_at end as "nextAllowedAt",
         r.deferrals, r.attempts, r.submission_id::text as "submissionId", r.submitted_at as "submittedAt"
    from campaign_recipient r
   where r.campaign_id = $1 and r.id > $2::bigint
   order by r.id
   limit $3`;

/** A campaign's recipients in creation order, after a cursor (the last id of the previous page). */
export async function listRecipients(
  sql: SqlClient,
  campaignId: string,
  options: { after?: string; limit: number },
): Promise<RecipientRow[]> {
  const { rows } = await sql.query<RecipientRow>(SELECT_RECIPIENTS, [
    campaignId,
    options.after ?? '0',
    options.limit,
  ]);
  return rows;
}

// ─── uploads ────────────────────────────────────────────────────────────────────────────────────────

export const INSERT_UPLOAD = `
  insert into campaign_upload (id, campaign_id, organization_id, meta, file_name, size_bytes, sha256, chunks)
  values ($1, $2, $3, $4::jsonb, $5, 0, '', 0)`;
export const INSERT_UPLOAD_CHUNK =
  'insert into campaign_upload_chunk (upload_id, seq, data) values ($1, $2, $3)';
export const SEAL_UPLOAD =
  'update campaign_upload set size_bytes = $2, sha256 = $3, chunks = $4 where id = $1';
export const SELECT_UPLOAD_CHUNK = 'select data from campaign_upload_chunk where upload_id = $1 and seq = $2';

export async function insertUpload(
  sql: SqlClient,
  upload: { id: string; campaignId: string; organizationId: string; meta: unknown; fileName: string | null },
): Promise<void> {
  await sql.query(INSERT_UPLOAD, [
    upload.id,
    upload.campaignId,
    upload.organizationId,
    JSON.stringify(upload.meta),
    upload.fileName,
  ]);
}

export async function insertUploadChunk(
  sql: SqlClient,
  uploadId: string,
  seq: number,
  data: Buffer,
): Promise<void> {
  await sql.query(INSERT_UPLOAD_CHUNK, [uploadId, seq, data]);
}

export async function sealUpload(
  sql: SqlClient,
  uploadId: string,
  file: { sizeBytes: number; sha256: string; chunks: number },
): Promise<void> {
  await sql.query(SEAL_UPLOAD, [uploadId, file.sizeBytes, file.sha256, file.chunks]);
}

export async function readUploadChunk(sql: SqlClient, uploadId: string, seq: number): Promise<Buffer | null> {
  const { rows } = await sql.query<{ data: Buffer }>(SELECT_UPLOAD_CHUNK, [uploadId, seq]);
  return rows[0]?.data ?? null;
}

export interface UploadRow {
  id: string;
  campaignId: string;
  organizationId: string;
  /** CHARGING: every recipient saved, the charge unanswered and retried with its key (ADR 0023). */
  status: 'PENDING' | 'IN_PROGRESS' | 'CHARGING' | 'DONE' | 'FAILED';
  meta: Record<string, unknown>;
  fileName: string | null;
  sizeBytes: number;
  sha256: string;
  chunks: number;
  attempt: number;
  rowsRead: number;
  acceptedCount: number;
  rejectedCount: number;
  rejectedByReason: Record<string, number>;
  rejectedRows: RejectedRow[];
  error: string | null;
  heartbeatAt: Date | null;
  finishedAt: Date | null;
}

export const SELECT_UPLOAD = `
  select id::text, campaign_id::text as "campaignId", organization_id as "organizationId", status, meta,
         file_name as "fileName", size_bytes::float8 as "sizeBytes", sha256, chunks, attempt,
         rows_read::float8 as "rowsRead", accepted_count as "acceptedCount", rejected_count as "rejectedCount",
         rejected_by_reason as "rejectedByReason", rejected_rows as "rejectedRows", error, heartbeat_at as "heartbeatAt", finished_at as "finishedAt"
    from campaign_upload where campaign_id = $1`;

export async function loadUpload(sql: SqlClient, campaignId: string): Promise<UploadRow | null> {
  const { rows } = await sql.query<UploadRow>(SELECT_UPLOAD, [campaignId]);
  return rows[0] ?? null;
}

/**
 * BUILDING campaigns whose upload is PENDING, or IN_PROGRESS without a saved batch for `$2` ms (a stale
 * build), oldest upload first; campaign and upload rows locked (SKIP LOCKED: any number of workers).
 */
export const LOCK_DUE_BUILDS = `
  select ${campaignTable.qualified}, t.version
    from campaign t join campaign_upload u on u.campaign_id = t.id
   where t.status = 'BUILDING' and t.deleted_at is null and u.status in ('PENDING', 'IN_PROGRESS')
     and (u.status = 'PENDING' or u.heartbeat_at < now() - make_interval(secs => $2 / 1000.0))
   order by u.created_at
   limit $1
   for update of t, u skip locked`;

export async function lockDueBuilds(sql: SqlClient, limit: number, staleMs: number) {
  const { rows } = await sql.query<Record<string, unknown> & { version: number }>(LOCK_DUE_BUILDS, [
    limit,
    staleMs,
  ]);
  return campaignTable.rows(rows);
}

export const NEXT_BUILD_DUE_IN_MS = `
  select (extract(epoch from (min(case when u.status = 'PENDING' then u.created_at
                                       else u.heartbeat_at + make_interval(secs => $1 / 1000.0) end)
                              - now())) * 1000)::float8 as due_in_ms
    from campaign_upload u join campaign c on c.id = u.campaign_id
   where u.status in ('PENDING', 'IN_PROGRESS') and c.status = 'BUILDING' and c.deleted_at is null`;

export async function nextBuildDueInMs(sql: SqlClient, staleMs: number): Promise<number | null> {
  const { rows } = await sql.query<{ due_in_ms: number | null }>(NEXT_BUILD_DUE_IN_MS, [staleMs]);
  const due = rows[0]?.due_in_ms ?? null;
  return due === null ? null : Math.max(0, due);
}

export const START_UPLOAD_BUILD = `
  update campaign_upload set status = 'IN_PROGRESS', attempt = s.attempt, claimed_by = $3, heartbeat_at = now()
    from unnest($1::uuid[], $2::int[]) as s(campaign_id, attempt)
   where campaign_upload.campaign_id = s.campaign_id and campaign_upload.status in ('PENDING', 'IN_PROGRESS')`;

export async function startUploadBuilds(
  sql: SqlClient,
  builds: readonly { campaignId: string; attempt: number }[],
  owner: string,
): Promise<void> {
  const { rowCount } = await sql.query(START_UPLOAD_BUILD, [
    builds.map((b) => b.campaignId),
    builds.map((b) => b.attempt),
    owner,
  ]);
  if (rowCount !== builds.length)
    throw new Error(`${builds.length - rowCount} upload(s) changed during their claim`);
}

/** A row the build rejected: its line in the file, its MSISDN cell as written, why. */
export interface RejectedRow {
  line: number;
  value: string;
  reason: string;
}

export interface BuildProgress {
  rowsRead: number;
  accepted: number;
  rejected: number;
  rejectedByReason: Record<string, number>;
  /** The first rejected rows (REJECTED_ROWS_KEPT at most). */
  rejectedRows: RejectedRow[];
}

/** Rejected rows kept on an upload (the counts by reason cover the rest). */
export const REJECTED_ROWS_KEPT = 100;

/** Records a build's progress; false when the attempt no longer holds the upload (taken over). */
export const RECORD_UPLOAD_PROGRESS = `
  update campaign_upload
     set heartbeat_at = now(), rows_read = $3, accepted_count = $4, rejected_count = $5, rejected_by_reason = $6::jsonb,
         rejected_rows = $7::jsonb
   where campaign_id = $1 and attempt = $2 and status = 'IN_PROGRESS'`;

export async function recordUploadProgress(
  sql: SqlClient,
  campaignId: string,
  attempt: number,
  progress: BuildProgress,
): Promise<boolean> {
  const { rowCount } = await sql.query(RECORD_UPLOAD_PROGRESS, [
    campaignId,
    attempt,
    progress.rowsRead,
    progress.accepted,
    progress.rejected,
    JSON.stringify(progress.rejectedByReason),
    JSON.stringify(progress.rejectedRows),
  ]);
  return rowCount === 1;
}

/** A failed build attempt's reason, on the upload it still holds (retried when it goes stale). */
export const RECORD_UPLOAD_ERROR = `
  update campaign_upload set error = $3
   where campaign_id = $1 and attempt = $2 and status = 'IN_PROGRESS'`;

export async function recordUploadError(
  sql: SqlClient,
  campaignId: string,
  attempt: number,
  error: string,
): Promise<boolean> {
  const { rowCount } = await sql.query(RECORD_UPLOAD_ERROR, [campaignId, attempt, error]);
  return rowCount === 1;
}

export const FINISH_UPLOAD = `
  update campaign_upload
     set status = $3, error = $4, finished_at = now(), heartbeat_at = now(),
         rows_read = coalesce($5, rows_read), accepted_count = coalesce($6, accepted_count),
         rejected_count = coalesce($7, rejected_count), rejected_by_reason = coalesce($8::jsonb, rejected_by_reason),
         rejected_rows = coalesce($9::jsonb, rejected_rows)
   where campaign_id = $1 and attempt = $2 and status = 'IN_PROGRESS'`;

/** DONE or FAILED, by the attempt that holds it; false when it no longer does. */
export async function finishUpload(
  sql: SqlClient,
  campaignId: string,
  attempt: number,
  outcome: { status: 'DONE' | 'FAILED'; error: string | null; progress?: BuildProgress },
): Promise<boolean> {
  const p = outcome.progress;
  const { rowCount } = await sql.query(FINISH_UPLOAD, [
    campaignId,
    attempt,
    outcome.status,
    outcome.error,
    p?.rowsRead ?? null,
    p?.accepted ?? null,
    p?.rejected ?? null,
    p ? JSON.stringify(p.rejectedByReason) : null,
    p ? JSON.stringify(p.rejectedRows) : null,
  ]);
  return rowCount === 1;
}

export const COUNT_RECIPIENTS_BY_STATUS = `
  select status, count(*)::int as n from campaign_recipient where campaign_id = $1 group by status`;

/** Recipients per status, counted (for verification and tests; progress reads the campaign's counters). */
export async function countRecipientsByStatus(
  sql: SqlClient,
  campaignId: string,
): Promise<Record<string, number>> {
  const { rows } = await sql.query<{ status: string; n: number }>(COUNT_RECIPIENTS_BY_STATUS, [campaignId]);
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}
