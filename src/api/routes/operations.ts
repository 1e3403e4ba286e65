/**
 * Operations on the organization's own data: the outbox (pending, dead and parked lists, a row, requeue,
 * skip with a reason — src/outbox/outbox-admin.ts, restricted to rows whose event belongs to the
 * organization), `verify` (invariant 8 for the organization's streams) and the `dispatch_stats`
 * projection; and `/v1/api-keys` (admin keys manage their organization's keys). Lists read the partial
 * indexes on (organization_id, id) of migration 000009, keyset by id; nothing counts a whole table.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { findApiKey, listApiKeys, revokeApiKey } from '../../adapters/postgres/api-key-queries.js';
import { readOrganizationDispatchStats } from '../../adapters/postgres/dispatch-stats-queries.js';
import { listOrganizationParkedKeys } from '../../adapters/postgres/outbox-order-queries.js';
import { listOrganizationOutbox, organizationOutboxRow } from '../../adapters/postgres/outbox-queries.js';
import { ConflictError, IllegalStateError, ValidationError } from '../../errors.js';
import { requeueRow, skipRow } from '../../outbox/outbox-admin.js';
import type { Database } from '../../ports/database.js';
import { verifyStates } from '../../projections/verify.js';
import { API_KEY_ROLES, createApiKey } from '../auth.js';
import { notFound, principalOf, sendCommand } from '../http.js';
import type { RouteDeps } from '../module.js';
import {
  cursor,
  cursorInstant,
  cursorUuid,
  instantQuery,
  limit,
  offFlag,
  outboxParams,
  pageOf,
  uuidParams,
} from '../schemas.js';
import {
  apiKeyView,
  createdApiKeyView,
  outboxRowView,
  page,
  parkedKeyView,
  statsView,
  verifyView,
  view,
} from '../views.js';
import { commandProblems, IDEMPOTENCY_HEADER_DOC, idempotencyHeaders, readProblems } from './common.js';

const outboxListQuery = z.strictObject({ limit, cursor: cursor(z.number().int().nonnegative()).optional() });
const skipBody = z.strictObject({
  reason: z
    .string()
    .trim()
    .min(1, 'must not be empty')
    .max(1000)
    .describe('why the row is given up on (kept on the row)'),
});
const statsQuery = z.strictObject({
  from: instantQuery.optional().describe('default: 24 hours before `to`'),
  to: instantQuery.optional().describe('default: now'),
});
const MAX_STATS_SPAN_MS = 31 * 86_400_000;

const keyListQuery = z.strictObject({
  includeRevoked: offFlag,
  limit,
  cursor: cursor(z.tuple([cursorInstant, cursorUuid])).optional(),
});
const newKeyBody = z
  .strictObject({
    role: z.enum(API_KEY_ROLES),
    name: z.string().trim().min(1).max(200).optional(),
  })
  .meta({ id: 'NewApiKey' });

const outboxPage = page(outboxRowView, 'OutboxRowPage');
const parkedPage = page(parkedKeyView, 'ParkedKeyPage');
const keyPage = page(apiKeyView, 'ApiKeyPage');

/** A row of the organization, or 404; with its current status for the 409 of a command it does not allow. */
async function ownOutboxRow(db: Database, organizationId: string, id: number) {
  const row = await organizationOutboxRow(db, id, organizationId);
  if (!row) throw notFound('outbox row', id);
  return row;
}

export const operationRoutes: FastifyPluginAsyncZod<RouteDeps> = async (
  app,
  { commands, registry, logger },
) => {
  const db = commands.readers.db;

  for (const status of ['pending', 'dead'] as const) {
    app.get(
      `/outbox/${status}`,
      {
        schema: {
          tags: ['outbox'],
          summary: `The organization's ${status} outbox rows, oldest first`,
          querystring: outboxListQuery,
          response: { 200: outboxPage, ...readProblems },
        },
      },
      async (request) => {
        const q = request.query;
        const rows = await listOrganizationOutbox(db, {
          organizationId: principalOf(request).organizationId,
          status,
          afterId: q.cursor ?? 0,
          limit: q.limit + 1,
        });
        return view(
          outboxPage,
          pageOf(rows, q.limit, (last) => last.id),
        );
      },
    );
  }

  app.get(
    '/outbox/parked',
    {
      schema: {
        tags: ['outbox'],
        summary: 'Ordered keys held back by a dead head row of the organization (skip or requeue the head)',
        querystring: outboxListQuery,
        response: { 200: parkedPage, ...readProblems },
      },
    },
    async (request) => {
      const q = request.query;
      const rows = await listOrganizationParkedKeys(db, {
        organizationId: principalOf(request).organizationId,
        afterId: q.cursor ?? 0,
        limit: q.limit + 1,
      });
      return view(
        parkedPage,
        pageOf(
          rows.map((r) => ({ ...r, deadAt: r.deadAt.toISOString() })),
          q.limit,
          (last) => last.id,
        ),
      );
    },
  );

  app.get(
    '/outbox/:id',
    {
      schema: {
        tags: ['outbox'],
        summary: 'An outbox row of the organization',
        params: outboxParams,
        response: { 200: outboxRowView, ...readProblems },
      },
    },
    async (request) =>
      view(outboxRowView, await ownOutboxRow(db, principalOf(request).organizationId, request.params.id)),
  );

  /** A command on one dead row of the caller's organization: 200 with the row, 409 when it is not dead. */
  const outboxCommand = <Body>(
    action: 'requeue' | 'skip',
    summary: string,
    body: z.ZodType<Body> | undefined,
    act: (
      db: Database,
      row: { id: number; actor: string; organizationId: string },
      body: Body,
    ) => Promise<unknown>,
  ) =>
    app.post(
      `/outbox/:id/${action}`,
      {
        schema: {
          tags: ['outbox'],
          summary,
          description: IDEMPOTENCY_HEADER_DOC,
          headers: idempotencyHeaders,
          params: outboxParams,
          ...(body ? { body } : {}),
          response: { 200: outboxRowView, ...commandProblems },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const { id } = request.params as { id: number };
        return sendCommand(commands, request, reply, async (s) => {
          const row = await ownOutboxRow(s.db, principal.organizationId, id);
          const target = { id, actor: principal.actor, organizationId: principal.organizationId };
          if (!(await act(s.db, target, request.body as Body)))
            throw new IllegalStateError(`outbox row ${id} is ${row.status}, not dead`, {
              status: row.status,
            });
          return { status: 200, body: await ownOutboxRow(s.db, principal.organizationId, id) };
        });
      },
    );
  outboxCommand(
    'requeue',
    'Re-queue a dead row (due now, attempts reset; its ordered key stays behind it)',
    undefined,
    (db, target) => requeueRow(db, { ...target, logger }),
  );
  outboxCommand(
    'skip',
    'Give up on a dead row (never published; the next row of its key becomes the head)',
    skipBody,
    (db, target, body) => skipRow(db, { ...target, reason: body.reason, logger }),
  );

  app.get(
    '/verify',
    {
      config: { permission: 'command' },
      schema: {
        tags: ['operations'],
        summary: "Invariant 8 for the organization's streams: each state row equals the fold of its events",
        description:
          "Folds every stream of the organization (a stream is the organization's its first event names) of every registered aggregate in one snapshot and reports their drifts; `streams` and `events` count the organization's only. Reads every stream's first event: an operator tool, operator or admin keys only. `herald verify` checks every organization's streams (or one, with `--organization`).",
        response: { 200: verifyView, ...readProblems },
      },
    },
    async (request) => {
      const { organizationId } = principalOf(request);
      const report = await verifyStates(db, registry, {
        streamTypes: [...registry.stateModels.keys()],
        organizationId,
      });
      return view(verifyView, {
        organizationId,
        ok: report.driftedStreams === 0,
        streamTypes: report.streamTypes,
        streams: report.streams,
        events: report.events,
        driftedStreams: report.driftedStreams,
        drifts: report.drifts.map((d) => ({
          ...d,
          firstDifferingEvent: d.firstDifferingEvent
            ? { ...d.firstDifferingEvent, recordedAt: d.firstDifferingEvent.recordedAt.toISOString() }
            : null,
        })),
        truncated: report.truncated,
        ms: report.ms,
      });
    },
  );

  app.get(
    '/stats',
    {
      schema: {
        tags: ['operations'],
        summary:
          'Campaign dispatch per UTC hour and destination (the dispatch_stats projection), at most 31 days',
        querystring: statsQuery,
        response: { 200: statsView, ...readProblems },
      },
    },
    async (request) => {
      const { organizationId } = principalOf(request);
      const to = request.query.to ? new Date(request.query.to) : new Date();
      const from = request.query.from ? new Date(request.query.from) : new Date(to.getTime() - 86_400_000);
      if (to.getTime() - from.getTime() > MAX_STATS_SPAN_MS || to < from) {
        throw new ValidationError('from must be before to, at most 31 days apart', { field: 'from' });
      }
      const rows = await readOrganizationDispatchStats(db, organizationId, { from, to });
      return view(statsView, {
        from: from.toISOString(),
        to: to.toISOString(),
        rows: rows.map(({ organizationId: _org, ...row }) => ({ ...row, hour: row.hour.toISOString() })),
      });
    },
  );

  app.post(
    '/api-keys',
    {
      config: { permission: 'admin' },
      schema: {
        tags: ['api keys'],
        summary: 'Create an API key of the organization (the secret is in this response only)',
        description: IDEMPOTENCY_HEADER_DOC,
        headers: idempotencyHeaders,
        body: newKeyBody,
        response: { 201: createdApiKeyView, ...commandProblems },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      return sendCommand(commands, request, reply, async (_s, _meta, tx) => {
        const { record, key } = await createApiKey(tx, {
          organizationId: principal.organizationId,
          role: request.body.role,
          ...(request.body.name ? { name: request.body.name } : {}),
          createdBy: principal.actor,
        });
        return {
          status: 201,
          body: { apiKey: record, key },
          headers: { location: `/v1/api-keys/${record.id}` },
        };
      });
    },
  );

  app.get(
    '/api-keys',
    {
      config: { permission: 'admin' },
      schema: {
        tags: ['api keys'],
        summary: "The organization's API keys (never their secrets)",
        querystring: keyListQuery,
        response: { 200: keyPage, ...readProblems },
      },
    },
    async (request) => {
      const q = request.query;
      const rows = await listApiKeys(db, {
        organizationId: principalOf(request).organizationId,
        after: q.cursor ? { createdAt: q.cursor[0], id: q.cursor[1] } : null,
        includeRevoked: q.includeRevoked,
        limit: q.limit + 1,
      });
      return view(
        keyPage,
        pageOf(rows, q.limit, (last) => [last.createdAt, last.id]),
      );
    },
  );

  app.get(
    '/api-keys/:id',
    {
      config: { permission: 'admin' },
      schema: {
        tags: ['api keys'],
        summary: 'An API key of the organization',
        params: uuidParams,
        response: { 200: apiKeyView, ...readProblems },
      },
    },
    async (request) => {
      const found = await findApiKey(db, request.params.id, principalOf(request).organizationId);
      if (!found) throw notFound('API key', request.params.id);
      return found;
    },
  );

  app.post(
    '/api-keys/:id/revoke',
    {
      config: { permission: 'admin' },
      schema: {
        tags: ['api keys'],
        summary: 'Revoke an API key: its next request gets 401',
        description: IDEMPOTENCY_HEADER_DOC,
        headers: idempotencyHeaders,
        params: uuidParams,
        response: { 200: apiKeyView, ...commandProblems },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const { id } = request.params;
      return sendCommand(commands, request, reply, async (_s, _meta, tx) => {
        const found = await findApiKey(tx, id, principal.organizationId);
        if (!found) throw notFound('API key', id);
        if (found.revokedAt !== null) {
          throw new ConflictError(`API key ${id} was already revoked at ${found.revokedAt}`, {
            status: 'revoked',
          });
        }
        const revoked = await revokeApiKey(tx, id, principal.organizationId, { keepLastAdmin: true });
        if (!revoked && found.role === 'admin') {
          // An organization without an admin key could never manage its keys again through the API.
          throw new ConflictError(
            `API key ${id} is the last active admin key of ${found.organizationId}: create another admin key first`,
            { status: 'last-admin' },
          );
        }
        if (!revoked)
          throw new ConflictError(`API key ${id} was revoked concurrently`, { status: 'revoked' });
        return { status: 200, body: revoked };
      });
    },
  );
};
