/**
 * The dashboard's sign-in through the OpenID Connect issuer (ADR 0035): authorization code with PKCE
 * (S256), exchanged by the API, so no token ever reaches the page's JavaScript — the result is the same
 * HttpOnly session cookie a key sign-in makes (src/api/session.ts). `GET /v1/session/oidc` draws a state,
 * a nonce and a code verifier, keeps them in a short-lived HttpOnly cookie scoped to these two paths
 * (SameSite=Lax: the issuer's redirect back is a cross-site navigation), and sends the browser to the
 * issuer's authorization endpoint. `GET /v1/session/oidc/callback` checks the state against that cookie,
 * exchanges the code with the verifier, verifies the ID token (signature, issuer, the client id as
 * audience, expiry, the nonce), maps its claims to an organization and a role like a bearer token's, and
 * makes a session that ends when the issuer's token does. A failure anywhere sends the browser back to
 * `/ui/signin?error=…`; a failed state, code or token counts against the address like a wrong key.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { HeraldError, NotFoundError, UnauthenticatedError } from '../../errors.js';
import type { SessionAuthenticator } from '../session.js';
import { readProblems } from './common.js';

export const OIDC_LOGIN_COOKIE = 'herald_oidc_login';
const LOGIN_PATH = '/v1/session/oidc';
const CALLBACK_PATH = '/v1/session/oidc/callback';
/** How long a started sign-in may take at the issuer. */
const LOGIN_SECONDS = 600;

const b64url = (bytes: Buffer) => bytes.toString('base64url');
const random = () => b64url(randomBytes(32));
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** Only a same-origin dashboard path (under /ui) is a place to come back to (never `//host` or a URL). */
const safeNext = (next: string | undefined) =>
  next?.startsWith('/') && !next.startsWith('//') && !next.startsWith('/\\') ? next : '/';

interface PendingLogin {
  state: string;
  nonce: string;
  verifier: string;
  next: string;
}

function readLogin(value: string | undefined): PendingLogin | null {
  const [state, nonce, verifier, next] = (value ?? '').split('.');
  if (!state || !nonce || !verifier || next === undefined) return null;
  if (![state, nonce, verifier].every((part) => TOKEN.test(part))) return null;
  return { state, nonce, verifier, next: safeNext(Buffer.from(next, 'base64url').toString('utf8')) };
}

const startQuery = z.strictObject({
  next: z.string().max(2000).optional().describe('the dashboard path to open after signing in'),
});

const callbackQuery = z.object({
  code: z.string().max(4000).optional(),
  state: z.string().max(200).optional(),
  error: z.string().max(200).optional(),
  error_description: z.string().max(2000).optional(),
});

export const oidcSessionRoutes: FastifyPluginAsyncZod<{ sessions: SessionAuthenticator }> = async (
  app,
  { sessions },
) => {
  const configured = () => {
    const tokens = sessions.tokens;
    const client = tokens?.settings.client;
    if (!tokens || !client) {
      throw new NotFoundError(
        'the dashboard sign-in through an issuer is not configured (HERALD_API_OIDC_ISSUER, HERALD_API_OIDC_CLIENT_ID)',
      );
    }
    return { tokens, client };
  };
  const redirectUri = (request: FastifyRequest, configuredUrl: string | undefined) =>
    configuredUrl ?? `${request.protocol}://${request.host}${CALLBACK_PATH}`;
  const loginCookie = (request: FastifyRequest) => ({
    httpOnly: true,
    sameSite: 'lax' as const,
    path: LOGIN_PATH,
    secure: sessions.secureFor(request),
  });

  app.get(
    '/session/oidc',
    {
      config: { public: true },
      schema: {
        tags: ['session'],
        summary: 'Sign in through the OpenID Connect issuer: redirects to its authorization endpoint (PKCE)',
        description:
          'Answers 302 to the issuer (authorization code, PKCE S256, state and nonce kept in a short-lived HttpOnly cookie); 404 when HERALD_API_OIDC_CLIENT_ID is not set.',
        security: [],
        querystring: startQuery,
        response: { 302: z.null().describe('to the issuer’s authorization endpoint'), ...readProblems },
      },
    },
    async (request, reply) => {
      const { tokens, client } = configured();
      const login: PendingLogin = {
        state: random(),
        nonce: random(),
        verifier: random(),
        next: safeNext(request.query.next),
      };
      const url = await tokens.issuer.authorizationUrl({
        state: login.state,
        nonce: login.nonce,
        codeChallenge: b64url(createHash('sha256').update(login.verifier).digest()),
        redirectUri: redirectUri(request, client.redirectUrl),
      });
      const value = [login.state, login.nonce, login.verifier, b64url(Buffer.from(login.next))].join('.');
      void reply.setCookie(OIDC_LOGIN_COOKIE, value, { ...loginCookie(request), maxAge: LOGIN_SECONDS });
      void reply.header('cache-control', 'no-store');
      return reply.redirect(url, 302);
    },
  );

  app.get(
    '/session/oidc/callback',
    {
      config: { public: true },
      schema: {
        tags: ['session'],
        summary: 'Where the issuer sends the browser back: the code is exchanged and the session cookie set',
        description:
          'Answers 302 to the dashboard page the sign-in started from, with the HttpOnly session cookie, or to `/ui/signin?error=…` when the sign-in failed (state, code, ID token, claim mapping).',
        security: [],
        querystring: callbackQuery,
        response: {
          302: z.null().describe('to the dashboard, or back to its sign-in page with the error'),
          ...readProblems,
        },
      },
    },
    async (request, reply) => {
      const { tokens, client } = configured();
      const login = readLogin(request.cookies[OIDC_LOGIN_COOKIE]);
      void reply.clearCookie(OIDC_LOGIN_COOKIE, loginCookie(request));
      void reply.header('cache-control', 'no-store');
      const { code, state, error } = request.query;
      const back = (message: string) =>
        reply.redirect(`/ui/signin?error=${encodeURIComponent(message)}`, 302);
      if (error !== undefined) {
        // The person declined or the issuer refused: not a guess at credentials.
        return back(`the issuer did not sign you in: ${request.query.error_description ?? error}`);
      }
      try {
        const principal = await sessions.guarded(request.ip, async () => {
          if (!login)
            throw new UnauthenticatedError(
              'the sign-in expired or was started in another browser: start again',
            );
          if (state !== login.state)
            throw new UnauthenticatedError('the sign-in answer does not match its request (state)');
          if (!code) throw new UnauthenticatedError('the issuer answered no code');
          const answer = await tokens.issuer.exchangeCode({
            code,
            codeVerifier: login.verifier,
            redirectUri: redirectUri(request, client.redirectUrl),
          });
          const claims = await tokens.issuer.verifyIdToken(answer.idToken, login.nonce);
          const expiresAt = Math.min(
            claims.exp * 1000,
            answer.expiresIn !== undefined ? Date.now() + answer.expiresIn * 1000 : Number.POSITIVE_INFINITY,
          );
          return { principal: tokens.principalOf(claims), notAfter: new Date(expiresAt) };
        });
        const { cookie } = await sessions.signInSubject(principal.principal, principal.notAfter);
        sessions.setCookie(request, reply, cookie);
        request.log.info(
          { subject: principal.principal.subject, organizationId: principal.principal.organizationId },
          'signed in through the issuer',
        );
        return reply.redirect(`/ui${login!.next}`, 302);
      } catch (failure) {
        if (failure instanceof HeraldError && failure.code !== 'TRANSIENT_FAILURE')
          return back(failure.message);
        if (failure instanceof HeraldError) return back('the issuer could not be reached: try again');
        throw failure;
      }
    },
  );
};
