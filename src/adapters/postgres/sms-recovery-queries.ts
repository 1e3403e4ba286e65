/**
 * Queries of the `sms:recovery` poller and the SMS controls (seed 003 part 2, ADR 0019): the campaigns
 * each recovery step looks at (cancellation to settle, SCHEDULED past its dispatch deadline, expiry
 * refund still owed, stale DRAFT / BUILDING / DISPATCHING), each found without a lock and then locked
 * alone (FOR UPDATE SKIP LOCKED, the step's condition re-checked in the same WHERE) so every campaign
 * is its own transaction; the guarded recipient statements (unsent withdrawn, failed reopened by a
 * resend); the synthetic DLR-timeout reports; and auto-pause's bounded read of a campaign's last
 * rolled-up reports. Times are the database's (invariant 6); every state change is guarded in its WHERE.
 */
import type { SqlClient } from '../../ports/database.js';
import { campaignTable } from './campaign-queries.js';

/** The recovery steps, each a condition on the campaign row `t` ($1: the step's window in ms). */
export type SmsRecoveryStep =
  | 'cancelling'
  | 'expiring'
  | 'expiredRefund'
  | 'staleDraft'
  | 'staleBuilding'
  | 'staleDispatching'
  | 'dlrTimeout';

const WINDOW = `make_interval(secs => $1::float8 / 1000.0)`;
const SMS = `t.channel = 'sms' and t.sms is not null`;
const NO_WITHDRAWAL = `coalesce(t.sms->'withdrawal', 'null'::jsonb) = 'null'::jsonb`;
const WITHDRAWAL_OWED = `jsonb_typeof(t.sms->'withdrawal') = 'object' and coalesce(t.sms->'withdrawal'->'refundedAt', 'null'::jsonb) = 'null'::jsonb`;
const NO_RECENT_REPORT = `not exists (select 1 from sms_delivery_report d
                                where d.campaign_id = t.id and d.rolled_up_at > now() - ${WINDOW})`;

/**
 * Each step's condition. A charged CANCELLING campaign is taken at once until its unsent recipients are
 * withdrawn (woken by NOTIFY after the cancel), then again only once stuck for the window (its refund
 * failed: billing down); an uncharged one is the generic settlement's. Expiry ignores soft deletion: a
 * deleted campaign's money is still owed back.
 */
const CONDITIONS: Record<Exclude<SmsRecoveryStep, 'dlrTimeout'>, { where: string; order: string }> = {
  cancelling: {
    where: `t.status = 'CANCELLING' and ${SMS} and t.sms->>'chargeKey' is not null
            and (${NO_WITHDRAWAL} or t.status_changed_at < now() - ${WINDOW})`,
    order: 't.status_changed_at',
  },
  expiring: {
    // No window: the deadline itself ($1 is unused but typed, so every step takes the same parameters).
    where: `t.status = 'SCHEDULED' and ${SMS} and t.dispatch_deadline is not null and t.dispatch_deadline < now()
            and $1::float8 is not null`,
    order: 't.dispatch_deadline',
  },
  expiredRefund: {
    where: `t.status = 'EXPIRED' and ${SMS} and ${WITHDRAWAL_OWED} and t.status_changed_at < now() - ${WINDOW}`,
    order: 't.status_changed_at',
  },
  staleDraft: {
    where: `t.status = 'DRAFT' and ${SMS} and t.status_changed_at < now() - ${WINDOW}`,
    order: 't.status_changed_at',
  },
  staleBuilding: {
    where: `t.status = 'BUILDING' and ${SMS} and t.sms->>'chargeKey' is null
            and (t.sms->>'recipients')::int = 0 and t.status_changed_at < now() - ${WINDOW}
            and coalesce((t.sms->>'buildHeartbeatAt')::timestamptz, '-infinity') < now() - ${WINDOW}`,
    order: 't.status_changed_at',
  },
  staleDispatching: {
    where: `t.status = 'DISPATCHING' and ${SMS} and t.claimed_at < now() - ${WINDOW} and ${NO_RECENT_REPORT}`,
    order: 't.claimed_at',
  },
};

export const FIND_RECOVERABLE = Object.fromEntries(
  Object.entries(CONDITIONS).map(([step, c]) => [
    step,
    `select ${campaignTable.qualified}, t.version from campaign t where ${c.where} order by ${c.order} limit $2`,
  ]),
) as Record<keyof typeof CONDITIONS, string>;

export const LOCK_RECOVERABLE = Object.fromEntries(
  Object.entries(CONDITIONS).map(([step, c]) => [
    step,
    `select ${campaignTable.qualified}, t.version from campaign t
      where t.id = $2 and t.version = $3 and ${c.where} for update of t skip locked`,
  ]),
) as Record<keyof typeof CONDITIONS, string>;

type CampaignRow = Record<string, unknown> & { version: number };

/** Campaigns a recovery step would act on, oldest first (no lock: each is then locked alone). */
export async function findRecoverable(
  sql: SqlClient,
  step: keyof typeof CONDITIONS,
  windowMs: number,
  limit: number,
) {
  const { rows } = await sql.query<CampaignRow>(FIND_RECOVERABLE[step], [windowMs, limit]);
  return campaignTable.rows(rows);
}

/** Locks one campaign for a step, only while it is still at `version` and the step still applies. */
export async function lockRecoverable(
  sql: SqlClient,
  step: keyof typeof CONDITIONS,
  windowMs: number,
  campaignId: string,
  version: number,
) {
  const { rows } = await sql.query<CampaignRow>(LOCK_RECOVERABLE[step], [windowMs, campaignId, version]);
  return campaignTable.rows(rows)[0] ?? null;
}

// ─── recipients ─────────────────────────────────────────────────────────────────────────────────────

/** Every unsent recipient (pending, deferred, retry pending) withdrawn: CANCELLED, with their summed cost. */
export const WITHDRAW_UNSENT_RECIPIENTS = `
  with withdrawn as (
    update campaign_recipient
       set status = 'CANCELLED', final_at = now(), next_retry_at = null
     where campaign_id = $1 and status in ('PENDING', 'DEFERRED', 'RETRY_PENDING')
    returning cost)
  select count(*)::int as recipients, coalesce(sum(cost), 0)::text as amount from withdrawn`;

export async function withdrawUnsentRecipients(
  sql: SqlClient,
  campaignId: string,
): Promise<{ recipients: number; amount: string }> {
  const { rows } = await sql.query<{ recipients: number; amount: string }>(WITHDRAW_UNSENT_RECIPIENTS, [
    campaignId,
  ]);
  return rows[0]!;
}

/**
 * A resend: the campaign's FAILED recipients of delivery cycle `$2` become PENDING in cycle `$3`, their
 * attempts, delivery outcome, failure class and refund fields cleared (a new cycle has new refund keys).
 */
export const REOPEN_FAILED_RECIPIENTS = `
  with reopened as (
    update campaign_recipient
       set status = 'PENDING', resend_attempt = $3, attempts = 0, next_allowed_at = '-infinity',
           submission_id = null, submitted_at = null, dlr_status = null, dlr_code = null, dlr_at = null,
           failure_class = null, unconfirmed = false, next_retry_at = null, final_at = null,
           refund_required = false, refund_key = null, refunded_at = null, refund_reason = null,
           refund_attempts = 0, refund_error = null
     where campaign_id = $1 and status = 'FAILED' and resend_attempt = $2
    returning cost)
  select count(*)::int as recipients, coalesce(sum(cost), 0)::text as amount from reopened`;

export async function reopenFailedRecipients(
  sql: SqlClient,
  campaignId: string,
  fromAttempt: number,
  toAttempt: number,
): Promise<{ recipients: number; amount: string }> {
  const { rows } = await sql.query<{ recipients: number; amount: string }>(REOPEN_FAILED_RECIPIENTS, [
    campaignId,
    fromAttempt,
    toAttempt,
  ]);
  return rows[0]!;
}

/** A failed build's upload, given up (guarded: only while it is still waiting or being built). */
export const FAIL_UPLOAD = `
  update campaign_upload set status = 'FAILED', error = $2, finished_at = now()
   where campaign_id = $1 and status in ('PENDING', 'IN_PROGRESS')`;

export async function failUpload(sql: SqlClient, campaignId: string, error: string): Promise<number> {
  const { rowCount } = await sql.query(FAIL_UPLOAD, [campaignId, error]);
  return rowCount;
}

// ─── DLR timeouts ───────────────────────────────────────────────────────────────────────────────────

/**
 * Campaigns (any status) with recipients SUBMITTED longer than the DLR timeout and no report rolled up
 * for them within the timeout, oldest submission first: their gateway never answered.
 */
export const FIND_DLR_TIMEOUT_CAMPAIGNS = `
  select t.id::text as id from campaign t
   where ${SMS} and (t.sms->'progress'->>'submitted')::int > 0 and ${NO_RECENT_REPORT}
     and exists (select 1 from campaign_recipient r
                  where r.campaign_id = t.id and r.status = 'SUBMITTED' and r.submitted_at < now() - ${WINDOW})
   order by t.status_changed_at
   limit $2`;

export async function findDlrTimeoutCampaigns(
  sql: SqlClient,
  timeoutMs: number,
  limit: number,
): Promise<string[]> {
  const { rows } = await sql.query<{ id: string }>(FIND_DLR_TIMEOUT_CAMPAIGNS, [timeoutMs, limit]);
  return rows.map((r) => r.id);
}

/**
 * Synthetic NOT_AVAILABLE / DLR_TIMEOUT reports (dlr_id `dlr-timeout:{submission}:{recipient}`) for a
 * campaign's recipients SUBMITTED longer than the timeout, at most `$3`: the roll-up finishes them
 * (FAILED, unconfirmed, never refunded). A repeat inserts nothing (the id is the report's key), and a
 * recipient a real report reached first makes the synthetic one 'ignored'.
 */
export const INSERT_DLR_TIMEOUT_REPORTS = `
  insert into sms_delivery_report (dlr_id, submission_id, campaign_id, recipient_id, status, error_code, done_at)
  select 'dlr-timeout:' || r.submission_id || ':' || r.id, r.submission_id, r.campaign_id, r.id,
         'NOT_AVAILABLE', 'DLR_TIMEOUT', now()
    from campaign_recipient r
   where r.campaign_id = $2 and r.status = 'SUBMITTED' and r.submission_id is not null
     and r.submitted_at < now() - ${WINDOW}
   order by r.id
   limit $3
  on conflict (dlr_id) do nothing`;

export async function insertDlrTimeoutReports(
  sql: SqlClient,
  campaignId: string,
  timeoutMs: number,
  limit: number,
): Promise<number> {
  const { rowCount } = await sql.query(INSERT_DLR_TIMEOUT_REPORTS, [timeoutMs, campaignId, limit]);
  return rowCount;
}

// ─── auto-pause ─────────────────────────────────────────────────────────────────────────────────────

/**
 * A campaign's last `$2` rolled-up reports that changed a recipient (duplicates and stale reports are
 * 'ignored' and do not count), newest first on (campaign_id, rolled_up_at desc): how many, and how many
 * did not end DELIVERED.
 */
export const RECENT_REPORT_OUTCOMES = `
  select count(*)::int as reports, count(*) filter (where outcome <> 'DELIVERED')::int as failed
    from (select d.outcome from sms_delivery_report d
           where d.campaign_id = $1 and d.rolled_up_at is not null and d.outcome <> 'ignored'
           order by d.rolled_up_at desc
           limit $2) as recent`;

export async function recentReportOutcomes(
  sql: SqlClient,
  campaignId: string,
  window: number,
): Promise<{ reports: number; failed: number }> {
  const { rows } = await sql.query<{ reports: number; failed: number }>(RECENT_REPORT_OUTCOMES, [
    campaignId,
    window,
  ]);
  return rows[0]!;
}
