/**
 * SMS delivery queries (ADR 0019): delivery reports as received (idempotent by dlr_id), the
 * roll-up's locks and guarded row updates, synthetic SEND_FAILED reports for dead submissions, the
 * retry dispatcher's claim, refunds owed and their guarded bookkeeping, and the money check's sums.
 * A report applies only to the row with id = recipient_id AND submission_id = the report's AND status
 * SUBMITTED (a phone number is never a key: duplicate MSISDNs are distinct rows); every status change
 * is guarded in its WHERE, batches take arrays, times are the database's (invariant 6).
 */
import type { SqlClient } from '../../ports/database.js';
import { campaignTable } from './campaign-queries.js';

// ─── delivery reports ───────────────────────────────────────────────────────────────────────────────

export interface NewDeliveryReport {
  dlrId: string;
  submissionId: string;
  campaignId: string;
  recipientId: string;
  status: string;
  errorCode: string | null;
  epoch: number | null;
  doneAt: string | null;
}

export const INSERT_DELIVERY_REPORTS = `
  insert into sms_delivery_report (dlr_id, submission_id, campaign_id, recipient_id, status, error_code, epoch, done_at)
  select * from unnest($1::text[], $2::uuid[], $3::uuid[], $4::bigint[], $5::text[], $6::text[], $7::int[], $8::timestamptz[])
  on conflict (dlr_id) do nothing`;

/** Stores reports; one already stored (same dlr_id) is left as it is. Returns how many were new. */
export async function insertDeliveryReports(
  sql: SqlClient,
  reports: readonly NewDeliveryReport[],
): Promise<number> {
  if (reports.length === 0) return 0;
  const { rowCount } = await sql.query(INSERT_DELIVERY_REPORTS, [
    reports.map((r) => r.dlrId),
    reports.map((r) => r.submissionId),
    reports.map((r) => r.campaignId),
    reports.map((r) => r.recipientId),
    reports.map((r) => r.status),
    reports.map((r) => r.errorCode),
    reports.map((r) => r.epoch),
    reports.map((r) => r.doneAt),
  ]);
  return rowCount;
}

/**
 * Synthetic SEND_FAILED reports for the recipients of submissions whose outbox row went dead for good
 * (the Kafka send kept failing and the relay's recovery rounds, `$3` = HERALD_RELAY_RECOVERY_MAX_ROUNDS,
 * are used up, so the relay will not publish it again by itself): one per recipient still SUBMITTED
 * under that submission. Idempotent by dlr_id ('send-failed:{submission}:{recipient}'). A dead row an
 * operator re-queues later is still harmless to money: its reports find the recipient no longer
 * SUBMITTED under that submission and are ignored.
 */
export const INSERT_SEND_FAILED_REPORTS = `
  insert into sms_delivery_report (dlr_id, submission_id, campaign_id, recipient_id, status, error_code)
  select 'send-failed:' || r.submission_id || ':' || r.id, r.submission_id, r.campaign_id, r.id, 'SEND_FAILED',
         left(o.last_error, 200)
    from outbox o
    join campaign_recipient r on r.submission_id = o.message_id and r.status = 'SUBMITTED'
   where o.status = 'dead' and o.sink = $1 and o.destination = $2 and o.recovery_count >= $3
  on conflict (dlr_id) do nothing`;

export async function insertSendFailedReports(
  sql: SqlClient,
  submit: { sink: string; topic: string; recoveryRounds: number },
): Promise<number> {
  const { rowCount } = await sql.query(INSERT_SEND_FAILED_REPORTS, [
    submit.sink,
    submit.topic,
    submit.recoveryRounds,
  ]);
  return rowCount;
}

/**
 * Rolled-up reports past their retention (maintenance, any number of replicas): never one the roll-up
 * has not applied yet; the recipient row keeps the outcome.
 */
export const PRUNE_ROLLED_UP_REPORTS = `
  with prunable as (
    select dlr_id from sms_delivery_report
     where rolled_up_at < now() - make_interval(days => $1)
     limit $2
     for update skip locked
  )
  delete from sms_delivery_report d using prunable
   where d.dlr_id = prunable.dlr_id and d.rolled_up_at < now() - make_interval(days => $1)`;

export async function pruneRolledUpReports(
  sql: SqlClient,
  params: { retentionDays: number; limit: number },
): Promise<number> {
  return (await sql.query(PRUNE_ROLLED_UP_REPORTS, [params.retentionDays, params.limit])).rowCount;
}

/** Campaigns with reports waiting for the roll-up, the one waiting longest first. */
export const CAMPAIGNS_WITH_UNROLLED_REPORTS = `
  select campaign_id::text as "campaignId"
    from sms_delivery_report
   where rolled_up_at is null
   group by campaign_id
   order by min(received_at)
   limit $1`;

export async function campaignsWithUnrolledReports(sql: SqlClient, limit: number): Promise<string[]> {
  const { rows } = await sql.query<{ campaignId: string }>(CAMPAIGNS_WITH_UNROLLED_REPORTS, [limit]);
  return rows.map((r) => r.campaignId);
}

export interface UnrolledReport {
  dlrId: string;
  submissionId: string;
  recipientId: string;
  status: string;
  errorCode: string | null;
}

export const LOCK_UNROLLED_REPORTS = `
  select dlr_id as "dlrId", submission_id::text as "submissionId", recipient_id::text as "recipientId",
         status, error_code as "errorCode"
    from sms_delivery_report
   where campaign_id = $1 and rolled_up_at is null
   order by received_at, dlr_id
   limit $2
   for update skip locked`;

export async function lockUnrolledReports(
  sql: SqlClient,
  campaignId: string,
  limit: number,
): Promise<UnrolledReport[]> {
  const { rows } = await sql.query<UnrolledReport>(LOCK_UNROLLED_REPORTS, [campaignId, limit]);
  return rows;
}

export interface ReportedRecipient {
  id: string;
  submissionId: string | null;
  status: string;
  attempts: number;
  cost: string;
  resendAttempt: number;
}

/** The campaign's rows the reports name, locked in id order (writers of recipient rows lock in id order). */
export const LOCK_REPORTED_RECIPIENTS = `
  select id::text, submission_id::text as "submissionId", status, attempts, cost::text as cost,
         resend_attempt as "resendAttempt"
    from campaign_recipient
   where campaign_id = $1 and id = any($2::bigint[])
   order by id
   for update`;

export async function lockReportedRecipients(
  sql: SqlClient,
  campaignId: string,
  ids: readonly string[],
): Promise<ReportedRecipient[]> {
  if (ids.length === 0) return [];
  const { rows } = await sql.query<ReportedRecipient>(LOCK_REPORTED_RECIPIENTS, [campaignId, ids]);
  return rows;
}

export interface AppliedReport {
  id: string;
  submissionId: string;
  status: 'DELIVERED' | 'FAILED' | 'RETRY_PENDING';
  dlrStatus: string;
  dlrCode: string | null;
  failureClass: string | null;
  unconfirmed: boolean;
  nextRetryAt: Date | null;
  refundRequired: boolean;
}

/**
 * Applies terminal results, guarded: only a row still SUBMITTED under the report's submission changes.
 * FAILED rows that owe a refund get their key, recipient:{id}:{resend_attempt}.
 */
export const APPLY_REPORTS = `
  update campaign_recipient r
     set status = s.status, dlr_status = s.dlr_status, dlr_code = s.dlr_code, dlr_at = now(),
         failure_class = s.failure_class, unconfirmed = s.unconfirmed, next_retry_at = s.next_retry_at,
         final_at = case when s.status in ('DELIVERED', 'FAILED') then now() end,
         refund_required = s.refund_required,
         refund_key = case when s.refund_required then 'recipient:' || r.id || ':' || r.resend_attempt end
    from unnest($1::bigint[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::boolean[],
                $8::timestamptz[], $9::boolean[])
           as s(id, submission_id, status, dlr_status, dlr_code, failure_class, unconfirmed, next_retry_at,
                refund_required)
   where r.id = s.id and r.submission_id = s.submission_id and r.status = 'SUBMITTED'
  returning r.id::text`;

export async function applyReports(sql: SqlClient, rows: readonly AppliedReport[]): Promise<Set<string>> {
  if (rows.length === 0) return new Set();
  const { rows: changed } = await sql.query<{ id: string }>(APPLY_REPORTS, [
    rows.map((r) => r.id),
    rows.map((r) => r.submissionId),
    rows.map((r) => r.status),
    rows.map((r) => r.dlrStatus),
    rows.map((r) => r.dlrCode),
    rows.map((r) => r.failureClass),
    rows.map((r) => r.unconfirmed),
    rows.map((r) => r.nextRetryAt),
    rows.map((r) => r.refundRequired),
  ]);
  return new Set(changed.map((r) => r.id));
}

export const MARK_REPORTS_ROLLED_UP = `
  update sms_delivery_report d
     set rolled_up_at = now(), outcome = s.outcome
    from unnest($1::text[], $2::text[]) as s(dlr_id, outcome)
   where d.dlr_id = s.dlr_id and d.rolled_up_at is null`;

export async function markReportsRolledUp(
  sql: SqlClient,
  reports: readonly { dlrId: string; outcome: string }[],
): Promise<number> {
  if (reports.length === 0) return 0;
  const { rowCount } = await sql.query(MARK_REPORTS_ROLLED_UP, [
    reports.map((r) => r.dlrId),
    reports.map((r) => r.outcome),
  ]);
  return rowCount;
}

// ─── retries ────────────────────────────────────────────────────────────────────────────────────────

/**
 * SMS campaigns that may release retries (DISPATCHING, QUEUED, SCHEDULED, PAUSED) with RETRY_PENDING
 * recipients due now, their state rows locked (SKIP LOCKED: any number of retry dispatchers).
 */
export const LOCK_CAMPAIGNS_WITH_DUE_RETRIES = `
  select ${campaignTable.qualified}, t.version from campaign t
   where t.id in (select r.campaign_id from campaign_recipient r
                   where r.status = 'RETRY_PENDING' and r.next_retry_at <= now())
     and t.channel = 'sms' and t.status in ('DISPATCHING', 'QUEUED', 'SCHEDULED', 'PAUSED')
   order by t.id
   limit $1
   for update of t skip locked`;

export async function lockCampaignsWithDueRetries(sql: SqlClient, limit: number) {
  const { rows } = await sql.query<Record<string, unknown> & { version: number }>(
    LOCK_CAMPAIGNS_WITH_DUE_RETRIES,
    [limit],
  );
  return campaignTable.rows(rows);
}

/** A campaign's due RETRY_PENDING recipients, locked (SKIP LOCKED), earliest first. */
export const LOCK_DUE_RETRIES = `
  select id::text from campaign_recipient
   where campaign_id = $1 and status = 'RETRY_PENDING' and next_retry_at <= now()
   order by next_retry_at, id
   limit $2
   for update skip locked`;

export async function lockDueRetries(sql: SqlClient, campaignId: string, limit: number): Promise<string[]> {
  const { rows } = await sql.query<{ id: string }>(LOCK_DUE_RETRIES, [campaignId, limit]);
  return rows.map((r) => r.id);
}

/** RETRY_PENDING → PENDING, ready at once (guarded). */
export const RELEASE_RETRIES = `
  update campaign_recipient
     set status = 'PENDING', next_retry_at = null, next_allowed_at = '-infinity'
   where id = any($1::bigint[]) and status = 'RETRY_PENDING'`;

export async function releaseRetries(sql: SqlClient, ids: readonly string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const { rowCount } = await sql.query(RELEASE_RETRIES, [ids]);
  return rowCount;
}

export const NEXT_RETRY_DUE_IN_MS = `
  select (extract(epoch from (min(next_retry_at) - now())) * 1000)::float8 as due_in_ms
    from campaign_recipient where status = 'RETRY_PENDING'`;

export async function nextRetryDueInMs(sql: SqlClient): Promise<number | null> {
  const { rows } = await sql.query<{ due_in_ms: number | null }>(NEXT_RETRY_DUE_IN_MS);
  const due = rows[0]?.due_in_ms ?? null;
  return due === null ? null : Math.max(0, due);
}

// ─── refunds ────────────────────────────────────────────────────────────────────────────────────────

export interface OwedRefund {
  id: string;
  campaignId: string;
  organizationId: string;
  key: string;
  cost: string;
}

const OWED_REFUND_COLUMNS = `
  r.id::text, r.campaign_id::text as "campaignId", c.organization_id as "organizationId",
  r.refund_key as key, r.cost::text as cost`;

/** These FAILED recipients, if they still owe a refund (the roll-up, right after it failed them). */
export const OWED_REFUNDS_BY_ID = `
  select ${OWED_REFUND_COLUMNS}
    from campaign_recipient r join campaign c on c.id = r.campaign_id
   where r.id = any($1::bigint[]) and r.refund_required and r.refunded_at is null and r.status = 'FAILED'
   order by r.id`;

/**
 * The refund retry poller's: FAILED recipients owing a refund that failed more than `$1` ms ago and
 * whose last refused attempt, if any, is more than `$2` ms old (on the partial index of owed refunds).
 */
export const OWED_REFUNDS_DUE = `
  select ${OWED_REFUND_COLUMNS}
    from campaign_recipient r join campaign c on c.id = r.campaign_id
   where r.refund_required and r.refunded_at is null and r.status = 'FAILED'
     and r.final_at <= now() - make_interval(secs => $1 / 1000.0)
     and (r.refund_tried_at is null or r.refund_tried_at <= now() - make_interval(secs => $2 / 1000.0))
   order by r.final_at, r.id
   limit $3`;

export async function owedRefunds(
  sql: SqlClient,
  params: { ids?: readonly string[]; olderThanMs?: number; triedBeforeMs?: number; limit: number },
): Promise<OwedRefund[]> {
  if (params.ids) {
    if (params.ids.length === 0) return [];
    const { rows } = await sql.query<OwedRefund>(OWED_REFUNDS_BY_ID, [params.ids]);
    return rows;
  }
  const olderThanMs = params.olderThanMs ?? 0;
  const { rows } = await sql.query<OwedRefund>(OWED_REFUNDS_DUE, [
    olderThanMs,
    params.triedBeforeMs ?? olderThanMs,
    params.limit,
  ]);
  return rows;
}

/** Refunded: recorded once (guarded `refunded_at is null`); returns the ids that changed. */
export const MARK_REFUNDED = `
  update campaign_recipient r
     set refunded_at = now(), refund_reason = $2, refund_error = null, refund_attempts = r.refund_attempts + 1
   where r.id = any($1::bigint[]) and r.refund_required and r.refunded_at is null and r.status = 'FAILED'
  returning r.id::text, r.campaign_id::text as "campaignId", r.cost::text as cost`;

export async function markRefunded(
  sql: SqlClient,
  ids: readonly string[],
  reason: string,
): Promise<{ id: string; campaignId: string; cost: string }[]> {
  if (ids.length === 0) return [];
  const { rows } = await sql.query<{ id: string; campaignId: string; cost: string }>(MARK_REFUNDED, [
    ids,
    reason,
  ]);
  return rows;
}

/** A refund attempt that failed: counted with its error on the row (still owed). */
export const RECORD_REFUND_ERROR = `
  update campaign_recipient
     set refund_attempts = refund_attempts + 1, refund_error = left($2, 1000), refund_tried_at = now()
   where id = $1 and refund_required and refunded_at is null`;

export async function recordRefundError(sql: SqlClient, id: string, error: string): Promise<void> {
  await sql.query(RECORD_REFUND_ERROR, [id, error]);
}

export const NEXT_REFUND_RETRY_DUE_IN_MS = `
  select (extract(epoch from (min(greatest(final_at + make_interval(secs => $1 / 1000.0),
                                           refund_tried_at + make_interval(secs => $2 / 1000.0)))
                              - now())) * 1000)::float8 as due_in_ms
    from campaign_recipient where refund_required and refunded_at is null and status = 'FAILED'`;

export async function nextRefundRetryDueInMs(
  sql: SqlClient,
  afterMs: number,
  triedBeforeMs: number,
): Promise<number | null> {
  const { rows } = await sql.query<{ due_in_ms: number | null }>(NEXT_REFUND_RETRY_DUE_IN_MS, [
    afterMs,
    triedBeforeMs,
  ]);
  const due = rows[0]?.due_in_ms ?? null;
  return due === null ? null : Math.max(0, due);
}

// ─── the money check ────────────────────────────────────────────────────────────────────────────────

export interface RecipientMoneyRow {
  status: string;
  unconfirmed: boolean;
  refunded: boolean;
  recipients: number;
  cost: string;
}

/** A campaign's rows by status, unconfirmed and refunded, counted and summed (the money check). */
export const RECIPIENT_MONEY = `
  select status, unconfirmed, refunded_at is not null as refunded, count(*)::int as recipients,
         coalesce(sum(cost), 0)::text as cost
    from campaign_recipient where campaign_id = $1
   group by 1, 2, 3`;

export async function recipientMoney(sql: SqlClient, campaignId: string): Promise<RecipientMoneyRow[]> {
  const { rows } = await sql.query<RecipientMoneyRow>(RECIPIENT_MONEY, [campaignId]);
  return rows;
}

export interface LedgerKeyRow {
  kind: 'deduction' | 'refund';
  key: string;
  amount: string;
  entries: number;
}

/**
 * The ledger's deductions and refunds under a campaign's keys (campaign:{id}, campaign:{id}:resend:{n},
 * cancel:/expire:{id}:{n}, and recipient:{rid}:{n} of its recipients), one row per (kind, key) with the
 * number of entries (the unique constraint keeps it at 1: more would be a duplicate application).
 */
export const LEDGER_KEYS = `
  select e.kind, e.key, sum(e.amount)::text as amount, count(*)::int as entries
    from billing_entry e
   where e.organization_id = $2 and e.kind in ('deduction', 'refund')
     and (e.key = 'campaign:' || $1
          or e.key like 'campaign:' || $1 || ':resend:%'
          or e.key like 'cancel:' || $1 || ':%'
          or e.key like 'expire:' || $1 || ':%'
          or (e.key like 'recipient:%' and exists (
                select 1 from campaign_recipient r
                 where r.campaign_id = $1::uuid and r.id = split_part(e.key, ':', 2)::bigint)))
   group by e.kind, e.key`;

export async function ledgerKeys(
  sql: SqlClient,
  campaignId: string,
  organizationId: string,
): Promise<LedgerKeyRow[]> {
  const { rows } = await sql.query<LedgerKeyRow>(LEDGER_KEYS, [campaignId, organizationId]);
  return rows;
}
