/**
 * Job run commands: created by the cron job's events (materialization, trigger, backfill, resume),
 * claimed by sweeps (a buffered run released, a retry due, a stale claim taken back), and reported on
 * by the executor (start, heartbeat, complete, a failed attempt, a permanent failure). Each carries
 * `now` from the database (invariant 6); every command of a claim's holder carries its epoch
 * (invariant 5).
 */
import { z } from 'zod';
import { OVERLAP_POLICIES, retryPolicy } from '../cron-job/policies.js';
import { instantInput } from '../time.js';
import { validationErrorFrom } from '../validation.js';

const runId = z.uuid().transform((id) => id.toLowerCase());
const epoch = z.number().int().positive();
const base = { runId, now: instantInput };
const text = (max: number) => z.string().min(1).max(max);

export const RUN_FATES = [
  'fired',
  'buffered',
  'skipped-overlap',
  'missed',
  'paused',
  'backfilled',
  'manual',
] as const;
export type RunFate = (typeof RUN_FATES)[number];
export const RUN_TRIGGERS = ['schedule', 'manual', 'backfill'] as const;
export type RunTrigger = (typeof RUN_TRIGGERS)[number];

/** What an attempt reported (kept on the run): the response status, a bounded excerpt of the output, its duration. */
export const attemptReport = z.strictObject({
  responseStatus: z.number().int().nullable().default(null),
  output: z.string().max(1_000_000).nullable().default(null),
  durationMs: z.number().int().min(0).nullable().default(null),
});
export type AttemptReport = z.input<typeof attemptReport>;

const createRun = z.strictObject({
  type: z.literal('CreateRun'),
  ...base,
  jobId: z.uuid().transform((id) => id.toLowerCase()),
  organizationId: text(200),
  jobType: text(50),
  scheduledFor: instantInput,
  trigger: z.enum(RUN_TRIGGERS),
  triggerKey: text(100),
  fate: z.enum(RUN_FATES),
  /** A record of several occurrences (missed, paused): the last one and how many. */
  span: z.strictObject({ last: instantInput, count: z.number().int().positive() }).nullable().default(null),
  /** Why it did not run (skipped, missed, paused), or null. */
  reason: z.string().max(1000).nullable().default(null),
  retry: retryPolicy,
  overlap: z.enum(OVERLAP_POLICIES),
});

/** A buffered run released (the job's active run ended) or a retry that is due: a new claim, a new epoch. */
const claimRun = z.strictObject({ type: z.literal('ClaimRun'), ...base });

const startRun = z.strictObject({ type: z.literal('StartRun'), ...base, epoch });
const heartbeatRun = z.strictObject({ type: z.literal('HeartbeatRun'), ...base, epoch });
const completeRun = z.strictObject({ type: z.literal('CompleteRun'), ...base, epoch, report: attemptReport });

/** A transient failure: the run decides its retry (a delay, then a fresh claim) or gives up. */
const failAttempt = z.strictObject({
  type: z.literal('FailAttempt'),
  ...base,
  epoch,
  error: text(10_000),
  report: attemptReport,
});

/** A permanent failure (a refused target, a rejected request): no retry can help. */
const failRun = z.strictObject({
  type: z.literal('FailRun'),
  ...base,
  epoch,
  error: text(10_000),
  report: attemptReport,
});

/** Stale recovery: the claim's holder is presumed dead; the attempt counts as failed. */
const reclaimRun = z.strictObject({
  type: z.literal('ReclaimRun'),
  ...base,
  staleAfterMs: z.number().int().positive(),
  reason: text(1000),
});

/** The job was deleted before this run went out (or while it waited for a retry or a buffer slot). */
const cancelRun = z.strictObject({
  type: z.literal('CancelRun'),
  ...base,
  reason: text(1000),
  /** The claim's epoch when its holder cancels it (the executor); omitted by sweeps. */
  epoch: epoch.optional(),
});

export const jobRunCommandSchema = z.discriminatedUnion('type', [
  createRun,
  claimRun,
  startRun,
  heartbeatRun,
  completeRun,
  failAttempt,
  failRun,
  reclaimRun,
  cancelRun,
]);

export type JobRunCommand = z.input<typeof jobRunCommandSchema>;
export type ParsedJobRunCommand = z.output<typeof jobRunCommandSchema>;
export type JobRunCommandType = JobRunCommand['type'];
export type CreateRun = z.input<typeof createRun>;

export const JOB_RUN_COMMAND_TYPES = jobRunCommandSchema.options.map(
  (option) => option.shape.type.value,
) as readonly JobRunCommandType[];

export function parseJobRunCommand(raw: unknown): ParsedJobRunCommand {
  const result = jobRunCommandSchema.safeParse(raw);
  if (result.success) return result.data;
  throw validationErrorFrom('job run command', raw, result.error.issues);
}
