/**
 * Bearer JWTs of an OpenID Connect issuer beside API keys (issue 25 item 2, ADR 0035), over real sockets:
 * the API (`herald api`'s runtime on a test database) verifies tokens of the test issuer
 * (test/support/oidc-issuer.ts) against its JWKS. Expired, not yet valid, another audience or issuer, an
 * unknown key id, `alg: none` and HS256 signed with the public key are 401 problem+json with
 * `WWW-Authenticate: Bearer error="invalid_token"`, counted by the authentication throttle; a token of
 * organization B gets 404 on A's resources; a viewer cannot command (403); a token with no mapped
 * organization or role is a 403 naming the claim; keys keep working; a key rotation needs no restart;
 * the actor `oidc:<sub>` is recorded on events and named in `GET /v1/actors`.
 */
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../src/testing/wait.js';
import { startTestIssuer, type TestIssuer } from '../support/oidc-issuer.js';
import { type ApiFixture, type ApiReply, expectProblem, startTestApi } from './support/api.js';

const AUDIENCE = 'herald-api';
const LIMIT = 5;

let issuer: TestIssuer;
let api: ApiFixture;
let keyA: string;
let actionA: string;

/** A fresh client address per test (the API trusts the loopback proxy's X-Forwarded-For). */
let addresses = 0;
const nextAddress = () => `198.51.100.${++addresses}`;

const claims = (
  organization = 'org-a',
  roles: unknown = ['operator'],
  extra: Record<string, unknown> = {},
) => ({
  sub: 'alice',
  aud: AUDIENCE,
  herald_organization: organization,
  herald_roles: roles,
  name: 'Alice Example',
  ...extra,
});

const as = (token: string, method: string, path: string, body?: unknown, address = nextAddress()) =>
  api.request(method, path, {
    key: token,
    headers: { 'x-forwarded-for': address },
    ...(body === undefined ? {} : { body }),
  });

const newAction = { mode: 'normal', actionType: 'x', actionConfig: {}, delaySeconds: 3600 };

function expectInvalidToken(reply: ApiReply, reason: string): void {
  expectProblem(reply, 401);
  expect(reply.body.type).toBe('urn:herald:problem:invalid-token');
  expect(reply.body.code).toBe('INVALID_TOKEN');
  expect(reply.headers.get('www-authenticate')).toBe(
    `Bearer error="invalid_token", error_description="${reason}"`,
  );
}

const failuresOf = async (address: string) =>
  (
    await api.t.db.query<{ failures: number }>('select failures from auth_failure where client = $1', [
      address,
    ])
  ).rows[0]?.failures ?? 0;

beforeAll(async () => {
  issuer = await startTestIssuer({ audience: AUDIENCE });
  api = await startTestApi({
    HERALD_API_OIDC_ISSUER: issuer.url,
    HERALD_API_OIDC_AUDIENCE: AUDIENCE,
    // Rotation: an unknown kid refetches at once, and the set is refetched after a second.
    HERALD_API_OIDC_JWKS_COOLDOWN_SECONDS: '0',
    HERALD_API_OIDC_JWKS_MAX_AGE_SECONDS: '1',
    HERALD_API_OIDC_CLOCK_TOLERANCE_SECONDS: '5',
    HERALD_API_TRUST_PROXY: '127.0.0.1',
    HERALD_API_AUTH_FAILURE_LIMIT: String(LIMIT),
  });
  keyA = await api.key('org-a', 'operator');
  actionA = (await api.request('POST', '/v1/actions', { key: keyA, body: newAction })).body.actionId;
}, 60_000);
afterAll(async () => {
  await api?.close();
  await issuer?.close();
});

describe('a bearer JWT of the configured issuer', () => {
  it('acts as its organization and role, records oidc:<sub> as the actor, named in /v1/actors', async () => {
    const token = await issuer.sign(claims());
    const created = await as(token, 'POST', '/v1/actions', newAction);
    expect(created.status).toBe(201);
    const read = await as(token, 'GET', `/v1/actions/${created.body.actionId}`);
    expect(read.status).toBe(200);
    const { rows } = await api.t.db.query<{ actor: string }>(
      `select meta->>'actor' as actor from event where stream_id = $1`,
      [created.body.actionId],
    );
    expect(rows.map((r) => r.actor)).toEqual(['oidc:alice']);
    // A's key reads what the token made (one organization), and sees the actor by name.
    expect((await api.request('GET', `/v1/actions/${created.body.actionId}`, { key: keyA })).status).toBe(
      200,
    );
    await waitFor(
      async () =>
        (await api.request('GET', '/v1/actors?actors=oidc:alice,oidc:nobody', { key: keyA })).body.actors[0]
          .name === 'Alice Example',
      { timeoutMs: 5_000, what: 'the subject recorded' },
    );
    const actors = (await api.request('GET', '/v1/actors?actors=oidc:alice,oidc:nobody', { key: keyA })).body;
    expect(actors.actors).toEqual([
      { actor: 'oidc:alice', kind: 'oidc', name: 'Alice Example', role: 'operator', revoked: false },
      { actor: 'oidc:nobody', kind: 'oidc', name: null, role: null, revoked: false },
    ]);
  });

  it('accepts the ES256 key too, and API keys keep working beside tokens', async () => {
    const es = issuer.kids().find((kid) => kid.startsWith('es256'))!;
    expect((await as(await issuer.sign(claims(), { kid: es }), 'GET', `/v1/actions/${actionA}`)).status).toBe(
      200,
    );
    expect((await as(keyA, 'GET', `/v1/actions/${actionA}`)).status).toBe(200);
  });

  it("gets 404 on another organization's resources", async () => {
    const tokenB = await issuer.sign(claims('org-b', ['admin']));
    expectProblem(await as(tokenB, 'GET', `/v1/actions/${actionA}`), 404);
    expectProblem(await as(tokenB, 'POST', `/v1/actions/${actionA}/cancel`, { reason: 'not yours' }), 404);
    expect((await api.request('GET', `/v1/actions/${actionA}`, { key: keyA })).body.status).toBe('pending');
  });

  it('maps roles: a viewer reads but cannot command (403), the highest mapped role wins', async () => {
    const viewer = await issuer.sign(claims('org-a', ['viewer', 'unknown-role']));
    expect((await as(viewer, 'GET', `/v1/actions/${actionA}`)).status).toBe(200);
    const refused = await as(viewer, 'POST', '/v1/actions', newAction);
    expectProblem(refused, 403);
    const both = await issuer.sign(claims('org-a', ['viewer', 'operator']));
    expect((await as(both, 'POST', '/v1/actions', newAction)).status).toBe(201);
  });

  it('refuses a token with no mapped organization or role: 403 naming the claim, not counted', async () => {
    const address = nextAddress();
    const noRole = await as(
      await issuer.sign(claims('org-a', ['guest'])),
      'GET',
      '/v1/actions',
      undefined,
      address,
    );
    expectProblem(noRole, 403);
    expect(noRole.body.detail).toContain("'herald_roles'");
    const noOrg = await as(
      await issuer.sign({ ...claims(), herald_organization: undefined }),
      'GET',
      '/v1/actions',
      undefined,
      address,
    );
    expectProblem(noOrg, 403);
    expect(noOrg.body.detail).toContain("'herald_organization'");
    expect(await failuresOf(address)).toBe(0);
  });
});

describe('a token that does not verify is a 401 invalid_token', () => {
  const now = () => Math.floor(Date.now() / 1000);

  it('expired', async () => {
    expectInvalidToken(
      await as(
        await issuer.sign(claims('org-a', ['operator'], { exp: now() - 60, iat: now() - 600 })),
        'GET',
        '/v1/actions',
      ),
      'expired',
    );
  });

  it('not yet valid', async () => {
    expectInvalidToken(
      await as(await issuer.sign(claims('org-a', ['operator'], { nbf: now() + 120 })), 'GET', '/v1/actions'),
      'not yet valid',
    );
  });

  it('for another audience', async () => {
    expectInvalidToken(
      await as(
        await issuer.sign(claims('org-a', ['operator'], { aud: 'another-api' })),
        'GET',
        '/v1/actions',
      ),
      'wrong audience',
    );
  });

  it('from another issuer', async () => {
    expectInvalidToken(
      await as(
        await issuer.sign(claims('org-a', ['operator'], { iss: 'https://evil.example' })),
        'GET',
        '/v1/actions',
      ),
      'wrong issuer',
    );
  });

  it('signed with a key the issuer does not publish (unknown kid)', async () => {
    const stranger = await startTestIssuer();
    try {
      const forged = await stranger.sign({ ...claims(), iss: issuer.url });
      expectInvalidToken(await as(forged, 'GET', '/v1/actions'), 'unknown key id');
    } finally {
      await stranger.close();
    }
  });

  it('with a bad signature (the kid of a published key, signed by another)', async () => {
    const stranger = await startTestIssuer();
    try {
      const forged = await stranger.sign(
        { ...claims(), iss: issuer.url },
        { header: { kid: issuer.signingKid } },
      );
      expectInvalidToken(await as(forged, 'GET', '/v1/actions'), 'bad signature');
    } finally {
      await stranger.close();
    }
  });

  it('alg: none', async () => {
    const header = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
    const payload = Buffer.from(
      JSON.stringify({ ...claims(), iss: issuer.url, exp: now() + 300, iat: now() }),
    ).toString('base64url');
    expectInvalidToken(await as(`${header}.${payload}.`, 'GET', '/v1/actions'), 'algorithm not accepted');
  });

  it('HS256 signed with the public key as the secret', async () => {
    const jwk = issuer.publicJwk(issuer.signingKid);
    const secret = new TextEncoder().encode(JSON.stringify(jwk));
    const forged = await new SignJWT({ ...claims(), iss: issuer.url })
      .setProtectedHeader({ alg: 'HS256', kid: issuer.signingKid })
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(secret);
    expectInvalidToken(await as(forged, 'GET', '/v1/actions'), 'algorithm not accepted');
  });

  it('counts bad tokens in the authentication throttle: past the limit even a good token gets 429', async () => {
    const address = nextAddress();
    const expired = await issuer.sign(claims('org-a', ['operator'], { exp: now() - 60, iat: now() - 600 }));
    for (let i = 0; i < LIMIT; i++)
      expectInvalidToken(await as(expired, 'GET', '/v1/actions', undefined, address), 'expired');
    expect(await failuresOf(address)).toBe(LIMIT);
    const good = await issuer.sign(claims());
    const throttled = await as(good, 'GET', '/v1/actions', undefined, address);
    expectProblem(throttled, 429);
    expect(throttled.body.code).toBe('AUTH_THROTTLED');
    // Another address is untouched.
    expect((await as(good, 'GET', '/v1/actions')).status).toBe(200);
  });
});

describe('key rotation without a restart', () => {
  it('accepts a token of a newly published key, and refuses the retired key once the set is refetched', async () => {
    const old = issuer.signingKid;
    const oldToken = await issuer.sign(claims());
    expect((await as(oldToken, 'GET', `/v1/actions/${actionA}`)).status).toBe(200);
    const fresh = await issuer.rotate('RS256');
    const jwksFetches = issuer.requests.filter((r) => r === 'GET /jwks').length;
    const newToken = await issuer.sign(claims(), { kid: fresh });
    // The unknown kid makes the API refetch the JWKS at once (cooldown 0 in this test).
    expect((await as(newToken, 'GET', `/v1/actions/${actionA}`)).status).toBe(200);
    expect(issuer.requests.filter((r) => r === 'GET /jwks').length).toBeGreaterThan(jwksFetches);
    issuer.retire(old);
    // The cached set still holds the old key until it is older than its max age (1 s here).
    await waitFor(async () => (await as(oldToken, 'GET', `/v1/actions/${actionA}`)).status === 401, {
      timeoutMs: 10_000,
      what: 'the retired key refused after the JWKS refresh',
    });
    expectInvalidToken(await as(oldToken, 'GET', `/v1/actions/${actionA}`), 'unknown key id');
    expect((await as(newToken, 'GET', `/v1/actions/${actionA}`)).status).toBe(200);
  });
});
