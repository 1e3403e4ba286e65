/**
 * Cron job and job run state tables (the inline projections of the 'cron_job' and 'job_run' streams,
 * invariant 1) and their named queries: the materializer's claim of due jobs with each job's active and
 * buffered run counts (FOR UPDATE SKIP LOCKED: any number of scanners, invariant 7), the run sweeps
 * (buffered runs whose job is idle, retries that are due, stale claims), the due-time look-ups that arm
 * the scanner's timer, and the reads of the service, the ledger and backfill. Time comparisons use the
 * database's now() (invariant 6). ADR 0011.
 */
import type { ExistingCronJob } from '../../domain/cron-job/state.js';
import type { ExistingJobRun } from '../../domain/job-run/state.js';
import { ConflictError } from '../../errors.js';
import type { SqlClient } from '../../ports/database.js';
import { STALE_CLAIMED_AT } from './claim-liveness-queries.js';
import { isUuid, stateTable } from './state-table.js';

export const cronJobTable = stateTable<ExistingCronJob>({
  table: 'cron_job',
  streamType: 'cron_job',
  key: { column: 'id', type: 'uuid', field: 'jobId' },
  columns: [
    { column: 'organization_id', type: 'text', field: 'organizationId' },
    { column: 'name', type: 'text', field: 'name' },
    { column: 'schedule', type: 'text', field: 'schedule' },
    { column: 'timezone', type: 'text', field: 'timezone' },
    { column: 'dst', type: 'jsonb', field: 'dst' },
    { column: 'job_type', type: 'text', field: 'jobType' },
    { column: 'payload', type: 'jsonb', field: 'payload' },
    { column: 'timeout_ms', type: 'int', field: 'timeoutMs' },
    { column: 'overlap', type: 'text', field: 'overlap' },
    { column: 'catch_up', type: 'jsonb', field: 'catchUp' },
    { column: 'retry', type: 'jsonb', field: 'retry' },
    { column: 'status', type: 'text', field: 'status' },
    { column: 'next_run_at', type: 'timestamptz', field: 'nextRunAt' },
    { column: 'last_occurrence_at', type: 'timestamptz', field: 'lastOccurrenceAt' },
    { column: 'paused_at', type: 'timestamptz', field: 'pausedAt' },
    { column: 'paused_reason', type: 'text', field: 'pausedReason' },
    { column: 'paused_by', type: 'text', field: 'pausedBy' },
    { column: 'created_at', type: 'timestamptz', field: 'createdAt' },
    { column: 'updated_at', type: 'timestamptz', field: 'updatedAt' },
    { column: 'deleted_at', type: 'timestamptz', field: 'deletedAt' },
    { column: 'idempotency_key', type: 'text', field: 'idempotencyKey' },
  ],
});

export const jobRunTable = stateTable<ExistingJobRun>({
  table: 'job_run',
  streamType: 'job_run',
  key: { column: 'id', type: 'uuid', field: 'runId' },
  columns: [
    { column: 'job_id', type: 'uuid', field: 'jobId' },
    { column: 'organization_id', type: 'text', field: 'organizationId' },
    { column: 'job_type', type: 'text', field: 'jobType' },
    { column: 'scheduled_for', type: 'timestamptz', field: 'scheduledFor' },
    { column: 'trigger', type: 'text', field: 'trigger' },
    { column: 'trigger_key', type: 'text', field: 'triggerKey' },
    { column: 'fate', type: 'text', field: 'fate' },
    { column: 'span_last', type: 'timestamptz', field: 'spanLast' },
    { column: 'span_count', type: 'int', field: 'spanCount' },
    { column: 'reason', type: 'text', field: 'reason' },
    { column: 'status', type: 'text', field: 'status' },
    { column: 'attempts', type: 'int', field: 'attempts' },
    { column: 'max_attempts', type: 'int', field: 'maxAttempts' },
    { column: 'retry', type: 'jsonb', field: 'retry' },
    { column: 'overlap', type: 'text', field: 'overlap' },
    { column: 'claim_epoch', type: 'int', field: 'claimEpoch' },
    { column: 'claimed_at', type: 'timestamptz', field: 'claimedAt' },
    { column: 'next_attempt_at', type: 'timestamptz', field: 'nextAttemptAt' },
    { column: 'started_at', type: 'timestamptz', field: 'startedAt' },
    { column: 'finished_at', type: 'timestamptz', field: 'finishedAt' },
    { column: 'response_status', type: 'int', field: 'responseStatus' },
    { column: 'output', type: 'text', field: 'output' },
    { column: 'error', type: 'text', field: 'error' },
    { column: 'duration_ms', type: 'int', field: 'durationMs' },
    { column: 'created_at', type: 'timestamptz', field: 'createdAt' },
    { column: 'updated_at', type: 'timestamptz', field: 'updatedAt' },
  ],
  onUniqueViolation(constraint, inserted) {
    if (constraint !== 'job_run_occurrence_idx') return undefined;
    const run = inserted[0];
    return new ConflictError(`a run of job ${run?.jobId} for this occurrence and trigger already exists`, {
      field: 'scheduledFor',
      jobId: run?.jobId,
    });
  },
});

type Row = Record<string, unknown> & { version: number };

const ACTIVE = `('queued', 'running', 'retry_scheduled')`;

/**
 * Due active jobs, oldest first, locked for this claim, with what the overlap policy needs: whether the
 * job has an active run, and a buffered one (1 or 0; one index probe each, never a count that grows
 * with a backlog of runs; none for `allow`). The runs are not locked: a run ending meanwhile only makes
 * the decision one run more cautious.
 */
export const LOCK_DUE_CRON_JOBS = `
  select ${cronJobTable.qualified}, t.version,
         case when t.overlap = 'allow' then 0 else (exists (
           select 1 from job_run r where r.job_id = t.id and r.status in ${ACTIVE}))::int end as active_runs,
         case when t.overlap <> 'buffer-one' then 0 else (exists (
           select 1 from job_run r where r.job_id = t.id and r.status = 'buffered'))::int end as buffered_runs
    from cron_job t
   where t.status = 'active' and t.next_run_at <= now()
   order by t.next_run_at, t.id
   limit $1
   for update of t skip locked`;

/** Milliseconds until the next active job's occurrence (null: none), by the database clock. */
export const NEXT_CRON_JOB_DUE_IN_MS = `
  select (extract(epoch from (min(next_run_at) - now())) * 1000)::float8 as due_in_ms
    from cron_job where status = 'active' and next_run_at is not null`;

/** Buffered runs whose job has no active run any more (buffer-one), oldest first, locked. */
export const LOCK_RELEASABLE_RUNS = `
  select ${jobRunTable.qualified}, t.version
    from job_run t
   where t.status = 'buffered'
     and not exists (select 1 from job_run a where a.job_id = t.job_id and a.status in ${ACTIVE})
   order by t.scheduled_for, t.id
   limit $1
   for update of t skip locked`;

/** Runs waiting for a retry that is due, with whether their job was deleted meanwhile; locked. */
export const LOCK_DUE_RETRIES = `
  select ${jobRunTable.qualified}, t.version
    from job_run t
   where t.status = 'retry_scheduled' and t.next_attempt_at <= now()
   order by t.next_attempt_at, t.id
   limit $1
   for update of t skip locked`;

/** Buffered or retry-waiting runs of deleted jobs: cancelled by a sweep. */
export const LOCK_RUNS_OF_DELETED_JOBS = `
  select ${jobRunTable.qualified}, t.version
    from job_run t
    join cron_job j on j.id = t.job_id and j.status = 'deleted'
   where t.status in ('buffered', 'retry_scheduled')
   order by t.id
   limit $1
   for update of t skip locked`;

/** Milliseconds until the next retry is due (null: none). */
export const NEXT_RETRY_DUE_IN_MS = `
  select (extract(epoch from (min(next_attempt_at) - now())) * 1000)::float8 as due_in_ms
    from job_run where status = 'retry_scheduled'`;

/** Stale exactly as ReclaimRun judges it (STALE_CLAIMED_AT: whole ms, `now - claimedAt > staleAfterMs`). */
export const FIND_STALE_RUNS = `
  select ${jobRunTable.columnList}, version from job_run
   where status in ('queued', 'running') and claimed_at < ${STALE_CLAIMED_AT}
   order by claimed_at
   limit $2`;

export const LOCK_STALE_RUNS = `
  select ${jobRunTable.qualified}, t.version
    from job_run t
    join unnest($2::uuid[], $3::int[]) as found(id, version) on t.id = found.id and t.version = found.version
   where t.status in ('queued', 'running') and t.claimed_at < ${STALE_CLAIMED_AT}
   order by t.claimed_at
   for update of t skip locked`;

/** An organization's jobs (not deleted unless asked), by name. */
export const SELECT_CRON_JOBS = `
  select ${cronJobTable.columnList}, version from cron_job
   where ($1::text is null or organization_id = $1) and ($2::boolean or status <> 'deleted')
   order by organization_id, name, id
   limit $3`;

export const SELECT_CRON_JOB_BY_NAME = `
  select ${cronJobTable.columnList}, version from cron_job
   where organization_id = $1 and name = $2 and status <> 'deleted'
   order by created_at desc
   limit 1`;

/** An organization's jobs by name after a keyset cursor (name, id): cron_job_organization_idx. */
export const LIST_ORGANIZATION_CRON_JOBS = `
  select ${cronJobTable.columnList}, version from cron_job
   where organization_id = $1 and ($2::boolean or status <> 'deleted')
     and ($3::text is null or (name, id) > ($3, $4::uuid))
   order by name, id
   limit $5`;

/**
 * A job's runs and records scheduled in [from, to] after a keyset cursor (scheduled_for, trigger_key),
 * in that order: a range scan of job_run_occurrence_idx.
 */
export const JOB_RUNS_PAGE = `
  select ${jobRunTable.columnList}, version from job_run
   where job_id = $1 and scheduled_for >= $2 and scheduled_for <= $3
     and ($4::timestamptz is null or (scheduled_for, trigger_key) > ($4, $5::text))
   order by scheduled_for, trigger_key
   limit $6`;

/**
 * A job's runs and records in a range of scheduled times, and spans that reach into it; in order. The
 * two parts are disjoint (scheduled_for ≥ / < $2), so `union all` of two limited index scans: a plain
 * `union` read and de-duplicated every run of the range before the limit (200 ms for 100,000 runs).
 */
export const SELECT_JOB_RUNS = `
  (select ${jobRunTable.columnList}, version from job_run
    where job_id = $1 and scheduled_for >= $2 and scheduled_for <= $3
    order by scheduled_for, trigger_key
    limit $4)
  union all
  (select ${jobRunTable.columnList}, version from job_run
    where job_id = $1 and span_last is not null and span_last >= $2 and scheduled_for < $2
    order by scheduled_for, trigger_key
    limit $4)
   order by scheduled_for, trigger_key
   limit $4`;

/**
 * The scheduled_for of a job's schedule and backfill runs in a range that ran or are on their way
 * (backfill leaves those occurrences alone). Records of occurrences that never ran do not count.
 */
export const SELECT_ALREADY_RUN = `
  select distinct scheduled_for from job_run
   where job_id = $1 and scheduled_for >= $2 and scheduled_for <= $3
     and trigger_key in ('schedule', 'backfill')
     and status not in ('skipped', 'missed', 'paused', 'cancelled')`;

/** Runs per status of one job (the show command). */
export const COUNT_JOB_RUNS = `
  select status, count(*)::int as n from job_run where job_id = $1 group by status order by status`;

export interface DueCronJobRow {
  state: ExistingCronJob;
  version: number;
  activeRuns: number;
  bufferedRuns: number;
}

/**
 * An organization's cron quota lock (issue 23, ADR 0029): every create of an active job and every resume
 * takes it before counting the organization's active jobs, and holds it to its commit, so two concurrent
 * creates count one after the other and cannot both take the last place. A transaction-level advisory
 * lock: nothing to clean up, and only creates and resumes of one organization wait for each other.
 */
export const LOCK_CRON_QUOTA = `select pg_advisory_xact_lock(hashtextextended('herald:cron-quota:' || $1, 0))`;

/** An organization's active jobs (paused and deleted ones do not count); read under LOCK_CRON_QUOTA. */
export const COUNT_ACTIVE_CRON_JOBS = `
  select count(*)::int as active from cron_job where organization_id = $1 and status = 'active'`;

/** Takes the organization's quota lock and counts its active jobs (in the caller's transaction). */
export async function lockedActiveCronJobs(tx: SqlClient, organizationId: string): Promise<number> {
  await tx.query(LOCK_CRON_QUOTA, [organizationId]);
  const { rows } = await tx.query<{ active: number }>(COUNT_ACTIVE_CRON_JOBS, [organizationId]);
  return rows[0]!.active;
}

export async function lockDueCronJobs(sql: SqlClient, limit: number): Promise<DueCronJobRow[]> {
  const { rows } = await sql.query<Row & { active_runs: number; buffered_runs: number }>(LOCK_DUE_CRON_JOBS, [
    limit,
  ]);
  return rows.map((row) => ({
    ...cronJobTable.fromRow(row),
    activeRuns: row.active_runs,
    bufferedRuns: row.buffered_runs,
  }));
}

async function dueInMs(sql: SqlClient, statement: string): Promise<number | null> {
  const { rows } = await sql.query<{ due_in_ms: number | null }>(statement);
  const due = rows[0]?.due_in_ms ?? null;
  // Not greatest(0, …) in SQL: it ignores NULL, and "nothing scheduled" would read as "due now".
  return due === null ? null : Math.max(0, due);
}

export const nextCronJobDueInMs = (sql: SqlClient) => dueInMs(sql, NEXT_CRON_JOB_DUE_IN_MS);
export const nextRetryDueInMs = (sql: SqlClient) => dueInMs(sql, NEXT_RETRY_DUE_IN_MS);

async function runRows(sql: SqlClient, statement: string, values: readonly unknown[]) {
  const { rows } = await sql.query<Row>(statement, values);
  return jobRunTable.rows(rows);
}

export const lockReleasableRuns = (sql: SqlClient, limit: number) =>
  runRows(sql, LOCK_RELEASABLE_RUNS, [limit]);
export const lockDueRetries = (sql: SqlClient, limit: number) => runRows(sql, LOCK_DUE_RETRIES, [limit]);
export const lockRunsOfDeletedJobs = (sql: SqlClient, limit: number) =>
  runRows(sql, LOCK_RUNS_OF_DELETED_JOBS, [limit]);
export const findStaleRuns = (sql: SqlClient, staleAfterMs: number, limit: number) =>
  runRows(sql, FIND_STALE_RUNS, [staleAfterMs, limit]);

export function lockStaleRuns(
  sql: SqlClient,
  found: readonly { streamId: string; version: number }[],
  staleAfterMs: number,
) {
  if (found.length === 0) return Promise.resolve([]);
  return runRows(sql, LOCK_STALE_RUNS, [
    staleAfterMs,
    found.map((f) => f.streamId),
    found.map((f) => f.version),
  ]);
}

export async function listCronJobs(
  sql: SqlClient,
  options: { organizationId?: string; includeDeleted?: boolean; limit?: number } = {},
): Promise<ExistingCronJob[]> {
  const { rows } = await sql.query<Row>(SELECT_CRON_JOBS, [
    options.organizationId ?? null,
    options.includeDeleted ?? false,
    options.limit ?? 1_000,
  ]);
  return cronJobTable.rows(rows).map((r) => r.state);
}

export async function findCronJobByName(
  sql: SqlClient,
  organizationId: string,
  name: string,
): Promise<ExistingCronJob | null> {
  const { rows } = await sql.query<Row>(SELECT_CRON_JOB_BY_NAME, [organizationId, name]);
  return rows[0] ? cronJobTable.fromRow(rows[0]).state : null;
}

export async function jobRuns(
  sql: SqlClient,
  jobId: string,
  range: { from: Date | string; to: Date | string; limit: number },
): Promise<ExistingJobRun[]> {
  if (!isUuid(jobId)) return [];
  return (await runRows(sql, SELECT_JOB_RUNS, [jobId, range.from, range.to, range.limit])).map(
    (r) => r.state,
  );
}

export async function alreadyRun(
  sql: SqlClient,
  jobId: string,
  from: Date | string,
  to: Date | string,
): Promise<string[]> {
  const { rows } = await sql.query<{ scheduled_for: Date }>(SELECT_ALREADY_RUN, [jobId, from, to]);
  return rows.map((row) => row.scheduled_for.toISOString());
}

export async function countJobRuns(sql: SqlClient, jobId: string): Promise<Record<string, number>> {
  const { rows } = await sql.query<{ status: string; n: number }>(COUNT_JOB_RUNS, [jobId]);
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

export async function listOrganizationCronJobs(
  sql: SqlClient,
  params: {
    organizationId: string;
    includeDeleted: boolean;
    after: { name: string; id: string } | null;
    limit: number;
  },
): Promise<ExistingCronJob[]> {
  const { rows } = await sql.query<Row>(LIST_ORGANIZATION_CRON_JOBS, [
    params.organizationId,
    params.includeDeleted,
    params.after?.name ?? null,
    params.after?.id ?? null,
    params.limit,
  ]);
  return cronJobTable.rows(rows).map((r) => r.state);
}

export async function jobRunsPage(
  sql: SqlClient,
  jobId: string,
  params: {
    from: Date | string;
    to: Date | string;
    after: { scheduledFor: string; triggerKey: string } | null;
    limit: number;
  },
): Promise<ExistingJobRun[]> {
  if (!isUuid(jobId)) return [];
  return (
    await runRows(sql, JOB_RUNS_PAGE, [
      jobId,
      params.from,
      params.to,
      params.after?.scheduledFor ?? null,
      params.after?.triggerKey ?? null,
      params.limit,
    ])
  ).map((r) => r.state);
}
