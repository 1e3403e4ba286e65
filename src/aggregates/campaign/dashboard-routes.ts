/**
 * The campaign slice's dashboard reads: recipient search by phone number across the organization's
 * campaigns (indexed, cursor-paginated) and a campaign's timeline (each event with its actor, outbox
 * messages, broker confirms and consumer inbox records). Tenancy as everywhere: the key's
 * organization scopes every query.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { recipientsByMsisdn } from '../../adapters/postgres/dashboard-queries.js';
import { principalOf } from '../../api/http.js';
import type { RouteDeps } from '../../api/module.js';
import { readProblems } from '../../api/routes/common.js';
import { cursor, limit, pageOf, uuidParams } from '../../api/schemas.js';
import { instant, json, page, plainJson, view } from '../../api/views.js';
import { normalizeMsisdn } from '../../domain/sms/msisdn.js';
import { ValidationError } from '../../errors.js';
import { replayStream } from '../../projections/replay.js';
import { type CampaignServices, ownCampaign } from './routes.js';

const recipientView = z
  .object({
    recipientId: z.number().int(),
    campaignId: z.uuid(),
    campaignName: z.string(),
    campaignStatus: z.string(),
    msisdn: z.string().describe('E.164 digits without +'),
    status: z.string(),
    operator: z.string(),
    segments: z.number().int(),
    cost: z.number(),
    attempts: z.number().int(),
    deferrals: z.number().int(),
    nextAllowedAt: instant.nullable(),
    submissionId: z.string().nullable(),
    submittedAt: instant.nullable(),
    createdAt: instant,
  })
  .meta({ id: 'RecipientHit' });
const recipientPage = page(recipientView, 'RecipientHitPage');
const recipientQuery = z.strictObject({
  msisdn: z
    .string()
    .trim()
    .min(3)
    .max(40)
    .describe('a phone number in any common spelling (+880…, 01…, 00…)'),
  limit,
  cursor: cursor(z.number().int().positive()).optional(),
});

const timelineView = z
  .object({
    campaignId: z.uuid(),
    version: z.number().int(),
    truncated: z.boolean().describe('only the latest `limit` events are listed'),
    events: z.array(
      z.object({
        position: z.number().int(),
        version: z.number().int(),
        type: z.string(),
        recordedAt: instant,
        actor: z.string().nullable().describe('who caused it: api-key:<id>, a pod, the scanner…'),
        correlationId: z.string().nullable(),
        causationId: z.string().nullable(),
        data: z.unknown(),
        messages: z.array(
          z.object({
            messageId: z.string(),
            sink: z.string(),
            destination: z.string(),
            outbox: json
              .nullable()
              .describe('the outbox row (status, attempts, last error), while retention keeps it'),
            receipts: z.array(json).describe('publish receipts: the broker confirm (sent) or dead'),
            inbox: z.array(json).describe('consumer inbox records: consumer, status, attempts, error'),
          }),
        ),
      }),
    ),
  })
  .meta({ id: 'CampaignTimeline' });
const timelineQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).default(200).describe('latest events (1–1000)'),
});

export const campaignDashboardRoutes: FastifyPluginAsyncZod<RouteDeps<CampaignServices>> = async (
  app,
  { commands, registry },
) => {
  const db = commands.readers.db;

  app.get(
    '/recipients',
    {
      schema: {
        tags: ['dashboard'],
        summary: "A phone number's recipients across the organization's campaigns, newest first",
        querystring: recipientQuery,
        response: { 200: recipientPage, ...readProblems },
      },
    },
    async (request) => {
      const { organizationId } = principalOf(request);
      const q = request.query;
      const normalized = normalizeMsisdn(q.msisdn.replace(/[\s().-]/g, ''));
      if (!normalized) throw new ValidationError(`'${q.msisdn}' is not a mobile number`, { field: 'msisdn' });
      const rows = await recipientsByMsisdn(db, {
        msisdn: normalized.msisdn,
        organizationId,
        beforeId: q.cursor ?? null,
        limit: q.limit + 1,
      });
      return view(
        recipientPage,
        pageOf(rows, q.limit, (last) => last.recipientId),
      );
    },
  );

  app.get(
    '/campaigns/:id/timeline',
    {
      schema: {
        tags: ['campaigns'],
        summary:
          "A campaign's timeline: each event with its actor, its outbox messages, their broker confirms and consumer records",
        params: uuidParams,
        querystring: timelineQuery,
        response: { 200: timelineView, ...readProblems },
      },
    },
    async (request) => {
      const campaign = await ownCampaign(commands.readers, principalOf(request), request.params.id);
      const replay = await replayStream(db, registry, {
        streamType: 'campaign',
        streamId: campaign.campaignId,
      });
      const byVersion = new Map<number, (typeof replay.commands)[number]>();
      const messagesOf = new Map<number, (typeof replay.commands)[number]['messages']>();
      for (const command of replay.commands) {
        for (const version of command.versions) byVersion.set(version, command);
        for (const message of command.messages) {
          messagesOf.set(message.eventVersion, [...(messagesOf.get(message.eventVersion) ?? []), message]);
        }
      }
      const events = replay.events.slice(-request.query.limit);
      return view(
        timelineView,
        plainJson({
          campaignId: campaign.campaignId,
          version: replay.version,
          truncated: events.length < replay.events.length,
          events: events.map((event) => {
            const command = byVersion.get(event.version);
            const meta = event.meta as Record<string, unknown>;
            const text = (value: unknown) => (typeof value === 'string' ? value : null);
            return {
              position: event.position,
              version: event.version,
              type: event.type,
              recordedAt: event.recordedAt,
              actor: command?.actor ?? text(meta.actor),
              correlationId: command?.correlationId ?? text(meta.correlationId),
              causationId: command?.causationId ?? text(meta.causationId),
              data: event.data,
              messages: (messagesOf.get(event.version) ?? []).map((m) => ({
                messageId: m.messageId,
                sink: m.sink,
                destination: m.destination,
                outbox: m.outbox,
                receipts: m.receipts,
                inbox: m.inbox,
              })),
            };
          }),
        }),
      );
    },
  );
};
