/**
 * The cron slice's response views: a job (without its webhook signing secret, which is never
 * returned) and a run exactly as their states hold them (`sameKeys`), ledger entries, occurrences
 * and backfill results.
 */
import { z } from 'zod';
import { instant, json, operationsField, type SameKeys, sameKeys } from '../../api/views.js';
import {
  AMBIGUOUS_TIME_POLICIES,
  CATCH_UP_MODES,
  CRON_JOB_OPERATIONS,
  CRON_JOB_STATUSES,
  type ExistingCronJob,
  JOB_TYPES,
  MISSING_TIME_POLICIES,
  OVERLAP_POLICIES,
} from '../../domain/cron-job.js';
import { type ExistingJobRun, RUN_FATES, RUN_STATUSES, RUN_TRIGGERS } from '../../domain/job-run.js';
import { availableOperations } from '../../domain/operations.js';

const dstView = z.object({
  ambiguous: z.enum(AMBIGUOUS_TIME_POLICIES),
  missing: z.enum(MISSING_TIME_POLICIES),
});
const catchUpView = z.object({
  mode: z.enum(CATCH_UP_MODES),
  graceMs: z.number().int(),
  windowMs: z.number().int(),
  cap: z.number().int(),
});
const retryView = z.object({
  maxRetries: z.number().int(),
  delayMs: z.number().int(),
  maxDelayMs: z.number().int(),
});

const cronJobFields = z.object({
  jobId: z.uuid(),
  organizationId: z.string(),
  name: z.string(),
  status: z.enum(CRON_JOB_STATUSES),
  schedule: z.string(),
  timezone: z.string(),
  dst: dstView,
  jobType: z.enum(JOB_TYPES),
  payload: json.describe("the job type's payload (a webhook's signingSecret is never returned)"),
  timeoutMs: z.number().int(),
  overlap: z.enum(OVERLAP_POLICIES),
  catchUp: catchUpView,
  retry: retryView,
  nextRunAt: instant.nullable(),
  lastOccurrenceAt: instant.nullable(),
  pausedAt: instant.nullable(),
  pausedReason: z.string().nullable(),
  pausedBy: z.string().nullable(),
  createdAt: instant,
  updatedAt: instant,
  deletedAt: instant.nullable(),
  idempotencyKey: z
    .string()
    .nullable()
    .describe('the Idempotency-Key header the job was created with (null: none)'),
});
sameKeys<SameKeys<ExistingCronJob, z.output<typeof cronJobFields>>>(true);

export const cronJobView = cronJobFields
  .extend({ commands: operationsField(CRON_JOB_OPERATIONS) })
  .meta({ id: 'CronJob' });

/** A job as the API shows it: the signing secret of a webhook stays in the database. */
/** A job as the API answers it: without its signing secret, with the operations its state allows. */
export function cronJobOut(job: ExistingCronJob): z.input<typeof cronJobView> {
  const { signingSecret: _secret, ...payload } = job.payload as unknown as Record<string, unknown>;
  return { ...job, payload, commands: availableOperations(CRON_JOB_OPERATIONS, job) };
}

export const jobRunView = z
  .object({
    runId: z.uuid(),
    jobId: z.uuid(),
    organizationId: z.string(),
    jobType: z.string(),
    scheduledFor: instant,
    trigger: z.enum(RUN_TRIGGERS),
    triggerKey: z.string(),
    fate: z.enum(RUN_FATES),
    spanLast: instant.nullable(),
    spanCount: z.number().int().nullable(),
    reason: z.string().nullable(),
    status: z.enum(RUN_STATUSES),
    attempts: z.number().int(),
    maxAttempts: z.number().int(),
    retry: retryView,
    overlap: z.enum(OVERLAP_POLICIES),
    claimEpoch: z.number().int(),
    claimedAt: instant.nullable(),
    nextAttemptAt: instant.nullable(),
    startedAt: instant.nullable(),
    finishedAt: instant.nullable(),
    responseStatus: z.number().int().nullable(),
    output: z.string().nullable(),
    error: z.string().nullable(),
    durationMs: z.number().int().nullable(),
    createdAt: instant,
    updatedAt: instant,
  })
  .meta({ id: 'JobRun' });
sameKeys<SameKeys<ExistingJobRun, z.output<typeof jobRunView>>>(true);

export const ledgerEntryView = z
  .object({
    scheduledFor: instant,
    fate: z.enum(RUN_FATES),
    status: z.enum(RUN_STATUSES),
    trigger: z.enum(RUN_TRIGGERS),
    runId: z.uuid().nullable(),
    attempts: z.number().int(),
    reason: z.string().nullable(),
    error: z.string().nullable(),
    responseStatus: z.number().int().nullable(),
  })
  .meta({ id: 'LedgerEntry' });

export const occurrenceView = z
  .object({
    at: instant,
    wall: z.string().describe('the wall-clock time the expression named, in the job time zone'),
    kind: z.enum(['regular', 'ambiguous-first', 'ambiguous-second', 'shifted']),
  })
  .meta({ id: 'Occurrence' });

export const backfillView = z
  .object({
    dryRun: z.boolean(),
    from: instant,
    to: instant,
    runs: z.array(z.object({ scheduledFor: instant, runId: z.uuid() })),
    skipped: z.array(instant).describe('occurrences of the range left alone because they already ran'),
  })
  .meta({ id: 'BackfillResult' });
