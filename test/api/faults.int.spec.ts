/**
 * Faults: a real fault answers 500 with a problem document that carries the request id and not the
 * fault's message, and is logged at error level with that request id as the correlation id; a database
 * that does not answer is a 503 (retry later), and `/readyz` says so, never a 500.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RETRY_AFTER_SECONDS } from '../../src/api/problem.js';
import { waitFor } from '../../src/testing/wait.js';
import { type ApiFixture, expectProblem, lineCampaignBody, startTestApi } from './support/api.js';

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
