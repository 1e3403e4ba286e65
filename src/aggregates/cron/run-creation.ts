/**
 * The runs a cron job's events cause, written in the same transaction as those events (invariant 1):
 * materialized occurrences (fired, buffered, skipped for overlap), the record of missed ones, a manual
 * trigger, a backfill, the record of occurrences a pause held back. Each is a job_run stream created at
 * version 1 under its derived id, so a second writer of the same occurrence fails on the event
 * stream's unique version as well as on the run table's unique (job, scheduled_for, trigger key).
 */
import type { CronJobEvent, CronJobState, ExistingCronJob } from '../../domain/cron-job.js';
import type { JobRunCommand, JobRunEvent } from '../../domain/job-run.js';
import { type CreateRun, type JobRunState, runIdFor } from '../../domain/job-run.js';
import type { AggregateCommands, CommandResult } from '../../eventstore/command-handler.js';
import type { SqlClient } from '../../ports/database.js';
import type { EventMeta } from '../../ports/events.js';

export type RunSpec = Omit<CreateRun, 'type' | 'now'> & { runId: string };

function base(job: ExistingCronJob) {
  return {
    jobId: job.jobId,
    organizationId: job.organizationId,
    jobType: job.jobType,
    retry: job.retry,
    overlap: job.overlap,
  };
}

/** The runs one event of a job causes (the job's state after the event). */
export function runsCausedBy(job: ExistingCronJob, event: CronJobEvent): RunSpec[] {
  switch (event.type) {
    case 'CronOccurrencesMaterialized': {
      const runs: RunSpec[] = [];
      const { missed } = event.data;
      if (missed) {
        runs.push({
          ...base(job),
          runId: missed.runId,
          scheduledFor: missed.first,
          trigger: 'schedule',
          triggerKey: 'schedule',
          fate: 'missed',
          span: { last: missed.last, count: missed.count },
          reason: missed.reason,
        });
      }
      for (const o of event.data.occurrences) {
        runs.push({
          ...base(job),
          runId: o.runId,
          scheduledFor: o.scheduledFor,
          trigger: 'schedule',
          triggerKey: 'schedule',
          fate: o.fate,
          reason:
            o.fate === 'skipped-overlap'
              ? `overlap policy ${job.overlap}: an earlier run is still active`
              : null,
        });
      }
      return runs;
    }
    case 'CronJobTriggered':
      return [
        {
          ...base(job),
          runId: event.data.runId,
          scheduledFor: event.data.at,
          trigger: 'manual',
          triggerKey: `manual:${event.data.runId}`,
          fate: 'manual',
        },
      ];
    case 'CronJobBackfilled':
      return event.data.runs.map((r) => ({
        ...base(job),
        runId: r.runId,
        scheduledFor: r.scheduledFor,
        trigger: 'backfill',
        triggerKey: 'backfill',
        fate: 'backfilled',
      }));
    case 'CronJobResumed': {
      const { paused } = event.data;
      if (!paused) return [];
      return [
        {
          ...base(job),
          runId: runIdFor(job.jobId, paused.first, 'schedule'),
          scheduledFor: paused.first,
          trigger: 'schedule',
          triggerKey: 'schedule',
          fate: 'paused',
          span: { last: paused.last, count: paused.count },
          reason: `the job was paused (${paused.count} occurrence(s))`,
        },
      ];
    }
    default:
      return [];
  }
}

/** Creates, in `tx`, every run the results' events cause; returns the run results (for wake-ups). */
export async function createRunsInTransaction(
  tx: SqlClient,
  runs: AggregateCommands<JobRunState, JobRunCommand, JobRunEvent>,
  results: readonly CommandResult<CronJobState, CronJobEvent>[],
  meta: EventMeta,
): Promise<CommandResult<JobRunState, JobRunEvent>[]> {
  const specs = results.flatMap((result) => {
    const job = result.state;
    if (job.status === 'NONE') return [];
    return result.events.flatMap((event) => runsCausedBy(job, event));
  });
  if (specs.length === 0) return [];
  const byId = new Map(specs.map((spec) => [spec.runId, spec]));
  const batch = await runs.handleBatchInTransaction(
    tx,
    specs.map((spec) => ({ streamId: spec.runId, state: runs.aggregate.decider.initialState(), version: 0 })),
    (stream, now) => ({ type: 'CreateRun', now, ...byId.get(stream.streamId)! }),
    { meta },
  );
  // A run the decider refuses (invalid input) must not leave its job's events without it.
  if (batch.refused.length > 0) throw batch.refused[0]!.error;
  return batch.results;
}
