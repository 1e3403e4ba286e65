/**
 * The dashboard's generic reads and bulk commands (ADR 0018), on the API alone: the live stream (SSE,
 * src/api/stream.ts; its topics are the registered slices' and the outbox's), the overview (every
 * figure from a projection, a capped count of a partial index or a bounded sample: never an unbounded
 * count) and bulk outbox requeue / skip (each row guarded in SQL, answered per id). The slices'
 * dashboard reads (recipient search, a campaign's timeline, signals) are in their routes. Tenancy as
 * everywhere: the key's organization scopes every query.
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
} from '../../adapters/postgres/dashboard-queries.js';
import { leaseAges, projectionLag } from '../../adapters/postgres/observability-queries.js';
import {
  listOrganizationParkedKeys,
  type OrderKey,
  skipDead,
  wakeKeyHeads,
} from '../../adapters/postgres/outbox-order-queries.js';
import { requeueDead } from '../../adapters/postgres/outbox-queries.js';
import { ValidationError } from '../../errors.js';
import { databaseNow } from '../../eventstore/command-handler.js';
import { leaseRequirements } from '../../health/readiness.js';
import { notifyOutboxMoved } from '../../outbox/outbox-admin.js';
import { principalOf, sendCommand } from '../http.js';
import type { RouteDeps } from '../module.js';
import { eventStreamSchema } from '../openapi.js';
import { type StreamHub, streamTopics } from '../stream.js';
import { view } from '../views.js';
import {
  commandProblems,
  IDEMPOTENCY_HEADER_DOC,
  idempotencyHeaders,
  problemResponse,
  readProblems,
} from './common.js';

const instant = z.iso.datetime().describe('ISO-8601, UTC');

/** The overview is shared by all of an organization's pages for this long (per API process). */
export const OVERVIEW_TTL_MS = 2_000;

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

export const dashboardRoutes: FastifyPluginAsyncZod<
  RouteDeps & {
    stream: StreamHub;
    /** Counts the request and ends its span; Fastify's onResponse never runs for a hijacked reply. */
    requestDone: (request: FastifyRequest, reply: FastifyReply) => void;
  }
> = async (app, { commands, registry, logger, stream, requestDone }) => {
  const db = commands.readers.db;
  const lease = leaseRequirements([registry]);
  // The topics are the registered slices' and the outbox's: the document (and so the dashboard's
  // generated client) lists them as the `StreamTopic` enum.
  const topics = streamTopics(registry);
  const streamTopic = z.enum(topics as [string, ...string[]]).meta({ id: 'StreamTopic' });
  const streamQuery = z.strictObject({
    topics: z
      .string()
      .max(200)
      .optional()
      .describe(`comma-separated subset of ${topics.join(', ')} (default: all)`),
  });

  app.get(
    '/stream/topics',
    {
      schema: {
        tags: ['dashboard'],
        summary: "The live stream's topics: each slice's, `outbox`, and `overview` (anything changed)",
        response: {
          200: z.object({ topics: z.array(streamTopic) }).meta({ id: 'StreamTopics' }),
          ...readProblems,
        },
      },
    },
    async () => ({ topics: [...topics] }),
  );

  app.get(
    '/stream',
    {
      schema: {
        tags: ['dashboard'],
        summary: 'Live updates (Server-Sent Events): `event: <topic>` when something of that topic changed',
        description: `Topics: ${topics.join(', ')} (\`GET /v1/stream/topics\`); each at most once a second, data \`{"at": ISO}\`; a comment line every 15 s. Only changes of the caller's organization are told. Refetch on an event; poll when the stream is down. Open streams per API process are bounded per organization (HERALD_API_STREAMS_PER_ORGANIZATION) and per API key (HERALD_API_STREAMS_PER_KEY): 429 naming the limit, with Retry-After; and in all (HERALD_API_STREAMS_MAX): 503 naming it.`,
        querystring: streamQuery,
        response: {
          200: {
            description: 'an event stream (until the client or the server closes it)',
            content: { 'text/event-stream': { schema: eventStreamSchema(topics) } },
          },
          ...readProblems,
          429: problemResponse(
            429,
            "the caller's organization or API key holds its share of this process's live streams: `limit` names the setting; retry after `Retry-After`, or poll",
          ),
          503: problemResponse(
            503,
            'this API process serves its maximum of live streams (`limit`: HERALD_API_STREAMS_MAX), or a dependency is unavailable; retry after `Retry-After`',
          ),
        },
      },
    },
    async (request, reply) => {
      const wanted = request.query.topics
        ? request.query.topics.split(',').map((t) => t.trim())
        : [...topics];
      const unknown = wanted.filter((t) => !topics.includes(t));
      if (unknown.length > 0) {
        throw new ValidationError(`unknown topic ${unknown[0]}: one of ${topics.join(', ')}`, {
          field: 'topics',
        });
      }
      // Bounded per organization and per key (429), and per process (503), each naming its limit, with
      // Retry-After: beyond them a page polls instead.
      const { organizationId, keyId } = principalOf(request);
      stream.admit({ organizationId, keyId });
      reply.hijack();
      reply.raw.once('close', () => requestDone(request, reply));
      stream.attach(reply.raw, { organizationId, keyId }, new Set(wanted));
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
          await notifyOutboxMoved(s.db, principal.organizationId);
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
          await notifyOutboxMoved(s.db, principal.organizationId);
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
