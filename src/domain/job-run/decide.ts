/**
 * `decide` for job runs. Check order: command shape → run id → status → claim epoch → rules that
 * compare the command with the state (retry due, claim stale). A failed attempt is the run's own
 * decision: a retry after a delay (`retry_scheduled`, claimed again by a sweep with a new epoch) while
 * attempts remain, `permanently_failed` after the last (seed 004: 3 retries).
 */
import { IllegalStateError, ValidationError } from '../../errors.js';
import { retryDelayMs } from '../cron-job/policies.js';
import { assertNever } from '../decider.js';
import { ms } from '../time.js';
import { type JobRunCommand, type ParsedJobRunCommand, parseJobRunCommand } from './commands.js';
import type { JobRunEvent } from './events.js';
import type { ExistingJobRun, JobRunState, RunStatus } from './state.js';

const RUNNABLE_FATES = new Set(['fired', 'backfilled', 'manual']);

function illegal(c: ParsedJobRunCommand, state: JobRunState, why: string): IllegalStateError {
  return new IllegalStateError(`cannot ${c.type} run ${c.runId}: ${why}`, {
    command: c.type,
    runId: c.runId,
    status: state.status,
  });
}

function requireStatus(c: ParsedJobRunCommand, state: ExistingJobRun, allowed: readonly RunStatus[]): void {
  if (!allowed.includes(state.status))
    throw illegal(c, state, `it is ${state.status}, not ${allowed.join(' or ')}`);
}

function requireEpoch(c: ParsedJobRunCommand & { epoch: number }, state: ExistingJobRun): void {
  if (c.epoch !== state.claimEpoch) {
    throw illegal(c, state, `stale epoch ${c.epoch}: the live claim is epoch ${state.claimEpoch}`);
  }
}

export function decideJobRun(command: JobRunCommand, state: JobRunState): JobRunEvent[] {
  const c = parseJobRunCommand(command);

  if (c.type === 'CreateRun') {
    if (state.status !== 'NONE') throw illegal(c, state, 'it already exists');
    const { type: _type, now, ...fields } = c;
    return [
      {
        type: 'JobRunCreated',
        data: {
          ...fields,
          maxAttempts: 1 + c.retry.maxRetries,
          epoch: RUNNABLE_FATES.has(c.fate) ? 1 : 0,
          at: now,
        },
      },
    ];
  }

  if (state.status === 'NONE') throw illegal(c, state, 'it does not exist');
  if (c.runId !== state.runId) {
    throw new ValidationError(`${c.type} is for run ${c.runId}, not ${state.runId}`, { command: c.type });
  }
  const now = c.now;
  /** The attempt's end: its start (or now) plus its duration, not before now. */
  const finishedAt = (durationMs: number | null) =>
    new Date(Math.max(ms(now), ms(state.startedAt ?? now) + (durationMs ?? 0))).toISOString();

  switch (c.type) {
    case 'ClaimRun': {
      requireStatus(c, state, ['buffered', 'retry_scheduled']);
      if (state.status === 'retry_scheduled' && ms(state.nextAttemptAt!) > ms(now)) {
        throw illegal(c, state, `its retry is due at ${state.nextAttemptAt}, after now (${now})`);
      }
      return [
        {
          type: 'JobRunClaimed',
          data: {
            epoch: state.claimEpoch + 1,
            attempt: state.attempts + 1,
            cause: state.status === 'buffered' ? 'released' : 'retry',
            at: now,
          },
        },
      ];
    }
    case 'StartRun':
      requireStatus(c, state, ['queued', 'running']);
      requireEpoch(c, state);
      // A redelivered message of the same claim: already running, nothing new.
      if (state.status === 'running') return [];
      return [{ type: 'JobRunStarted', data: { epoch: c.epoch, at: now } }];
    case 'HeartbeatRun':
      requireStatus(c, state, ['queued', 'running']);
      requireEpoch(c, state);
      return [{ type: 'JobRunHeartbeat', data: { epoch: c.epoch, at: now } }];
    case 'CompleteRun':
      requireStatus(c, state, ['queued', 'running']);
      requireEpoch(c, state);
      return [
        {
          type: 'JobRunCompleted',
          data: { epoch: c.epoch, at: now, ...c.report, finishedAt: finishedAt(c.report.durationMs) },
        },
      ];
    case 'FailAttempt': {
      requireStatus(c, state, ['queued', 'running']);
      requireEpoch(c, state);
      const ended = finishedAt(c.report.durationMs);
      if (state.attempts >= state.maxAttempts) {
        return [
          {
            type: 'JobRunFailed',
            data: {
              epoch: c.epoch,
              at: now,
              error: c.error,
              ...c.report,
              finishedAt: ended,
              to: 'permanently_failed',
            },
          },
        ];
      }
      // The delay counts from the failure, not from the executor's transaction start.
      const delay = retryDelayMs(state.retry, state.attempts);
      return [
        {
          type: 'JobRunAttemptFailed',
          data: {
            epoch: c.epoch,
            at: now,
            error: c.error,
            ...c.report,
            finishedAt: ended,
            nextAttemptAt: new Date(ms(ended) + delay).toISOString(),
          },
        },
      ];
    }
    case 'FailRun':
      requireStatus(c, state, ['queued', 'running']);
      requireEpoch(c, state);
      return [
        {
          type: 'JobRunFailed',
          data: {
            epoch: c.epoch,
            at: now,
            error: c.error,
            ...c.report,
            finishedAt: finishedAt(c.report.durationMs),
            to: 'failed',
          },
        },
      ];
    case 'ReclaimRun': {
      requireStatus(c, state, ['queued', 'running']);
      const age = ms(now) - ms(state.claimedAt!);
      if (age <= c.staleAfterMs) {
        throw illegal(c, state, `its claim is ${age} ms old, not stale (staleAfterMs ${c.staleAfterMs})`);
      }
      return [
        {
          type: 'JobRunReclaimed',
          data: {
            epoch: state.claimEpoch + 1,
            at: now,
            reason: c.reason,
            previousClaimedAt: state.claimedAt!,
            nextAttemptAt: state.attempts < state.maxAttempts ? now : null,
          },
        },
      ];
    }
    case 'CancelRun':
      if (c.epoch !== undefined) {
        requireStatus(c, state, ['queued', 'running']);
        requireEpoch({ ...c, epoch: c.epoch }, state);
      } else {
        requireStatus(c, state, ['buffered', 'retry_scheduled']);
      }
      return [{ type: 'JobRunCancelled', data: { at: now, reason: c.reason } }];
    default:
      return assertNever(c, 'job run command');
  }
}
