/**
 * The cron job's operator commands (src/domain/operations.ts), each said once: a job that is not
 * deleted may be updated, triggered, backfilled or deleted; only an active job is paused, only a
 * paused one resumed. The decider refuses through these entries; the API's view of a job lists those
 * its state allows (`commands`).
 */
import type { Operation } from '../operations.js';
import type { ExistingCronJob } from './state.js';

const LIVE = ['active', 'paused'] as const;

export const CRON_JOB_OPERATIONS = {
  update: { command: 'UpdateCronJob', statuses: LIVE },
  pause: { command: 'PauseCronJob', statuses: ['active'], statusRefusal: (s) => `it is ${s.status}` },
  resume: {
    command: 'ResumeCronJob',
    statuses: ['paused'],
    statusRefusal: (s) => `it is ${s.status}, not paused`,
  },
  trigger: { command: 'TriggerCronJob', statuses: LIVE },
  backfill: { command: 'BackfillCronJob', statuses: LIVE },
  delete: { command: 'DeleteCronJob', statuses: LIVE },
} as const satisfies Readonly<Record<string, Operation<ExistingCronJob>>>;
