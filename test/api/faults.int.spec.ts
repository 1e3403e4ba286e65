/**
 * Faults: a real fault answers 500 with a problem document that carries the request id and not the
 * fault's message, and is logged at error level with that request id as the correlation id; a database
 * that does not answer is a 503 (retry later), and `/readyz` says so, never a 500. Refusals of the HTTP
 * layer itself (bytes that are not UTF-8, a bad percent-encoding, control characters, oversized
 * headers, a method the path does not declare, prototype-pollution keys) are problem documents with
 * their own `type`, sent over a raw socket where fetch would not send the request.
 */
import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RETRY_AFTER_SECONDS } from '../../src/api/problem.js';
import { waitFor } from '../../src/testing/wait.js';
import {
  type ApiFixture,
  type ApiReply,
  expectProblem,
  lineCampaignBody,
  startTestApi,
} from './support/api.js';

const lines: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk, _encoding, done) {
    for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
    done();
  },
});

let api: ApiFixture;
let key: string;

beforeAll(async () => {
  api = await startTestApi({}, { logger: pino({ level: 'info' }, sink) });
  key = await api.key('org-faults');
});
afterAll(async () => {
  await api?.close();
});

describe('faults', () => {
  it('500: logged with the request id, its message not sent', async () => {
    await api.t.db.query('alter table campaign rename to campaign_gone');
    try {
      const r = await api.request('GET', '/v1/campaigns', { key, headers: { 'x-request-id': 'fault-1' } });
      expectProblem(r, 500);
      expect(r.body.requestId).toBe('fault-1');
      expect(r.body.detail).toContain('fault-1');
      expect(r.text).not.toMatch(/relation|does not exist|campaign_gone/);
      const logged = await waitFor(() =>
        lines.find((l) => l.correlationId === 'fault-1' && l.level === 50 && l.msg === 'request failed'),
      );
      expect((logged.err as { message: string }).message).toMatch(/relation "campaign" does not exist/);
    } finally {
      await api.t.db.query('alter table campaign_gone rename to campaign');
    }
    expect((await api.request('GET', '/v1/campaigns', { key })).status).toBe(200);
  });
});

describe('input PostgreSQL cannot store', () => {
  it('a NUL in a free-text path parameter or body field is a 422 naming the field, and writes nothing', async () => {
    const before = await api.t.db.query<{ n: number }>('select count(*)::int as n from event');
    expectProblem(await api.request('GET', '/v1/subjects/%00', { key }), 422, 'params.subjectId');
    const body = lineCampaignBody({ name: 'bad\u0000name' });
    expectProblem(await api.request('POST', '/v1/campaigns', { key, body }), 422, 'body.name');
    const after = await api.t.db.query<{ n: number }>('select count(*)::int as n from event');
    expect(after.rows[0]!.n).toBe(before.rows[0]!.n);
  });

  it('a lone UTF-16 surrogate in a body field, a key or a path is a 422 naming it, and writes nothing', async () => {
    const before = await api.t.db.query<{ n: number }>('select count(*)::int as n from event');
    // JSON.stringify writes a lone surrogate as the escape `\ud800`, as a client would send it.
    const name = await api.request('POST', '/v1/campaigns', {
      key,
      body: lineCampaignBody({ name: 'x\ud800' }),
    });
    expectProblem(name, 422, 'body.name');
    expect(name.body.detail).toContain('lone UTF-16 surrogate');
    const text = lineCampaignBody({ line: { messages: [{ type: 'text', text: '\udc00 sale' }] } });
    expectProblem(
      await api.request('POST', '/v1/campaigns', { key, body: text }),
      422,
      'body.line.messages[0].text',
    );
    const after = await api.t.db.query<{ n: number }>('select count(*)::int as n from event');
    expect(after.rows[0]!.n).toBe(before.rows[0]!.n);
  });

  it('JSON nested 10,000 levels deep is a 422 naming where it went too deep, not a stack overflow', async () => {
    const depth = 10_000;
    const raw = `{"name":"deep","castType":"broadcast","channel":"line","lineOaId":"oa-1","line":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`;
    const reply = await api.request('POST', '/v1/campaigns', { key, raw, contentType: 'application/json' });
    expectProblem(reply, 422);
    expect(reply.body.detail).toMatch(/^body\.line(\.a)+ is nested deeper than 64 levels$/);
  });

  it('a year-0000 time in a body or a query is a 4xx naming the field, not a 500', async () => {
    const body = lineCampaignBody({ startAt: '0000-01-01T00:00:00Z' });
    const created = await api.request('POST', '/v1/campaigns', { key, body });
    expect(created.status, created.text).toBeGreaterThanOrEqual(400);
    expect(created.status).toBeLessThan(500);
    expect(created.text).toContain('startAt');
    const listed = await api.request('GET', '/v1/campaigns?createdFrom=0000-01-01T00:00:00%2B00:00', { key });
    expectProblem(listed, 400, 'querystring.createdFrom');
    // Offsets JavaScript reads and PostgreSQL refuses (beyond ±15:59) are read as UTC, not a 500 (fuzzer).
    const offset = await api.request('GET', '/v1/campaigns?createdFrom=2026-01-01T00:00:00-23:59', { key });
    expect(offset.status, offset.text).toBe(200);
  });
});

/** One request written as is on a fresh connection; the response as the server wrote it (closes after). */
function rawRequest(url: string, head: string, body: Buffer | string = ''): Promise<ApiReply> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')));
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [top = '', ...rest] = text.split('\r\n\r\n');
      const [statusLine = '', ...lines] = top.split('\r\n');
      const headers = new Headers();
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
      }
      const payload = rest.join('\r\n\r\n');
      let parsed: unknown = null;
      try {
        parsed = JSON.parse(payload);
      } catch {}
      resolve({ status: Number(statusLine.split(' ')[1]), headers, text: payload, body: parsed });
    });
    const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
    socket.write(
      `${head}\r\nHost: localhost\r\nConnection: close\r\n${bytes.length ? `Content-Length: ${bytes.length}\r\n` : ''}\r\n`,
    );
    if (bytes.length) socket.write(bytes);
  });
}

async function eventCount(): Promise<number> {
  return (await api.t.db.query<{ n: number }>('select count(*)::int as n from event')).rows[0]!.n;
}

describe('refusals of the HTTP layer are problem documents with their own type', () => {
  const typed = (reply: ApiReply, status: number, kind: string) => {
    expectProblem(reply, status);
    expect(reply.body.type).toBe(`urn:herald:problem:${kind}`);
  };

  it('bytes that are not UTF-8 in a JSON body: 400 naming the offset, nothing written', async () => {
    const before = await eventCount();
    const body = Buffer.concat([
      Buffer.from('{"channel":"line","name":"sale '),
      Buffer.from([0xff, 0xfe]),
      Buffer.from(
        '","castType":"broadcast","lineOaId":"oa-1","line":{"messages":[{"type":"text","text":"x"}]}}',
      ),
    ]);
    const reply = await api.request('POST', '/v1/campaigns', {
      key,
      raw: new Uint8Array(body),
      contentType: 'application/json',
    });
    typed(reply, 400, 'invalid-utf8');
    expect(reply.body.detail).toBe(
      'body is not valid UTF-8: byte 0xff at offset 31 does not start a valid sequence',
    );
    // UTF-8-encoded surrogates (CESU-8) are no more valid than a lone \ud800 escape.
    const cesu = Buffer.concat([
      Buffer.from('{"reason":"'),
      Buffer.from([0xed, 0xa0, 0x80]),
      Buffer.from('"}'),
    ]);
    typed(
      await api.request('POST', `/v1/campaigns/${crypto.randomUUID()}/cancel`, {
        key,
        raw: new Uint8Array(cesu),
        contentType: 'application/json; charset=utf-8',
      }),
      400,
      'invalid-utf8',
    );
    expect(await eventCount()).toBe(before);
  });

  it('malformed JSON, an empty JSON body and another content type: 400, 400, 415', async () => {
    const malformed = await api.request('POST', '/v1/campaigns', {
      key,
      raw: '{"name":',
      contentType: 'application/json',
    });
    typed(malformed, 400, 'malformed-json');
    expect(malformed.body.detail).toMatch(/^body is not valid JSON: /);
    typed(
      await api.request('POST', '/v1/campaigns', { key, raw: '', contentType: 'application/json' }),
      400,
      'empty-json-body',
    );
    const plain = await api.request('POST', '/v1/campaigns', { key, raw: '{}', contentType: 'text/plain' });
    typed(plain, 415, 'unsupported-media-type');
    expect(plain.body.detail).toContain('text/plain');
  });

  it('__proto__ and constructor.prototype keys: 422 naming the key path, the prototype untouched', async () => {
    const before = await eventCount();
    const proto = await api.request('POST', '/v1/actions', {
      key,
      raw: '{"mode":"normal","actionType":"x","delaySeconds":60,"actionConfig":{"a":{"__proto__":{"polluted":true}}}}',
      contentType: 'application/json',
    });
    expectProblem(proto, 422, 'body.actionConfig.a.__proto__');
    expect(proto.body.detail).toContain('prototype pollution');
    const ctor = await api.request('POST', '/v1/signals', {
      key,
      raw: '{"correlationKey":"k","name":"n","payload":{"constructor":{"prototype":{"polluted":true}}}}',
      contentType: 'application/json',
    });
    expectProblem(ctor, 422, 'body.payload.constructor');
    expect(({} as { polluted?: boolean }).polluted).toBe(undefined);
    expect(await eventCount()).toBe(before);
  });

  it('a bad percent-encoding or a parameter over 512 characters: 400 and 414', async () => {
    typed(await api.request('GET', '/v1/campaigns/%zz', { key }), 400, 'bad-url');
    typed(await api.request('GET', `/v1/campaigns/${'a'.repeat(600)}`, { key }), 414, 'uri-too-long');
  });

  it('a method the path does not declare: 405 with Allow listing those it does; an unknown path 404', async () => {
    const collection = await api.request('DELETE', '/v1/campaigns', { key });
    typed(collection, 405, 'method-not-allowed');
    expect(collection.headers.get('allow')).toBe('GET, HEAD, POST');
    const one = await api.request('PUT', `/v1/campaigns/${crypto.randomUUID()}`, { key });
    expect(one.headers.get('allow')).toBe('DELETE, GET, HEAD, PATCH');
    // A method HTTP knows but Fastify does not route, and without a key: still a 405, not a 404.
    const propfind = await api.request('PROPFIND', '/v1/cron-jobs');
    typed(propfind, 405, 'method-not-allowed');
    expect(propfind.headers.get('allow')).toBe('GET, HEAD, POST');
    typed(await api.request('GET', '/v1/no-such-thing', { key }), 404, 'route-not-found');
  });

  it("what Node's parser refuses (raw requests): control characters, bad header bytes, oversized headers, an unknown method", async () => {
    const control = await rawRequest(
      api.url,
      `GET /v1/campaigns/a\u0001b HTTP/1.1\r\nAuthorization: Bearer ${key}`,
    );
    typed(control, 400, 'malformed-request');
    expect(control.body.detail).toContain('control character');
    expect(control.headers.get('x-request-id')).toBe(control.body.requestId);
    const header = await rawRequest(api.url, 'GET /v1/campaigns HTTP/1.1\r\nX-Thing: a\u0001b');
    typed(header, 400, 'malformed-request');
    const big = await rawRequest(api.url, `GET /v1/campaigns HTTP/1.1\r\nX-Big: ${'a'.repeat(20_000)}`);
    typed(big, 431, 'headers-too-large');
    const method = await rawRequest(api.url, 'FROB /v1/campaigns HTTP/1.1');
    typed(method, 400, 'malformed-request');
    // The server still answers.
    expect((await api.request('GET', '/v1/campaigns', { key })).status).toBe(200);
  });
});

describe('the database away', () => {
  it('503 with Retry-After for requests, 503 naming the database for /readyz', async () => {
    const away = await startTestApi({ DATABASE_URL: 'postgres://herald@127.0.0.1:1/nowhere' });
    try {
      const r = await away.request('GET', '/v1/campaigns', { key: `hk_00000000_${'A'.repeat(43)}` });
      expectProblem(r, 503);
      expect(r.headers.get('retry-after')).toBe(String(RETRY_AFTER_SECONDS));
      expect(r.body.code).toBe('DATABASE_UNAVAILABLE');
      const ready = await away.request('GET', '/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.checks.find((c: { name: string }) => c.name === 'database').ok).toBe(false);
      expect((await away.request('GET', '/healthz')).status).toBe(200);
    } finally {
      await away.close();
    }
  });
});

describe("seed 003's lease-age check on the API port", () => {
  it('/readyz is 503 naming a missing or stale projector lease, and 200 while it is fresh', async () => {
    const strict = await startTestApi({
      HERALD_READY_STARTUP_GRACE_SECONDS: '0',
      HERALD_READY_MAX_LEASE_AGE_SECONDS: '30',
      HERALD_READY_MAX_PROJECTION_LAG_SECONDS: '0',
    });
    const lease = async () => {
      const r = await strict.request('GET', '/readyz');
      return {
        status: r.status,
        check: r.body.checks.find((c: { name: string }) => c.name === 'lease:projector:dispatch_stats'),
      };
    };
    try {
      expect(await lease()).toMatchObject({ status: 503, check: { ok: false } });
      await strict.t.db.query(
        "insert into lease (name, owner, expires_at) values ('projector:dispatch_stats', 'test', now() + interval '30 seconds')",
      );
      expect(await lease()).toMatchObject({ status: 200, check: { ok: true } });
      await strict.t.db.query(
        "update lease set renewed_at = now() - interval '1 minute' where name = 'projector:dispatch_stats'",
      );
      expect(await lease()).toMatchObject({ status: 503, check: { ok: false } });
    } finally {
      await strict.close();
    }
  });
});
