/**
 * A CSV campaign's charge that billing could not answer (migration 000017, ADR 0023): the upload moves
 * IN_PROGRESS → CHARGING (guarded by the build attempt) with every recipient saved, and the charge
 * retry claims CHARGING uploads of BUILDING campaigns whose last try (`heartbeat_at`) is older than the
 * retry interval (`FOR UPDATE SKIP LOCKED` on campaign and upload: any number of workers), records the
 * try, and asks billing again with the same key after its commit. Every later change of the upload is
 * guarded by `status = 'CHARGING'`, so two workers can never both finish it.
 */

import type { SqlClient } from '../../ports/database.js';
import { campaignTable } from './campaign-queries.js';
import type { BuildProgress } from './sms-queries.js';

export const PEND_UPLOAD_CHARGE = `
  update campaign_upload
     set status = 'CHARGING', error = $3, heartbeat_at = now(), charge_pending_since = now(), charge_attempts = 1,
         rows_read = $4, accepted_count = $5, rejected_count = $6, rejected_by_reason = $7::jsonb,
         rejected_rows = $8::jsonb
   where campaign_id = $1 and attempt = $2 and status = 'IN_PROGRESS'`;

/** IN_PROGRESS → CHARGING by the attempt that holds it; false when it no longer does. */
export async function pendUploadCharge(
  sql: SqlClient,
  campaignId: string,
  attempt: number,
  error: string,
  progress: BuildProgress,
): Promise<boolean> {
  const { rowCount } = await sql.query(PEND_UPLOAD_CHARGE, [
    campaignId,
    attempt,
    error,
    progress.rowsRead,
    progress.accepted,
    progress.rejected,
    JSON.stringify(progress.rejectedByReason),
    JSON.stringify(progress.rejectedRows),
  ]);
  return rowCount === 1;
}

export interface DueCharge {
  /** The campaign row's state columns (campaignTable.rows). */
  readonly row: Record<string, unknown>;
  readonly chargeAttempts: number;
  /** Milliseconds since the build first asked for the charge (database clock). */
  readonly pendingForMs: number;
}

/** BUILDING campaigns whose CHARGING upload's last try is older than `$2` ms, locked with their upload. */
export const LOCK_DUE_CHARGES = `
  select ${campaignTable.qualified}, t.version, u.charge_attempts as "chargeAttempts",
         (extract(epoch from (now() - u.charge_pending_since)) * 1000)::float8 as "pendingForMs"
    from campaign t join campaign_upload u on u.campaign_id = t.id
   where u.status = 'CHARGING' and t.status = 'BUILDING' and t.deleted_at is null
     and u.heartbeat_at < now() - make_interval(secs => $2 / 1000.0)
   order by u.heartbeat_at
   limit $1
   for update of t, u skip locked`;

export async function lockDueCharges(sql: SqlClient, limit: number, retryMs: number) {
  const { rows } = await sql.query<
    Record<string, unknown> & { version: number; chargeAttempts: number; pendingForMs: number }
  >(LOCK_DUE_CHARGES, [limit, retryMs]);
  const states = campaignTable.rows(rows);
  return states.map((loaded, i) => ({
    ...loaded,
    chargeAttempts: rows[i]!.chargeAttempts,
    pendingForMs: rows[i]!.pendingForMs,
  }));
}

/** The claim of one retry: the try is recorded (and the next one pushed a retry interval away). */
export const CLAIM_UPLOAD_CHARGE = `
  update campaign_upload set heartbeat_at = now(), charge_attempts = charge_attempts + 1
   where campaign_id = $1 and status = 'CHARGING'
  returning charge_attempts`;

export async function claimUploadCharge(sql: SqlClient, campaignId: string): Promise<number | null> {
  const { rows } = await sql.query<{ charge_attempts: number }>(CLAIM_UPLOAD_CHARGE, [campaignId]);
  return rows[0]?.charge_attempts ?? null;
}

/** Why the last try failed (the upload stays CHARGING; the next try waits a retry interval from now). */
export const RECORD_CHARGE_FAILURE = `
  update campaign_upload set error = $2, heartbeat_at = now() where campaign_id = $1 and status = 'CHARGING'`;

export async function recordChargeFailure(sql: SqlClient, campaignId: string, error: string): Promise<void> {
  await sql.query(RECORD_CHARGE_FAILURE, [campaignId, error]);
}

/** CHARGING → DONE or FAILED; false when it was no longer CHARGING. */
export const FINISH_CHARGING_UPLOAD = `
  update campaign_upload set status = $2, error = $3, finished_at = now(), heartbeat_at = now()
   where campaign_id = $1 and status = 'CHARGING'`;

export async function finishChargingUpload(
  sql: SqlClient,
  campaignId: string,
  outcome: { status: 'DONE' | 'FAILED'; error: string | null },
): Promise<boolean> {
  const { rowCount } = await sql.query(FINISH_CHARGING_UPLOAD, [campaignId, outcome.status, outcome.error]);
  return rowCount === 1;
}

export const NEXT_CHARGE_DUE_IN_MS = `
  select (extract(epoch from (min(u.heartbeat_at) + make_interval(secs => $1 / 1000.0) - now())) * 1000)::float8 as due_in_ms
    from campaign_upload u join campaign c on c.id = u.campaign_id
   where u.status = 'CHARGING' and c.status = 'BUILDING' and c.deleted_at is null`;

export async function nextChargeDueInMs(sql: SqlClient, retryMs: number): Promise<number | null> {
  const { rows } = await sql.query<{ due_in_ms: number | null }>(NEXT_CHARGE_DUE_IN_MS, [retryMs]);
  const due = rows[0]?.due_in_ms ?? null;
  return due === null ? null : Math.max(0, due);
}
