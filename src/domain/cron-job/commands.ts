/**
 * Cron job commands: what callers (the service, the CLI, the materializer in `herald scanner`) ask a
 * job to do. Each names its job and carries `now`, the database time read by the command handler
 * (invariant 6: the decider never reads a clock). Strict schemas: an unknown field is a typo.
 */
import { z } from 'zod';
import { instantInput } from '../time.js';
import { validationErrorFrom } from '../validation.js';
import { catchUpPolicy, dstPolicy, JOB_TYPES, OVERLAP_POLICIES, retryPolicy, timeoutMs } from './policies.js';

const jobId = z.uuid().transform((id) => id.toLowerCase());
const text = (max: number) => z.string().trim().min(1, 'must not be empty').max(max);
const actor = text(200);
const base = { jobId, now: instantInput };

/** The job's definition, as created or changed (the type is a plain string so an unknown one gets a clear error). */
const definition = {
  name: text(200),
  schedule: text(200),
  timezone: text(100),
  dst: dstPolicy.optional(),
  jobType: z.string().min(1),
  payload: z.unknown(),
  timeoutMs: timeoutMs.optional(),
  overlap: z.enum(OVERLAP_POLICIES).optional(),
  catchUp: catchUpPolicy.optional(),
  retry: retryPolicy.optional(),
};

const createCronJob = z.strictObject({
  type: z.literal('CreateCronJob'),
  ...base,
  organizationId: text(200),
  ...definition,
  /** Created paused (nothing fires until it is resumed). */
  paused: z.boolean().optional(),
  /** The Idempotency-Key the job was created with (HTTP API), shown on the job. */
  idempotencyKey: text(255).nullish(),
  by: actor.optional(),
});

const updateCronJob = z.strictObject({
  type: z.literal('UpdateCronJob'),
  ...base,
  changes: z
    .strictObject({
      name: definition.name.optional(),
      schedule: definition.schedule.optional(),
      timezone: definition.timezone.optional(),
      dst: dstPolicy.optional(),
      jobType: z.enum(JOB_TYPES).optional(),
      payload: z.unknown().optional(),
      timeoutMs: timeoutMs.optional(),
      overlap: z.enum(OVERLAP_POLICIES).optional(),
      catchUp: catchUpPolicy.optional(),
      retry: retryPolicy.optional(),
    })
    .refine((c) => Object.keys(c).length > 0, 'nothing to change'),
  by: actor.optional(),
});

const pauseCronJob = z.strictObject({
  type: z.literal('PauseCronJob'),
  ...base,
  reason: text(1000),
  by: actor,
});

const resumeCronJob = z.strictObject({ type: z.literal('ResumeCronJob'), ...base, by: actor });

const deleteCronJob = z.strictObject({ type: z.literal('DeleteCronJob'), ...base, by: actor });

/**
 * The materializer's claim (a sweep in `herald scanner`): every occurrence due by `now`, decided by the
 * catch-up and overlap policies. `activeRuns` / `bufferedRuns`: how many of the job's runs are still
 * queued, running or waiting for a retry, and buffered, as the claim's query saw them in the same
 * transaction (only zero or not matters; the query sends 0 or 1).
 */
const materializeDue = z.strictObject({
  type: z.literal('MaterializeDue'),
  ...base,
  activeRuns: z.number().int().min(0),
  bufferedRuns: z.number().int().min(0),
  /** Most runs one claim records individually (more stay due for the next sweep). */
  maxRuns: z.number().int().positive().max(10_000).default(100),
});

/** "Trigger now": one manual run at `now`, whatever the schedule and the overlap policy say. */
const triggerCronJob = z.strictObject({
  type: z.literal('TriggerCronJob'),
  ...base,
  runId: z.uuid().transform((id) => id.toLowerCase()),
  by: actor,
});

/**
 * A backfill of the occurrences in [from, to] (to ≤ now): a run for each one that has not already run
 * (`alreadyRun`: the scheduled_for of the job's schedule or backfill runs that ran or are running, read
 * with the job locked). `dryRun` only changes what the caller does with the events (nothing written).
 */
const backfillCronJob = z.strictObject({
  type: z.literal('BackfillCronJob'),
  ...base,
  from: instantInput,
  to: instantInput,
  alreadyRun: z.array(instantInput),
  maxRuns: z.number().int().positive().max(100_000),
  by: actor,
});

export const cronJobCommandSchema = z.discriminatedUnion('type', [
  createCronJob,
  updateCronJob,
  pauseCronJob,
  resumeCronJob,
  deleteCronJob,
  materializeDue,
  triggerCronJob,
  backfillCronJob,
]);

export type CronJobCommand = z.input<typeof cronJobCommandSchema>;
export type ParsedCronJobCommand = z.output<typeof cronJobCommandSchema>;
export type CronJobCommandType = CronJobCommand['type'];
export type CreateCronJob = z.input<typeof createCronJob>;
export type UpdateCronJob = z.input<typeof updateCronJob>;
export type CronJobChanges = z.input<typeof updateCronJob>['changes'];
export type MaterializeDue = z.input<typeof materializeDue>;
export type BackfillCronJob = z.input<typeof backfillCronJob>;

export const CRON_JOB_COMMAND_TYPES = cronJobCommandSchema.options.map(
  (option) => option.shape.type.value,
) as readonly CronJobCommandType[];

export function parseCronJobCommand(raw: unknown): ParsedCronJobCommand {
  const result = cronJobCommandSchema.safeParse(raw);
  if (result.success) return result.data;
  throw validationErrorFrom('cron job command', raw, result.error.issues);
}
