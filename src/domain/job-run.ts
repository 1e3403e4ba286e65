/**
 * The JobRun aggregate: one run of a cron job for one occurrence and trigger (or one record of
 * occurrences that did not run), with its attempts, retries, output and timings. Created in the same
 * transaction as the cron job event that caused it; claimed with a fencing epoch (invariant 5) by its
 * creation, a buffer release, a due retry or a stale reclaim; completed by the executor's fenced
 * handler. Pure decider. Decisions: ADR 0011.
 */
import type { Decider } from './decider.js';
import type { JobRunCommand } from './job-run/commands.js';
import { decideJobRun } from './job-run/decide.js';
import type { JobRunEvent } from './job-run/events.js';
import { evolveJobRun, initialJobRunState, type JobRunState } from './job-run/state.js';

export * from './job-run/commands.js';
export { decideJobRun } from './job-run/decide.js';
export * from './job-run/events.js';
export * from './job-run/ids.js';
export * from './job-run/state.js';

export const JOB_RUN_STREAM_TYPE = 'job_run';

export const jobRunDecider: Decider<JobRunState, JobRunCommand, JobRunEvent> = {
  decide: decideJobRun,
  evolve: evolveJobRun,
  initialState: initialJobRunState,
};
