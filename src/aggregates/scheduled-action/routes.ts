/**
 * `/v1/actions` and `/v1/signals`: the scheduled-action library (src/aggregates/scheduled-action/
 * service.ts) — schedule, get, list (keyset-paginated), cancel, fire now, reschedule (the execute time
 * of a normal action, the deadline of a wait), history — and signals, which unlock the organization's
 * matching waits in the transaction that records them. Subjects (what stored conditions are evaluated
 * against at fire time) are read and replaced under `/v1/subjects`. Bodies come from the commands'
 * own field schemas; the organization is always the key's.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { listOrganizationActions } from '../../adapters/postgres/scheduled-action-queries.js';
import type { Principal } from '../../api/auth.js';
import { idempotencyKeyOf, owned, principalOf, sendCommand } from '../../api/http.js';
import type { RouteDeps } from '../../api/module.js';
import {
  commandProblems,
  commandRoutes,
  historyRoute,
  IDEMPOTENCY_HEADER_DOC,
  idempotencyHeaders,
  readProblems,
} from '../../api/routes/common.js';
import {
  commandSchema,
  cursor,
  cursorInstant,
  cursorUuid,
  limit,
  pageOf,
  uuidParams,
} from '../../api/schemas.js';
import { page, view } from '../../api/views.js';
import type { ExistingAction } from '../../domain/scheduled-action.js';
import {
  ACTION_OPERATIONS,
  ACTION_STATUSES,
  scheduledActionCommandSchema,
} from '../../domain/scheduled-action.js';
import type { ScheduledActionService } from './service.js';
import { signalParams } from './service.js';
import { actionOut, actionView, signalOutcomeView } from './views.js';

const schedule = commandSchema(scheduledActionCommandSchema.options, 'ScheduleAction').shape;
const cancel = commandSchema(scheduledActionCommandSchema.options, 'CancelAction').shape;
const fire = commandSchema(scheduledActionCommandSchema.options, 'FireActionNow').shape;
const reschedule = commandSchema(scheduledActionCommandSchema.options, 'RescheduleAction').shape;

const scheduleBody = z
  .strictObject({
    mode: schedule.mode,
    actionType: schedule.actionType,
    actionConfig: schedule.actionConfig,
    sourceConfig: schedule.sourceConfig,
    workflowId: schedule.workflowId,
    workflowNodePath: schedule.workflowNodePath,
    subjectId: schedule.subjectId,
    delaySeconds: schedule.delaySeconds,
    expiresSeconds: schedule.expiresSeconds,
    wait: schedule.wait,
    expiry: schedule.expiry,
    // Without a value the configured default applies (HERALD_ACTIONS_MAX_RETRIES).
    maxRetries: schedule.maxRetries.unwrap().optional(),
  })
  .meta({ id: 'NewScheduledAction' });

const cancelBody = z.strictObject({ reason: cancel.reason });
const fireBody = z.strictObject({ reason: fire.reason }).nullish();
const rescheduleBody = z.strictObject({
  executeAt: reschedule.executeAt.describe('a normal action: the new execute time'),
  expiresAt: reschedule.expiresAt.describe('a wait: the new deadline'),
  reason: reschedule.reason,
});
const signalBody = signalParams.omit({ organizationId: true }).meta({ id: 'NewSignal' });

const listQuery = z.strictObject({
  status: z.enum(ACTION_STATUSES).optional(),
  workflowId: z.string().min(1).max(200).optional(),
  mode: z
    .enum(['normal', 'waitForSignal'])
    .optional()
    .describe('waitForSignal with status=pending: the waiting actions'),
  correlationKey: z.string().min(1).max(500).optional().describe("a wait's correlation key"),
  limit,
  cursor: cursor(z.tuple([cursorInstant, cursorUuid])).optional(),
});

const subjectParams = z.strictObject({ subjectId: z.string().trim().min(1).max(200) });
const subjectView = z
  .object({
    organizationId: z.string(),
    subjectId: z.string(),
    attributes: z.record(z.string(), z.unknown()),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'Subject' });

const actionPage = page(actionView, 'ScheduledActionPage');
const actionResponse = (status: 200 | 201) => ({ [status]: actionView, ...commandProblems });

/** The scheduled-action slice's services (its registration builds them). */
export interface ActionServices {
  actions: ScheduledActionService;
}

/** The action, when the principal's organization owns it (a 404 otherwise). */
export const ownAction = (s: ActionServices, principal: Principal, id: string): Promise<ExistingAction> =>
  owned('scheduled action', id, principal, () => s.actions.get(id));

export const actionRoutes: FastifyPluginAsyncZod<RouteDeps<ActionServices>> = async (
  app,
  { commands, registry },
) => {
  const readers = commands.readers;

  app.post(
    '/actions',
    {
      schema: {
        tags: ['scheduled actions'],
        summary:
          'Schedule an action (normal: after delaySeconds; waitForSignal: until a signal or its deadline)',
        description: IDEMPOTENCY_HEADER_DOC,
        headers: idempotencyHeaders,
        body: scheduleBody,
        response: actionResponse(201),
      },
    },
    async (request, reply) => {
      const { organizationId } = principalOf(request);
      return sendCommand(commands, request, reply, async (s, meta) => {
        const action = await s.actions.schedule(
          { ...request.body, organizationId, idempotencyKey: idempotencyKeyOf(request) },
          meta,
        );
        return {
          status: 201,
          body: actionOut(action),
          headers: { location: `/v1/actions/${action.actionId}` },
        };
      });
    },
  );

  app.get(
    '/actions',
    {
      schema: {
        tags: ['scheduled actions'],
        summary: "List the organization's actions by execute time, latest first",
        querystring: listQuery,
        response: { 200: actionPage, ...readProblems },
      },
    },
    async (request) => {
      const { organizationId } = principalOf(request);
      const q = request.query;
      const rows = await listOrganizationActions(readers.db, {
        organizationId,
        ...(q.status ? { status: q.status } : {}),
        ...(q.workflowId ? { workflowId: q.workflowId } : {}),
        ...(q.mode ? { mode: q.mode } : {}),
        ...(q.correlationKey ? { correlationKey: q.correlationKey } : {}),
        before: q.cursor ? { executeAt: q.cursor[0], id: q.cursor[1] } : null,
        limit: q.limit + 1,
      });
      return view(
        actionPage,
        pageOf(rows.map(actionOut), q.limit, (last) => [last.executeAt, last.actionId]),
      );
    },
  );

  app.get(
    '/actions/:id',
    {
      schema: {
        tags: ['scheduled actions'],
        summary: 'Get an action',
        params: uuidParams,
        response: { 200: actionView, ...readProblems },
      },
    },
    async (request) =>
      view(actionView, actionOut(await ownAction(readers, principalOf(request), request.params.id))),
  );

  historyRoute(
    app,
    { commands, registry },
    {
      path: '/actions',
      tag: 'scheduled actions',
      summary: "An action's events with each command's causal chain, and its state",
      streamType: 'scheduled_action',
      own: async (principal, id) => (await ownAction(readers, principal, id)).actionId,
    },
  );

  const { post: command } = commandRoutes(app, commands, {
    operations: ACTION_OPERATIONS,
    path: '/actions',
    tag: 'scheduled actions',
    view: actionView,
    out: (action) => actionOut(action as ExistingAction),
    own: ownAction,
  });

  command(
    'cancel',
    'Cancel a pending or waiting action',
    cancelBody,
    (s, id, b: z.output<typeof cancelBody>, meta) => s.actions.cancel(id, b.reason, meta),
  );
  command(
    'fire',
    'Fire now (a wait runs its main branch, as if signalled)',
    fireBody,
    (s, id, b: z.output<typeof fireBody>, meta) => s.actions.fireNow(id, b?.reason, meta),
  );
  command(
    'reschedule',
    "Move a pending action's execute time (executeAt) or a wait's deadline (expiresAt)",
    rescheduleBody,
    (s, id, b: z.output<typeof rescheduleBody>, meta) =>
      s.actions.reschedule(
        id,
        {
          ...(b.executeAt ? { executeAt: b.executeAt } : {}),
          ...(b.expiresAt ? { expiresAt: b.expiresAt } : {}),
        },
        b.reason,
        meta,
      ),
  );

  app.post(
    '/signals',
    {
      schema: {
        tags: ['scheduled actions'],
        summary:
          "Record a signal; it unlocks the organization's pending waits on its correlation key and name",
        description: IDEMPOTENCY_HEADER_DOC,
        headers: idempotencyHeaders,
        body: signalBody,
        response: { 200: signalOutcomeView, ...commandProblems },
      },
    },
    async (request, reply) => {
      const { organizationId } = principalOf(request);
      return sendCommand(commands, request, reply, async (s, meta) => ({
        status: 200,
        body: await s.actions.signal({ ...request.body, organizationId }, meta),
      }));
    },
  );

  app.get(
    '/subjects/:subjectId',
    {
      schema: {
        tags: ['scheduled actions'],
        summary: "A subject's attributes (what stored conditions are evaluated against at fire time)",
        params: subjectParams,
        response: { 200: subjectView, ...readProblems },
      },
    },
    async (request) =>
      view(
        subjectView,
        await readers.actions.getSubject(principalOf(request).organizationId, request.params.subjectId),
      ),
  );

  app.put(
    '/subjects/:subjectId',
    {
      schema: {
        tags: ['scheduled actions'],
        summary: "Create or replace a subject's attributes",
        description: IDEMPOTENCY_HEADER_DOC,
        headers: idempotencyHeaders,
        params: subjectParams,
        body: z.strictObject({ attributes: z.record(z.string(), z.unknown()) }),
        response: { 200: subjectView, ...commandProblems },
      },
    },
    async (request, reply) => {
      const { organizationId } = principalOf(request);
      return sendCommand(commands, request, reply, async (s) => ({
        status: 200,
        body: await s.actions.upsertSubject(
          organizationId,
          request.params.subjectId,
          request.body.attributes,
        ),
      }));
    },
  );
};
