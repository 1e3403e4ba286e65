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
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  deleteSession,
  findSession,
  insertSession,
  touchSession,
} from '../adapters/postgres/session-queries.js';
import { CsrfError, UnauthenticatedError } from '../errors.js';
import type { Database } from '../ports/database.js';
import type { ApiSettings } from '../settings/core.js';
import type { ApiKeyAuthenticator, Principal } from './auth.js';
import type { AuthThrottle } from './auth-throttle.js';

export const SESSION_COOKIE = 'herald_session';
export const CSRF_HEADER = 'x-csrf-token';

/** What a signed-in page knows of its session (the body of POST and GET /v1/session). */
export interface SessionInfo {
  organizationId: string;
  role: Principal['role'];
  keyId: string;
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
    const principal: Principal = {
      keyId: found.keyId,
      organizationId: found.organizationId,
      role: found.role,
      actor: `api-key:${found.keyId}`,
    };
    return {
      principal,
      info: {
        organizationId: found.organizationId,
        role: found.role,
        keyId: found.keyId,
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
    if (authorization !== undefined)
      return this.guarded(request.ip, () => this.keys.authenticate(authorization));
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

  private guarded(client: string | undefined, attempt: () => Promise<Principal>): Promise<Principal> {
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
      secure: this.secure(request),
    });
  }

  clearCookie(request: FastifyRequest, reply: FastifyReply): void {
    void reply.clearCookie(SESSION_COOKIE, {
      httpOnly: true,
      sameSite: 'strict',
      path: '/',
      secure: this.secure(request),
    });
  }

  private secure(request: FastifyRequest): boolean {
    if (this.settings.sessionSecure === 'always') return true;
    if (this.settings.sessionSecure === 'never') return false;
    // request.protocol is `https` over TLS, or from X-Forwarded-Proto when the proxy is trusted.
    return request.protocol === 'https';
  }
}
