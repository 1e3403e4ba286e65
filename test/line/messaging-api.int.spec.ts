/**
 * The production LINE adapter (the official SDK) against the LINE test server over real HTTP: every
 * outcome kind from what LINE answers (accepted, duplicate with the first request id, throttled with
 * Retry-After, quota, rejected with details, transient for 5xx, timeouts and network errors), never a
 * throw and never the token in a message; and short-lived token issuance with typed errors that do not
 * carry the secret.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { issueChannelToken } from '../../src/adapters/line/channel-token.js';
import {
  type LineMessage,
  type LineMessagingPort,
  type LineOutcome,
  lineMessagingApi,
  outcomeOfResponse,
  retryAfterMs,
} from '../../src/adapters/line/messaging-api.js';
import {
  type LineSimulator,
  startLineSimulator,
} from '../../src/aggregates/campaign/line/simulator/server.js';
import { PermanentError, TransientError } from '../../src/errors.js';

const TOKEN = 'tok-3f9a1c0d7e2b4a6c8d0e1f2a3b4c5d6e';
const SECRET = 'secret-91b2c3d4e5f60718';
const MESSAGES: LineMessage[] = [{ type: 'text', text: 'Hello from Herald' }];
const users = (n: number, from = 0) =>
  Array.from({ length: n }, (_, i) => `U${String(from + i).padStart(32, '0')}`);

let clock = Date.UTC(2026, 0, 1);
let sim: LineSimulator;
let line: LineMessagingPort;

/** Every outcome is checked for the token on its way out. */
function clean(outcome: LineOutcome): LineOutcome {
  expect(JSON.stringify(outcome)).not.toContain(TOKEN);
  return outcome;
}
const multicast = async (to: string[], retryKey = randomUUID(), token = TOKEN) =>
  clean(await line.multicast({ token, retryKey, messages: MESSAGES, to }));

beforeAll(async () => {
  sim = await startLineSimulator({ now: () => clock });
  line = lineMessagingApi({ baseUrl: sim.url, timeoutMs: 2_000 });
});
afterAll(async () => {
  await sim.close();
});
beforeEach(() => {
  sim.reset();
  sim.addChannel({
    channelId: 'ch',
    tokens: [TOKEN],
    clientId: 'client-1',
    clientSecret: SECRET,
    friends: users(4, 50),
    audiences: { '777': users(3, 80) },
  });
  clock += 2 * 24 * 60 * 60 * 1000;
});

describe('lineMessagingApi against the LINE test server', () => {
  it('multicast: accepted with the request id LINE gave', async () => {
    const outcome = await multicast(users(3));
    const [record] = sim.stats('ch').requests;
    expect(outcome).toEqual({ kind: 'accepted', requestId: record!.requestId });
    expect(record).toMatchObject({ endpoint: 'multicast', status: 200, recipients: 3 });
    expect(sim.violationCount).toBe(0);
  });

  it('broadcast and narrowcast: accepted, counted for the friends and the audience', async () => {
    const broadcast = clean(
      await line.broadcast({ token: TOKEN, retryKey: randomUUID(), messages: MESSAGES }),
    );
    const narrowcast = clean(
      await line.narrowcast({
        token: TOKEN,
        retryKey: randomUUID(),
        messages: MESSAGES,
        audienceGroupId: 777,
      }),
    );
    expect(broadcast.kind).toBe('accepted');
    expect(narrowcast.kind).toBe('accepted');
    const stats = sim.stats('ch');
    expect(stats.requests.map((r) => [r.endpoint, r.status])).toEqual([
      ['broadcast', 200],
      ['narrowcast', 202],
    ]);
    expect(stats).toMatchObject({ broadcasts: 1, narrowcastAudiences: [777], recipientsDelivered: 7 });
    expect(sim.violationCount).toBe(0);
  });

  it('a repeated retry key: duplicate with the first request id, recipients counted once', async () => {
    const key = randomUUID();
    const first = await multicast(users(2), key);
    const again = await multicast(users(2), key);
    expect(first.kind).toBe('accepted');
    const firstId = first.kind === 'accepted' ? first.requestId : '';
    expect(again).toEqual({ kind: 'duplicate', requestId: expect.any(String), acceptedRequestId: firstId });
    expect(again.kind === 'duplicate' && again.requestId).not.toBe(firstId);
    expect(sim.usersReceivedMoreThanOnce('ch')).toEqual([]);
  });

  it('429 with Retry-After: throttled with retryAfterMs; the key is not spent', async () => {
    sim.behave('ch', { kind: 'throttle', retryAfterSeconds: 7, calls: 1 });
    const key = randomUUID();
    const outcome = await multicast(users(1), key);
    expect(outcome).toEqual({
      kind: 'throttled',
      requestId: expect.any(String),
      retryAfterMs: 7_000,
      message: 'The API rate limit has been exceeded. Try again later.',
    });
    expect((await multicast(users(1), key)).kind).toBe('accepted');
  });

  it('429 without Retry-After (the channel’s rate): throttled with retryAfterMs null', async () => {
    sim.addChannel({ channelId: 'ch', tokens: [TOKEN], rateLimits: { multicast: 1 } });
    clock = Math.ceil(clock / 1000) * 1000;
    expect((await multicast(users(1))).kind).toBe('accepted');
    expect(await multicast(users(1))).toMatchObject({ kind: 'throttled', retryAfterMs: null });
  });

  it('the monthly limit: quota (not throttled)', async () => {
    sim.behave('ch', { kind: 'quota-exhausted' });
    expect(await multicast(users(1))).toEqual({
      kind: 'quota',
      requestId: expect.any(String),
      message: 'You have reached your monthly limit.',
    });
  });

  it('a body the OpenAPI refuses: rejected 400 with LINE’s details', async () => {
    const outcome = await multicast(users(501));
    expect(outcome).toMatchObject({ kind: 'rejected', status: 400, requestId: expect.any(String) });
    expect(outcome.kind === 'rejected' && outcome.details).toEqual([
      { message: 'must NOT have more than 500 items', property: 'to' },
    ]);
    expect(sim.violationCount).toBe(1);
  });

  it('a 400 LINE answers with details (told): rejected with them', async () => {
    sim.behave('ch', {
      kind: 'reject',
      calls: 1,
      message: 'The request body has 1 error(s)',
      details: [{ message: 'May not be empty', property: 'messages[0].text' }],
    });
    expect(await multicast(users(1))).toEqual({
      kind: 'rejected',
      status: 400,
      requestId: expect.any(String),
      message: 'The request body has 1 error(s)',
      details: [{ message: 'May not be empty', property: 'messages[0].text' }],
    });
  });

  it('an unknown token: rejected 401, and the token is in no message', async () => {
    const outcome = await multicast(users(1), randomUUID(), `${TOKEN}-revoked`);
    expect(outcome).toMatchObject({ kind: 'rejected', status: 401 });
    expect(JSON.stringify(outcome)).not.toContain(`${TOKEN}-revoked`);
    expect(outcome.kind === 'rejected' && outcome.message).toMatch(/^Authentication failed/);
  });

  it('checkToken: accepted for a valid token, rejected 401 for an invalid one', async () => {
    expect(clean(await line.checkToken(TOKEN))).toEqual({ kind: 'accepted', requestId: expect.any(String) });
    expect(clean(await line.checkToken('not-a-token'))).toMatchObject({ kind: 'rejected', status: 401 });
    expect(sim.stats('ch').requests.map((r) => r.endpoint)).toEqual(['quota']);
  });

  it('5xx: transient with the status; the same key is accepted afterwards', async () => {
    sim.behave('ch', { kind: 'server-error', status: 503, calls: 1, message: 'Service Unavailable' });
    const key = randomUUID();
    expect(await multicast(users(1), key)).toEqual({
      kind: 'transient',
      status: 503,
      requestId: expect.any(String),
      message: 'Service Unavailable',
    });
    expect((await multicast(users(1), key)).kind).toBe('accepted');
  });

  it('no answer within the timeout: transient; LINE had accepted, so the retry is a duplicate', async () => {
    const quick = lineMessagingApi({ baseUrl: sim.url, timeoutMs: 150 });
    sim.behave('ch', { kind: 'stall', ms: 3_000, calls: 1 });
    const key = randomUUID();
    const started = performance.now();
    const outcome = clean(
      await quick.multicast({ token: TOKEN, retryKey: key, messages: MESSAGES, to: users(2) }),
    );
    expect(outcome).toEqual({
      kind: 'transient',
      status: null,
      requestId: null,
      message: 'no answer within 150 ms',
    });
    expect(performance.now() - started).toBeLessThan(2_500);
    const retry = clean(
      await quick.multicast({ token: TOKEN, retryKey: key, messages: MESSAGES, to: users(2) }),
    );
    expect(retry).toMatchObject({
      kind: 'duplicate',
      acceptedRequestId: sim.stats('ch').requests[0]!.requestId,
    });
    expect(sim.usersReceivedMoreThanOnce('ch')).toEqual([]);
  });

  it('nobody listening: transient (a network error), never a throw', async () => {
    const closed = await startLineSimulator();
    const url = closed.url;
    await closed.close();
    const outcome = clean(
      await lineMessagingApi({ baseUrl: url }).multicast({
        token: TOKEN,
        retryKey: randomUUID(),
        messages: MESSAGES,
        to: users(1),
      }),
    );
    expect(outcome).toMatchObject({ kind: 'transient', status: null, requestId: null });
    expect(outcome.kind === 'transient' && outcome.message).toMatch(/^network error: /);
  });
});

describe('LINE outcomes from raw answers', () => {
  const headers = (entries: Record<string, string>) => new Headers(entries);

  it('a 409 without x-line-accepted-request-id is rejected, not a duplicate', () => {
    const outcome = outcomeOfResponse(409, headers({ 'x-line-request-id': 'r1' }), '{"message":"Conflict"}');
    expect(outcome).toEqual({
      kind: 'rejected',
      status: 409,
      requestId: 'r1',
      message: 'Conflict',
      details: [],
    });
  });

  it('a 408 is transient; a 403 is rejected; a body that is not JSON still gives a message', () => {
    expect(outcomeOfResponse(408, headers({}), '')).toMatchObject({ kind: 'transient', status: 408 });
    expect(outcomeOfResponse(403, headers({}), '<html>forbidden</html>')).toMatchObject({
      kind: 'rejected',
      status: 403,
      message: 'HTTP 403: <html>forbidden</html>',
    });
  });

  it('the token is redacted from a message that echoes it', () => {
    const outcome = outcomeOfResponse(
      400,
      headers({}),
      JSON.stringify({ message: `bad token ${TOKEN}` }),
      TOKEN,
    );
    expect(outcome).toMatchObject({ kind: 'rejected', message: 'bad token [redacted]' });
  });

  it('Retry-After: seconds or an HTTP date; absent or unreadable is null', () => {
    const now = Date.UTC(2026, 0, 1, 0, 0, 0);
    expect(retryAfterMs('3', now)).toBe(3_000);
    expect(retryAfterMs(new Date(now + 5_000).toUTCString(), now)).toBe(5_000);
    expect(retryAfterMs(null, now)).toBeNull();
    expect(retryAfterMs('soon', now)).toBeNull();
  });
});

describe('issueChannelToken', () => {
  it('issues a short-lived token that authenticates the adapter', async () => {
    const before = Date.now();
    const issued = await issueChannelToken({ baseUrl: sim.url, clientId: 'client-1', clientSecret: SECRET });
    expect(issued.accessToken).toEqual(expect.any(String));
    expect(issued.expiresAt.getTime()).toBeGreaterThanOrEqual(before + 2_592_000_000);
    const outcome = await line.multicast({
      token: issued.accessToken,
      retryKey: randomUUID(),
      messages: MESSAGES,
      to: users(1),
    });
    expect(outcome.kind).toBe('accepted');
    expect(sim.stats('ch').accepted).toBe(1);
    expect(sim.violationCount).toBe(0);
  });

  it('a wrong secret is a PermanentError without the secret', async () => {
    const wrong = `${SECRET}-wrong`;
    const error = await issueChannelToken({
      baseUrl: sim.url,
      clientId: 'client-1',
      clientSecret: wrong,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentError);
    expect((error as PermanentError).message).toContain('invalid_client');
    expect(
      JSON.stringify({ m: (error as Error).message, d: (error as PermanentError).details }),
    ).not.toContain(wrong);
  });

  it('a 5xx, no answer in time and nobody listening are TransientErrors without the secret', async () => {
    let answer: 'error' | 'hang' = 'error';
    const server: Server = createServer((request, response) => {
      request.resume();
      if (answer === 'error') response.writeHead(503, { 'content-type': 'text/plain' }).end(`down ${SECRET}`);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const failed = await issueChannelToken({ baseUrl, clientId: 'c', clientSecret: SECRET }).catch(
        (e) => e,
      );
      expect(failed).toBeInstanceOf(TransientError);
      expect(failed.details).toMatchObject({ status: 503 });
      expect(failed.message).not.toContain(SECRET);
      answer = 'hang';
      const late = await issueChannelToken({
        baseUrl,
        clientId: 'c',
        clientSecret: SECRET,
        timeoutMs: 100,
      }).catch((e) => e);
      expect(late).toBeInstanceOf(TransientError);
      expect(late.message).toMatch(/no answer within 100 ms/);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    const unreachable = await issueChannelToken({ baseUrl, clientId: 'c', clientSecret: SECRET }).catch(
      (e) => e,
    );
    expect(unreachable).toBeInstanceOf(TransientError);
    expect(unreachable).not.toBeInstanceOf(PermanentError);
    expect(unreachable.message).not.toContain(SECRET);
  });
});
