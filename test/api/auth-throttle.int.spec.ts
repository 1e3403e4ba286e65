/**
 * The authentication throttle over real sockets on a real database (issue 23, item 5): failed keys and
 * sign-ins count per client address (HERALD_API_TRUST_PROXY=127.0.0.1: the test client is the trusted
 * proxy, so the address is the last X-Forwarded-For hop it appended); past the limit the address gets 429 problem+json with Retry-After — a
 * right key included — in a second API process on the same database too, while other addresses and
 * requests without credentials are untouched; successful requests count nothing; the window ends on the
 * database clock.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import type { RunningApiServer } from '../../src/api/server.js';
import { startApi } from '../../src/roles/api-role.js';
import { createRuntime } from '../../src/roles/runtime.js';
import { testLogger } from '../support/roles.js';
import { type ApiFixture, type ApiReply, expectProblem, request, startTestApi } from './support/api.js';

const LIMIT = 3;
const WINDOW_SECONDS = 60;

let api: ApiFixture;
let second: { server: RunningApiServer; close(): Promise<void> };
let goodKey: string;
const wrongKey = `hk_00000000_${'A'.repeat(43)}`;

beforeAll(async () => {
  const env = {
    HERALD_API_TRUST_PROXY: '127.0.0.1',
    HERALD_API_AUTH_FAILURE_LIMIT: String(LIMIT),
    HERALD_API_AUTH_FAILURE_WINDOW_SECONDS: String(WINDOW_SECONDS),
  };
  api = await startTestApi(env);
  goodKey = await api.key('org-throttle', 'operator');
  // A second API process on the same database (its own runtime, pool and server).
  const runtime = createRuntime(
    api.t.config({ HERALD_API_PORT: '0', HERALD_API_HOST: '127.0.0.1', ...env }),
    testLogger(),
    {
      registry: heraldRegistry,
      applicationName: 'herald-api-test-2',
    },
  );
  const server = await startApi(runtime);
  second = {
    server,
    async close() {
      await server.close();
      await runtime.close();
    },
  };
}, 60_000);
afterAll(async () => {
  await second?.close();
  await api?.close();
});

const from = (address: string) => ({ 'x-forwarded-for': address });
const list = (key: string | null, address: string, url = api.url) =>
  request(url, 'GET', '/v1/campaigns', { key, headers: from(address) });

function expectThrottled(reply: ApiReply): void {
  expectProblem(reply, 429);
  expect(reply.headers.get('content-type')).toContain('application/problem+json');
  expect(reply.body.code).toBe('AUTH_THROTTLED');
  expect(reply.body.detail).toContain('HERALD_API_AUTH_FAILURE_LIMIT');
  const retryAfter = Number(reply.headers.get('retry-after'));
  // The rest of the window, not the API's generic 2 s (the failures came seconds ago in a 60 s window).
  expect(retryAfter).toBeGreaterThanOrEqual(10);
  expect(retryAfter).toBeLessThanOrEqual(WINDOW_SECONDS);
}

const failuresOf = async (address: string) =>
  (
    await api.t.db.query<{ failures: number }>('select failures from auth_failure where client = $1', [
      address,
    ])
  ).rows[0]?.failures ?? 0;

describe('failed authentications per client address', () => {
  it('answers 401 up to the limit, then 429 with Retry-After even for a right key, in every API process', async () => {
    const address = '203.0.113.10';
    for (let i = 0; i < LIMIT; i++) expectProblem(await list(wrongKey, address), 401);
    expect(await failuresOf(address)).toBe(LIMIT);

    expectThrottled(await list(wrongKey, address));
    expectThrottled(await list(goodKey, address));
    // The other process reads the same counters.
    expectThrottled(await list(goodKey, address, second.server.url));
    // Refusals while blocked are not counted again.
    expect(await failuresOf(address)).toBe(LIMIT);

    // Another address is untouched.
    expect((await list(goodKey, '203.0.113.11')).status).toBe(200);
  });

  it('counts failures made in different processes together', async () => {
    const address = '203.0.113.20';
    expectProblem(await list(wrongKey, address), 401);
    expectProblem(await list(wrongKey, address, second.server.url), 401);
    expectProblem(await list('hk_short', address), 401); // malformed counts too
    expectThrottled(await list(goodKey, address, second.server.url));
  });

  it('counts a revoked key and failed sign-ins, and throttles the sign-in', async () => {
    const address = '203.0.113.30';
    const revoked = await api.key('org-throttle', 'viewer');
    await api.t.db.query('update api_key set revoked_at = now() where secret_hash = sha256($1::bytea)', [
      Buffer.from(revoked, 'utf8'),
    ]);
    expectProblem(await list(revoked, address), 401);
    for (let i = 1; i < LIMIT; i++) {
      const signIn = await request(api.url, 'POST', '/v1/session', {
        body: { apiKey: wrongKey },
        headers: from(address),
      });
      expectProblem(signIn, 401);
    }
    const blocked = await request(api.url, 'POST', '/v1/session', {
      body: { apiKey: goodKey },
      headers: from(address),
    });
    expectThrottled(blocked);
    expect(blocked.headers.get('set-cookie')).toBeNull();
  });

  it('does not count requests without credentials, nor successful ones', async () => {
    const address = '203.0.113.40';
    for (let i = 0; i < LIMIT + 2; i++) expectProblem(await list(null, address), 401);
    for (let i = 0; i < LIMIT + 2; i++) expect((await list(goodKey, address)).status).toBe(200);
    expect(await failuresOf(address)).toBe(0);
  });

  it('lets the address in again when its window ends (database clock)', async () => {
    const address = '203.0.113.50';
    for (let i = 0; i < LIMIT; i++) expectProblem(await list(wrongKey, address), 401);
    expectThrottled(await list(goodKey, address));
    // The window started WINDOW_SECONDS ago by the database's clock: it has ended.
    await api.t.db.query(
      'update auth_failure set window_start = now() - make_interval(secs => $2) where client = $1',
      [address, WINDOW_SECONDS],
    );
    expect((await list(goodKey, address)).status).toBe(200);
    // A new failure starts a new window at 1.
    expectProblem(await list(wrongKey, address), 401);
    expect(await failuresOf(address)).toBe(1);
  });

  it('takes the address the trusted proxy saw, not one the client put in front of it', async () => {
    const address = '203.0.113.60';
    for (let i = 0; i < LIMIT; i++) {
      // A client forging a different left-most hop each time is still counted by the proxy's hop.
      const reply = await request(api.url, 'GET', '/v1/campaigns', {
        key: wrongKey,
        headers: { 'x-forwarded-for': `198.51.100.${i}, ${address}` },
      });
      expectProblem(reply, 401);
    }
    expectThrottled(await list(goodKey, address));
  });
});
