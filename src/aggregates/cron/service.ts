/**
 * The cron library API: create, update, pause, resume, delete, trigger now, backfill (with a dry-run
 * preview), and the reads — a job, the jobs of an organization, runs, the occurrence ledger, the
 * upcoming fire times, a job's history. Each command is one transaction through the command handler
 * (invariant 1) at database time (invariant 6); the commands that create runs (trigger, backfill,
 * resume with occurrences held back by the pause) write the job's event and the runs' events, rows and
 * messages in that same transaction. The preview of a backfill is the real backfill's decision,
 * computed and not written, so the real one creates exactly what the preview listed (unless a run
 * happened in between, which it then leaves alone). Each organization's quotas (issue 23, ADR 0029) are
 * checked here: a schedule that can fire sooner after an occurrence than the organization's minimum
 * interval is a ValidationError naming `schedule`; a create of an active job or a resume past its most
 * active jobs is a ConflictError naming the limit, counted under the organization's quota lock in the
 * creating transaction, so concurrent creates cannot pass it together.
 */
import { randomUUID } from 'node:crypto';
import {
  alreadyRun,
  countJobRuns,
  findCronJobByName,
  jobRuns,
  listCronJobs,
  lockedActiveCronJobs,
} from '../../adapters/postgres/cron-queries.js';
import { shortestInterval } from '../../domain/cron-job/schedule.js';
import {
  type CreateCronJob,
  type CronJobChanges,
  type CronJobCommand,
  type CronJobEvent,
  type CronJobState,
  cronJobDecider,
  type ExistingCronJob,
  type Occurrence,
} from '../../domain/cron-job.js';
import type { ExistingJobRun, JobRunCommand, JobRunEvent, JobRunState } from '../../domain/job-run.js';
import { ConcurrencyError, ConflictError, NotFoundError, ValidationError } from '../../errors.js';
import {
  type AggregateCommands,
  type CommandHandler,
  type CommandResult,
  databaseNow,
} from '../../eventstore/command-handler.js';
import { readCurrentStream } from '../../eventstore/read-stream.js';
import type { Database, SqlClient } from '../../ports/database.js';
import type { EventMeta, StoredEvent } from '../../ports/events.js';
import { cronJobAggregate } from './job-descriptor.js';
import { buildLedger, type LedgerEntry, upcomingOccurrences } from './ledger.js';
import { createRunsInTransaction } from './run-creation.js';
import { jobRunAggregate } from './run-descriptor.js';
import { type CronQuotas, quotaOf } from './settings.js';

type Times = Date | string;

export type NewCronJob = Omit<CreateCronJob, 'type' | 'now' | 'jobId'> & { jobId?: string };

export interface CronServiceSettings {
  /** A job's timeout when it names none (HERALD_CRON_DEFAULT_TIMEOUT_MS). */
  defaultTimeoutMs: number;
  /** The longest timeout a job may name (HERALD_CRON_MAX_TIMEOUT_MS). */
  maxTimeoutMs: number;
  /** Most runs one backfill creates (HERALD_CRON_BACKFILL_MAX). */
  backfillMax: number;
  /** Per organization: the shortest interval between occurrences, the most active jobs. */
  quotas: CronQuotas;
}

export interface CronServiceDeps {
  db: Database;
  handler: CommandHandler;
  settings?: Partial<CronServiceSettings>;
}

export interface BackfillResult {
  dryRun: boolean;
  from: string;
  to: string;
  /** The runs created (or, in a dry run, that would be). */
  runs: { scheduledFor: string; runId: string }[];
  /** Occurrences of the range left alone because they already ran. */
  skipped: string[];
}

const DEFAULTS: CronServiceSettings = {
  defaultTimeoutMs: 30_000,
  maxTimeoutMs: 300_000,
  backfillMax: 1_000,
  quotas: { defaults: { minIntervalSeconds: 1, maxActiveJobs: 1_000 }, organizations: {} },
};

const iso = (value: Times) => (value instanceof Date ? value : new Date(value)).toISOString();

export class CronService {
  private readonly jobs: AggregateCommands<CronJobState, CronJobCommand, CronJobEvent>;
  private readonly runs: AggregateCommands<JobRunState, JobRunCommand, JobRunEvent>;
  private readonly settings: CronServiceSettings;

  constructor(private readonly deps: CronServiceDeps) {
    this.jobs = deps.handler.for(cronJobAggregate);
    this.runs = deps.handler.for(jobRunAggregate);
    this.settings = { ...DEFAULTS, ...deps.settings };
  }

  /** Creates a job (active, or paused with `paused: true`). A job of an unknown type is a ValidationError. */
  async create(input: NewCronJob, meta?: EventMeta): Promise<ExistingCronJob> {
    const jobId = input.jobId ?? randomUUID();
    this.checkTimeout(input.timeoutMs);
    const organizationId = typeof input.organizationId === 'string' ? input.organizationId.trim() : '';
    this.checkInterval(organizationId, input.schedule);
    const result = await this.deps.db.transaction(async (tx) => {
      // An active job takes a place of the organization's quota, counted under its lock (held to the commit).
      if (input.paused !== true) await this.checkActiveJobs(tx, organizationId);
      return this.jobs.handleInTransaction(
        tx,
        jobId,
        (now) => ({
          ...input,
          type: 'CreateCronJob',
          jobId,
          now,
          timeoutMs: input.timeoutMs ?? this.settings.defaultTimeoutMs,
        }),
        meta ? { meta } : {},
      );
    });
    this.jobs.signalAfterCommit([result]);
    return result.state as ExistingCronJob;
  }

  async update(
    jobId: string,
    changes: CronJobChanges,
    by?: string,
    meta?: EventMeta,
  ): Promise<ExistingCronJob> {
    this.checkTimeout(changes.timeoutMs);
    if (changes.schedule !== undefined)
      this.checkInterval((await this.get(jobId)).organizationId, changes.schedule);
    return this.job(
      jobId,
      (now) => ({ type: 'UpdateCronJob', jobId, now, changes, ...(by ? { by } : {}) }),
      meta,
    );
  }

  pause(jobId: string, reason: string, by: string, meta?: EventMeta) {
    return this.job(jobId, (now) => ({ type: 'PauseCronJob', jobId, now, reason, by }), meta);
  }

  /** Resumes a paused job; the occurrences the pause held back are recorded as one `paused` run. */
  async resume(jobId: string, by: string, meta?: EventMeta): Promise<ExistingCronJob> {
    const { job } = await this.withRuns(
      jobId,
      async (tx) => {
        // A paused job takes a place of the quota again (the job locked first, then the quota).
        const loaded = await cronJobAggregate.store.load(tx, jobId, { forUpdate: true });
        if (loaded?.state.status === 'paused') await this.checkActiveJobs(tx, loaded.state.organizationId);
        return (now) => ({ type: 'ResumeCronJob', jobId, now, by });
      },
      meta,
    );
    return job;
  }

  /** Deletes a job: nothing fires any more; its queued runs are cancelled when an executor or a sweep meets them. */
  delete(jobId: string, by: string, meta?: EventMeta) {
    return this.job(jobId, (now) => ({ type: 'DeleteCronJob', jobId, now, by }), meta);
  }

  /** "Trigger now": one manual run at the current time, recorded as such. */
  async trigger(jobId: string, by: string, meta?: EventMeta): Promise<ExistingJobRun> {
    const runId = randomUUID();
    const { runs } = await this.withRuns(
      jobId,
      async () => (now) => ({ type: 'TriggerCronJob', jobId, now, runId, by }),
      meta,
    );
    return runs[0]!.state as ExistingJobRun;
  }

  /**
   * Backfills [from, to]: a run for each occurrence that has not already run; `dryRun` lists them (and
   * those it would skip) and writes nothing. A second identical backfill creates none.
   */
  async backfill(
    jobId: string,
    range: { from: Times; to: Times; dryRun?: boolean; by: string },
    meta?: EventMeta,
  ): Promise<BackfillResult> {
    const from = iso(range.from);
    const to = iso(range.to);
    const command = async (tx: SqlClient) => {
      // With the job locked, so no run of the range appears between the reading and the decision.
      await cronJobAggregate.store.load(tx, jobId, { forUpdate: true });
      const done = await alreadyRun(tx, jobId, from, to);
      return (now: Date): CronJobCommand => ({
        type: 'BackfillCronJob',
        jobId,
        now,
        from,
        to,
        alreadyRun: done,
        maxRuns: this.settings.backfillMax,
        by: range.by,
      });
    };
    const resultOf = (events: readonly CronJobEvent[], dryRun: boolean): BackfillResult => {
      const event = events.find((e) => e.type === 'CronJobBackfilled');
      if (event?.type !== 'CronJobBackfilled')
        throw new Error('a backfill decides a CronJobBackfilled event');
      return { dryRun, from, to, runs: event.data.runs, skipped: event.data.skipped };
    };
    if (range.dryRun) {
      const events = await this.deps.db.transaction(async (tx) => {
        const make = await command(tx);
        const loaded = await cronJobAggregate.store.load(tx, jobId);
        return cronJobDecider.decide(
          make(await databaseNow(tx)),
          loaded?.state ?? cronJobDecider.initialState(),
        );
      });
      return resultOf(events, true);
    }
    const { events } = await this.withRuns(jobId, command, meta);
    return resultOf(events, false);
  }

  async get(jobId: string): Promise<ExistingCronJob> {
    const loaded = await cronJobAggregate.store.load(this.deps.db, jobId);
    if (!loaded || loaded.state.status === 'NONE')
      throw new NotFoundError(`cron job ${jobId} not found`, { jobId });
    return loaded.state;
  }

  /** A job by id, or by name within an organization. */
  async find(ref: string, organizationId?: string): Promise<ExistingCronJob> {
    if (/^[0-9a-f-]{36}$/i.test(ref)) return this.get(ref);
    if (!organizationId)
      throw new ValidationError(`a job name (${ref}) needs its organization`, { field: 'organization' });
    const job = await findCronJobByName(this.deps.db, organizationId, ref);
    if (!job)
      throw new NotFoundError(`no cron job named '${ref}' in organization ${organizationId}`, { name: ref });
    return job;
  }

  list(options: { organizationId?: string; includeDeleted?: boolean; limit?: number } = {}) {
    return listCronJobs(this.deps.db, options);
  }

  async run(runId: string): Promise<ExistingJobRun> {
    const loaded = await jobRunAggregate.store.load(this.deps.db, runId);
    if (!loaded || loaded.state.status === 'NONE')
      throw new NotFoundError(`job run ${runId} not found`, { runId });
    return loaded.state;
  }

  /** A job's runs (and records of occurrences that did not run) scheduled in [from, to], in order. */
  runsOf(jobId: string, range: { from?: Times; to?: Times; limit?: number } = {}): Promise<ExistingJobRun[]> {
    return jobRuns(this.deps.db, jobId, {
      from: range.from ?? new Date(0),
      to: range.to ?? new Date(8.64e15),
      limit: range.limit ?? 1_000,
    });
  }

  countRuns(jobId: string): Promise<Record<string, number>> {
    return countJobRuns(this.deps.db, jobId);
  }

  /** Every occurrence of [from, to] (default: up to now) with its fate. */
  async ledger(
    jobId: string,
    range: { from?: Times; to?: Times; limit?: number } = {},
  ): Promise<LedgerEntry[]> {
    const job = await this.get(jobId);
    const now = (await databaseNow(this.deps.db)).getTime();
    const from = range.from ? Date.parse(iso(range.from)) : 0;
    const to = range.to ? Date.parse(iso(range.to)) : now;
    const limit = range.limit ?? 1_000;
    const runs = await jobRuns(this.deps.db, jobId, { from: new Date(from), to: new Date(to), limit });
    return buildLedger(job, runs, { from, to, now, limit });
  }

  /** The next `count` fire times (DST policy applied). */
  async upcoming(jobId: string, count = 10): Promise<Occurrence[]> {
    const job = await this.get(jobId);
    return upcomingOccurrences(job, count, (await databaseNow(this.deps.db)).getTime());
  }

  history(jobId: string, until?: Date): Promise<StoredEvent[]> {
    return readCurrentStream(this.deps.db, cronJobAggregate, jobId, until ? { until } : {});
  }

  private checkTimeout(timeoutMs: number | undefined): void {
    if (timeoutMs !== undefined && timeoutMs > this.settings.maxTimeoutMs) {
      throw new ValidationError(
        `timeoutMs ${timeoutMs} is longer than the longest allowed (${this.settings.maxTimeoutMs}, HERALD_CRON_MAX_TIMEOUT_MS)`,
        { field: 'timeoutMs' },
      );
    }
  }

  /** A schedule that can fire sooner after an occurrence than the organization's minimum interval: 422. */
  checkInterval(organizationId: string, schedule: unknown): void {
    if (typeof schedule !== 'string') return; // the decider names what is wrong with it
    const { minIntervalSeconds } = quotaOf(this.settings.quotas, organizationId);
    if (minIntervalSeconds <= 1) return; // a cron expression names whole seconds at the finest
    let shortest: number;
    try {
      shortest = shortestInterval(schedule.trim(), minIntervalSeconds);
    } catch {
      return; // not a cron expression: the decider's ValidationError says why
    }
    if (shortest < minIntervalSeconds) {
      throw new ValidationError(
        `cron expression '${schedule.trim()}' can fire ${shortest} s after an occurrence; organization ` +
          `${organizationId}'s cron jobs fire at most every ${minIntervalSeconds} s (${this.quotaSource(organizationId, 'HERALD_CRON_MIN_INTERVAL_SECONDS')})`,
        { field: 'schedule', schedule, minIntervalSeconds, shortestIntervalSeconds: shortest },
      );
    }
  }

  /** One more active job past the organization's most: 409 (counted under its quota lock, in `tx`). */
  private async checkActiveJobs(tx: SqlClient, organizationId: string): Promise<void> {
    const { maxActiveJobs } = quotaOf(this.settings.quotas, organizationId);
    const active = await lockedActiveCronJobs(tx, organizationId);
    if (active >= maxActiveJobs) {
      throw new ConflictError(
        `organization ${organizationId} has ${active} active cron jobs, the most it may have ` +
          `(${maxActiveJobs}, ${this.quotaSource(organizationId, 'HERALD_CRON_MAX_ACTIVE_JOBS')}): pause or delete one first, or create this one paused`,
        { limit: 'maxActiveJobs', maxActiveJobs, activeJobs: active },
      );
    }
  }

  /** The setting an organization's quota comes from: its own entry, or the default's variable. */
  private quotaSource(organizationId: string, variable: string): string {
    return Object.hasOwn(this.settings.quotas.organizations, organizationId)
      ? `HERALD_CRON_ORGANIZATION_LIMITS, else ${variable}`
      : variable;
  }

  private async job(
    jobId: string,
    make: (now: Date) => CronJobCommand,
    meta?: EventMeta,
  ): Promise<ExistingCronJob> {
    const result = await this.jobs.handle(jobId, make, meta ? { meta } : {});
    return result.state as ExistingCronJob;
  }

  /** A job command and the runs its events cause, in one transaction (retried on a concurrent write). */
  private async withRuns(
    jobId: string,
    /** Reads what the command needs in the transaction (the job is locked by then if it asks), then makes it. */
    prepare: (tx: SqlClient) => Promise<(now: Date) => CronJobCommand>,
    meta?: EventMeta,
  ): Promise<{
    job: ExistingCronJob;
    events: CronJobEvent[];
    runs: CommandResult<JobRunState, JobRunEvent>[];
  }> {
    for (let attempt = 0; ; attempt++) {
      try {
        const outcome = await this.deps.db.transaction(async (tx) => {
          const makeCommand = await prepare(tx);
          const job = await this.jobs.handleInTransaction(tx, jobId, makeCommand, meta ? { meta } : {});
          const runs = await createRunsInTransaction(tx, this.runs, [job], {
            ...meta,
            actor: meta?.actor ?? 'cron-service',
          });
          return { job, runs };
        });
        this.jobs.signalAfterCommit([outcome.job]);
        this.runs.signalAfterCommit(outcome.runs);
        return {
          job: outcome.job.state as ExistingCronJob,
          events: outcome.job.events,
          runs: outcome.runs,
        };
      } catch (error) {
        if (error instanceof ConcurrencyError && attempt < 3) continue;
        throw error;
      }
    }
  }
}
