/**
 * The occurrence ledger: every due occurrence of a job with its fate — fired (and how the run went),
 * buffered, skipped for overlap, missed by the catch-up policy, held back by a pause, backfilled, or a
 * manual run — for a range of times, built from the job's runs (one row per run; missed and paused
 * occurrences are recorded as one row per stretch, expanded here through the schedule), plus the
 * occurrences a current pause is holding back. And the preview of the next fire times, DST policy
 * applied.
 */
import { type ExistingCronJob, type Occurrence, scheduleFor } from '../../domain/cron-job.js';
import type { ExistingJobRun, RunFate, RunStatus, RunTrigger } from '../../domain/job-run.js';

export interface LedgerEntry {
  scheduledFor: string;
  fate: RunFate;
  /** The run's status; `paused` for occurrences a current pause holds back (no run yet). */
  status: RunStatus;
  trigger: RunTrigger;
  /** The run (for a stretch of missed or paused occurrences: the one run recording them). */
  runId: string | null;
  attempts: number;
  reason: string | null;
  error: string | null;
  responseStatus: number | null;
}

const entryOf = (run: ExistingJobRun, scheduledFor: string): LedgerEntry => ({
  scheduledFor,
  fate: run.fate,
  status: run.status,
  trigger: run.trigger,
  runId: run.runId,
  attempts: run.attempts,
  reason: run.reason,
  error: run.error,
  responseStatus: run.responseStatus,
});

function scheduleOf(job: ExistingCronJob) {
  return scheduleFor({ expression: job.schedule, timezone: job.timezone, dst: job.dst });
}

/** The occurrences of [first, last] by the job's schedule (at most `limit`). */
function expand(job: ExistingCronJob, first: number, last: number, limit: number): number[] {
  return [
    first,
    ...scheduleOf(job)
      .between(first, last, Math.max(0, limit - 1))
      .map((o) => o.at),
  ];
}

export function buildLedger(
  job: ExistingCronJob,
  runs: readonly ExistingJobRun[],
  range: { from: number; to: number; now: number; limit: number },
): LedgerEntry[] {
  const entries: LedgerEntry[] = [];
  for (const run of runs) {
    if (run.spanLast === null || run.spanCount === null) {
      entries.push(entryOf(run, run.scheduledFor));
      continue;
    }
    const first = Date.parse(run.scheduledFor);
    const last = Date.parse(run.spanLast);
    const times = expand(job, first, last, run.spanCount + 1);
    if (times.length !== run.spanCount || times.at(-1) !== last) {
      // The schedule changed since the stretch was recorded: show it as recorded, first and last.
      entries.push(entryOf(run, run.scheduledFor));
      if (last !== first) entries.push(entryOf(run, run.spanLast));
      continue;
    }
    for (const at of times) {
      if (at >= range.from && at <= range.to) entries.push(entryOf(run, new Date(at).toISOString()));
    }
  }
  // A pause in progress holds back occurrences that have no run yet.
  if (job.status === 'paused' && job.nextRunAt !== null) {
    const held = Date.parse(job.nextRunAt);
    const until = Math.min(range.to, range.now);
    if (held <= until) {
      for (const at of expand(job, held, until, range.limit)) {
        if (at < range.from) continue;
        entries.push({
          scheduledFor: new Date(at).toISOString(),
          fate: 'paused',
          status: 'paused',
          trigger: 'schedule',
          runId: null,
          attempts: 0,
          reason: `held back by the pause: ${job.pausedReason}`,
          error: null,
          responseStatus: null,
        });
      }
    }
  }
  return entries
    .sort(
      (a, b) => Date.parse(a.scheduledFor) - Date.parse(b.scheduledFor) || a.trigger.localeCompare(b.trigger),
    )
    .slice(0, range.limit);
}

/** The next `count` fire times of an active or paused job, from its next occurrence. */
export function upcomingOccurrences(job: ExistingCronJob, count: number, now: number): Occurrence[] {
  if (job.status === 'deleted' || job.nextRunAt === null) return [];
  const schedule = scheduleOf(job);
  const next = Date.parse(job.nextRunAt);
  // A paused job resumes with the first occurrence after its resume: preview from now.
  const from = job.status === 'paused' ? Math.max(now, next - 1) : next - 1;
  return schedule.upcoming(from, count);
}
