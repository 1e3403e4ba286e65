/**
 * The client's transport and stream reader on their own, with a scripted `fetch` (what a real server
 * does in these cases is covered by client.int.spec.ts; here are the cases a real Herald does not make
 * on demand): Retry-After as an HTTP date, a 409 for a key still in use, network errors retried only for requests safe to send twice
 * (with the same Idempotency-Key), a wait longer than allowed handed to the caller, the credential asked
 * per attempt, and a stream split mid-line, dropped and reconnected.
 */
import { describe, expect, it } from 'vitest';
import { createHeraldClient, HeraldUnavailableError, retryAfterMs } from '../../src/client/index.js';
import { liveStream, type StreamTransport } from '../../src/client/stream.js';

const NOW = Date.parse('2026-06-01T12:00:00Z');

/** A fetch that answers from a script, recording what it was sent. */
function scripted(answers: (() => Response)[]) {
  const sent: { method: string; url: string; key: string | null; auth: string | null; body: string }[] = [];
  const fetch = async (request: Request) => {
    sent.push({
      method: request.method,
      url: request.url,
      key: request.headers.get('idempotency-key'),
      auth: request.headers.get('authorization'),
      body: await request.text(),
    });
    const next = answers.shift();
    if (!next) throw new Error('no more answers');
    return next();
  };
  return { sent, fetch };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': status < 400 ? 'application/json' : 'application/problem+json', ...headers },
  });
const unavailable = (retryAfter?: string) =>
  json(
    503,
    { type: 'urn:herald:problem:database-unavailable', title: 'Service Unavailable', status: 503 },
    retryAfter ? { 'retry-after': retryAfter } : {},
  );
const networkError = () => {
  throw new TypeError('fetch failed');
};

function client(fetch: (r: Request) => Promise<Response>, waits: number[], credential: () => string) {
  return createHeraldClient({
    baseUrl: 'http://herald.test/',
    credential,
    fetch,
    retries: { sleep: async (ms) => void waits.push(ms), now: () => NOW },
    idempotencyKey: () => 'k-1',
  });
}

describe('Retry-After', () => {
  it('reads delay-seconds and HTTP dates; ignores what it cannot read', () => {
    expect(retryAfterMs('2', NOW)).toBe(2_000);
    expect(retryAfterMs('Mon, 01 Jun 2026 12:00:07 GMT', NOW)).toBe(7_000);
    expect(retryAfterMs('Mon, 01 Jun 2026 11:00:00 GMT', NOW)).toBe(0);
    expect(retryAfterMs('soon', NOW)).toBeUndefined();
    expect(retryAfterMs(null, NOW)).toBeUndefined();
  });
});

describe('the retrying transport', () => {
  it('retries a 503 after its HTTP-date Retry-After and a network error, re-sending the same key and body', async () => {
    const { sent, fetch } = scripted([
      () => unavailable('Mon, 01 Jun 2026 12:00:03 GMT'),
      networkError,
      () => json(201, { actionId: 'a-1' }),
    ]);
    const waits: number[] = [];
    let asked = 0;
    const herald = client(fetch, waits, () => `token-${++asked}`);
    const created = await herald.POST('/v1/actions', {
      body: { mode: 'normal', actionType: 'send_message', actionConfig: {}, delaySeconds: 60 },
    });
    expect(created).toEqual({ actionId: 'a-1' });
    expect(waits).toEqual([3_000, 1_000]);
    expect(sent.map((s) => s.key)).toEqual(['k-1', 'k-1', 'k-1']);
    expect(new Set(sent.map((s) => s.body)).size).toBe(1);
    expect(sent.map((s) => s.auth)).toEqual(['Bearer token-1', 'Bearer token-2', 'Bearer token-3']);
    expect(sent[0]!.url).toBe('http://herald.test/v1/actions');
  });

  it('retries a 409 for an Idempotency-Key still in use after its Retry-After, but not another 409', async () => {
    const inUse = () =>
      json(
        409,
        { type: 'urn:herald:problem:idempotency-key-in-use', title: 'Conflict', status: 409 },
        { 'retry-after': '2' },
      );
    const { sent, fetch } = scripted([inUse, () => json(201, { actionId: 'a-1' })]);
    const waits: number[] = [];
    const herald = client(fetch, waits, () => 'k');
    const body = { mode: 'normal', actionType: 'send_message', actionConfig: {}, delaySeconds: 60 } as const;
    expect(await herald.POST('/v1/actions', { body })).toEqual({ actionId: 'a-1' });
    expect(waits).toEqual([2_000]);
    expect(sent.map((s) => s.key)).toEqual(['k-1', 'k-1']);

    const reused = scripted([
      () => json(409, { type: 'urn:herald:problem:idempotency-key-reused', title: 'Conflict', status: 409 }),
    ]);
    await expect(client(reused.fetch, [], () => 'k').POST('/v1/actions', { body })).rejects.toMatchObject({
      status: 409,
    });
    expect(reused.sent).toHaveLength(1);
  });

  it('does not resend a command without an Idempotency-Key after a network error', async () => {
    const { sent, fetch } = scripted([networkError, () => json(200, {})]);
    const waits: number[] = [];
    const herald = client(fetch, waits, () => 'k');
    // POST /v1/campaigns/preview takes no Idempotency-Key: it might have reached the server.
    await expect(herald.POST('/v1/campaigns/preview', { body: {} as never })).rejects.toThrow('fetch failed');
    expect(sent).toHaveLength(1);
    expect(sent[0]!.key).toBeNull();
    expect(waits).toEqual([]);
  });

  it('hands the caller a wait longer than allowed, and stops after maxAttempts', async () => {
    const long = scripted([() => unavailable('120')]);
    const waits: number[] = [];
    const error = await client(long.fetch, waits, () => 'k')
      .GET('/v1/overview')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HeraldUnavailableError);
    expect(error).toMatchObject({ status: 503, retryAfterMs: 120_000 });
    expect(waits).toEqual([]);

    const always = scripted(
      [unavailable, unavailable, unavailable, unavailable, unavailable].map((f) => () => f()),
    );
    await expect(client(always.fetch, waits, () => 'k').GET('/v1/overview')).rejects.toBeInstanceOf(
      HeraldUnavailableError,
    );
    expect(always.sent).toHaveLength(4);
    // No Retry-After: 500 ms, doubling.
    expect(waits).toEqual([500, 1_000, 2_000]);
  });
});

describe('the stream reader', () => {
  it('parses frames split anywhere, follows retry:, reconnects with Last-Event-ID and says what it missed', async () => {
    const encoder = new TextEncoder();
    const body = (chunks: string[], end: 'close' | 'error') =>
      new ReadableStream<Uint8Array>({
        // One chunk per read, then the end (an error is a dropped connection).
        pull(controller) {
          const chunk = chunks.shift();
          if (chunk !== undefined) controller.enqueue(encoder.encode(chunk));
          else if (end === 'close') controller.close();
          else controller.error(new TypeError('terminated'));
        },
      });
    const opened: (string | undefined)[] = [];
    const waits: number[] = [];
    const bodies = [
      body(
        [
          'retry: 1500\n: connected\n\nevent: camp',
          'aigns\r\nid: 7\r\ndata: {"at":"2026-06-01T12:00:00.000Z"}\r\n\r\n',
        ],
        'error',
      ),
      body([': connected\n\nevent: cron\ndata: {"at":"2026-06-01T12:00:02.000Z"}\n\n'], 'close'),
    ];
    const transport: StreamTransport = {
      open: async (_topics, lastEventId) => {
        opened.push(lastEventId);
        const next = bodies.shift();
        if (!next) throw new Error('no more connections');
        return new Response(next, { headers: { 'content-type': 'text/event-stream' } });
      },
      sleep: async (ms) => void waits.push(ms),
      now: () => NOW,
    };
    const seen = [];
    for await (const event of liveStream(transport, { topics: ['campaigns', 'cron'] })) {
      seen.push(event);
      if (seen.length === 4) break;
    }
    expect(seen).toEqual([
      { topic: 'campaigns', at: '2026-06-01T12:00:00.000Z', reconnected: false, id: '7' },
      { topic: 'campaigns', at: '2026-06-01T12:00:00.000Z', reconnected: true },
      { topic: 'cron', at: '2026-06-01T12:00:00.000Z', reconnected: true },
      { topic: 'cron', at: '2026-06-01T12:00:02.000Z', reconnected: false },
    ]);
    expect(opened).toEqual([undefined, '7']);
    expect(waits).toEqual([1_500]);
  });
});
