/**
 * The cron executors, as a configuration of the fenced handler consuming `cron_events`: a run is executed
 * only while it is queued or running with the message's epoch (invariant 5), else a quiet discard on
 * `cron_delivery/<message id>`. The effect marks the run `running` in a transaction of its own, then runs
 * the job's type under its timeout; the outcome is a run command in the inbox transaction (invariant 4):
 * CompleteRun, FailRun for a permanent error, otherwise FailAttempt, so the run decides its own retry and
 * a failing job never loops. A job type this worker does not know is dead-lettered at once. ADR 0011.
 */
import { z } from 'zod';
import type { ExecutableJob } from '../../domain/cron-job.js';
import { isJobType, JOB_TYPES } from '../../domain/cron-job.js';
import type { AttemptReport, JobRunCommand, JobRunEvent, JobRunState } from '../../domain/job-run.js';
import { DeadLetterError, errorMessage, HeraldError, TransientError } from '../../errors.js';
import type { CommandHandler } from '../../eventstore/command-handler.js';
import type { Logger } from '../../logger.js';
import type { ExecutionReport, JobExecutor } from '../../ports/job-executor.js';
import type { Handler } from '../../worker/delivery-policy.js';
import { type FencedHandlerDefinition, fencedHandler } from '../../worker/fenced-handler.js';
import { cronJobStore } from './job-descriptor.js';
import { jobRunAggregate, type RunMessagePayload } from './run-descriptor.js';
import { CRON_EXECUTOR_CONSUMER } from './topology.js';

/** The job type is a plain string here: an unknown one is dead-lettered by the handler, not rejected by parse. */
export const runMessagePayload = z.strictObject({
  runId: z.uuid(),
  jobId: z.uuid(),
  organizationId: z.string().min(1),
  jobType: z.string().min(1),
  scheduledFor: z.iso.datetime(),
  epoch: z.number().int().positive(),
  attempt: z.number().int().positive(),
}) satisfies z.ZodType<RunMessagePayload>;

type Outcome =
  | { kind: 'completed'; report: ExecutionReport; durationMs: number }
  | { kind: 'cancelled'; reason: string };

export interface RunExecutionOptions {
  handler: CommandHandler;
  logger: Logger;
  executor: JobExecutor<ExecutableJob>;
  /** HERALD_CRON_MAX_TIMEOUT_MS: a job's own timeout is capped at this. */
  maxTimeoutMs: number;
  /** Heartbeat while a job runs longer than this (below the stale-run window). */
  heartbeatMs?: number;
}

const durations = new WeakMap<Error, number>();

/** The report a failed attempt leaves on its run, from the error's details. */
function reportOf(error: Error): AttemptReport {
  const details = error instanceof HeraldError ? error.details : {};
  const status = details.responseStatus;
  const output = details.output;
  return {
    responseStatus: typeof status === 'number' ? status : null,
    output: typeof output === 'string' ? output : null,
    durationMs: durations.get(error) ?? null,
  };
}

export function runExecution(
  options: RunExecutionOptions,
): FencedHandlerDefinition<JobRunState, JobRunCommand, JobRunEvent, RunMessagePayload, Outcome> {
  const runs = options.handler.for(jobRunAggregate);
  return {
    consumer: CRON_EXECUTOR_CONSUMER,
    aggregate: jobRunAggregate,
    async effect({ message, claim, state, tx, log }): Promise<Outcome> {
      if (state.status === 'NONE') throw new Error('unreachable: refused above');
      const job = (await cronJobStore.load(tx, state.jobId))?.state;
      if (!job || job.status === 'NONE' || job.status === 'deleted') {
        return { kind: 'cancelled', reason: 'the job was deleted' };
      }
      await runs.handle(
        claim.streamId,
        (now) => ({ type: 'StartRun', runId: claim.streamId, epoch: claim.epoch, now }),
        {
          meta: {
            actor: CRON_EXECUTOR_CONSUMER,
            causationId: message.messageId,
            ...(message.correlationId ? { correlationId: message.correlationId } : {}),
          },
        },
      );
      const timeoutMs = Math.min(job.timeoutMs, options.maxTimeoutMs);
      const signal = AbortSignal.timeout(timeoutMs);
      const started = performance.now();
      try {
        const report = await options.executor.execute(
          { jobType: job.jobType, payload: job.payload } as ExecutableJob,
          {
            runId: state.runId,
            jobId: state.jobId,
            scheduledFor: state.scheduledFor,
            attempt: state.attempts,
            signal,
          },
        );
        return { kind: 'completed', report, durationMs: Math.round(performance.now() - started) };
      } catch (error) {
        const failure =
          signal.aborted && !(error instanceof HeraldError && error.code === 'PERMANENT_FAILURE')
            ? new TransientError(`${job.jobType} timed out after ${timeoutMs} ms`, { timeout: true }, error)
            : error instanceof Error
              ? error
              : new Error(String(error));
        durations.set(failure, Math.round(performance.now() - started));
        log.debug({ err: failure }, 'job attempt failed');
        throw failure;
      }
    },
    heartbeat: ({ streamId, epoch }, now) => ({ type: 'HeartbeatRun', runId: streamId, epoch, now }),
    complete: ({ streamId, epoch }, now, outcome) =>
      outcome?.kind === 'cancelled'
        ? { type: 'CancelRun', runId: streamId, epoch, now, reason: outcome.reason }
        : {
            type: 'CompleteRun',
            runId: streamId,
            epoch,
            now,
            report: {
              responseStatus: outcome?.report.responseStatus ?? null,
              output: outcome?.report.output ?? null,
              durationMs: outcome?.durationMs ?? null,
            },
          },
    fail: ({ streamId, epoch }, reason, now, error) => ({
      type: 'FailRun',
      runId: streamId,
      epoch,
      now,
      error: reason,
      report: reportOf(error),
    }),
    retry: ({ streamId, epoch }, error, now) => ({
      type: 'FailAttempt',
      runId: streamId,
      epoch,
      now,
      error: errorMessage(error).slice(0, 10_000) || error.name,
      report: reportOf(error),
    }),
  };
}

/** The cron_events handler: dead-letters unknown job types, then the fenced run execution. */
export function runExecutionHandler(options: RunExecutionOptions): Handler<RunMessagePayload> {
  const fenced = fencedHandler(runExecution(options), {
    handler: options.handler,
    logger: options.logger,
    ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
  });
  return async (message, tx) => {
    if (!isJobType(message.payload.jobType)) {
      throw new DeadLetterError(
        `unknown job type '${message.payload.jobType}' (this worker knows ${JOB_TYPES.join(', ')})`,
        { jobType: message.payload.jobType, runId: message.payload.runId },
      );
    }
    return fenced(message, tx);
  };
}
