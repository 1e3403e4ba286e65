/**
 * `/v1/actors`: who an event's actor is, for people. Events record their actor as `api-key:<id>` (or a
 * pod, the scanner, a CLI user); the dashboard shows the key's name instead of its id. Only the caller's
 * organization's keys are named: another organization's key id is answered as unknown, like a missing
 * one, so the route reveals nothing across tenants. Any role may read it (a viewer sees the timelines).
 * A bearer JWT's actor `oidc:<sub>` (ADR 0035) is named by the name its token last carried in this
 * organization (`oidc_subject`), or shown as its subject.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { apiKeyNames } from '../../adapters/postgres/api-key-queries.js';
import { oidcSubjectNames } from '../../adapters/postgres/oidc-subject-queries.js';
import { API_KEY_ROLES } from '../auth.js';
import { principalOf } from '../http.js';
import type { RouteDeps } from '../module.js';
import { OIDC_ACTOR_PREFIX } from '../oidc-auth.js';
import { readProblems } from './common.js';

const MAX_ACTORS = 50;
const KEY_ACTOR = /^api-key:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i;

const actorsQuery = z.strictObject({
  actors: z
    .string()
    .min(1)
    .max(MAX_ACTORS * 60)
    .refine((text) => text.split(',').length <= MAX_ACTORS, `at most ${MAX_ACTORS} actors`)
    .describe(
      `comma-separated actors as events record them (\`api-key:<id>\`, a pod…), at most ${MAX_ACTORS}`,
    ),
});

export const actorView = z
  .object({
    actor: z.string(),
    kind: z
      .enum(['api-key', 'oidc', 'other'])
      .describe(
        "an API key of the organization, an OpenID Connect token's subject (`oidc:<sub>`), or anything else",
      ),
    name: z
      .string()
      .nullable()
      .describe(
        "the key's name, or the name the subject's token carried; null when unknown or for another actor",
      ),
    role: z.enum(API_KEY_ROLES).nullable(),
    revoked: z.boolean(),
  })
  .meta({ id: 'Actor' });

export const actorRoutes: FastifyPluginAsyncZod<RouteDeps> = async (app, { commands }) => {
  app.get(
    '/actors',
    {
      schema: {
        tags: ['dashboard'],
        summary: "Names for event actors: the organization's API keys by name (others as they are)",
        querystring: actorsQuery,
        response: {
          200: z.object({ actors: z.array(actorView) }).meta({ id: 'Actors' }),
          ...readProblems,
        },
      },
    },
    async (request) => {
      const { organizationId } = principalOf(request);
      const actors = [...new Set(request.query.actors.split(',').map((a) => a.trim()))].filter(Boolean);
      const ids = actors.flatMap((a) => KEY_ACTOR.exec(a)?.[1]?.toLowerCase() ?? []);
      const subjects = actors.flatMap((a) =>
        a.startsWith(OIDC_ACTOR_PREFIX) ? [a.slice(OIDC_ACTOR_PREFIX.length)] : [],
      );
      const [keys, people] = await Promise.all([
        apiKeyNames(commands.readers.db, organizationId, ids),
        oidcSubjectNames(commands.readers.db, organizationId, subjects),
      ]);
      const names = new Map(keys.map((k) => [k.id, k]));
      const named = new Map(people.map((p) => [p.subject, p]));
      return {
        actors: actors.map((actor) => {
          if (actor.startsWith(OIDC_ACTOR_PREFIX)) {
            const person = named.get(actor.slice(OIDC_ACTOR_PREFIX.length));
            return {
              actor,
              kind: 'oidc' as const,
              name: person?.name ?? null,
              role: person?.role ?? null,
              revoked: false,
            };
          }
          const id = KEY_ACTOR.exec(actor)?.[1]?.toLowerCase();
          const key = id ? names.get(id) : undefined;
          return {
            actor,
            kind: id ? ('api-key' as const) : ('other' as const),
            name: key?.name ?? null,
            role: key?.role ?? null,
            revoked: key?.revoked ?? false,
          };
        }),
      };
    },
  );
};
