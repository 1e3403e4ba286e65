/**
 * `/v1/cron-jobs` and `/v1/cron-runs`: the cron library (src/aggregates/cron/service.ts) — create, get,
 * list (keyset by name), update, delete, pause, resume, trigger now, a job's runs (keyset by occurrence),
 * its occurrence ledger, its upcoming fire times, and backfill (`?dryRun=true` lists what it would
 * create and writes nothing), and the preview of a schedule (a read: the next fire times of an expression
 * in a zone, DST policy applied, for the dashboard's form). Every command records the key as `by` and as the events' actor; a job or
 * run of another organization is a 404.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { jobRunsPage, listOrganizationCronJobs } from '../../adapters/postgres/cron-queries.js';
import type { Principal } from '../../api/auth.js';
import { idempotencyKeyOf, owned, principalOf, sendCommand } from '../../api/http.js';
import type { RouteDeps } from '../../api/module.js';
import {
  commandProblems,
  commandRoutes,
  IDEMPOTENCY_HEADER_DOC,
  idempotencyHeaders,
  readProblems,
} from '../../api/routes/common.js';
import {
  commandSchema,
  cursor,
  cursorInstant,
  cursorUuid,
  instantQuery,
  limit,
  offFlag,
  pageOf,
  uuidParams,
} from '../../api/schemas.js';
import { page, view } from '../../api/views.js';
import { previewSchedule } from '../../domain/cron-job/preview.js';
import type { ExistingCronJob } from '../../domain/cron-job.js';
import { cronJobCommandSchema, dstPolicy } from '../../domain/cron-job.js';
import type { ExistingJobRun } from '../../domain/job-run.js';
import { ValidationError } from '../../errors.js';
import { databaseNow } from '../../eventstore/command-handler.js';
import type { CronService } from './service.js';
import {
  backfillView,
  cronJobOut,
  cronJobView,
  jobRunView,
  ledgerEntryView,
  occurrenceView,
} from './views.js';

const create = commandSchema(cronJobCommandSchema.options, 'CreateCronJob').shape;
const update = commandSchema(cronJobCommandSchema.options, 'UpdateCronJob').shape;
const pause = commandSchema(cronJobCommandSchema.options, 'PauseCronJob').shape;
const backfill = commandSchema(cronJobCommandSchema.options, 'BackfillCronJob').shape;

const createBody = z
  .strictObject({
    name: create.name,
    schedule: create.schedule.describe('a cron expression (5 or 6 fields)'),
    timezone: create.timezone.describe('an IANA time zone, e.g. Europe/Berlin'),
    dst: create.dst,
    jobType: create.jobType.describe('ping | webhook | slack | email'),
    payload: create.payload.describe("the job type's payload"),
    timeoutMs: create.timeoutMs,
    overlap: create.overlap,
    catchUp: create.catchUp,
    retry: create.retry,
    paused: create.paused,
  })
  .meta({ id: 'NewCronJob' });
const updateBody = update.changes.meta({ id: 'CronJobChanges' });
const pauseBody = z.strictObject({ reason: pause.reason });
const backfillBody = z.strictObject({ from: backfill.from, to: backfill.to });
const backfillQuery = z.strictObject({
  dryRun: offFlag.describe('true: list the runs, write nothing (default false)'),
});

const listQuery = z.strictObject({
  includeDeleted: offFlag,
  limit,
  cursor: cursor(z.tuple([z.string(), cursorUuid])).optional(),
});
const runsQuery = z.strictObject({
  from: instantQuery.optional(),
  to: instantQuery.optional(),
  limit,
  cursor: cursor(z.tuple([cursorInstant, z.string()])).optional(),
});
const ledgerQuery = z.strictObject({
  from: instantQuery.optional(),
  to: instantQuery.optional().describe('default: now'),
  limit: z.coerce.number().int().min(1).max(1_000).default(100),
});
const previewBody = z
  .strictObject({
    expression: create.schedule.describe('a cron expression (5 or 6 fields)'),
    timezone: create.timezone.describe('an IANA time zone, e.g. Europe/Berlin'),
    dst: dstPolicy
      .optional()
      .describe("the job's DST policy; default: the one a job with this expression gets"),
    count: z.number().int().min(1).max(50).optional().describe('how many (default 5)'),
    after: instantQuery.optional().describe('preview from this instant (default: now, database time)'),
  })
  .meta({ id: 'CronScheduleToPreview' });
const previewView = z
  .object({
    valid: z.literal(true),
    expression: z.string(),
    timezone: z.string(),
    dst: dstPolicy,
    next: z.array(
      z.object({
        at: z.iso.datetime().describe('ISO-8601, UTC'),
        local: z.string().describe('the local time in the zone at that instant, with its offset'),
        wall: z.string().describe('the wall-clock time the expression named'),
        kind: z.enum(['regular', 'ambiguous-first', 'ambiguous-second', 'shifted']),
        note: z
          .enum(['dst-shifted', 'dst-repeated-first', 'dst-repeated-second'])
          .optional()
          .describe('how the occurrence met a DST transition'),
      }),
    ),
  })
  .meta({ id: 'CronSchedulePreview' });
const upcomingQuery = z.strictObject({ count: z.coerce.number().int().min(1).max(100).default(10) });

const jobPage = page(cronJobView, 'CronJobPage');
const runPage = page(jobRunView, 'JobRunPage');
const jobResponse = (status: 200 | 201) => ({ [status]: cronJobView, ...commandProblems });
const jobOut = (job: ExistingCronJob) => view(cronJobView, cronJobOut(job));

/** The cron slice's services (its registration builds them). */
export interface CronServices {
  cron: CronService;
}

/** The job, when the principal's organization owns it (a 404 otherwise). */
export const ownJob = (s: CronServices, principal: Principal, id: string): Promise<ExistingCronJob> =>
  owned('cron job', id, principal, () => s.cron.get(id));

/** The run, when the principal's organization owns it (a 404 otherwise). */
export const ownRun = (s: CronServices, principal: Principal, id: string): Promise<ExistingJobRun> =>
  owned('job run', id, principal, () => s.cron.run(id));

export const cronRoutes: FastifyPluginAsyncZod<RouteDeps<CronServices>> = async (app, { commands }) => {
  const readers = commands.readers;

  app.post(
    '/cron-jobs',
    {
      schema: {
        tags: ['cron jobs'],
        summary: 'Create a cron job',
        description: IDEMPOTENCY_HEADER_DOC,
        headers: idempotencyHeaders,
        body: createBody,
        response: jobResponse(201),
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      return sendCommand(commands, request, reply, async (s, meta) => {
        const job = await s.cron.create(
          {
            ...request.body,
            organizationId: principal.organizationId,
            idempotencyKey: idempotencyKeyOf(request),
            by: principal.actor,
          },
          meta,
        );
        return { status: 201, body: jobOut(job), headers: { location: `/v1/cron-jobs/${job.jobId}` } };
      });
    },
  );

  app.post(
    '/cron-jobs/preview',
    {
      schema: {
        tags: ['cron jobs'],
        summary:
          'Validate a schedule and list its next fire times in the zone (DST policy applied as the job would); nothing is written',
        body: previewBody,
        response: { 200: previewView, ...commandProblems },
      },
      config: { permission: 'read' },
    },
    async (request) => {
      const { expression, timezone, dst, count, after } = request.body;
      const from = after ? Date.parse(after) : (await databaseNow(readers.db)).getTime();
      try {
        const preview = previewSchedule({ expression, timezone, dst }, from, count ?? 5);
        // Valid for the form only if a job of the caller's organization may have it (its minimum interval).
        readers.cron.checkInterval(principalOf(request).organizationId, expression);
        return { valid: true as const, expression, timezone, ...preview };
      } catch (error) {
        // The domain names the job's field (`schedule`); here the expression is `expression`.
        if (error instanceof ValidationError && error.details.field === 'schedule') {
          throw new ValidationError(error.message, { ...error.details, field: 'expression' });
        }
        throw error;
      }
    },
  );

  app.get(
    '/cron-jobs',
    {
      schema: {
        tags: ['cron jobs'],
        summary: "List the organization's cron jobs by name",
        querystring: listQuery,
        response: { 200: jobPage, ...readProblems },
      },
    },
    async (request) => {
      const q = request.query;
      const rows = await listOrganizationCronJobs(readers.db, {
        organizationId: principalOf(request).organizationId,
        includeDeleted: q.includeDeleted,
        after: q.cursor ? { name: q.cursor[0], id: q.cursor[1] } : null,
        limit: q.limit + 1,
      });
      const result = pageOf(rows, q.limit, (last) => [last.name, last.jobId]);
      return view(jobPage, { ...result, items: result.items.map(cronJobOut) });
    },
  );

  app.get(
    '/cron-jobs/:id',
    {
      schema: {
        tags: ['cron jobs'],
        summary: 'Get a cron job',
        params: uuidParams,
        response: { 200: cronJobView, ...readProblems },
      },
    },
    async (request) => jobOut(await ownJob(readers, principalOf(request), request.params.id)),
  );

  const { route: jobCommand } = commandRoutes(app, commands, {
    path: '/cron-jobs',
    tag: 'cron jobs',
    view: cronJobView,
    own: ownJob,
    out: (job) => jobOut(job as ExistingCronJob),
  });

  jobCommand(
    'PATCH',
    '',
    'Change a job (schedule, time zone, payload, policies)',
    updateBody,
    (s, id, b: z.output<typeof updateBody>, meta, p) => s.cron.update(id, b, p.actor, meta),
  );
  jobCommand(
    'DELETE',
    '',
    'Delete a job (nothing fires any more; queued runs are cancelled)',
    undefined,
    (s, id, _b: unknown, meta, p) => s.cron.delete(id, p.actor, meta),
  );
  jobCommand(
    'POST',
    '/pause',
    'Pause a job, with the reason',
    pauseBody,
    (s, id, b: z.output<typeof pauseBody>, meta, p) => s.cron.pause(id, b.reason, p.actor, meta),
  );
  jobCommand(
    'POST',
    '/resume',
    'Resume a paused job (held-back occurrences are recorded as one paused run)',
    undefined,
    (s, id, _b: unknown, meta, p) => s.cron.resume(id, p.actor, meta),
  );

  app.post(
    '/cron-jobs/:id/trigger',
    {
      schema: {
        tags: ['cron jobs'],
        summary: 'Trigger a manual run now',
        description: IDEMPOTENCY_HEADER_DOC,
        headers: idempotencyHeaders,
        params: uuidParams,
        response: { 201: jobRunView, ...commandProblems },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      return sendCommand(commands, request, reply, async (s, meta) => {
        await ownJob(s, principal, request.params.id);
        const run = await s.cron.trigger(request.params.id, principal.actor, meta);
        return { status: 201, body: run, headers: { location: `/v1/cron-runs/${run.runId}` } };
      });
    },
  );

  app.post(
    '/cron-jobs/:id/backfill',
    {
      schema: {
        tags: ['cron jobs'],
        summary: 'Backfill the occurrences in [from, to] that have not run (?dryRun=true: only list them)',
        description: IDEMPOTENCY_HEADER_DOC,
        headers: idempotencyHeaders,
        params: uuidParams,
        querystring: backfillQuery,
        body: backfillBody,
        response: { 200: backfillView, ...commandProblems },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      return sendCommand(commands, request, reply, async (s, meta) => {
        await ownJob(s, principal, request.params.id);
        const result = await s.cron.backfill(
          request.params.id,
          { ...request.body, dryRun: request.query.dryRun, by: principal.actor },
          meta,
        );
        return { status: 200, body: result };
      });
    },
  );

  app.get(
    '/cron-jobs/:id/runs',
    {
      schema: {
        tags: ['cron jobs'],
        summary: "A job's runs (and records of occurrences that did not run) in occurrence order",
        params: uuidParams,
        querystring: runsQuery,
        response: { 200: runPage, ...readProblems },
      },
    },
    async (request) => {
      const job = await ownJob(readers, principalOf(request), request.params.id);
      const q = request.query;
      const rows = await jobRunsPage(readers.db, job.jobId, {
        from: q.from ?? new Date(0),
        to: q.to ?? new Date(8.64e15),
        after: q.cursor ? { scheduledFor: q.cursor[0], triggerKey: q.cursor[1] } : null,
        limit: q.limit + 1,
      });
      return view(
        runPage,
        pageOf(rows, q.limit, (last) => [last.scheduledFor, last.triggerKey]),
      );
    },
  );

  app.get(
    '/cron-jobs/:id/ledger',
    {
      schema: {
        tags: ['cron jobs'],
        summary:
          'Every occurrence of [from, to] with its fate (fired, buffered, skipped-overlap, missed, paused, backfilled, manual)',
        params: uuidParams,
        querystring: ledgerQuery,
        response: { 200: z.object({ entries: z.array(ledgerEntryView) }), ...readProblems },
      },
    },
    async (request) => {
      const job = await ownJob(readers, principalOf(request), request.params.id);
      const q = request.query;
      const entries = await readers.cron.ledger(job.jobId, {
        ...(q.from ? { from: q.from } : {}),
        ...(q.to ? { to: q.to } : {}),
        limit: q.limit,
      });
      return view(z.object({ entries: z.array(ledgerEntryView) }), { entries });
    },
  );

  app.get(
    '/cron-jobs/:id/upcoming',
    {
      schema: {
        tags: ['cron jobs'],
        summary: 'The next fire times (DST policy applied)',
        params: uuidParams,
        querystring: upcomingQuery,
        response: { 200: z.object({ occurrences: z.array(occurrenceView) }), ...readProblems },
      },
    },
    async (request) => {
      const job = await ownJob(readers, principalOf(request), request.params.id);
      const occurrences = await readers.cron.upcoming(job.jobId, request.query.count);
      return {
        occurrences: occurrences.map((o) => ({
          at: new Date(o.at).toISOString(),
          wall: o.wall,
          kind: o.kind,
        })),
      };
    },
  );

  app.get(
    '/cron-runs/:id',
    {
      schema: {
        tags: ['cron jobs'],
        summary: 'Get a run',
        params: uuidParams,
        response: { 200: jobRunView, ...readProblems },
      },
    },
    async (request) => view(jobRunView, await ownRun(readers, principalOf(request), request.params.id)),
  );
};
