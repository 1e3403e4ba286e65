/**
 * The LINE test server over real HTTP on loopback: requests are checked against LINE's OpenAPI documents
 * (a violation is a 400 in LINE's shape and is recorded), tokens authenticate (long-lived, and issued
 * ones until they expire on the injected clock), an accepted retry key answers 409 with the first
 * request id and counts nobody again for 24 h (a key answered 5xx/429 is not recorded), and the
 * behaviours, rate limits, hook and control API do what tests rely on.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  MONTHLY_LIMIT_MESSAGE,
  RATE_LIMIT_MESSAGE,
  RETRY_KEY_WINDOW_MS,
} from '../../src/aggregates/campaign/line/simulator/channel-state.js';
import {
  type LineSimulator,
  startLineSimulator,
} from '../../src/aggregates/campaign/line/simulator/server.js';

const TEXT = [{ type: 'text', text: 'Hello' }];
const users = (n: number, from = 0) =>
  Array.from({ length: n }, (_, i) => `U${String(from + i).padStart(32, '0')}`);

let clock = Date.UTC(2026, 0, 1);
let sim: LineSimulator;

interface Sent {
  status: number;
  headers: Headers;
  body: Record<string, unknown> | null;
}

async function send(
  path: string,
  body: unknown,
  options: { token?: string | null; retryKey?: string | null; method?: string; contentType?: string } = {},
): Promise<Sent> {
  const headers: Record<string, string> = {};
  if (options.token !== null) headers.authorization = `Bearer ${options.token ?? 'token-a'}`;
  if (options.retryKey !== null) headers['x-line-retry-key'] = options.retryKey ?? randomUUID();
  if (body !== undefined) headers['content-type'] = options.contentType ?? 'application/json';
  const response = await fetch(`${sim.url}${path}`, {
    method: options.method ?? (body === undefined ? 'GET' : 'POST'),
    headers,
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : null };
}

const multicast = (to: string[], options: Parameters<typeof send>[2] = {}) =>
  send('/v2/bot/message/multicast', { to, messages: TEXT }, options);

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
const FORM = 'application/x-www-form-urlencoded';

beforeAll(async () => {
  sim = await startLineSimulator({ now: () => clock });
});
afterAll(async () => {
  await sim.close();
});

function freshChannels() {
  sim.reset();
  sim.beforeRespond(null);
  sim.addChannel({ channelId: 'ch-a', tokens: ['token-a'], friends: users(3, 100) });
  sim.addChannel({ channelId: 'ch-b', tokens: ['token-b'], clientId: 'client-b', clientSecret: 'secret-b' });
  for (const id of ['ch-a', 'ch-b']) sim.clearBehaviours(id);
}
afterEach(() => {
  clock += 10 * RETRY_KEY_WINDOW_MS;
});

describe('LINE simulator: contract and acceptance', () => {
  beforeAll(freshChannels);

  it('accepts a valid multicast with a request id and counts each recipient once', async () => {
    freshChannels();
    const to = users(3);
    const response = await multicast(to);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({});
    const requestId = response.headers.get('x-line-request-id');
    expect(requestId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    const stats = sim.stats('ch-a');
    expect(stats.accepted).toBe(1);
    expect(stats.requests).toMatchObject([{ endpoint: 'multicast', status: 200, requestId, recipients: 3 }]);
    expect(sim.timesReceived('ch-a', to[0]!)).toBe(1);
    expect(sim.distinctRecipients('ch-a')).toBe(3);
    expect(sim.violationCount).toBe(0);
  });

  it.each([
    ['501 user ids', { to: users(501), messages: TEXT }, 'to'],
    ['no messages', { to: users(1) }, 'messages'],
    ['an empty to', { to: [], messages: TEXT }, 'to'],
    [
      'an unknown message type',
      { to: users(1), messages: [{ type: 'hologram', text: 'x' }] },
      'messages[0].type',
    ],
    ['a text message without text', { to: users(1), messages: [{ type: 'text' }] }, 'messages[0].text'],
    ['six messages', { to: users(1), messages: Array(6).fill(TEXT[0]) }, 'messages'],
    [
      'a flex bubble with an unknown component',
      {
        to: users(1),
        messages: [
          {
            type: 'flex',
            altText: 'alt',
            contents: {
              type: 'bubble',
              body: { type: 'box', layout: 'vertical', contents: [{ type: 'bogus' }] },
            },
          },
        ],
      },
      'messages[0].contents.body.contents[0].type',
    ],
  ])(
    'refuses a multicast with %s (400 in LINE’s shape) and records the violation',
    async (_, body, property) => {
      freshChannels();
      const response = await send('/v2/bot/message/multicast', body);
      expect(response.status).toBe(400);
      expect(response.body?.message).toEqual(expect.any(String));
      expect(response.body?.details).toEqual(
        expect.arrayContaining([{ message: expect.any(String), property }]),
      );
      expect(sim.violationCount).toBe(1);
      expect(sim.violations()[0]).toMatchObject({ channelId: 'ch-a', endpoint: 'multicast' });
      expect(sim.stats('ch-a')).toMatchObject({ accepted: 0, violations: 1, distinctRecipients: 0 });
    },
  );

  it('accepts a valid flex message (the discriminator dispatches, it does not only refuse)', async () => {
    freshChannels();
    const flex = {
      type: 'flex',
      altText: 'alt',
      contents: {
        type: 'bubble',
        body: { type: 'box', layout: 'vertical', contents: [{ type: 'text', text: 'hi' }] },
      },
    };
    expect((await send('/v2/bot/message/multicast', { to: users(1), messages: [flex] })).status).toBe(200);
    const badLayout = {
      ...flex,
      contents: { ...flex.contents, body: { ...flex.contents.body, layout: 'diagonal' } },
    };
    const refused = await send('/v2/bot/message/multicast', { to: users(1), messages: [badLayout] });
    expect(refused.status).toBe(400);
    expect(refused.body?.details).toEqual([
      expect.objectContaining({ property: 'messages[0].contents.body.layout' }),
    ]);
  });

  it('refuses a retry key that is not a UUID, a body that is not JSON and a wrong content type', async () => {
    freshChannels();
    const badKey = await multicast(users(1), { retryKey: 'not-a-uuid' });
    expect(badKey.status).toBe(400);
    expect(badKey.body?.details).toEqual([expect.objectContaining({ property: 'X-Line-Retry-Key' })]);
    expect((await send('/v2/bot/message/multicast', '{"to": [')).status).toBe(400);
    const wrongType = await send('/v2/bot/message/multicast', 'to=U1', { contentType: 'text/plain' });
    expect(wrongType.status).toBe(400);
    expect(wrongType.body?.details).toEqual([expect.objectContaining({ property: 'Content-Type' })]);
    expect(sim.violationCount).toBe(3);
    expect(sim.stats('ch-a').accepted).toBe(0);
  });

  it('answers 401 for an unknown or missing token, and records no violation', async () => {
    freshChannels();
    const unknown = await multicast(users(1), { token: 'nope' });
    expect(unknown.status).toBe(401);
    expect(String(unknown.body?.message)).toMatch(/^Authentication failed/);
    expect((await multicast(users(1), { token: null })).status).toBe(401);
    expect(sim.stats().unauthenticated).toBe(2);
    expect(sim.violationCount).toBe(0);
    expect(sim.stats('ch-a').requestCount).toBe(0);
  });

  it('answers a repeated accepted retry key with 409 and the first request id, counting recipients once', async () => {
    freshChannels();
    const key = randomUUID();
    const to = users(5);
    const first = await multicast(to, { retryKey: key });
    const again = await multicast(to, { retryKey: key });
    expect(first.status).toBe(200);
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ message: 'The retry key is already accepted' });
    expect(again.headers.get('x-line-accepted-request-id')).toBe(first.headers.get('x-line-request-id'));
    expect(again.headers.get('x-line-request-id')).not.toBe(first.headers.get('x-line-request-id'));
    const stats = sim.stats('ch-a');
    expect(stats).toMatchObject({
      accepted: 1,
      duplicates: 1,
      usersReceivedMoreThanOnce: 0,
      recipientsDelivered: 5,
    });
    expect(sim.timesReceived('ch-a', to[4]!)).toBe(1);
    expect(stats.requests[1]).toMatchObject({
      status: 409,
      acceptedRequestId: first.headers.get('x-line-request-id'),
    });
    // Another channel's key space is its own.
    expect((await multicast(to, { retryKey: key, token: 'token-b' })).status).toBe(200);
  });

  it('keeps an accepted key for 24 hours on the injected clock', async () => {
    freshChannels();
    const key = randomUUID();
    expect((await multicast(users(1), { retryKey: key })).status).toBe(200);
    clock += RETRY_KEY_WINDOW_MS - 1;
    expect((await multicast(users(1), { retryKey: key })).status).toBe(409);
    clock += 1;
    expect((await multicast(users(1), { retryKey: key })).status).toBe(200);
    expect(sim.timesReceived('ch-a', users(1)[0]!)).toBe(2);
  });

  it('does not record a key answered 500 or 429: it is then accepted, and only then a duplicate', async () => {
    freshChannels();
    const key = randomUUID();
    sim.behave('ch-a', { kind: 'server-error', calls: 1 });
    sim.behave('ch-a', { kind: 'throttle', calls: 1 });
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await multicast(users(2), { retryKey: key })).status);
    expect(statuses).toEqual([500, 429, 200, 409]);
    expect(sim.stats('ch-a')).toMatchObject({
      accepted: 1,
      duplicates: 1,
      throttled: 1,
      usersReceivedMoreThanOnce: 0,
    });
  });

  it('counts a broadcast for each friend and records a narrowcast’s audience (202)', async () => {
    freshChannels();
    sim.addChannel({
      channelId: 'ch-a',
      tokens: ['token-a'],
      friends: users(3, 100),
      audiences: { '4242': users(4, 200) },
    });
    const broadcast = await send('/v2/bot/message/broadcast', { messages: TEXT });
    expect(broadcast.status).toBe(200);
    const narrowcast = await send('/v2/bot/message/narrowcast', {
      messages: TEXT,
      recipient: { type: 'audience', audienceGroupId: 4242 },
    });
    expect(narrowcast.status).toBe(202);
    expect(narrowcast.body).toEqual({});
    const stats = sim.stats('ch-a');
    expect(stats).toMatchObject({
      broadcasts: 1,
      narrowcastAudiences: [4242],
      accepted: 2,
      recipientsDelivered: 7,
    });
    expect(sim.timesReceived('ch-a', users(1, 102)[0]!)).toBe(1);
    expect(sim.timesReceived('ch-a', users(1, 203)[0]!)).toBe(1);
    const badRecipient = await send('/v2/bot/message/narrowcast', {
      messages: TEXT,
      recipient: { type: 'audience', audienceGroupId: 'x' },
    });
    expect(badRecipient.status).toBe(400);
    expect(badRecipient.body?.details).toEqual([
      expect.objectContaining({ property: 'recipient.audienceGroupId' }),
    ]);
  });

  it('answers the quota and consumption endpoints', async () => {
    freshChannels();
    expect((await send('/v2/bot/message/quota', undefined)).body).toEqual({ type: 'none' });
    sim.addChannel({ channelId: 'ch-a', tokens: ['token-a'], monthlyQuota: 3 });
    expect((await send('/v2/bot/message/quota', undefined)).body).toEqual({ type: 'limited', value: 3 });
    expect((await multicast(users(2))).status).toBe(200);
    expect((await send('/v2/bot/message/quota/consumption', undefined)).body).toEqual({ totalUsage: 2 });
    const over = await multicast(users(2, 10));
    expect(over.status).toBe(429);
    expect(over.body?.message).toBe(MONTHLY_LIMIT_MESSAGE);
    expect(sim.distinctRecipients('ch-a')).toBe(2);
  });
});

describe('LINE simulator: channel access tokens', () => {
  it('issues a short-lived token for registered client credentials; it authenticates until it expires', async () => {
    freshChannels();
    const issued = await send(
      '/v2/oauth/accessToken',
      form({ grant_type: 'client_credentials', client_id: 'client-b', client_secret: 'secret-b' }),
      { token: null, retryKey: null, contentType: FORM },
    );
    expect(issued.status).toBe(200);
    expect(issued.body).toEqual({
      access_token: expect.any(String),
      expires_in: 2_592_000,
      token_type: 'Bearer',
    });
    const token = String(issued.body?.access_token);
    expect((await multicast(users(1), { token })).status).toBe(200);
    expect(sim.stats('ch-b').accepted).toBe(1);
    const verified = await send('/v2/oauth/verify', form({ access_token: token }), {
      token: null,
      retryKey: null,
      contentType: FORM,
    });
    expect(verified.body).toMatchObject({ client_id: 'client-b', expires_in: 2_592_000 });
    clock += 2_592_000 * 1000;
    expect((await multicast(users(1), { token })).status).toBe(401);
    expect(sim.violationCount).toBe(0);
  });

  it('refuses a wrong secret, an unknown client and a missing field (the last as a violation)', async () => {
    freshChannels();
    const options = { token: null, retryKey: null, contentType: FORM } as const;
    const wrong = await send(
      '/v2/oauth/accessToken',
      form({ grant_type: 'client_credentials', client_id: 'client-b', client_secret: 'guess' }),
      options,
    );
    expect(wrong.status).toBe(400);
    expect(wrong.body).toMatchObject({ error: 'invalid_client' });
    const unknown = await send(
      '/v2/oauth/accessToken',
      form({ grant_type: 'client_credentials', client_id: 'nobody', client_secret: 'x' }),
      options,
    );
    expect(unknown.status).toBe(400);
    expect(sim.violationCount).toBe(0);
    const missing = await send('/v2/oauth/accessToken', form({ grant_type: 'client_credentials' }), options);
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({ error: 'invalid_request' });
    expect(sim.violationCount).toBe(1);
  });
});

describe('LINE simulator: behaviours', () => {
  it('throttles with Retry-After for N calls, then answers normally', async () => {
    freshChannels();
    sim.behave('ch-a', { kind: 'throttle', retryAfterSeconds: 7, calls: 2 });
    const first = await multicast(users(1));
    expect(first.status).toBe(429);
    expect(first.headers.get('retry-after')).toBe('7');
    expect(first.body?.message).toBe(RATE_LIMIT_MESSAGE);
    expect((await multicast(users(1))).status).toBe(429);
    expect((await multicast(users(1))).status).toBe(200);
  });

  it('throttles for a duration on the injected clock, only on the endpoints named', async () => {
    freshChannels();
    sim.behave('ch-a', { kind: 'throttle', forMs: 5_000, endpoints: ['multicast'] });
    expect((await multicast(users(1))).status).toBe(429);
    expect((await send('/v2/bot/message/broadcast', { messages: TEXT })).status).toBe(200);
    clock += 5_000;
    expect((await multicast(users(1))).status).toBe(200);
  });

  it('answers the monthly limit, 401, 400 with details and 5xx when told', async () => {
    freshChannels();
    sim.behave('ch-a', { kind: 'quota-exhausted', calls: 1 });
    sim.behave('ch-a', { kind: 'unauthorized', calls: 1 });
    sim.behave('ch-a', {
      kind: 'reject',
      calls: 1,
      message: 'The request body has 1 error(s)',
      details: [{ message: 'May not be empty', property: 'messages[0].text' }],
    });
    sim.behave('ch-a', { kind: 'server-error', status: 503, calls: 1 });
    const quota = await multicast(users(1));
    expect([quota.status, quota.body?.message]).toEqual([429, MONTHLY_LIMIT_MESSAGE]);
    expect((await multicast(users(1))).status).toBe(401);
    const rejected = await multicast(users(1));
    expect(rejected.status).toBe(400);
    expect(rejected.body).toEqual({
      message: 'The request body has 1 error(s)',
      details: [{ message: 'May not be empty', property: 'messages[0].text' }],
    });
    expect((await multicast(users(1))).status).toBe(503);
    expect((await multicast(users(1))).status).toBe(200);
    expect(sim.stats('ch-a').accepted).toBe(1);
    // A behaviour's default scope is the sending endpoints: the token check was not consumed or refused.
    sim.behave('ch-a', { kind: 'unauthorized' });
    expect((await send('/v2/bot/message/quota', undefined)).status).toBe(200);
    sim.behave('ch-a', { kind: 'unauthorized', endpoints: ['quota'] });
    expect((await send('/v2/bot/message/quota', undefined)).status).toBe(401);
  });

  it('holds a response for N ms after accepting it (a retry meanwhile is a duplicate)', async () => {
    freshChannels();
    sim.behave('ch-a', { kind: 'stall', ms: 400, calls: 1 });
    const key = randomUUID();
    const started = performance.now();
    const slow = multicast(users(1), { retryKey: key });
    const retry = await multicast(users(1), { retryKey: key });
    expect(retry.status).toBe(409);
    const answered = await slow;
    expect(answered.status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(390);
    expect(retry.headers.get('x-line-accepted-request-id')).toBe(answered.headers.get('x-line-request-id'));
  });

  it('holds before accepting when told: nothing is recorded while held', async () => {
    freshChannels();
    sim.behave('ch-a', { kind: 'stall', ms: 300, beforeAccept: true, calls: 1 });
    const held = multicast(users(1));
    await expect.poll(() => sim.stats('ch-a').requestCount).toBe(1);
    expect(sim.stats('ch-a').accepted).toBe(0);
    expect((await held).status).toBe(200);
    expect(sim.stats('ch-a').accepted).toBe(1);
  });

  it('runs beforeRespond after a call is accepted and recorded, before the answer is written', async () => {
    freshChannels();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const seen: unknown[] = [];
    sim.beforeRespond(async (call) => {
      seen.push({ ...call, acceptedSoFar: sim.stats(call.channelId).accepted });
      await gate;
    });
    let answered = false;
    const pending = multicast(users(2)).then((response) => {
      answered = true;
      return response;
    });
    await expect.poll(() => seen.length).toBe(1);
    expect(seen[0]).toMatchObject({
      channelId: 'ch-a',
      endpoint: 'multicast',
      recipients: 2,
      acceptedSoFar: 1,
    });
    expect(answered).toBe(false);
    release();
    expect((await pending).status).toBe(200);
  });

  it('enforces a per-endpoint rate and records the highest rate seen in a one-second window', async () => {
    freshChannels();
    clock = Math.ceil(clock / 1000) * 1000;
    sim.addChannel({ channelId: 'ch-a', tokens: ['token-a'], rateLimits: { multicast: 3 } });
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await multicast(users(1, i))).status);
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    expect((await send('/v2/bot/message/broadcast', { messages: TEXT })).status).toBe(200);
    clock += 1000;
    expect((await multicast(users(1, 9))).status).toBe(200);
    const stats = sim.stats('ch-a');
    expect(stats.maxObservedRate).toEqual({ multicast: 5, broadcast: 1 });
    expect(stats.throttled).toBe(2);
    expect(stats.accepted).toBe(5);
  });
});

describe('LINE simulator: control HTTP API', () => {
  it('registers a channel, sets a behaviour, reports stats and resets over HTTP', async () => {
    freshChannels();
    const control = (path: string, method: string, body?: unknown) =>
      fetch(`${sim.url}/_simulator${path}`, {
        method,
        ...(body === undefined
          ? {}
          : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      });
    expect(
      (await control('/channels', 'POST', { channelId: 'ch-http', tokens: ['token-http'] })).status,
    ).toBe(204);
    expect(
      (await control('/channels/ch-http/behaviours', 'POST', { kind: 'throttle', calls: 1 })).status,
    ).toBe(204);
    expect((await control('/channels/ch-http/behaviours', 'POST', { kind: 'teleport' })).status).toBe(400);
    expect((await multicast(users(1), { token: 'token-http' })).status).toBe(429);
    expect((await multicast(users(1), { token: 'token-http' })).status).toBe(200);
    const stats = (await (await control('/stats', 'GET')).json()) as {
      channels: Record<string, { accepted: number; throttled: number }>;
      violationCount: number;
    };
    expect(stats.channels['ch-http']).toMatchObject({ accepted: 1, throttled: 1 });
    const user = await (await control(`/channels/ch-http/users/${users(1)[0]}`, 'GET')).json();
    expect(user).toEqual({ userId: users(1)[0], timesReceived: 1 });
    const channel = (await (await control('/channels/ch-http/stats', 'GET')).json()) as {
      requests: unknown[];
    };
    expect(channel.requests).toHaveLength(2);
    expect((await control('/reset', 'POST')).status).toBe(204);
    expect(sim.stats('ch-http').accepted).toBe(0);
  });
});

describe('LINE simulator: close', () => {
  it('closes while a response is held forever (the client sees the connection end)', async () => {
    const own = await startLineSimulator({ channels: [{ channelId: 'c', tokens: ['t'] }] });
    own.behave('c', { kind: 'stall' });
    const pending = fetch(`${own.url}/v2/bot/message/multicast`, {
      method: 'POST',
      headers: { authorization: 'Bearer t', 'content-type': 'application/json' },
      body: JSON.stringify({ to: ['U1'], messages: TEXT }),
    });
    await expect.poll(() => own.stats('c').accepted).toBe(1);
    await own.close();
    await expect(pending).rejects.toThrow();
  });
});
