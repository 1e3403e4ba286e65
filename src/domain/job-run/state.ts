/**
 * Job run state (the job_run table, one row per run and per recorded occurrence) and `evolve`.
 * Statuses: a run that goes out is `queued` (claimed: its message is on its way to an executor), then
 * `running` (an executor started it), then `completed`, `retry_scheduled` (an attempt failed; a sweep
 * claims it again when the retry is due), `failed` (a permanent error) or `permanently_failed` (every
 * attempt failed); `buffered` waits for the job's active run to end (buffer-one). Occurrences that never
 * run are recorded too, for the ledger: `skipped` (overlap), `missed` (catch-up), `paused`, `cancelled`
 * (the job was deleted first). Plain JSON, keyed on `status` (invariant 8).
 */
import { IllegalStateError } from '../../errors.js';
import type { OverlapPolicy, RetryPolicy } from '../cron-job/policies.js';
import { assertNever } from '../decider.js';
import type { RunFate, RunTrigger } from './commands.js';
import type { JobRunEvent } from './events.js';

export const RUN_STATUSES = [
  'buffered',
  'queued',
  'running',
  'retry_scheduled',
  'completed',
  'failed',
  'permanently_failed',
  'skipped',
  'missed',
  'paused',
  'cancelled',
] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** Statuses that count as the job's run still being active (the overlap policy looks at them). */
export const ACTIVE_RUN_STATUSES = [
  'queued',
  'running',
  'retry_scheduled',
] as const satisfies readonly RunStatus[];
/** A claim is held (a message on its way or an executor at work): what stale recovery looks at. */
export const CLAIMED_RUN_STATUSES = ['queued', 'running'] as const satisfies readonly RunStatus[];
export const FINAL_RUN_STATUSES = [
  'completed',
  'failed',
  'permanently_failed',
  'skipped',
  'missed',
  'paused',
  'cancelled',
] as const satisfies readonly RunStatus[];

export interface JobRunFields {
  readonly runId: string;
  readonly jobId: string;
  readonly organizationId: string;
  readonly jobType: string;
  readonly scheduledFor: string;
  readonly trigger: RunTrigger;
  readonly triggerKey: string;
  readonly fate: RunFate;
  /** A record of several occurrences (missed, paused): the last one and how many, else null. */
  readonly spanLast: string | null;
  readonly spanCount: number | null;
  /** Why it did not run (skipped, missed, paused, cancelled), else null. */
  readonly reason: string | null;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly retry: RetryPolicy;
  readonly overlap: OverlapPolicy;
  /** Fencing token: every claim (creation that goes out, release, retry, reclaim) increments it. */
  readonly claimEpoch: number;
  /** The live claim's last sign of life (claim, start, heartbeat); non-null while queued or running. */
  readonly claimedAt: string | null;
  /** When the retry is due; non-null only while retry_scheduled. */
  readonly nextAttemptAt: string | null;
  readonly startedAt: string | null;
  readonly finishedAt: string | null;
  readonly responseStatus: number | null;
  readonly output: string | null;
  readonly error: string | null;
  readonly durationMs: number | null;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface NoJobRun {
  readonly status: 'NONE';
}
export type JobRunIn<S extends RunStatus> = JobRunFields & { readonly status: S };
export type ExistingJobRun = { [S in RunStatus]: JobRunIn<S> }[RunStatus];
export type JobRunState = NoJobRun | ExistingJobRun;

export function initialJobRunState(): JobRunState {
  return { status: 'NONE' };
}

function unfit(state: JobRunState, event: JobRunEvent): IllegalStateError {
  return new IllegalStateError(`event ${event.type} cannot follow a job run in status ${state.status}`, {
    event: event.type,
    status: state.status,
  });
}

const STATUS_OF_FATE: Record<RunFate, RunStatus> = {
  fired: 'queued',
  backfilled: 'queued',
  manual: 'queued',
  buffered: 'buffered',
  'skipped-overlap': 'skipped',
  missed: 'missed',
  paused: 'paused',
};

const isClaimed = (status: RunStatus) => status === 'queued' || status === 'running';

export function evolveJobRun(state: JobRunState, event: JobRunEvent): JobRunState {
  if (event.type === 'JobRunCreated') {
    if (state.status !== 'NONE') throw unfit(state, event);
    const { at, epoch, span, ...fields } = event.data;
    const status = STATUS_OF_FATE[fields.fate];
    return {
      ...fields,
      status,
      spanLast: span?.last ?? null,
      spanCount: span?.count ?? null,
      attempts: status === 'queued' ? 1 : 0,
      claimEpoch: epoch,
      claimedAt: status === 'queued' ? at : null,
      nextAttemptAt: null,
      startedAt: null,
      finishedAt: null,
      responseStatus: null,
      output: null,
      error: null,
      durationMs: null,
      createdAt: at,
      updatedAt: at,
    } as ExistingJobRun;
  }
  if (state.status === 'NONE') throw unfit(state, event);
  const at = event.data.at;
  switch (event.type) {
    case 'JobRunClaimed':
      if (state.status !== 'buffered' && state.status !== 'retry_scheduled') throw unfit(state, event);
      return {
        ...state,
        status: 'queued',
        claimEpoch: event.data.epoch,
        attempts: event.data.attempt,
        claimedAt: at,
        nextAttemptAt: null,
        startedAt: null,
        updatedAt: at,
      };
    case 'JobRunStarted':
      if (state.status !== 'queued') throw unfit(state, event);
      return { ...state, status: 'running', startedAt: at, claimedAt: at, updatedAt: at };
    case 'JobRunHeartbeat':
      if (!isClaimed(state.status)) throw unfit(state, event);
      return { ...state, claimedAt: at, updatedAt: at } as ExistingJobRun;
    case 'JobRunCompleted':
    case 'JobRunAttemptFailed':
    case 'JobRunFailed': {
      if (!isClaimed(state.status)) throw unfit(state, event);
      const { responseStatus, output, durationMs } = event.data;
      const finished = {
        ...state,
        responseStatus,
        output,
        durationMs,
        startedAt: state.startedAt ?? at,
        finishedAt: event.data.finishedAt,
        claimedAt: null,
        updatedAt: at,
      };
      if (event.type === 'JobRunCompleted') return { ...finished, status: 'completed', error: null };
      if (event.type === 'JobRunAttemptFailed') {
        return {
          ...finished,
          status: 'retry_scheduled',
          error: event.data.error,
          nextAttemptAt: event.data.nextAttemptAt,
        };
      }
      return { ...finished, status: event.data.to, error: event.data.error };
    }
    case 'JobRunReclaimed':
      if (!isClaimed(state.status)) throw unfit(state, event);
      return {
        ...state,
        status: event.data.nextAttemptAt === null ? 'permanently_failed' : 'retry_scheduled',
        claimEpoch: event.data.epoch,
        claimedAt: null,
        nextAttemptAt: event.data.nextAttemptAt,
        error: event.data.reason,
        finishedAt: event.data.nextAttemptAt === null ? at : state.finishedAt,
        updatedAt: at,
      };
    case 'JobRunCancelled':
      if (!['buffered', 'retry_scheduled', 'queued', 'running'].includes(state.status))
        throw unfit(state, event);
      return {
        ...state,
        status: 'cancelled',
        reason: event.data.reason,
        claimedAt: null,
        nextAttemptAt: null,
        finishedAt: at,
        updatedAt: at,
      };
    default:
      return assertNever(event, 'job run event');
  }
}
