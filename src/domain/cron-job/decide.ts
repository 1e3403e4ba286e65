/**
 * `decide` for cron jobs: validates a command, checks it against the state and returns the events, or
 * throws (ValidationError for bad input, IllegalStateError for a command the status forbids) without
 * emitting anything. Pure: time is the command's `now`; fire times come from the schedule module
 * (croner for the expression, Herald's DST policy on top); catch-up and overlap are materialize.ts.
 */
import { IllegalStateError, ValidationError } from '../../errors.js';
import { assertNever } from '../decider.js';
import { runIdFor } from '../job-run/ids.js';
import { type Operation, operationRefusal } from '../operations.js';
import { ms } from '../time.js';
import { validationErrorFrom } from '../validation.js';
import { type CronJobCommand, type ParsedCronJobCommand, parseCronJobCommand } from './commands.js';
import type { CronJobEvent } from './events.js';
import { planMaterialization } from './materialize.js';
import { CRON_JOB_OPERATIONS } from './operations.js';
import {
  catchUpPolicy,
  isJobType,
  JOB_TYPES,
  type JobPayload,
  type JobType,
  parsePayload,
  retryPolicy,
} from './policies.js';
import { type DstPolicy, defaultDstPolicy, type Schedule, scheduleFor } from './schedule.js';
import type { CronJobState, ExistingCronJob } from './state.js';

/** A job's timeout when the command names none (the service passes the configured default). */
export const DEFAULT_TIMEOUT_MS = 30_000;
/** Occurrences a resume counts into its `paused` record at most (the record keeps first and last). */
const PAUSED_COUNT_LIMIT = 100_000;

const iso = (at: number) => new Date(at).toISOString();

function illegal(c: ParsedCronJobCommand, state: CronJobState, why: string): IllegalStateError {
  return new IllegalStateError(`cannot ${c.type} job ${c.jobId}: ${why}`, {
    command: c.type,
    jobId: c.jobId,
    status: state.status,
  });
}

function jobTypeOf(value: string): JobType {
  if (!isJobType(value)) {
    throw new ValidationError(`unknown job type '${value}' (known: ${JOB_TYPES.join(', ')})`, {
      field: 'jobType',
      jobType: value,
    });
  }
  return value;
}

function payloadFor(jobType: JobType, payload: unknown): JobPayload {
  const parsed = parsePayload(jobType, payload);
  if (!parsed.success) throw validationErrorFrom(`${jobType} payload`, payload, parsed.error.issues);
  return parsed.data;
}

function scheduleOf(expression: string, timezone: string, dst: DstPolicy): Schedule {
  return scheduleFor({ expression, timezone, dst });
}

/** The first occurrence strictly after `after`, as ISO (null: the expression never fires again). */
function nextAfter(schedule: Schedule, after: string): string | null {
  const next = schedule.next(ms(after));
  return next ? iso(next.at) : null;
}

export function decideCronJob(command: CronJobCommand, state: CronJobState): CronJobEvent[] {
  const c = parseCronJobCommand(command);

  if (c.type === 'CreateCronJob') {
    if (state.status !== 'NONE') throw illegal(c, state, 'it already exists');
    const jobType = jobTypeOf(c.jobType);
    const payload = payloadFor(jobType, c.payload);
    const dst = c.dst ?? defaultDstPolicy(c.schedule);
    const schedule = scheduleOf(c.schedule, c.timezone, dst);
    return [
      {
        type: 'CronJobCreated',
        data: {
          jobId: c.jobId,
          organizationId: c.organizationId,
          name: c.name,
          schedule: c.schedule,
          timezone: c.timezone,
          dst,
          jobType,
          payload,
          timeoutMs: c.timeoutMs ?? DEFAULT_TIMEOUT_MS,
          overlap: c.overlap ?? 'skip',
          catchUp: c.catchUp ?? catchUpPolicy.parse({}),
          retry: c.retry ?? retryPolicy.parse({}),
          paused: c.paused ?? false,
          nextRunAt: nextAfter(schedule, c.now),
          // Only when the request had one: the events of other creates keep their shape.
          ...(c.idempotencyKey ? { idempotencyKey: c.idempotencyKey } : {}),
          at: c.now,
          by: c.by ?? null,
        },
      },
    ];
  }

  if (state.status === 'NONE') throw illegal(c, state, 'it does not exist');
  if (c.jobId !== state.jobId) {
    throw new ValidationError(`${c.type} is for job ${c.jobId}, not ${state.jobId}`, {
      command: c.type,
      jobId: c.jobId,
    });
  }
  if (state.status === 'deleted') throw illegal(c, state, 'it is deleted');
  const now = c.now;

  switch (c.type) {
    case 'UpdateCronJob': {
      requireOperation(c, state, CRON_JOB_OPERATIONS.update);
      const { payload: rawPayload, ...rest } = c.changes;
      const jobType = rest.jobType ?? state.jobType;
      if (rest.jobType !== undefined && rest.jobType !== state.jobType && rawPayload === undefined) {
        throw new ValidationError(`changing the job type to ${rest.jobType} needs its payload`, {
          field: 'payload',
        });
      }
      const payload = rawPayload !== undefined ? payloadFor(jobType, rawPayload) : undefined;
      const expression = rest.schedule ?? state.schedule;
      const timezone = rest.timezone ?? state.timezone;
      // A new expression without an explicit DST policy gets that expression's default.
      const dst = rest.dst ?? (rest.schedule !== undefined ? defaultDstPolicy(expression) : state.dst);
      const scheduleChanged =
        expression !== state.schedule ||
        timezone !== state.timezone ||
        JSON.stringify(dst) !== JSON.stringify(state.dst);
      const schedule = scheduleOf(expression, timezone, dst);
      const changes = {
        ...rest,
        ...(payload !== undefined ? { payload } : {}),
        ...(scheduleChanged ? { dst } : {}),
      };
      return [
        {
          type: 'CronJobUpdated',
          data: {
            changes,
            // A changed schedule starts afresh from now; otherwise the next occurrence stays as it was.
            nextRunAt: scheduleChanged ? nextAfter(schedule, now) : state.nextRunAt,
            at: now,
            by: c.by ?? null,
          },
        },
      ];
    }
    case 'PauseCronJob':
      requireOperation(c, state, CRON_JOB_OPERATIONS.pause);
      return [{ type: 'CronJobPaused', data: { reason: c.reason, by: c.by, at: now } }];
    case 'ResumeCronJob': {
      requireOperation(c, state, CRON_JOB_OPERATIONS.resume);
      const schedule = scheduleOf(state.schedule, state.timezone, state.dst);
      const held = state.nextRunAt !== null && ms(state.nextRunAt) <= ms(now) ? ms(state.nextRunAt) : null;
      let paused = null;
      if (held !== null) {
        const rest = schedule.between(held, ms(now), PAUSED_COUNT_LIMIT);
        // Beyond the count limit the record is bounded: it names the first and the last counted.
        paused = { first: iso(held), last: iso(rest.at(-1)?.at ?? held), count: rest.length + 1 };
      }
      return [
        {
          type: 'CronJobResumed',
          data: {
            by: c.by,
            at: now,
            nextRunAt: held === null ? state.nextRunAt : nextAfter(schedule, now),
            paused,
          },
        },
      ];
    }
    case 'DeleteCronJob':
      requireOperation(c, state, CRON_JOB_OPERATIONS.delete);
      return [{ type: 'CronJobDeleted', data: { by: c.by, at: now } }];
    case 'MaterializeDue': {
      if (state.status !== 'active') throw illegal(c, state, `it is ${state.status}`);
      if (state.nextRunAt === null || ms(state.nextRunAt) > ms(now)) {
        throw illegal(c, state, `nothing is due (next run ${state.nextRunAt ?? 'never'}, now ${now})`);
      }
      const plan = planMaterialization({
        schedule: scheduleOf(state.schedule, state.timezone, state.dst),
        nextRunAt: ms(state.nextRunAt),
        now: ms(now),
        catchUp: state.catchUp,
        overlap: state.overlap,
        activeRuns: c.activeRuns,
        bufferedRuns: c.bufferedRuns,
        maxRuns: c.maxRuns,
      });
      return [
        {
          type: 'CronOccurrencesMaterialized',
          data: {
            at: now,
            occurrences: plan.occurrences.map((o) => ({
              scheduledFor: iso(o.at),
              runId: runIdFor(state.jobId, iso(o.at), 'schedule'),
              fate: o.fate,
              late: o.late,
            })),
            missed: plan.missed && {
              first: iso(plan.missed.first),
              last: iso(plan.missed.last),
              count: plan.missed.count,
              reason: plan.missed.reason,
              runId: runIdFor(state.jobId, iso(plan.missed.first), 'schedule'),
            },
            nextRunAt: plan.nextRunAt === null ? null : iso(plan.nextRunAt),
          },
        },
      ];
    }
    case 'TriggerCronJob':
      requireOperation(c, state, CRON_JOB_OPERATIONS.trigger);
      return [{ type: 'CronJobTriggered', data: { runId: c.runId, at: now, by: c.by } }];
    case 'BackfillCronJob':
      requireOperation(c, state, CRON_JOB_OPERATIONS.backfill);
      return [backfill(c, state)];
    default:
      return assertNever(c, 'cron job command');
  }
}

/** An operator command's refusal (src/domain/cron-job/operations.ts) as its IllegalStateError. */
function requireOperation(
  c: ParsedCronJobCommand,
  state: ExistingCronJob,
  operation: Operation<ExistingCronJob>,
): void {
  const refused = operationRefusal(operation, state);
  if (refused !== null) throw illegal(c, state, refused);
}

/** The runs a backfill creates: every occurrence in [from, to] that has not already run. */
function backfill(
  c: Extract<ParsedCronJobCommand, { type: 'BackfillCronJob' }>,
  state: ExistingCronJob,
): CronJobEvent {
  const from = ms(c.from);
  const to = ms(c.to);
  if (to < from)
    throw new ValidationError(`backfill: to (${c.to}) is before from (${c.from})`, { field: 'to' });
  if (to > ms(c.now)) {
    throw new ValidationError(
      `backfill: to (${c.to}) is in the future (now ${c.now}); occurrences to come are the schedule's`,
      {
        field: 'to',
      },
    );
  }
  const schedule = scheduleOf(state.schedule, state.timezone, state.dst);
  const occurrences = schedule.between(from - 1, to, c.maxRuns + 1);
  const done = new Set(c.alreadyRun.map((at) => ms(at)));
  const runs = occurrences.filter((o) => !done.has(o.at));
  if (runs.length > c.maxRuns) {
    throw new ValidationError(
      `backfill of ${c.from} … ${c.to} would create more than ${c.maxRuns} runs (HERALD_CRON_BACKFILL_MAX): narrow the range`,
      { field: 'to', maxRuns: c.maxRuns },
    );
  }
  return {
    type: 'CronJobBackfilled',
    data: {
      from: c.from,
      to: c.to,
      runs: runs.map((o) => ({
        scheduledFor: iso(o.at),
        runId: runIdFor(state.jobId, iso(o.at), 'backfill'),
      })),
      skipped: occurrences.filter((o) => done.has(o.at)).map((o) => iso(o.at)),
      at: c.now,
      by: c.by,
    },
  };
}
