/**
 * `/v1/session`: the dashboard's sign-in (src/api/session.ts). POST exchanges an API key for a session
 * cookie and answers the organization, role and CSRF token; GET answers the same for the cookie's
 * session (401 without one), and GET /v1/session/status whether there is one (200 either way, for the
 * dashboard's quiet check on load); DELETE signs out (the session row is deleted, the cookie cleared). These
 * routes authenticate themselves (`public`), since signing in is how a page gets credentials.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { UnauthenticatedError } from '../../errors.js';
import { SESSION_COOKIE, type SessionAuthenticator } from '../session.js';
import { commandProblems, readProblems } from './common.js';

export const sessionView = z
  .object({
    organizationId: z.string(),
    role: z.enum(['viewer', 'operator', 'admin']),
    keyId: z.uuid().nullable().describe('the API key signed in with; null for a sign-in through the issuer'),
    subject: z
      .string()
      .nullable()
      .describe("the issuer's subject (`sub`) signed in with; null for an API key's session"),
    csrfToken: z.string().describe('send as the x-csrf-token header on every command of this session'),
    expiresAt: z.iso.datetime().describe('when the session expires unless used (idle timeout)'),
  })
  .meta({ id: 'Session' });

const signInBody = z
  .strictObject({ apiKey: z.string().min(1).max(200).describe('an API key (`herald api-keys create`)') })
  .meta({ id: 'SignIn' });

export const sessionRoutes: FastifyPluginAsyncZod<{ sessions: SessionAuthenticator }> = async (
  app,
  { sessions },
) => {
  app.post(
    '/session',
    {
      config: { public: true },
      schema: {
        tags: ['session'],
        summary: 'Sign in with an API key: sets the HttpOnly session cookie and answers the CSRF token',
        security: [],
        body: signInBody,
        response: { 200: sessionView, ...commandProblems },
      },
    },
    async (request, reply) => {
      const { cookie, info } = await sessions.signIn(request.body.apiKey, request.ip);
      sessions.setCookie(request, reply, cookie);
      void reply.header('cache-control', 'no-store');
      return info;
    },
  );

  app.get(
    '/session',
    {
      config: { public: true },
      schema: {
        tags: ['session'],
        summary: "The cookie's session: organization, role, CSRF token (401 when signed out or expired)",
        security: [],
        response: { 200: sessionView, ...readProblems },
      },
    },
    async (request, reply) => {
      const session = await sessions.find(request.cookies[SESSION_COOKIE]);
      if (!session) throw new UnauthenticatedError('not signed in, or the session expired');
      void reply.header('cache-control', 'no-store');
      return session.info;
    },
  );

  app.get(
    '/session/status',
    {
      config: { public: true },
      schema: {
        tags: ['session'],
        summary:
          'Whether the cookie has a session: 200 either way (signedIn false and session null when signed out)',
        description:
          'The dashboard asks this on load, so a signed-out visit makes no failing request (GET /v1/session answers 401 then).',
        security: [],
        response: {
          200: z
            .object({
              signedIn: z.boolean(),
              session: sessionView.nullable(),
              oidc: z
                .object({
                  displayName: z.string().describe('what the sign-in button names'),
                  signInUrl: z.string().describe('where the browser goes to sign in through the issuer'),
                })
                .nullable()
                .describe('the sign-in through an OpenID Connect issuer, when configured (ADR 0035)'),
            })
            .meta({ id: 'SessionStatus' }),
          ...readProblems,
        },
      },
    },
    async (request, reply) => {
      const session = await sessions.find(request.cookies[SESSION_COOKIE]);
      void reply.header('cache-control', 'no-store');
      const tokens = sessions.tokens;
      return {
        signedIn: session !== null,
        session: session?.info ?? null,
        oidc:
          tokens?.settings.client !== undefined
            ? { displayName: tokens.settings.displayName, signInUrl: '/v1/session/oidc' }
            : null,
      };
    },
  );

  app.delete(
    '/session',
    {
      config: { public: true },
      schema: {
        tags: ['session'],
        summary: 'Sign out: the session ends and its cookie is cleared (needs x-csrf-token)',
        security: [],
        response: { 204: z.null().describe('signed out'), ...commandProblems },
      },
    },
    async (request, reply) => {
      const cookie = request.cookies[SESSION_COOKIE];
      const session = await sessions.find(cookie);
      if (session) {
        sessions.checkCsrf(request, session.info);
        await sessions.signOut(cookie);
      }
      sessions.clearCookie(request, reply);
      return reply.code(204).send(null);
    },
  );
};
