/**
 * Cron job state (the inline projection in the cron_job table) and `evolve`. Plain JSON keyed on
 * `status`, never `undefined`, so a jsonb round trip and a replay both give the stored row exactly
 * (invariant 8). `evolve` refuses an event that cannot follow the state (a corrupt log).
 */
import { IllegalStateError } from '../../errors.js';
import { assertNever } from '../decider.js';
import type { CronJobEvent } from './events.js';
import type { CatchUpPolicy, JobPayload, JobType, OverlapPolicy, RetryPolicy } from './policies.js';
import type { DstPolicy } from './schedule.js';

export const CRON_JOB_STATUSES = ['active', 'paused', 'deleted'] as const;
export type CronJobStatus = (typeof CRON_JOB_STATUSES)[number];

export interface CronJobFields {
  readonly jobId: string;
  readonly organizationId: string;
  readonly name: string;
  /** Cron expression, 5 or 6 fields. */
  readonly schedule: string;
  readonly timezone: string;
  readonly dst: DstPolicy;
  readonly jobType: JobType;
  readonly payload: JobPayload;
  readonly timeoutMs: number;
  readonly overlap: OverlapPolicy;
  readonly catchUp: CatchUpPolicy;
  readonly retry: RetryPolicy;
  /**
   * The next occurrence not yet handled: due for the materializer when active and ≤ now. Kept while
   * paused (the first occurrence the pause holds back); null when deleted or the expression never fires again.
   */
  readonly nextRunAt: string | null;
  /** The latest occurrence the materializer handled (whatever its fate). */
  readonly lastOccurrenceAt: string | null;
  readonly pausedAt: string | null;
  readonly pausedReason: string | null;
  readonly pausedBy: string | null;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly deletedAt: string | null;
  /** The Idempotency-Key the job was created with, or null. */
  readonly idempotencyKey: string | null;
}

export interface NoCronJob {
  readonly status: 'NONE';
}
export type ActiveCronJob = CronJobFields & { readonly status: 'active' };
export type PausedCronJob = CronJobFields & {
  readonly status: 'paused';
  readonly pausedAt: string;
  readonly pausedReason: string;
  readonly pausedBy: string;
};
export type DeletedCronJob = CronJobFields & { readonly status: 'deleted'; readonly deletedAt: string };
export type ExistingCronJob = ActiveCronJob | PausedCronJob | DeletedCronJob;
export type CronJobState = NoCronJob | ExistingCronJob;

export function initialCronJobState(): CronJobState {
  return { status: 'NONE' };
}

function unfit(state: CronJobState, event: CronJobEvent): IllegalStateError {
  return new IllegalStateError(`event ${event.type} cannot follow a cron job in status ${state.status}`, {
    event: event.type,
    status: state.status,
  });
}

const unpaused = { pausedAt: null, pausedReason: null, pausedBy: null } as const;

export function evolveCronJob(state: CronJobState, event: CronJobEvent): CronJobState {
  if (event.type === 'CronJobCreated') {
    if (state.status !== 'NONE') throw unfit(state, event);
    const { paused, at, by, payload, idempotencyKey, ...fields } = event.data;
    const common = {
      ...fields,
      idempotencyKey: idempotencyKey ?? null,
      payload: payload as JobPayload,
      lastOccurrenceAt: null,
      createdAt: at,
      updatedAt: at,
      deletedAt: null,
    };
    return paused
      ? {
          ...common,
          status: 'paused',
          pausedAt: at,
          pausedReason: 'created paused',
          pausedBy: by ?? 'unknown',
        }
      : { ...common, status: 'active', ...unpaused };
  }
  if (state.status === 'NONE' || state.status === 'deleted') throw unfit(state, event);
  switch (event.type) {
    case 'CronJobUpdated': {
      const { payload, ...changes } = event.data.changes;
      return {
        ...state,
        ...changes,
        ...(payload !== undefined ? { payload: payload as JobPayload } : {}),
        nextRunAt: event.data.nextRunAt,
        updatedAt: event.data.at,
      };
    }
    case 'CronJobPaused':
      if (state.status !== 'active') throw unfit(state, event);
      return {
        ...state,
        status: 'paused',
        pausedAt: event.data.at,
        pausedReason: event.data.reason,
        pausedBy: event.data.by,
        updatedAt: event.data.at,
      };
    case 'CronJobResumed':
      if (state.status !== 'paused') throw unfit(state, event);
      return {
        ...state,
        status: 'active',
        ...unpaused,
        nextRunAt: event.data.nextRunAt,
        lastOccurrenceAt: event.data.paused?.last ?? state.lastOccurrenceAt,
        updatedAt: event.data.at,
      };
    case 'CronJobDeleted':
      return {
        ...state,
        status: 'deleted',
        ...unpaused,
        nextRunAt: null,
        deletedAt: event.data.at,
        updatedAt: event.data.at,
      };
    case 'CronOccurrencesMaterialized': {
      if (state.status !== 'active') throw unfit(state, event);
      const last = event.data.occurrences.at(-1)?.scheduledFor ?? event.data.missed?.last ?? null;
      return {
        ...state,
        nextRunAt: event.data.nextRunAt,
        lastOccurrenceAt: last ?? state.lastOccurrenceAt,
      };
    }
    case 'CronJobTriggered':
    case 'CronJobBackfilled':
      // Runs of their own; the schedule is unchanged.
      return state;
    default:
      return assertNever(event, 'cron job event');
  }
}
