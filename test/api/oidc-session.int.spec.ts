/**
 * The dashboard's sign-in through the OpenID Connect issuer over HTTP, redirect by redirect (ADR 0035):
 * `GET /v1/session/status` offers it; `GET /v1/session/oidc` redirects to the test issuer with a PKCE
 * S256 challenge, a state and a nonce kept in an HttpOnly cookie; the callback exchanges the code and
 * sets the session cookie, whose commands record `oidc:<sub>`; the session ends when the issuer's token
 * does (`not_after`, database clock); a callback whose state does not match is sent back to sign-in and
 * counts in the authentication throttle.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestIssuer, type TestIssuer } from '../support/oidc-issuer.js';
import { type ApiFixture, expectProblem, startTestApi } from './support/api.js';

let issuer: TestIssuer;
let api: ApiFixture;

beforeAll(async () => {
  issuer = await startTestIssuer({ clientId: 'herald-dashboard', audience: 'herald-api' });
  issuer.user = {
    sub: 'grace',
    claims: { herald_organization: 'org-s', herald_roles: 'operator', name: 'Grace' },
  };
  api = await startTestApi({
    HERALD_API_OIDC_ISSUER: issuer.url,
    HERALD_API_OIDC_AUDIENCE: 'herald-api',
    HERALD_API_OIDC_CLIENT_ID: 'herald-dashboard',
    HERALD_API_OIDC_DISPLAY_NAME: 'Test SSO',
    HERALD_API_TRUST_PROXY: '127.0.0.1',
  });
}, 60_000);
afterAll(async () => {
  await api?.close();
  await issuer?.close();
});

const cookieOf = (response: Response, name: string) =>
  response.headers
    .getSetCookie()
    .find((c) => c.startsWith(`${name}=`))
    ?.split(';')[0];

/** Follows the flow by hand: start → issuer → callback; answers the callback's response. */
async function signIn(options: { tamperState?: boolean; address?: string } = {}) {
  const headers = { 'x-forwarded-for': options.address ?? '192.0.2.1' };
  const start = await fetch(`${api.url}/v1/session/oidc?next=/campaigns`, { redirect: 'manual', headers });
  expect(start.status).toBe(302);
  const login = cookieOf(start, 'herald_oidc_login')!;
  expect(start.headers.getSetCookie().join()).toMatch(/herald_oidc_login=.*HttpOnly.*SameSite=Lax/i);
  const authorize = new URL(start.headers.get('location')!);
  expect(authorize.origin + authorize.pathname).toBe(`${issuer.url}/authorize`);
  expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
  expect(authorize.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(authorize.searchParams.get('nonce')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(authorize.searchParams.get('client_id')).toBe('herald-dashboard');
  const atIssuer = await fetch(authorize, { redirect: 'manual' });
  expect(atIssuer.status).toBe(302);
  const callback = new URL(atIssuer.headers.get('location')!);
  expect(callback.pathname).toBe('/v1/session/oidc/callback');
  if (options.tamperState) callback.searchParams.set('state', 'A'.repeat(43));
  return fetch(callback, { redirect: 'manual', headers: { ...headers, cookie: login } });
}

describe('sign-in through the issuer', () => {
  it('is offered by /v1/session/status', async () => {
    const status = await api.request('GET', '/v1/session/status');
    expect(status.body.oidc).toEqual({ displayName: 'Test SSO', signInUrl: '/v1/session/oidc' });
  });

  it('makes a session: the claims’ organization and role, commands recorded as oidc:<sub>', async () => {
    const back = await signIn();
    expect(back.status).toBe(302);
    expect(back.headers.get('location')).toBe('/ui/campaigns');
    const cookie = cookieOf(back, 'herald_session')!;
    expect(back.headers.getSetCookie().join()).toMatch(/herald_session=.*HttpOnly.*SameSite=Strict/i);
    const session = await api.request('GET', '/v1/session', { headers: { cookie } });
    expect(session.status, session.text).toBe(200);
    expect(session.body).toMatchObject({
      organizationId: 'org-s',
      role: 'operator',
      keyId: null,
      subject: 'grace',
    });
    const created = await api.request('POST', '/v1/actions', {
      headers: { cookie, 'x-csrf-token': session.body.csrfToken },
      body: { mode: 'normal', actionType: 'x', actionConfig: {}, delaySeconds: 3600 },
    });
    expect(created.status, created.text).toBe(201);
    const { rows } = await api.t.db.query<{ actor: string }>(
      `select meta->>'actor' as actor from event where stream_id = $1`,
      [created.body.actionId],
    );
    expect(rows[0]!.actor).toBe('oidc:grace');
    // The token's expiry ends the session (database clock), whatever its idle expiry.
    const expiry = new Date(session.body.expiresAt).getTime();
    expect(expiry).toBeLessThanOrEqual(Date.now() + 300_000 + 5_000);
    await api.t.db.query(
      `update api_session set not_after = now() - interval '1 second' where subject = 'grace'`,
    );
    expectProblem(await api.request('GET', '/v1/session', { headers: { cookie } }), 401);
  });

  it('a callback whose state does not match goes back to sign-in, makes no session and counts as a failure', async () => {
    const address = '192.0.2.77';
    const back = await signIn({ tamperState: true, address });
    expect(back.status).toBe(302);
    expect(back.headers.get('location')).toMatch(/^\/ui\/signin\?error=.*state/);
    expect(cookieOf(back, 'herald_session')).toBeUndefined();
    const { rows } = await api.t.db.query<{ failures: number }>(
      'select failures from auth_failure where client = $1',
      [address],
    );
    expect(rows[0]?.failures).toBe(1);
  });

  it('without a client id the sign-in through the issuer is a 404', async () => {
    const plain = await startTestApi({
      HERALD_API_OIDC_ISSUER: issuer.url,
      HERALD_API_OIDC_AUDIENCE: 'herald-api',
    });
    try {
      expectProblem(await plain.request('GET', '/v1/session/oidc'), 404);
      expect((await plain.request('GET', '/v1/session/status')).body.oidc).toBeNull();
    } finally {
      await plain.close();
    }
  });
});
