/**
 * Two reads the dashboard makes on every page, over real HTTP on a real database: GET /v1/actors names
 * the actors of events (the organization's API keys by name; another organization's key, a missing one
 * or a non-key actor gets no name, so nothing leaks across tenants), and GET /v1/session/status answers
 * 200 whether or not the cookie has a session (the signed-out check that logs no 401 in a browser).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../src/adapters/postgres/api-key-queries.js';
import { createApiKey } from '../../src/api/auth.js';
import { type ApiFixture, expectProblem, startTestApi } from './support/api.js';

let api: ApiFixture;
let viewerKey: string;
let mineId: string;
let revokedId: string;
let theirsId: string;

beforeAll(async () => {
  api = await startTestApi();
  viewerKey = await api.key('org-actors', 'viewer');
  const mine = await createApiKey(api.t.db, {
    organizationId: 'org-actors',
    role: 'operator',
    name: 'night shift',
    createdBy: null,
  });
  mineId = mine.record.id;
  const revoked = await createApiKey(api.t.db, {
    organizationId: 'org-actors',
    role: 'admin',
    name: 'old admin',
    createdBy: null,
  });
  revokedId = revoked.record.id;
  await revokeApiKey(api.t.db, revokedId, 'org-actors');
  theirsId = (
    await createApiKey(api.t.db, {
      organizationId: 'org-other',
      role: 'admin',
      name: 'secret',
      createdBy: null,
    })
  ).record.id;
}, 60_000);
afterAll(async () => api?.close());

describe('GET /v1/actors', () => {
  it("names the organization's keys, and only them", async () => {
    const actors = [
      `api-key:${mineId}`,
      `api-key:${revokedId.toUpperCase()}`,
      `api-key:${theirsId}`,
      'api-key:00000000-0000-4000-8000-000000000000',
      'scanner@pod-1',
    ];
    const reply = await api.request('GET', `/v1/actors?actors=${encodeURIComponent(actors.join(','))}`, {
      key: viewerKey,
    });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body.actors).toEqual([
      { actor: actors[0], kind: 'api-key', name: 'night shift', role: 'operator', revoked: false },
      { actor: actors[1], kind: 'api-key', name: 'old admin', role: 'admin', revoked: true },
      // Another organization's key is as unknown as a missing one.
      { actor: actors[2], kind: 'api-key', name: null, role: null, revoked: false },
      { actor: actors[3], kind: 'api-key', name: null, role: null, revoked: false },
      { actor: 'scanner@pod-1', kind: 'other', name: null, role: null, revoked: false },
    ]);
  });

  it('refuses a missing list or more than 50 actors with a problem naming the field', async () => {
    expectProblem(await api.request('GET', '/v1/actors', { key: viewerKey }), 400);
    const many = Array.from({ length: 51 }, (_, i) => `pod-${i}`).join(',');
    const reply = await api.request('GET', `/v1/actors?actors=${many}`, { key: viewerKey });
    expectProblem(reply, 400);
    expect(reply.text).toContain('actors');
    expectProblem(await api.request('GET', `/v1/actors?actors=pod-1`), 401);
  });
});

describe('GET /v1/session/status', () => {
  it('answers 200 signed out, and the session when the cookie has one', async () => {
    const out = await api.request('GET', '/v1/session/status');
    expect(out.status, out.text).toBe(200);
    expect(out.body).toEqual({ signedIn: false, session: null, oidc: null });
    const stale = await api.request('GET', '/v1/session/status', {
      headers: { cookie: `herald_session=${'B'.repeat(43)}` },
    });
    expect(stale.body).toEqual({ signedIn: false, session: null, oidc: null });

    const signIn = await api.request('POST', '/v1/session', { body: { apiKey: viewerKey } });
    expect(signIn.status, signIn.text).toBe(200);
    const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0]!;
    const reply = await api.request('GET', '/v1/session/status', { headers: { cookie } });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body.signedIn).toBe(true);
    expect(reply.body.session).toMatchObject({ organizationId: 'org-actors', role: 'viewer' });
    expect(reply.body.session.csrfToken).toBe(signIn.body.csrfToken);
    expect(reply.headers.get('cache-control')).toBe('no-store');
  });
});
