/**
 * Cron job events (stream type 'cron_job'): plain JSON, canonical ISO UTC times, one zod schema per
 * type so the log can be validated when replayed (invariant 8). The occurrence events double as the
 * job's side of the occurrence ledger: each names every due occurrence it handled and its fate; the
 * runs they cause are job_run streams written in the same transaction.
 */
import { z } from 'zod';
import { storedInstant } from '../time.js';
import { validationErrorFrom } from '../validation.js';
import { catchUpPolicy, dstPolicy, JOB_TYPES, OVERLAP_POLICIES, retryPolicy } from './policies.js';

const id = z.string().min(1);
const event = <Type extends string, Shape extends z.ZodRawShape>(type: Type, data: Shape) =>
  z.object({ type: z.literal(type), data: z.object(data) });

/** Every field of a job's definition, as stored (defaults applied). */
export const jobDefinition = {
  name: id,
  schedule: id,
  timezone: id,
  dst: dstPolicy,
  jobType: z.enum(JOB_TYPES),
  payload: z.json(),
  timeoutMs: z.number().int().positive(),
  overlap: z.enum(OVERLAP_POLICIES),
  catchUp: catchUpPolicy,
  retry: retryPolicy,
};

/** A range of occurrences recorded together (missed after downtime, or passed while paused). */
export const occurrenceSpan = z.object({
  first: storedInstant,
  last: storedInstant,
  count: z.number().int().positive(),
});
export type OccurrenceSpan = z.infer<typeof occurrenceSpan>;

export const MATERIALIZED_FATES = ['fired', 'buffered', 'skipped-overlap'] as const;
export type MaterializedFate = (typeof MATERIALIZED_FATES)[number];

const cronJobCreated = event('CronJobCreated', {
  jobId: z.uuid(),
  organizationId: id,
  ...jobDefinition,
  paused: z.boolean(),
  nextRunAt: storedInstant.nullable(),
  /** The Idempotency-Key it was created with (absent in events from before issue 23: none). */
  idempotencyKey: id.nullish(),
  at: storedInstant,
  by: id.nullable(),
});

const cronJobUpdated = event('CronJobUpdated', {
  changes: z.object(jobDefinition).partial(),
  nextRunAt: storedInstant.nullable(),
  at: storedInstant,
  by: id.nullable(),
});

const cronJobPaused = event('CronJobPaused', { reason: id, by: id, at: storedInstant });

const cronJobResumed = event('CronJobResumed', {
  by: id,
  at: storedInstant,
  nextRunAt: storedInstant.nullable(),
  /** The occurrences that passed while the job was paused (recorded as one `paused` run), or null. */
  paused: occurrenceSpan.nullable(),
});

const cronJobDeleted = event('CronJobDeleted', { by: id, at: storedInstant });

const cronOccurrencesMaterialized = event('CronOccurrencesMaterialized', {
  at: storedInstant,
  occurrences: z.array(
    z.object({
      scheduledFor: storedInstant,
      runId: z.uuid(),
      fate: z.enum(MATERIALIZED_FATES),
      /** Reached after the catch-up grace (a catch-up run). */
      late: z.boolean(),
    }),
  ),
  /** Occurrences the catch-up policy did not run (one `missed` run records them), or null. */
  missed: occurrenceSpan.extend({ runId: z.uuid(), reason: id }).nullable(),
  nextRunAt: storedInstant.nullable(),
});

const cronJobTriggered = event('CronJobTriggered', { runId: z.uuid(), at: storedInstant, by: id });

const cronJobBackfilled = event('CronJobBackfilled', {
  from: storedInstant,
  to: storedInstant,
  runs: z.array(z.object({ scheduledFor: storedInstant, runId: z.uuid() })),
  /** Occurrences of the range left alone because they already ran. */
  skipped: z.array(storedInstant),
  at: storedInstant,
  by: id,
});

export const cronJobEventSchema = z.discriminatedUnion('type', [
  cronJobCreated,
  cronJobUpdated,
  cronJobPaused,
  cronJobResumed,
  cronJobDeleted,
  cronOccurrencesMaterialized,
  cronJobTriggered,
  cronJobBackfilled,
]);

export type CronJobEvent = z.infer<typeof cronJobEventSchema>;
export type CronJobEventType = CronJobEvent['type'];
export type CronJobEventOf<T extends CronJobEventType> = Extract<CronJobEvent, { type: T }>;

export const CRON_JOB_EVENT_TYPES = cronJobEventSchema.options.map(
  (option) => option.shape.type.value,
) as readonly CronJobEventType[];

export function parseCronJobEvent(raw: { type: string; data: unknown }): CronJobEvent {
  const result = cronJobEventSchema.safeParse(raw);
  if (result.success) return result.data;
  throw validationErrorFrom('cron job event', raw, result.error.issues);
}
