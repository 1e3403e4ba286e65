/**
 * Signals by correlation key for the dashboard (latest first, optionally of one name, keyset by
 * receive time and id), of the key's organization.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { signalsByCorrelation } from '../../adapters/postgres/dashboard-queries.js';
import { principalOf } from '../../api/http.js';
import type { RouteDeps } from '../../api/module.js';
import { readProblems } from '../../api/routes/common.js';
import { cursor, cursorInstant, cursorUuid, limit, pageOf } from '../../api/schemas.js';
import { instant, page, view } from '../../api/views.js';

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

export const signalLookupRoutes: FastifyPluginAsyncZod<RouteDeps> = async (app, { commands }) => {
  const db = commands.readers.db;

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
};
