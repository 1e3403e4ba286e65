/**
 * The dashboard's reads and bulk commands (issue 14), on the API alone: the live stream (SSE,
 * src/api/stream.ts), the overview (every figure from a projection, a capped count of a partial index or
 * a bounded sample: never an unbounded count), recipient search by phone number across the
 * organization's campaigns (indexed, cursor-paginated), a campaign's timeline (each event with its
 * actor, outbox messages, broker confirms and consumer inbox records), signals by correlation key, and
 * bulk outbox requeue / skip (each row guarded in SQL, answered per id). Tenancy as everywhere: the
 * key's organization scopes every query.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  dispatchSeries,
  inboxDead,
  LATENCY_SAMPLE,
  latencySeries,
  OVERVIEW_COUNT_CAP,
  outboxByDestination,
  outboxStatuses,
  recipientsByMsisdn,
  signalsByCorrelation,
} from '../../adapters/postgres/dashboard-queries.js';
import { leaseAges, projectionLag } from '../../adapters/postgres/observability-queries.js';
import {
  listOrganizationParkedKeys,
  notifyChannel,
  type OrderKey,
  skipDead,
  wakeKeyHeads,
} from '../../adapters/postgres/outbox-order-queries.js';
import { requeueDead } from '../../adapters/postgres/outbox-queries.js';
import { normalizeMsisdn } from '../../domain/sms/msisdn.js';
import { HeraldError, ValidationError } from '../../errors.js';
import { databaseNow } from '../../eventstore/command-handler.js';
import { leaseRequirements } from '../../observability/readiness.js';
import { channels } from '../../ports/wakeups.js';
import { replayStream } from '../../projections/replay.js';
import { ownCampaign, principalOf, sendCommand } from '../http.js';
import { cursor, cursorInstant, cursorUuid, limit, pageOf, uuidParams } from '../schemas.js';
import { STREAM_TOPICS, type StreamHub, type StreamTopic } from '../stream.js';
import { page, plainJson, view } from '../views.js';
import {
  commandProblems,
  IDEMPOTENCY_HEADER_DOC,
  idempotencyHeaders,
  type RouteDeps,
  readProblems,
} from './common.js';

const instant = z.iso.datetime().describe('ISO-8601, UTC');

/** The overview is shared by all of an organization's pages for this long (per API process). */
export const OVERVIEW_TTL_MS = 2_000;
const json = z.record(z.string(), z.unknown());

const destinationCount = z.object({
  sink: z.string(),
  destination: z.string(),
  rows: z.number().int(),
  oldestAgeSeconds: z.number().describe('age of the oldest row (database clock)'),
});

export const overviewView = z
  .object({
    at: instant.describe(
      `database time of the overview (computed at most every ${OVERVIEW_TTL_MS / 1000} s per API process)`,
    ),
    dispatch: z
      .array(
        z.object({
          hour: instant,
          destination: z.string(),
          claimed: z.number().int(),
          published: z.number().int(),
          delivered: z.number().int(),
          discarded: z.number().int(),
          failed: z.number().int(),
          dead: z.number().int(),
        }),
      )
      .describe('dispatch_stats of the last 24 hours, per UTC hour and destination'),
    latency: z
      .array(
        z.object({
          minute: instant,
          published: z.number().int(),
          p50Seconds: z.number(),
          p99Seconds: z.number(),
        }),
      )
      .describe(
        `due → published of campaign messages per minute of the last hour (from at most ${LATENCY_SAMPLE} publishes)`,
      ),
    outbox: z.object({
      pending: z.array(destinationCount),
      pendingCapped: z.boolean().describe(`more than ${OVERVIEW_COUNT_CAP} pending rows: counts stop there`),
      dead: z.array(destinationCount),
      deadCapped: z.boolean(),
      parkedKeys: z.number().int().describe('ordered keys held back by a dead head (at most 101 counted)'),
    }),
    deadLetters: z
      .object({
        consumers: z.array(z.object({ consumer: z.string(), dead: z.number().int(), lastAt: instant })),
        capped: z.boolean(),
      })
      .describe("consumer inbox records that went dead (the instance's; an inbox row names no organization)"),
    leases: z.array(
      z.object({ name: z.string(), owner: z.string(), ageSeconds: z.number(), held: z.boolean() }),
    ),
    projections: z.array(
      z.object({
        name: z.string(),
        source: z.enum(['events', 'receipts']),
        present: z.boolean(),
        lagSeconds: z.number(),
      }),
    ),
  })
  .meta({ id: 'Overview' });

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

const signalView = z
  .object({
    signalId: z.uuid(),
    correlationKey: z.string(),
    name: z.string(),
    payload: z.unknown(),
    unlocked: z.unknown().describe('the waits it unlocked'),
    refused: z.unknown(),
    unlockedLater: z.unknown().describe('waits saved after it that it unlocked (lookback)'),
    receivedAt: instant,
  })
  .meta({ id: 'Signal' });
const signalPage = page(signalView, 'SignalPage');
const signalQuery = z.strictObject({
  correlationKey: z.string().trim().min(1).max(500),
  name: z.string().trim().min(1).max(200).optional(),
  limit,
  cursor: cursor(z.tuple([cursorInstant, cursorUuid])).optional(),
});

const bulkIds = z
  .array(z.number().int().positive().max(Number.MAX_SAFE_INTEGER))
  .min(1)
  .max(500)
  .describe('outbox row ids (1–500)');
const bulkRequeueBody = z.strictObject({ ids: bulkIds }).meta({ id: 'BulkRequeue' });
const bulkSkipBody = z
  .strictObject({
    ids: bulkIds,
    reason: z.string().trim().min(1, 'must not be empty').max(1000).describe('why the rows are given up on'),
  })
  .meta({ id: 'BulkSkip' });
const bulkResultView = z
  .object({
    results: z.array(
      z.object({
        id: z.number().int(),
        outcome: z.enum(['requeued', 'skipped', 'not-dead', 'not-found']),
        status: z.string().nullable().describe("the row's status before the command (null: not found)"),
      }),
    ),
  })
  .meta({ id: 'BulkOutboxResult' });

const streamQuery = z.strictObject({
  topics: z
    .string()
    .max(200)
    .optional()
    .describe(`comma-separated subset of ${STREAM_TOPICS.join(', ')} (default: all)`),
});

export const dashboardRoutes: FastifyPluginAsyncZod<
  RouteDeps & {
    stream: StreamHub;
    /** Counts the request and ends its span; Fastify's onResponse never runs for a hijacked reply. */
    requestDone: (request: FastifyRequest, reply: FastifyReply) => void;
  }
> = async (app, { commands, registry, logger, stream, requestDone }) => {
  const db = commands.readers.db;
  const lease = leaseRequirements([registry]);

  app.get(
    '/stream',
    {
      schema: {
        tags: ['dashboard'],
        summary: 'Live updates (Server-Sent Events): `event: <topic>` when something of that topic changed',
        description:
          'Topics: campaigns, actions, cron, outbox, overview; each at most once a second, data `{"at": ISO}`; a comment line every 15 s. Refetch on an event; poll when the stream is down.',
        querystring: streamQuery,
        response: {
          200: {
            description: 'an event stream',
            content: { 'text/event-stream': { schema: z.string() } },
          },
          ...readProblems,
        },
      },
    },
    async (request, reply) => {
      const wanted = request.query.topics
        ? request.query.topics.split(',').map((t) => t.trim())
        : [...STREAM_TOPICS];
      const unknown = wanted.filter((t) => !(STREAM_TOPICS as readonly string[]).includes(t));
      if (unknown.length > 0) {
        throw new ValidationError(`unknown topic ${unknown[0]}: one of ${STREAM_TOPICS.join(', ')}`, {
          field: 'topics',
        });
      }
      // Bounded per process: beyond maxClients a page polls instead (503 with Retry-After).
      if (stream.full)
        throw new HeraldError('TRANSIENT_FAILURE', 'too many live streams on this API process');
      reply.hijack();
      reply.raw.once('close', () => requestDone(request, reply));
      stream.attach(reply.raw, new Set(wanted as StreamTopic[]));
      return reply;
    },
  );

  app.get(
    '/overview',
    {
      schema: {
        tags: ['dashboard'],
        summary:
          'Dispatch throughput and latency, outbox backlog and dead rows per destination, dead letters, leases, projector lag',
        response: { 200: overviewView, ...readProblems },
      },
    },
    async (request) => overviewOf(principalOf(request).organizationId),
  );

  /**
   * One organization's overview, computed at most once per OVERVIEW_TTL_MS by this process however many
   * pages ask (concurrent askers share the one computation) unless something changed meanwhile: every
   * open dashboard refetches it, and nine bounded queries per page would still be load for nothing.
   */
  const overviews = new Map<string, { at: number; value: Promise<z.input<typeof overviewView>> }>();
  // Anything the live stream hears changed invalidates every cached overview: a page refetching on an
  // event never gets the figures from before it.
  stream.onChange(() => overviews.clear());
  // The process's LISTEN starts with the server (not with the first stream), so the cache hears changes.
  void stream.ready();
  function overviewOf(organizationId: string): Promise<z.input<typeof overviewView>> {
    const cached = overviews.get(organizationId);
    if (cached && Date.now() - cached.at < OVERVIEW_TTL_MS) return cached.value;
    if (overviews.size >= 1_000) overviews.clear(); // bounded; a cleared entry is recomputed once
    const value = computeOverview(organizationId);
    overviews.set(organizationId, { at: Date.now(), value });
    value.catch(() => overviews.delete(organizationId)); // a failure is not cached
    return value;
  }

  async function computeOverview(organizationId: string): Promise<z.input<typeof overviewView>> {
    const [now, dispatch, latency, pending, dead, parked, letters, leases, lag] = await Promise.all([
      databaseNow(db),
      dispatchSeries(db, organizationId),
      latencySeries(db, organizationId),
      outboxByDestination(db, organizationId, 'pending'),
      outboxByDestination(db, organizationId, 'dead'),
      listOrganizationParkedKeys(db, { organizationId, afterId: 0, limit: 101 }),
      inboxDead(db),
      leaseAges(db),
      projectionLag(db, lease.checkpoints),
    ]);
    return view(overviewView, {
      at: now.toISOString(),
      dispatch: dispatch.map((r) => ({ ...r, hour: r.hour.toISOString() })),
      latency: latency.map((r) => ({ ...r, minute: r.minute.toISOString() })),
      outbox: {
        pending: pending.destinations,
        pendingCapped: pending.capped,
        dead: dead.destinations,
        deadCapped: dead.capped,
        parkedKeys: parked.length,
      },
      deadLetters: {
        consumers: letters.consumers.map((c) => ({ ...c, lastAt: c.lastAt.toISOString() })),
        capped: letters.capped,
      },
      leases,
      projections: lag,
    });
  }

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

  app.get(
    '/signals',
    {
      schema: {
        tags: ['scheduled actions'],
        summary: 'Signals of a correlation key (optionally of one name), latest first',
        querystring: signalQuery,
        response: { 200: signalPage, ...readProblems },
      },
    },
    async (request) => {
      const q = request.query;
      const rows = await signalsByCorrelation(db, {
        organizationId: principalOf(request).organizationId,
        correlationKey: q.correlationKey,
        name: q.name ?? null,
        before: q.cursor ? { receivedAt: q.cursor[0], id: q.cursor[1] } : null,
        limit: q.limit + 1,
      });
      return view(
        signalPage,
        pageOf(rows, q.limit, (last) => [last.receivedAt, last.signalId]),
      );
    },
  );

  app.post(
    '/outbox/requeue',
    {
      schema: {
        tags: ['outbox'],
        summary: 'Re-queue dead rows (at most 500): each answered requeued, not-dead or not-found',
        description: IDEMPOTENCY_HEADER_DOC,
        headers: idempotencyHeaders,
        body: bulkRequeueBody,
        response: { 200: bulkResultView, ...commandProblems },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const ids = [...new Set(request.body.ids)];
      return sendCommand(commands, request, reply, async (s) => {
        const before = await outboxStatuses(s.db, ids, principal.organizationId);
        const dead = ids.filter((id) => before.get(id) === 'dead');
        // Guarded in SQL (only a dead row of the organization moves): a row the relay's recovery took
        // meanwhile is answered not-dead.
        const requeued = new Set(await requeueDead(s.db, dead, principal.organizationId));
        if (requeued.size > 0) {
          await notifyChannel(s.db, channels.outbox(s.db.schema));
          logger.info({ outboxIds: [...requeued], actor: principal.actor }, 'dead outbox rows re-queued');
        }
        return {
          status: 200,
          body: {
            results: ids.map((id) => ({
              id,
              outcome: requeued.has(id) ? 'requeued' : before.has(id) ? 'not-dead' : 'not-found',
              status: before.get(id) ?? null,
            })),
          },
        };
      });
    },
  );

  app.post(
    '/outbox/skip',
    {
      schema: {
        tags: ['outbox'],
        summary:
          'Give up on dead rows (at most 500) with a reason: each answered skipped, not-dead or not-found',
        description: IDEMPOTENCY_HEADER_DOC,
        headers: idempotencyHeaders,
        body: bulkSkipBody,
        response: { 200: bulkResultView, ...commandProblems },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const ids = [...new Set(request.body.ids)];
      return sendCommand(commands, request, reply, async (s) => {
        const before = await outboxStatuses(s.db, ids, principal.organizationId);
        // One guarded statement: a row the relay's recovery took meanwhile is answered not-dead.
        const rows = await skipDead(s.db, {
          ids: ids.filter((id) => before.get(id) === 'dead'),
          actor: principal.actor,
          reason: request.body.reason,
          organizationId: principal.organizationId,
        });
        const skipped = new Set(rows.map((row) => row.id));
        const heads: OrderKey[] = rows
          .filter((row) => row.ordered && row.partitionKey !== null)
          .map((row) => ({ sink: row.sink, destination: row.destination, partitionKey: row.partitionKey! }));
        if (heads.length > 0) await wakeKeyHeads(s.db, heads);
        if (skipped.size > 0) {
          await notifyChannel(s.db, channels.outbox(s.db.schema));
          logger.warn(
            { outboxIds: [...skipped], actor: principal.actor, reason: request.body.reason },
            'dead outbox rows skipped by operator; they will never be published',
          );
        }
        return {
          status: 200,
          body: {
            results: ids.map((id) => ({
              id,
              outcome: skipped.has(id) ? 'skipped' : before.has(id) ? 'not-dead' : 'not-found',
              status: before.get(id) ?? null,
            })),
          },
        };
      });
    },
  );
};
