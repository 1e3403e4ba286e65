/**
 * Dashboard sessions over real HTTP on a real database: sign-in with an API key sets an HttpOnly,
 * SameSite=Strict cookie (Secure behind TLS: a trusted proxy's X-Forwarded-Proto, or configured), the
 * cookie authenticates reads, commands need the session's CSRF token, a viewer's commands are refused,
 * sign-out ends it, idle expiry is judged on the database clock, and revoking the key ends its sessions.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../src/adapters/postgres/api-key-queries.js';
import { hashApiKey } from '../../src/api/auth.js';
import { type ApiFixture, expectProblem, lineCampaignBody, startTestApi } from './support/api.js';

let api: ApiFixture;
let operatorKey: string;
let viewerKey: string;

beforeAll(async () => {
  api = await startTestApi({ HERALD_API_TRUST_PROXY: 'true' });
  operatorKey = await api.key('org-s', 'operator');
  viewerKey = await api.key('org-s', 'viewer');
}, 60_000);
afterAll(async () => api?.close());

interface Session {
  cookie: string;
  setCookie: string;
  csrf: string;
  body: Record<string, unknown>;
}

async function signIn(key: string, headers: Record<string, string> = {}): Promise<Session> {
  const reply = await api.request('POST', '/v1/session', { body: { apiKey: key }, headers });
  expect(reply.status, reply.text).toBe(200);
  const setCookie = reply.headers.get('set-cookie') ?? '';
  const cookie = setCookie.split(';')[0]!;
  expect(cookie).toMatch(/^herald_session=[A-Za-z0-9_-]{43}$/);
  return { cookie, setCookie, csrf: reply.body.csrfToken, body: reply.body };
}

const keyIdOf = async (key: string) =>
  (
    await api.t.db.query<{ id: string }>('select id::text from api_key where secret_hash = $1', [
      hashApiKey(key),
    ])
  ).rows[0]!.id;

describe('signing in', () => {
  it('answers the organization, role, key and CSRF token and sets a strict HttpOnly cookie', async () => {
    const session = await signIn(operatorKey);
    expect(session.body).toMatchObject({
      organizationId: 'org-s',
      role: 'operator',
      keyId: await keyIdOf(operatorKey),
    });
    expect(session.csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Date.parse(session.body.expiresAt as string)).toBeGreaterThan(Date.now() + 50 * 60_000);
    const flags = session.setCookie.toLowerCase();
    expect(flags).toContain('httponly');
    expect(flags).toContain('samesite=strict');
    expect(flags).toContain('path=/');
    // Plain HTTP without a proxy header: not Secure (the browser would drop it on http://localhost).
    expect(flags).not.toContain('secure');
    // Only a hash of the cookie is stored.
    const stored = await api.t.db.query<{ n: number }>(
      "select count(*)::int as n from api_session where encode(id_hash, 'escape') like $1",
      [`%${session.cookie.split('=')[1]}%`],
    );
    expect(stored.rows[0]!.n).toBe(0);
  });

  it('is Secure behind a TLS proxy (X-Forwarded-Proto: https, trusted)', async () => {
    const session = await signIn(operatorKey, { 'x-forwarded-proto': 'https' });
    expect(session.setCookie.toLowerCase()).toMatch(/;\s*secure/);
  });

  it('a wrong key is 401 and sets no cookie', async () => {
    const wrong = await api.request('POST', '/v1/session', {
      body: { apiKey: `hk_00000000_${'A'.repeat(43)}` },
    });
    expectProblem(wrong, 401);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    expectProblem(await api.request('POST', '/v1/session', { body: { apiKey: 'nonsense' } }), 401);
    expectProblem(await api.request('POST', '/v1/session', { body: {} }), 400, 'apiKey');
  });

  it('GET /v1/session answers the session for the cookie, 401 without one', async () => {
    const session = await signIn(viewerKey);
    const got = await api.request('GET', '/v1/session', { headers: { cookie: session.cookie } });
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ organizationId: 'org-s', role: 'viewer', csrfToken: session.csrf });
    expectProblem(await api.request('GET', '/v1/session'), 401);
    expectProblem(
      await api.request('GET', '/v1/session', { headers: { cookie: `herald_session=${'B'.repeat(43)}` } }),
      401,
    );
  });
});

describe('the cookie on /v1', () => {
  it('authenticates reads without a CSRF token', async () => {
    const session = await signIn(operatorKey);
    const list = await api.request('GET', '/v1/campaigns', { headers: { cookie: session.cookie } });
    expect(list.status, list.text).toBe(200);
  });

  it('a command needs the CSRF token: missing or wrong is 403, right is accepted with the key as actor', async () => {
    const session = await signIn(operatorKey);
    const missing = await api.request('POST', '/v1/campaigns', {
      headers: { cookie: session.cookie },
      body: lineCampaignBody(),
    });
    expectProblem(missing, 403);
    expect(missing.body.code).toBe('CSRF_REJECTED');
    const wrong = await api.request('POST', '/v1/campaigns', {
      headers: { cookie: session.cookie, 'x-csrf-token': 'C'.repeat(43) },
      body: lineCampaignBody(),
    });
    expectProblem(wrong, 403);
    expect(wrong.body.code).toBe('CSRF_REJECTED');
    // Another session's token does not fit this session.
    const other = await signIn(operatorKey);
    expectProblem(
      await api.request('POST', '/v1/campaigns', {
        headers: { cookie: session.cookie, 'x-csrf-token': other.csrf },
        body: lineCampaignBody(),
      }),
      403,
    );
    const { rows: before } = await api.t.db.query<{ n: number }>('select count(*)::int as n from campaign');
    expect(before[0]!.n).toBe(0);
    const created = await api.request('POST', '/v1/campaigns', {
      headers: { cookie: session.cookie, 'x-csrf-token': session.csrf },
      body: lineCampaignBody(),
    });
    expect(created.status, created.text).toBe(201);
    const { rows } = await api.t.db.query<{ actor: string }>(
      "select meta->>'actor' as actor from event where stream_id = $1 order by version limit 1",
      [created.body.campaignId],
    );
    expect(rows[0]!.actor).toBe(`api-key:${await keyIdOf(operatorKey)}`);
  });

  it("a viewer's session reads, and its commands are 403 even with the CSRF token", async () => {
    const session = await signIn(viewerKey);
    expect((await api.request('GET', '/v1/campaigns', { headers: { cookie: session.cookie } })).status).toBe(
      200,
    );
    const refused = await api.request('POST', '/v1/campaigns', {
      headers: { cookie: session.cookie, 'x-csrf-token': session.csrf },
      body: lineCampaignBody(),
    });
    expectProblem(refused, 403);
    expect(refused.body.code).toBe('FORBIDDEN');
  });

  it('a Bearer key still works without a cookie or CSRF token', async () => {
    const created = await api.request('POST', '/v1/campaigns', {
      key: operatorKey,
      body: lineCampaignBody(),
    });
    expect(created.status).toBe(201);
  });
});

describe('ending a session', () => {
  it('sign-out (with the CSRF token) deletes the session and clears the cookie', async () => {
    const session = await signIn(operatorKey);
    expectProblem(await api.request('DELETE', '/v1/session', { headers: { cookie: session.cookie } }), 403);
    const out = await api.request('DELETE', '/v1/session', {
      headers: { cookie: session.cookie, 'x-csrf-token': session.csrf },
    });
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toMatch(/^herald_session=;.*Expires=Thu, 01 Jan 1970/i);
    expectProblem(await api.request('GET', '/v1/campaigns', { headers: { cookie: session.cookie } }), 401);
    expectProblem(await api.request('GET', '/v1/session', { headers: { cookie: session.cookie } }), 401);
  });

  it('expires after the idle timeout on the database clock, and use pushes the expiry forward', async () => {
    const session = await signIn(operatorKey);
    const hashOfCookie = "sha256(convert_to($1, 'utf8'))";
    const value = session.cookie.split('=')[1]!;
    // Last seen long ago, still within the idle time: the next request touches it (expiry moves on).
    await api.t.db.query(
      `update api_session set last_seen_at = now() - interval '10 minutes', expires_at = now() + interval '1 minute'
        where id_hash = ${hashOfCookie}`,
      [value],
    );
    expect((await api.request('GET', '/v1/campaigns', { headers: { cookie: session.cookie } })).status).toBe(
      200,
    );
    const touched = await api.t.db.query<{ left: number }>(
      `select extract(epoch from expires_at - now())::float8 as left from api_session where id_hash = ${hashOfCookie}`,
      [value],
    );
    expect(touched.rows[0]!.left).toBeGreaterThan(59 * 60);
    // Idle past its expiry (the database clock decides): 401.
    await api.t.db.query(
      `update api_session set expires_at = now() - interval '1 second' where id_hash = ${hashOfCookie}`,
      [value],
    );
    expectProblem(await api.request('GET', '/v1/campaigns', { headers: { cookie: session.cookie } }), 401);
  });

  it("revoking the key ends the key's sessions at once", async () => {
    const doomed = await api.key('org-s', 'operator');
    const session = await signIn(doomed);
    expect((await api.request('GET', '/v1/campaigns', { headers: { cookie: session.cookie } })).status).toBe(
      200,
    );
    await revokeApiKey(api.t.db, await keyIdOf(doomed), null);
    expectProblem(await api.request('GET', '/v1/campaigns', { headers: { cookie: session.cookie } }), 401);
    expectProblem(await api.request('GET', '/v1/session', { headers: { cookie: session.cookie } }), 401);
    expectProblem(await api.request('POST', '/v1/session', { body: { apiKey: doomed } }), 401);
  });
});
