/**
 * Job run events (stream type 'job_run'). Wherever an event carries `epoch`, it is the run's claim
 * epoch after it: the creation of a run that goes out is its first claim (epoch 1); a release from
 * the buffer, a due retry and a stale reclaim each take a new one (invariant 5).
 */
import { z } from 'zod';
import { OVERLAP_POLICIES, retryPolicy } from '../cron-job/policies.js';
import { storedInstant } from '../time.js';
import { validationErrorFrom } from '../validation.js';
import { RUN_FATES, RUN_TRIGGERS } from './commands.js';

const id = z.string().min(1);
const epoch = z.number().int().positive();
const event = <Type extends string, Shape extends z.ZodRawShape>(type: Type, data: Shape) =>
  z.object({ type: z.literal(type), data: z.object(data) });

const report = {
  responseStatus: z.number().int().nullable(),
  output: z.string().nullable(),
  durationMs: z.number().int().nullable(),
  /**
   * When the attempt ended: the start plus its measured duration (the command's `now` is the executor's
   * transaction start, from before the attempt), never before `at`.
   */
  finishedAt: storedInstant,
};

const jobRunCreated = event('JobRunCreated', {
  runId: z.uuid(),
  jobId: z.uuid(),
  organizationId: id,
  jobType: id,
  scheduledFor: storedInstant,
  trigger: z.enum(RUN_TRIGGERS),
  triggerKey: id,
  fate: z.enum(RUN_FATES),
  span: z.object({ last: storedInstant, count: z.number().int().positive() }).nullable(),
  reason: z.string().nullable(),
  maxAttempts: z.number().int().positive(),
  retry: retryPolicy,
  overlap: z.enum(OVERLAP_POLICIES),
  /** 1 when the run goes out at once (its first claim), 0 when it waits or will never run. */
  epoch: z.number().int().min(0),
  at: storedInstant,
});

const jobRunClaimed = event('JobRunClaimed', {
  epoch,
  attempt: z.number().int().positive(),
  cause: z.enum(['released', 'retry']),
  at: storedInstant,
});

const jobRunStarted = event('JobRunStarted', { epoch, at: storedInstant });
const jobRunHeartbeat = event('JobRunHeartbeat', { epoch, at: storedInstant });
const jobRunCompleted = event('JobRunCompleted', { epoch, at: storedInstant, ...report });

const jobRunAttemptFailed = event('JobRunAttemptFailed', {
  epoch,
  at: storedInstant,
  error: id,
  ...report,
  nextAttemptAt: storedInstant,
});

const jobRunFailed = event('JobRunFailed', {
  epoch,
  at: storedInstant,
  error: id,
  ...report,
  /** `failed`: a permanent error; `permanently_failed`: every attempt failed. */
  to: z.enum(['failed', 'permanently_failed']),
});

const jobRunReclaimed = event('JobRunReclaimed', {
  epoch,
  at: storedInstant,
  reason: id,
  previousClaimedAt: storedInstant,
  /** When the retry is due (at once), or null when the attempts are used up (permanently failed). */
  nextAttemptAt: storedInstant.nullable(),
});

const jobRunCancelled = event('JobRunCancelled', { at: storedInstant, reason: id });

export const jobRunEventSchema = z.discriminatedUnion('type', [
  jobRunCreated,
  jobRunClaimed,
  jobRunStarted,
  jobRunHeartbeat,
  jobRunCompleted,
  jobRunAttemptFailed,
  jobRunFailed,
  jobRunReclaimed,
  jobRunCancelled,
]);

export type JobRunEvent = z.infer<typeof jobRunEventSchema>;
export type JobRunEventType = JobRunEvent['type'];

export const JOB_RUN_EVENT_TYPES = jobRunEventSchema.options.map(
  (option) => option.shape.type.value,
) as readonly JobRunEventType[];

export function parseJobRunEvent(raw: { type: string; data: unknown }): JobRunEvent {
  const result = jobRunEventSchema.safeParse(raw);
  if (result.success) return result.data;
  throw validationErrorFrom('job run event', raw, result.error.issues);
}
