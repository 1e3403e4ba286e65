/**
 * The cron aggregates' sweeps in `herald scanner`, as generic sweepers: materialize gives each due active
 * job one MaterializeDue command and creates the runs it causes in the same transaction (the job's event,
 * the runs' events, rows and messages: invariant 1), unique per (job, scheduled_for, trigger) however many
 * scanners run (invariant 7). The run sweeps cancel waiting runs of deleted jobs, release buffered runs,
 * claim due retries with a new epoch and message, and recover stale runs whose message is no longer in
 * flight (invariant 5). ADR 0011.
 */
import {
  type DueCronJobRow,
  findStaleRuns,
  lockDueCronJobs,
  lockDueRetries,
  lockReleasableRuns,
  lockRunsOfDeletedJobs,
  lockStaleRuns,
  nextCronJobDueInMs,
  nextRetryDueInMs,
} from '../../adapters/postgres/cron-queries.js';
import type { CronJobCommand, CronJobEvent, CronJobState } from '../../domain/cron-job.js';
import type { JobRunCommand, JobRunEvent, JobRunState } from '../../domain/job-run.js';
import type { LoadedStream } from '../../eventstore/aggregate.js';
import {
  type ClaimSweepDefinition,
  type CountingSweeper,
  defineClaimSweeper,
  defineStaleRecovery,
  type StaleRecoveryDefinition,
  type SweeperDeps,
  sweepInOrder,
} from '../../scanner/sweeper.js';
import { cronJobAggregate } from './job-descriptor.js';
import { createRunsInTransaction } from './run-creation.js';
import { jobRunAggregate, runClaimMessageIds } from './run-descriptor.js';

/** Runs one materialization records individually at most (more stay due for the next sweep). */
export const MAX_RUNS_PER_MATERIALIZATION = 100;
/** A queued or running run with no sign of life this long, and no message in flight, is reclaimed. */
export const DEFAULT_STALE_RUN_MS = 15 * 60_000;

/** A due job as the claim query loads it: the stream plus its run counts for the overlap policy. */
type DueCronJob = LoadedStream<CronJobState> & { activeRuns: number; bufferedRuns: number };

const dueStream = (row: DueCronJobRow): DueCronJob => ({
  streamId: row.state.jobId,
  state: row.state,
  version: row.version,
  activeRuns: row.activeRuns,
  bufferedRuns: row.bufferedRuns,
});

const runStream = (row: { state: JobRunState; version: number }): LoadedStream<JobRunState> => ({
  streamId: row.state.status === 'NONE' ? '' : row.state.runId,
  state: row.state,
  version: row.version,
});

export function materializeSweep(
  deps: SweeperDeps,
): ClaimSweepDefinition<CronJobState, CronJobCommand, CronJobEvent> {
  const runs = deps.handler.for(jobRunAggregate);
  return {
    name: 'cron_job.materialize',
    aggregate: cronJobAggregate,
    actor: 'scanner',
    lockDue: async (tx, limit) => (await lockDueCronJobs(tx, limit)).map(dueStream),
    command(stream, now) {
      // lockDue returned DueCronJob streams; the sweeper hands each one back here as it was.
      const due = stream as DueCronJob;
      return {
        type: 'MaterializeDue',
        jobId: stream.streamId,
        now,
        activeRuns: due.activeRuns,
        bufferedRuns: due.bufferedRuns,
        maxRuns: MAX_RUNS_PER_MATERIALIZATION,
      };
    },
    async followUp(tx, results) {
      const created = await createRunsInTransaction(tx, runs, results, { actor: 'scanner' });
      return () => runs.signalAfterCommit(created, deps.wakeups);
    },
    nextDueInMs: nextCronJobDueInMs,
    outcome(result) {
      const event = result.events[0];
      const occurrences = event?.type === 'CronOccurrencesMaterialized' ? event.data.occurrences : [];
      const missed = event?.type === 'CronOccurrencesMaterialized' ? (event.data.missed?.count ?? 0) : 0;
      return {
        counter: 'materialized',
        message: `cron job materialized: ${occurrences.map((o) => `${o.scheduledFor} ${o.fate}`).join(', ') || 'nothing to run'}${missed ? `; ${missed} missed` : ''}`,
        level: missed > 0 ? 'info' : 'debug',
      };
    },
  };
}

export const cancelRunsOfDeletedJobs: ClaimSweepDefinition<JobRunState, JobRunCommand, JobRunEvent> = {
  name: 'job_run.cancel-deleted',
  aggregate: jobRunAggregate,
  actor: 'scanner',
  lockDue: async (tx, limit) => (await lockRunsOfDeletedJobs(tx, limit)).map(runStream),
  command: (stream, now) => ({
    type: 'CancelRun',
    runId: stream.streamId,
    now,
    reason: 'the job was deleted',
  }),
  outcome: () => ({ counter: 'cancelled', message: 'run cancelled: its job was deleted', level: 'info' }),
};

export const releaseBufferedRuns: ClaimSweepDefinition<JobRunState, JobRunCommand, JobRunEvent> = {
  name: 'job_run.release-buffered',
  aggregate: jobRunAggregate,
  actor: 'scanner',
  lockDue: async (tx, limit) => (await lockReleasableRuns(tx, limit)).map(runStream),
  command: (stream, now) => ({ type: 'ClaimRun', runId: stream.streamId, now }),
  outcome: () => ({ counter: 'released', message: 'buffered run released: its job is idle', level: 'info' }),
};

export const claimDueRetries: ClaimSweepDefinition<JobRunState, JobRunCommand, JobRunEvent> = {
  name: 'job_run.retry',
  aggregate: jobRunAggregate,
  actor: 'scanner',
  lockDue: async (tx, limit) => (await lockDueRetries(tx, limit)).map(runStream),
  command: (stream, now) => ({ type: 'ClaimRun', runId: stream.streamId, now }),
  nextDueInMs: nextRetryDueInMs,
  outcome: (result) => ({
    counter: 'retried',
    message: `run retry claimed (attempt ${result.state.status === 'NONE' ? '?' : result.state.attempts})`,
    level: 'info',
  }),
};

export const recoverStaleRuns: StaleRecoveryDefinition<JobRunState, JobRunCommand, JobRunEvent> = {
  name: 'job_run.recover',
  aggregate: jobRunAggregate,
  actor: 'reaper',
  findStale: async (sql, { staleAfterMs, limit }) =>
    (await findStaleRuns(sql, staleAfterMs, limit)).map(runStream),
  lockStale: async (tx, found, staleAfterMs) => (await lockStaleRuns(tx, found, staleAfterMs)).map(runStream),
  claimMessageIds: runClaimMessageIds,
  command: (stream, now, staleAfterMs) => ({
    type: 'ReclaimRun',
    runId: stream.streamId,
    now,
    staleAfterMs,
    reason: `no sign of life for ${Math.round(staleAfterMs / 1000)} s and no message in flight: executor presumed lost`,
  }),
  outcome: (result) => ({
    counter: 'reclaimed',
    message: `reclaimed stale run (now ${result.state.status})`,
    level: 'warn',
  }),
};

export interface CronSweeperOptions extends Omit<SweeperDeps, 'batchSize'> {
  batchSize?: number;
  staleRunMs?: number;
  messageLostAfterMs?: number;
  maxReclaimsPerPass?: number;
}

/** The cron job sweeper: materialize due occurrences. */
export function cronJobSweeper(
  options: CronSweeperOptions,
): CountingSweeper & { materialize: CountingSweeper } {
  const deps: SweeperDeps = { ...options, batchSize: options.batchSize ?? 500 };
  const materialize = defineClaimSweeper(materializeSweep(deps), deps);
  return Object.assign(sweepInOrder('cron_job', materialize), { materialize });
}

/** The job run sweeper: cancel runs of deleted jobs, release buffered runs, claim due retries, recover stale claims. */
export function jobRunSweeper(options: CronSweeperOptions) {
  const deps: SweeperDeps = { ...options, batchSize: options.batchSize ?? 500 };
  const retry = defineClaimSweeper(claimDueRetries, deps);
  const cancel = defineClaimSweeper(cancelRunsOfDeletedJobs, deps);
  const release = defineClaimSweeper(releaseBufferedRuns, deps);
  const recover = defineStaleRecovery(recoverStaleRuns, deps, {
    staleAfterMs: options.staleRunMs ?? DEFAULT_STALE_RUN_MS,
    messageLostAfterMs: options.messageLostAfterMs ?? 24 * 3_600_000,
    maxReclaimsPerPass: options.maxReclaimsPerPass ?? 100,
  });
  return Object.assign(sweepInOrder('job_run', retry, cancel, release, recover), {
    retry,
    cancel,
    release,
    recover,
  });
}
