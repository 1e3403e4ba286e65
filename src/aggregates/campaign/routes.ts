/**
 * `/v1/campaigns`: one route per operation of the campaign library (src/aggregates/campaign/service.ts)
 * — create (and schedule, given a startAt, in the same transaction), activate, schedule, send now,
 * pause, resume, reschedule, cancel, delete, get, the organization's list (keyset-paginated), and the
 * history (the replay with each command's causal chain). Bodies are built from the campaign commands'
 * own field schemas; the domain's cross-field rules answer 422 naming the field, a command the status
 * forbids 409 with the current status. Creation is a union on `channel` ('line' today): another
 * channel adds its body to CREATE_BODIES and its case to `createCampaign`.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { listOrganizationCampaigns } from '../../adapters/postgres/campaign-queries.js';
import type { Principal } from '../../api/auth.js';
import type { Services } from '../../api/commands.js';
import { idempotencyKeyOf, owned, principalOf, sendCommand } from '../../api/http.js';
import type { RouteDeps } from '../../api/module.js';
import {
  chargeProblems,
  commandOn,
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
  instantQuery,
  limit,
  offFlag,
  pageOf,
  uuidParams,
} from '../../api/schemas.js';
import { page, view } from '../../api/views.js';
import { campaignCommandSchema } from '../../domain/campaign/commands.js';
import { lineContentSchema } from '../../domain/campaign/line.js';
import { CAMPAIGN_CHANNELS, CAMPAIGN_STATUSES } from '../../domain/campaign/status.js';
import { CAMPAIGN_OPERATIONS, type ExistingCampaign } from '../../domain/campaign.js';
import { ValidationError } from '../../errors.js';
import type { EventMeta } from '../../ports/events.js';
import type { LineDirectory } from './line/directory.js';
import type { CampaignService } from './service.js';
import { createSmsCampaign, smsCampaignBody } from './sms/routes.js';
import type { SmsCampaignService } from './sms/service.js';
import { campaignOut, campaignView } from './views.js';

/** The campaign slice's services (its registration builds them): LINE and SMS campaigns. */
export interface CampaignServices {
  campaigns: CampaignService;
  /** SMS campaigns (ADR 0014): on the pool only — it runs its own transactions and reserves its own keys. */
  sms: SmsCampaignService;
  /** LINE channel credentials and audiences (ADR 0021). */
  line: LineDirectory;
}

/** The campaign, when the principal's organization owns it (a 404 otherwise). */
export const ownCampaign = (
  s: Pick<CampaignServices, 'campaigns'>,
  principal: Principal,
  id: string,
): Promise<ExistingCampaign> => owned('campaign', id, principal, () => s.campaigns.get(id));

const create = commandSchema(campaignCommandSchema.options, 'CreateCampaign').shape;
const schedule = commandSchema(campaignCommandSchema.options, 'ScheduleCampaign').shape;
const cancel = commandSchema(campaignCommandSchema.options, 'CancelCampaign').shape;
const edit = commandSchema(campaignCommandSchema.options, 'EditCampaign').shape;

const lineCampaignBody = z
  .strictObject({
    channel: z.literal('line'),
    name: create.name,
    castType: create.castType,
    audienceId: create.audienceId,
    lineOaId: create.lineOaId,
    line: z
      .strictObject({ messages: lineContentSchema })
      .describe('the LINE message objects sent (1..5), validated against LINE’s Messaging API shapes'),
    idempotencyKey: create.idempotencyKey.describe(
      "the organization's own unique key for this campaign (seed 003); distinct from the Idempotency-Key header",
    ),
    startAt: create.startAt.describe('given: the campaign is scheduled at this time in the same transaction'),
    dispatchDeadline: create.dispatchDeadline,
  })
  .meta({ id: 'NewLineCampaign' });

/**
 * One body per channel; the union's discriminator is `channel`. An `sms` body is created by the SMS
 * campaign service (sms-campaigns.ts: its own transactions around an external charge), not in the
 * request's transaction.
 */
const CREATE_BODIES = [lineCampaignBody, smsCampaignBody] as const;
const createBody = z.discriminatedUnion('channel', CREATE_BODIES);
type CreateBody = z.output<typeof createBody>;

async function createCampaign(
  s: Services<CampaignServices>,
  principal: Principal,
  body: CreateBody,
  meta: EventMeta,
  requestIdempotencyKey: string | null,
) {
  switch (body.channel) {
    case 'line': {
      const { startAt, dispatchDeadline, ...fields } = body;
      const created = await s.campaigns.create(
        {
          ...fields,
          mode: 'draft',
          organizationId: principal.organizationId,
          requestIdempotencyKey,
          startAt: startAt ?? null,
          dispatchDeadline: dispatchDeadline ?? null,
        },
        meta,
      );
      if (startAt == null) return created;
      return s.campaigns.schedule(created.campaignId, startAt, dispatchDeadline ?? null, meta);
    }
    case 'sms':
      throw new Error('an sms campaign is created by createSmsCampaign, outside the request transaction');
  }
}

const scheduleBody = z.strictObject({
  startAt: schedule.startAt,
  dispatchDeadline: schedule.dispatchDeadline,
});
const cancelBody = z.strictObject({ reason: cancel.reason }).nullish();
const reasonBody = z.strictObject({ reason: cancel.reason }).nullish();
const rescheduleBody = z.strictObject({
  startAt: schedule.startAt.optional().describe('LINE: the new start'),
  dispatchDeadline: schedule.dispatchDeadline,
  scheduledAt: z
    .string()
    .min(1)
    .max(40)
    .optional()
    .describe('SMS: the new start, as at creation (without an offset: local time in HERALD_SMS_TIMEZONE)'),
  reason: cancel.reason,
});

/** One reschedule route: an SMS campaign's new time is validated as at creation, a LINE one's as before. */
async function rescheduleCampaign(
  s: Services<CampaignServices>,
  principal: Principal,
  id: string,
  b: z.output<typeof rescheduleBody>,
  meta: EventMeta,
) {
  const campaign = await s.campaigns.get(id);
  if (campaign.channel === 'sms' && campaign.sms !== null) {
    if (b.dispatchDeadline !== undefined) {
      throw new ValidationError(
        "an SMS campaign's dispatch deadline follows its start (HERALD_SMS_DISPATCH_DEADLINE_MINUTES)",
        { field: 'dispatchDeadline' },
      );
    }
    const scheduledAt = b.scheduledAt ?? b.startAt;
    return s.sms.reschedule(
      id,
      { ...(scheduledAt !== undefined ? { scheduledAt } : {}), ...(b.reason ? { reason: b.reason } : {}) },
      { organizationId: principal.organizationId, meta },
    );
  }
  if (b.scheduledAt !== undefined) {
    throw new ValidationError('scheduledAt is for SMS campaigns; a LINE campaign takes startAt', {
      field: 'scheduledAt',
    });
  }
  if (b.startAt === undefined) throw new ValidationError('startAt is required', { field: 'startAt' });
  return s.campaigns.reschedule(id, b.startAt, b.dispatchDeadline, meta);
}

const editBody = z
  .strictObject({
    name: edit.name,
    castType: edit.castType,
    audienceId: edit.audienceId,
    lineOaId: edit.lineOaId,
    messages: edit.messages,
  })
  .meta({ id: 'CampaignEdit' });

const listQuery = z.strictObject({
  status: z.enum(CAMPAIGN_STATUSES).optional(),
  channel: z.enum(CAMPAIGN_CHANNELS).optional(),
  includeDeleted: offFlag,
  q: z
    .string()
    .trim()
    .min(1)
    .max(200)
    .optional()
    .describe('search: a campaign id (exact), or the start of its name (case-insensitive)'),
  createdFrom: instantQuery.optional().describe('created at or after'),
  createdTo: instantQuery.optional().describe('created before'),
  limit,
  cursor: cursor(z.tuple([cursorInstant, cursorUuid])).optional(),
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const campaignPage = page(campaignView, 'CampaignPage');
const campaignResponse = (status: 200 | 201) => ({ [status]: campaignView, ...commandProblems });

export const campaignRoutes: FastifyPluginAsyncZod<RouteDeps<CampaignServices>> = async (
  app,
  { commands, registry },
) => {
  const readers = commands.readers;

  app.post(
    '/campaigns',
    {
      schema: {
        tags: ['campaigns'],
        summary:
          'Create a campaign (and schedule it, given startAt); an SMS campaign with its recipients, charged',
        description: `${IDEMPOTENCY_HEADER_DOC} SMS (\`channel: "sms"\`, seed 003): 1–5,000 recipients, validated, priced and charged once; 201 with the QUEUED or SCHEDULED campaign; 402 when the balance does not cover it; 502 with \`Retry-After: 2\` when billing did not answer (the campaign is kept: a retry with the same Idempotency-Key charges it once under its key); 409 with \`Retry-After: 2\` while the same Idempotency-Key is in progress.`,
        headers: idempotencyHeaders,
        body: createBody,
        response: { 201: campaignView, ...chargeProblems },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const body = request.body;
      if (body.channel === 'sms') return createSmsCampaign(readers.sms, request, reply, body);
      return sendCommand(commands, request, reply, async (s, meta) => {
        const campaign = await createCampaign(s, principal, body, meta, idempotencyKeyOf(request));
        return {
          status: 201,
          body: campaignOut(campaign),
          headers: { location: `/v1/campaigns/${campaign.campaignId}` },
        };
      });
    },
  );

  app.get(
    '/campaigns',
    {
      schema: {
        tags: ['campaigns'],
        summary:
          "List the organization's campaigns, newest first; search by id or name prefix, filter by status, channel, creation time",
        querystring: listQuery,
        response: { 200: campaignPage, ...readProblems },
      },
    },
    async (request) => {
      const { organizationId } = principalOf(request);
      const q = request.query;
      const rows = await listOrganizationCampaigns(readers.db, {
        organizationId,
        ...(q.status ? { status: q.status } : {}),
        ...(q.channel ? { channel: q.channel } : {}),
        includeDeleted: q.includeDeleted,
        before: q.cursor ? { createdAt: q.cursor[0], id: q.cursor[1] } : null,
        limit: q.limit + 1,
        ...(q.q !== undefined ? (UUID.test(q.q) ? { id: q.q.toLowerCase() } : { namePrefix: q.q }) : {}),
        ...(q.createdFrom ? { createdFrom: q.createdFrom } : {}),
        ...(q.createdTo ? { createdTo: q.createdTo } : {}),
      });
      return view(
        campaignPage,
        pageOf(rows.map(campaignOut), q.limit, (last) => [last.createdAt, last.campaignId]),
      );
    },
  );

  app.get(
    '/campaigns/:id',
    {
      schema: {
        tags: ['campaigns'],
        summary: 'Get a campaign',
        params: uuidParams,
        response: { 200: campaignView, ...readProblems },
      },
    },
    async (request) => campaignOut(await ownCampaign(readers, principalOf(request), request.params.id)),
  );

  historyRoute(
    app,
    { commands, registry },
    {
      path: '/campaigns',
      tag: 'campaigns',
      summary:
        "A campaign's events, each command's causal chain (messages, receipts, consumers) and its state",
      streamType: 'campaign',
      own: async (principal, id) => (await ownCampaign(readers, principal, id)).campaignId,
    },
  );

  const { post: command } = commandRoutes(app, commands, {
    operations: CAMPAIGN_OPERATIONS,
    path: '/campaigns',
    tag: 'campaigns',
    view: campaignView,
    own: ownCampaign,
    out: (campaign) => campaignOut(campaign as ExistingCampaign),
  });

  command(
    'activate',
    'Activate a draft: QUEUED, or SCHEDULED at its startAt',
    undefined,
    (s, id, _b: unknown, meta) => s.campaigns.activate(id, meta),
  );
  command(
    'schedule',
    'Schedule a draft at startAt',
    scheduleBody,
    (s, id, b: z.output<typeof scheduleBody>, meta) =>
      s.campaigns.schedule(id, b.startAt, b.dispatchDeadline, meta),
  );
  command(
    'send-now',
    'Dispatch now (QUEUED or SCHEDULED → DISPATCHING)',
    undefined,
    (s, id, _b: unknown, meta) => s.campaigns.sendNow(id, meta),
  );
  command(
    'pause',
    'Pause (SCHEDULED, QUEUED or DISPATCHING), with an optional reason: no new claims, nothing recalled or refunded',
    reasonBody,
    (s, id, b: z.output<typeof reasonBody>, meta) => s.campaigns.pause(id, b?.reason, meta),
  );
  command(
    'resume',
    'Resume a paused campaign (paused from SCHEDULED → SCHEDULED, otherwise QUEUED)',
    reasonBody,
    (s, id, b: z.output<typeof reasonBody>, meta) => s.campaigns.resume(id, b?.reason, meta),
  );
  command(
    'reschedule',
    'Move the start time of a scheduled (or paused-from-scheduled) campaign. LINE: `startAt` (and `dispatchDeadline`). SMS: `scheduledAt` validated as at creation (without an offset a wall time in HERALD_SMS_TIMEZONE; lead, horizon, promotional window), a new dispatch deadline of start + HERALD_SMS_DISPATCH_DEADLINE_MINUTES',
    rescheduleBody,
    (s, id, b: z.output<typeof rescheduleBody>, meta, p) => rescheduleCampaign(s, p, id, b, meta),
  );
  command(
    'cancel',
    'Cancel (QUEUED, SCHEDULED or PAUSED; an SMS campaign also DISPATCHING → CANCELLING → CANCELLED once its unsent recipients are refunded)',
    cancelBody,
    (s, id, b: z.output<typeof cancelBody>, meta) => s.campaigns.cancel(id, b?.reason, meta),
  );

  app.patch(
    '/campaigns/:id',
    {
      schema: {
        tags: ['campaigns'],
        summary:
          'Edit a campaign (seed 000 CMS): name, cast type, audience, official account, LINE messages; DRAFT or SCHEDULED, 409 once claimed',
        description: IDEMPOTENCY_HEADER_DOC,
        headers: idempotencyHeaders,
        params: uuidParams,
        body: editBody,
        response: campaignResponse(200),
      },
    },
    commandOn(commands, ownCampaign, async (s, id, b: z.output<typeof editBody>, meta) =>
      campaignOut(await s.campaigns.edit(id, b, meta)),
    ),
  );

  app.delete(
    '/campaigns/:id',
    {
      schema: {
        tags: ['campaigns'],
        summary: 'Delete a campaign (soft: it keeps its status and history, and is never dispatched)',
        description: IDEMPOTENCY_HEADER_DOC,
        headers: idempotencyHeaders,
        params: uuidParams,
        response: campaignResponse(200),
      },
    },
    commandOn(commands, ownCampaign, async (s, id, _b, meta) =>
      campaignOut(await s.campaigns.delete(id, meta)),
    ),
  );
};
