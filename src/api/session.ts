/**
 * Dashboard sessions (ADR 0018): signing in with an API key makes a session whose 256-bit random id
 * travels only in an HttpOnly, SameSite=Strict cookie (Secure over TLS), and whose CSRF token the page
 * reads from the sign-in answer and echoes in `x-csrf-token` on every command. Only the id's SHA-256 is
 * stored (migration 000013), the organization and role are the key's, read at every request (a revoked
 * key's sessions die with it), and expiry is idle-based on the database clock (invariant 6).
 *
 * Every /v1 request authenticates here: `Authorization: Bearer <key>` as before, or else the session
 * cookie; with the cookie, a request other than GET/HEAD must carry the session's CSRF token (403
 * otherwise) — a cross-site page can make the browser send the cookie, never read the token. A Bearer
 * key and a sign-in go through the authentication throttle (src/api/auth-throttle.ts): failures count
 * per client address, and a blocked address gets 429. A session cookie does not: its id is 256 random
 * bits only a sign-in hands out, and a dashboard left open past its idle expiry must not lock its
 * address out.
 *
 * With an OpenID Connect issuer configured (ADR 0035), a Bearer value that is a JWT is verified as the
 * issuer's token (src/api/oidc-auth.ts; a token that does not verify counts as a failure like a wrong
 * key), and a sign-in through the issuer (src/api/routes/oidc-session.ts) makes the same kind of session:
 * the ID token's mapped organization, role and subject are stored with it, and it ends when the issuer's
 * token expires (`not_after`) as well as when idle.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  deleteSession,
  findSession,
  insertSession,
  insertSubjectSession,
  touchSession,
} from '../adapters/postgres/session-queries.js';
import { CsrfError, UnauthenticatedError } from '../errors.js';
import type { Database } from '../ports/database.js';
import type { ApiSettings } from '../settings/core.js';
import type { ApiKeyAuthenticator, Principal } from './auth.js';
import type { AuthThrottle } from './auth-throttle.js';
import { type JwtAuthenticator, looksLikeJwt, OIDC_ACTOR_PREFIX } from './oidc-auth.js';

export const SESSION_COOKIE = 'herald_session';
export const CSRF_HEADER = 'x-csrf-token';

/** What a signed-in page knows of its session (the body of POST and GET /v1/session). */
export interface SessionInfo {
  organizationId: string;
  role: Principal['role'];
  /** The API key of a key sign-in; null for a sign-in through the issuer. */
  keyId: string | null;
  /** The issuer's subject of a sign-in through it; null for a key's session. */
  subject: string | null;
  csrfToken: string;
  expiresAt: string;
}

const SESSION_FORMAT = /^[A-Za-z0-9_-]{43}$/;

const hashOf = (value: string) => createHash('sha256').update(value, 'utf8').digest();

function sameToken(given: string, expected: string): boolean {
  const a = Buffer.from(given, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

export class SessionAuthenticator {
  private readonly idleSeconds: number;
  /** A session is touched (its expiry pushed forward) at most this often: most requests only read. */
  private readonly touchAfterSeconds: number;

  constructor(
    private readonly db: Database,
    private readonly keys: ApiKeyAuthenticator,
    private readonly settings: Pick<ApiSettings, 'sessionIdleMs' | 'sessionSecure'>,
    /** Counts failed keys and sign-ins per client address; absent: no throttle. */
    private readonly throttle?: AuthThrottle,
    /** Bearer JWTs of the configured issuer (ADR 0035); absent: API keys only. */
    readonly tokens?: JwtAuthenticator,
  ) {
    this.idleSeconds = settings.sessionIdleMs / 1000;
    this.touchAfterSeconds = Math.min(60, this.idleSeconds / 4);
  }

  /**
   * Signs in with an API key: a new session (401 for a wrong or revoked key, 429 once `client`, the
   * caller's address, made too many failed attempts).
   */
  async signIn(apiKey: string, client?: string): Promise<{ cookie: string; info: SessionInfo }> {
    const principal = await this.guarded(client, () => this.keys.authenticate(`Bearer ${apiKey}`));
    const cookie = randomBytes(32).toString('base64url');
    const csrfToken = randomBytes(32).toString('base64url');
    const { expiresAt } = await insertSession(this.db, {
      idHash: hashOf(cookie),
      keyId: principal.keyId,
      csrfToken,
      idleSeconds: this.idleSeconds,
    });
    return {
      cookie,
      info: {
        organizationId: principal.organizationId,
        role: principal.role,
        keyId: principal.keyId,
        subject: null,
        csrfToken,
        expiresAt: expiresAt.toISOString(),
      },
    };
  }

  /**
   * A session for a subject signed in through the issuer (its ID token verified and mapped): it ends
   * at `notAfter` (the issuer's token expiry) or when idle, whichever comes first.
   */
  async signInSubject(principal: Principal, notAfter: Date): Promise<{ cookie: string; info: SessionInfo }> {
    const cookie = randomBytes(32).toString('base64url');
    const csrfToken = randomBytes(32).toString('base64url');
    const { expiresAt } = await insertSubjectSession(this.db, {
      idHash: hashOf(cookie),
      csrfToken,
      idleSeconds: this.idleSeconds,
      organizationId: principal.organizationId,
      role: principal.role,
      subject: principal.subject!,
      notAfter,
    });
    return {
      cookie,
      info: {
        organizationId: principal.organizationId,
        role: principal.role,
        keyId: null,
        subject: principal.subject!,
        csrfToken,
        expiresAt: expiresAt.toISOString(),
      },
    };
  }

  /** The live session of a cookie value, or null (unknown, expired, or its key revoked). */
  async find(cookie: string | undefined): Promise<{ principal: Principal; info: SessionInfo } | null> {
    if (!cookie || !SESSION_FORMAT.test(cookie)) return null;
    const idHash = hashOf(cookie);
    const found = await findSession(this.db, idHash, this.touchAfterSeconds);
    if (!found) return null;
    let expiresAt = found.expiresAt;
    if (found.stale) {
      expiresAt =
        (await touchSession(this.db, idHash, this.idleSeconds, this.touchAfterSeconds)) ?? expiresAt;
    }
    const actor = found.keyId !== null ? `api-key:${found.keyId}` : `${OIDC_ACTOR_PREFIX}${found.subject}`;
    const principal: Principal = {
      keyId: found.keyId ?? actor,
      organizationId: found.organizationId,
      role: found.role,
      actor,
      ...(found.subject !== null ? { subject: found.subject } : {}),
    };
    return {
      principal,
      info: {
        organizationId: found.organizationId,
        role: found.role,
        keyId: found.keyId,
        subject: found.subject,
        csrfToken: found.csrfToken,
        expiresAt: expiresAt.toISOString(),
      },
    };
  }

  async signOut(cookie: string | undefined): Promise<void> {
    if (cookie && SESSION_FORMAT.test(cookie)) await deleteSession(this.db, hashOf(cookie));
  }

  /**
   * The caller of a /v1 request: the Bearer key when there is an Authorization header, else the
   * session cookie (with the CSRF check on anything but GET/HEAD), else 401.
   */
  async authenticate(request: FastifyRequest): Promise<Principal> {
    const { authorization } = request.headers;
    if (authorization !== undefined) return this.guarded(request.ip, () => this.bearer(authorization));
    const cookie = request.cookies?.[SESSION_COOKIE];
    if (cookie === undefined) {
      throw new UnauthenticatedError(
        'an API key is required: Authorization: Bearer <key>, or sign in (POST /v1/session)',
      );
    }
    const session = await this.find(cookie);
    if (!session) throw new UnauthenticatedError('the session expired or was signed out: sign in again');
    if (request.method !== 'GET' && request.method !== 'HEAD') this.checkCsrf(request, session.info);
    return session.principal;
  }

  /** An `Authorization: Bearer` value: the issuer's JWT when one is configured and it is one, else a key. */
  private bearer(authorization: string): Promise<Principal> {
    const token = /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1];
    if (this.tokens && token !== undefined && looksLikeJwt(token)) return this.tokens.authenticate(token);
    return this.keys.authenticate(authorization);
  }

  /** Runs a sign-in step under the authentication throttle (a failure counts against `client`). */
  guarded<T>(client: string | undefined, attempt: () => Promise<T>): Promise<T> {
    return this.throttle && client !== undefined ? this.throttle.guard(client, attempt) : attempt();
  }

  checkCsrf(request: FastifyRequest, info: SessionInfo): void {
    const given = request.headers[CSRF_HEADER];
    if (typeof given !== 'string' || given.length === 0) {
      throw new CsrfError(`a command with a session cookie needs the ${CSRF_HEADER} header`);
    }
    if (!sameToken(given, info.csrfToken)) {
      throw new CsrfError(`the ${CSRF_HEADER} header does not match the session`);
    }
  }

  /** Sets the session cookie: HttpOnly, SameSite=Strict, Path=/, Secure over TLS (or as configured). */
  setCookie(request: FastifyRequest, reply: FastifyReply, cookie: string): void {
    void reply.setCookie(SESSION_COOKIE, cookie, {
      httpOnly: true,
      sameSite: 'strict',
      path: '/',
      secure: this.secureFor(request),
    });
  }

  clearCookie(request: FastifyRequest, reply: FastifyReply): void {
    void reply.clearCookie(SESSION_COOKIE, {
      httpOnly: true,
      sameSite: 'strict',
      path: '/',
      secure: this.secureFor(request),
    });
  }

  /** Whether this request's cookies get the Secure flag (HERALD_API_SESSION_SECURE). */
  secureFor(request: FastifyRequest): boolean {
    if (this.settings.sessionSecure === 'always') return true;
    if (this.settings.sessionSecure === 'never') return false;
    // request.protocol is `https` over TLS, or from X-Forwarded-Proto when the proxy is trusted.
    return request.protocol === 'https';
  }
}
