/**
 * The CronJob aggregate (seed 004's jobs, made durable): a schedule in a time zone with its type,
 * payload and policies (overlap, catch-up, DST, retries). Its occurrences are materialized by a sweep
 * in `herald scanner` into job_run streams (src/domain/job-run.ts) in the same transaction. Pure
 * decider: commands carry `now`; fire times come from schedule.ts. Decisions: ADR 0011.
 */
import type { CronJobCommand } from './cron-job/commands.js';
import { decideCronJob } from './cron-job/decide.js';
import type { CronJobEvent } from './cron-job/events.js';
import { type CronJobState, evolveCronJob, initialCronJobState } from './cron-job/state.js';
import type { Decider } from './decider.js';

export * from './cron-job/commands.js';
export { DEFAULT_TIMEOUT_MS, decideCronJob } from './cron-job/decide.js';
export * from './cron-job/events.js';
export * from './cron-job/materialize.js';
export * from './cron-job/operations.js';
export * from './cron-job/policies.js';
export * from './cron-job/schedule.js';
export * from './cron-job/state.js';

export const CRON_JOB_STREAM_TYPE = 'cron_job';

export const cronJobDecider: Decider<CronJobState, CronJobCommand, CronJobEvent> = {
  decide: decideCronJob,
  evolve: evolveCronJob,
  initialState: initialCronJobState,
};
