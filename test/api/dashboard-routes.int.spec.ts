/**
 * The dashboard's routes over real HTTP on a real database (and, for the timeline, the real relay and
 * worker on RabbitMQ): the overview's shape and figures, campaign search / filters / cursor, recipient
 * search by phone number within an organization and never across, the campaign timeline's causal chain
 * (command → event with its actor → outbox message → broker confirm → consumer inbox record), signals
 * by correlation key, the actions list's wait filters, and bulk outbox requeue / skip answered per id.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { buildApiServer } from '../../src/api/server.js';
import { waitFor } from '../../src/testing/wait.js';
import { startRoles, testLogger } from '../support/roles.js';
import { inlineRequest } from '../support/sms.js';
import { type ApiFixture, dbTime, expectProblem, lineCampaignBody, startTestApi } from './support/api.js';

let api: ApiFixture;
let key: string;
let viewer: string;
let otherKey: string;

beforeAll(async () => {
  api = await startTestApi();
  key = await api.key('org-d', 'operator');
  viewer = await api.key('org-d', 'viewer');
  otherKey = await api.key('org-e', 'operator');
  await api.lineChannel('org-e', 'oa-e');
  const ledger = new PostgresLedger(api.t.db);
  await ledger.credit({ organizationId: 'org-d', key: 'top-up', amount: '1000' });
  await ledger.credit({ organizationId: 'org-e', key: 'top-up', amount: '1000' });
}, 60_000);
afterAll(async () => api?.close());

async function sendNow(k: string, name: string): Promise<{ campaignId: string; outboxId: number }> {
  const lineOaId = k === otherKey ? 'oa-e' : 'oa-1';
  const c = await api.request('POST', '/v1/campaigns', {
    key: k,
    body: lineCampaignBody({ name, lineOaId }),
  });
  expect(c.status, c.text).toBe(201);
  const sent = await api.request('POST', `/v1/campaigns/${c.body.campaignId}/send-now`, { key: k });
  expect(sent.body.status).toBe('DISPATCHING');
  const { rows } = await api.t.db.query<{ id: number }>(
    `select o.id from outbox o join event e on e.position = o.event_position
      where e.stream_type = 'campaign' and e.stream_id = $1`,
    [c.body.campaignId],
  );
  return { campaignId: c.body.campaignId, outboxId: rows[0]!.id };
}

const makeDead = (ids: number[]) =>
  api.t.db.query(
    `update outbox set status = 'dead', dead_at = now(), attempts = 5, last_error = 'test: unroutable'
      where id = any($1::bigint[])`,
    [ids],
  );

describe('GET /v1/overview', () => {
  it('answers bounded figures of the organization: outbox per destination, dead rows, series, health', async () => {
    const pending = await sendNow(key, 'overview pending');
    const dead = await sendNow(key, 'overview dead');
    await makeDead([dead.outboxId]);
    await sendNow(otherKey, 'other org');
    const reply = await api.request('GET', '/v1/overview', { key: viewer });
    expect(reply.status, reply.text).toBe(200);
    const o = reply.body;
    expect(Date.parse(o.at)).toBeGreaterThan(0);
    expect(o.outbox.pending).toEqual([
      expect.objectContaining({ sink: 'amqp', destination: 'line_broadcast_rich_message', rows: 1 }),
    ]);
    expect(o.outbox.pending[0].oldestAgeSeconds).toBeGreaterThanOrEqual(0);
    expect(o.outbox.dead).toEqual([
      expect.objectContaining({ destination: 'line_broadcast_rich_message', rows: 1 }),
    ]);
    expect(o.outbox).toMatchObject({ pendingCapped: false, deadCapped: false, parkedKeys: 0 });
    expect(Array.isArray(o.dispatch)).toBe(true);
    expect(Array.isArray(o.latency)).toBe(true);
    expect(o.deadLetters).toMatchObject({ capped: false });
    expect(Array.isArray(o.leases)).toBe(true);
    expect(o.projections.map((p: { name: string }) => p.name)).toEqual(
      expect.arrayContaining(['dispatch_stats']),
    );
    // Another organization sees only its own row.
    const other = await api.request('GET', '/v1/overview', { key: otherKey });
    expect(other.body.outbox.pending).toEqual([expect.objectContaining({ rows: 1 })]);
    expect(other.body.outbox.dead).toEqual([]);
    expect(pending.outboxId).toBeGreaterThan(0);
    await api.t.db.query(
      "update outbox set status = 'sent', sent_at = now() where organization_id = 'org-d'",
    );
  });
});

describe('the overview cache', () => {
  it('is shared for a moment, and dropped as soon as the process hears of a change', async () => {
    // Two requests in a row share one computation (retried while earlier tests' trailing NOTIFYs land).
    const first = await waitFor(
      async () => {
        const one = await api.request('GET', '/v1/overview', { key });
        const two = await api.request('GET', '/v1/overview', { key });
        return one.body.at === two.body.at ? one : null;
      },
      { timeoutMs: 10_000, what: 'two overviews from one computation' },
    );
    // What the LISTEN connection delivers (test/api/stream.int.spec.ts: a commit's NOTIFY reaches the hub).
    api.server.app.heraldStream.notify('outbox', ['org-d']);
    const fresh = await api.request('GET', '/v1/overview', { key });
    expect(fresh.body.at).not.toBe(first.body.at);
  });
});

describe('GET /v1/campaigns search and filters', () => {
  it('finds by id or name prefix (case-insensitive, wildcards literal), filters by channel, status and time, pages by cursor', async () => {
    const org = await api.key('org-search', 'operator');
    const ids: string[] = [];
    for (const name of ['Spring sale 1', 'spring sale 2', 'Summer sale', 'spr%ng', 'Spring sale 3']) {
      const c = await api.request('POST', '/v1/campaigns', { key: org, body: lineCampaignBody({ name }) });
      ids.push(c.body.campaignId);
    }
    const names = (r: { body: { items: { name: string }[] } }) => r.body.items.map((c) => c.name);
    const spring = await api.request('GET', '/v1/campaigns?q=SPRING', { key: org });
    expect(names(spring)).toEqual(['Spring sale 3', 'spring sale 2', 'Spring sale 1']);
    expect(names(await api.request('GET', '/v1/campaigns?q=spr%25', { key: org }))).toEqual(['spr%ng']);
    expect(names(await api.request('GET', `/v1/campaigns?q=${ids[2]}`, { key: org }))).toEqual([
      'Summer sale',
    ]);
    expect(names(await api.request('GET', `/v1/campaigns?q=${ids[2]!.toUpperCase()}`, { key: org }))).toEqual(
      ['Summer sale'],
    );
    // Another organization's id is not found by search.
    expect(names(await api.request('GET', `/v1/campaigns?q=${ids[2]}`, { key: otherKey }))).toEqual([]);
    // Cursor pagination with the search.
    const first = await api.request('GET', '/v1/campaigns?q=spring&limit=2', { key: org });
    expect(names(first)).toEqual(['Spring sale 3', 'spring sale 2']);
    const second = await api.request(
      'GET',
      `/v1/campaigns?q=spring&limit=2&cursor=${first.body.nextCursor}`,
      {
        key: org,
      },
    );
    expect(names(second)).toEqual(['Spring sale 1']);
    expect(second.body.nextCursor).toBeNull();
    // Filters: channel, status, creation time.
    expect(names(await api.request('GET', '/v1/campaigns?channel=sms', { key: org }))).toEqual([]);
    expect(
      (await api.request('GET', '/v1/campaigns?channel=line&status=DRAFT', { key: org })).body.items,
    ).toHaveLength(5);
    const future = await dbTime(api.t, 3600);
    expect(
      names(
        await api.request('GET', `/v1/campaigns?createdFrom=${encodeURIComponent(future)}`, { key: org }),
      ),
    ).toEqual([]);
    expect(
      (await api.request('GET', `/v1/campaigns?createdTo=${encodeURIComponent(future)}&q=s`, { key: org }))
        .body.items,
    ).toHaveLength(5);
    expectProblem(
      await api.request('GET', '/v1/campaigns?createdFrom=yesterday', { key: org }),
      400,
      'querystring.createdFrom',
    );
  });
});

describe('GET /v1/recipients', () => {
  it("finds a phone number's recipients across the organization's campaigns, in any spelling, never another organization's", async () => {
    const sms = (name: string, k: string) =>
      api.request('POST', '/v1/campaigns', { key: k, body: { channel: 'sms', ...inlineRequest({ name }) } });
    const one = await sms('sms one', key);
    const two = await sms('sms two', key);
    const theirs = await sms('their sms', otherKey);
    for (const r of [one, two, theirs]) expect(r.status, r.text).toBe(201);
    for (const spelling of ['01712345678', '+8801712345678', '8801712345678', '+880 1712-345678']) {
      const found = await api.request('GET', `/v1/recipients?msisdn=${encodeURIComponent(spelling)}`, {
        key,
      });
      expect(found.status, found.text).toBe(200);
      expect(found.body.items.map((r: { campaignId: string }) => r.campaignId)).toEqual([
        two.body.campaignId,
        one.body.campaignId,
      ]);
    }
    const page1 = await api.request('GET', '/v1/recipients?msisdn=01712345678&limit=1', { key });
    expect(page1.body.items[0]).toMatchObject({
      campaignId: two.body.campaignId,
      campaignName: 'sms two',
      msisdn: '8801712345678',
      status: 'PENDING',
    });
    const page2 = await api.request(
      'GET',
      `/v1/recipients?msisdn=01712345678&limit=1&cursor=${page1.body.nextCursor}`,
      { key },
    );
    expect(page2.body.items.map((r: { campaignId: string }) => r.campaignId)).toEqual([one.body.campaignId]);
    const theirsFound = await api.request('GET', '/v1/recipients?msisdn=01712345678', { key: otherKey });
    expect(theirsFound.body.items.map((r: { campaignId: string }) => r.campaignId)).toEqual([
      theirs.body.campaignId,
    ]);
    expectProblem(await api.request('GET', '/v1/recipients?msisdn=hello-world', { key }), 422, 'msisdn');
    expectProblem(await api.request('GET', '/v1/recipients', { key }), 400, 'querystring.msisdn');
  });
});

describe('GET /v1/campaigns/{id}/timeline', () => {
  it('shows the causal chain: command (actor) → event → outbox message → broker confirm → consumer record', async () => {
    const roles = startRoles(api.runtime.config, { relay: true, worker: true });
    try {
      const { campaignId } = await sendNow(key, 'timeline');
      const { rows } = await api.t.db.query<{ id: string }>(
        "select id::text from api_key where organization_id = 'org-d' and role = 'operator' order by created_at limit 1",
      );
      const timeline = await waitFor(
        async () => {
          const r = await api.request('GET', `/v1/campaigns/${campaignId}/timeline`, { key: viewer });
          const claimed = r.body?.events?.find((e: { type: string }) => e.type === 'CampaignClaimed');
          const message = claimed?.messages?.[0];
          return message?.receipts?.some((x: { outcome: string }) => x.outcome === 'sent') &&
            message.inbox.length > 0
            ? r
            : null;
        },
        { timeoutMs: 30_000, what: 'the message to be confirmed and consumed' },
      );
      const events = timeline.body.events;
      const types = events.map((e: { type: string }) => e.type);
      expect(types[0]).toBe('CampaignCreated');
      const claimed = events.find((e: { type: string }) => e.type === 'CampaignClaimed');
      // The commands' actor is the key; the consumer's outcome is the worker's.
      for (const event of [events[0], claimed]) expect(event.actor).toBe(`api-key:${rows[0]!.id}`);
      // Each request is its own command: its request id is the correlation of its events.
      expect(claimed.correlationId).toEqual(expect.any(String));
      expect(claimed.correlationId).not.toBe(events[0].correlationId);
      const message = claimed.messages[0];
      expect(message).toMatchObject({ sink: 'amqp', destination: 'line_broadcast_rich_message' });
      expect(message.outbox).toMatchObject({ status: 'sent' });
      expect(message.inbox[0]).toMatchObject({ consumer: expect.any(String), status: expect.any(String) });
      expect(timeline.body).toMatchObject({ campaignId, truncated: false });
      const limited = await api.request('GET', `/v1/campaigns/${campaignId}/timeline?limit=1`, { key });
      expect(limited.body.events).toHaveLength(1);
      expect(limited.body.truncated).toBe(true);
      expectProblem(await api.request('GET', `/v1/campaigns/${campaignId}/timeline`, { key: otherKey }), 404);
    } finally {
      await roles.stop();
    }
  });
});

describe('signals and action filters', () => {
  it('looks signals up by correlation key; lists the waiting actions of a key', async () => {
    const wait = await api.request('POST', '/v1/actions', {
      key,
      body: {
        mode: 'waitForSignal',
        actionType: 'noop',
        actionConfig: {},
        delaySeconds: 3600,
        expiresSeconds: 7200,
        wait: { names: ['clicked'], correlationKey: 'order-7' },
      },
    });
    expect(wait.status, wait.text).toBe(201);
    await api.request('POST', '/v1/actions', {
      key,
      body: { mode: 'normal', actionType: 'noop', actionConfig: {}, delaySeconds: 3600 },
    });
    const waiting = await api.request(
      'GET',
      '/v1/actions?status=pending&mode=waitForSignal&correlationKey=order-7',
      {
        key,
      },
    );
    expect(waiting.body.items.map((a: { actionId: string }) => a.actionId)).toEqual([wait.body.actionId]);
    expect(
      (await api.request('GET', '/v1/actions?mode=normal', { key })).body.items.every(
        (a: { mode: string }) => a.mode === 'normal',
      ),
    ).toBe(true);
    await api.request('POST', '/v1/signals', { key, body: { correlationKey: 'order-7', name: 'opened' } });
    await api.request('POST', '/v1/signals', { key, body: { correlationKey: 'order-7', name: 'clicked' } });
    await api.request('POST', '/v1/signals', {
      key: otherKey,
      body: { correlationKey: 'order-7', name: 'clicked' },
    });
    const signals = await api.request('GET', '/v1/signals?correlationKey=order-7', { key });
    expect(signals.status, signals.text).toBe(200);
    expect(signals.body.items.map((s: { name: string }) => s.name)).toEqual(['clicked', 'opened']);
    expect(signals.body.items[0].unlocked).toEqual([wait.body.actionId]);
    const byName = await api.request('GET', '/v1/signals?correlationKey=order-7&name=opened&limit=1', {
      key,
    });
    expect(byName.body.items).toHaveLength(1);
    expect(byName.body.nextCursor).toBeNull();
    const paged = await api.request('GET', '/v1/signals?correlationKey=order-7&limit=1', { key });
    const rest = await api.request(
      'GET',
      `/v1/signals?correlationKey=order-7&limit=1&cursor=${paged.body.nextCursor}`,
      {
        key,
      },
    );
    expect(rest.body.items.map((s: { name: string }) => s.name)).toEqual(['opened']);
    expectProblem(await api.request('GET', '/v1/signals', { key }), 400, 'querystring.correlationKey');
  });
});

describe('bulk outbox requeue and skip', () => {
  it('requeues the dead rows of a selection and answers each id: requeued, not-dead, not-found', async () => {
    const a = await sendNow(key, 'bulk a');
    const b = await sendNow(key, 'bulk b');
    const pending = await sendNow(key, 'bulk pending');
    const theirs = await sendNow(otherKey, 'bulk theirs');
    await makeDead([a.outboxId, b.outboxId, theirs.outboxId]);
    const reply = await api.request('POST', '/v1/outbox/requeue', {
      key,
      body: { ids: [a.outboxId, b.outboxId, pending.outboxId, theirs.outboxId, 999_999_999] },
    });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body.results).toEqual([
      { id: a.outboxId, outcome: 'requeued', status: 'dead' },
      { id: b.outboxId, outcome: 'requeued', status: 'dead' },
      { id: pending.outboxId, outcome: 'not-dead', status: 'pending' },
      { id: theirs.outboxId, outcome: 'not-found', status: null },
      { id: 999_999_999, outcome: 'not-found', status: null },
    ]);
    const { rows } = await api.t.db.query<{ id: number; status: string; attempts: number }>(
      'select id, status, attempts from outbox where id = any($1::bigint[]) order by id',
      [[a.outboxId, b.outboxId, theirs.outboxId]],
    );
    expect(rows.map((r) => r.status)).toEqual(['pending', 'pending', 'dead']);
    // A viewer cannot; more than 500 ids is a 400 naming the field.
    expectProblem(
      await api.request('POST', '/v1/outbox/requeue', { key: viewer, body: { ids: [a.outboxId] } }),
      403,
    );
    expectProblem(
      await api.request('POST', '/v1/outbox/requeue', {
        key,
        body: { ids: Array.from({ length: 501 }, (_, i) => i + 1) },
      }),
      400,
      'ids',
    );
  });

  it('skips the dead rows of a selection with a reason, each guarded: a second skip is not-dead', async () => {
    const a = await sendNow(key, 'skip a');
    const b = await sendNow(key, 'skip b');
    await makeDead([a.outboxId, b.outboxId]);
    const reply = await api.request('POST', '/v1/outbox/skip', {
      key,
      body: { ids: [a.outboxId, b.outboxId], reason: 'customer asked to drop it' },
    });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body.results.map((r: { outcome: string }) => r.outcome)).toEqual(['skipped', 'skipped']);
    const again = await api.request('POST', '/v1/outbox/skip', {
      key,
      body: { ids: [a.outboxId], reason: 'again' },
    });
    expect(again.body.results).toEqual([{ id: a.outboxId, outcome: 'not-dead', status: 'skipped' }]);
    const { rows } = await api.t.db.query<{ status: string; last_error: string }>(
      'select status, last_error from outbox where id = $1',
      [a.outboxId],
    );
    expect(rows[0]!.status).toBe('skipped');
    expect(rows[0]!.last_error).toContain('customer asked to drop it');
    expectProblem(
      await api.request('POST', '/v1/outbox/skip', { key, body: { ids: [a.outboxId] } }),
      400,
      'reason',
    );
  });
});

describe('the dashboard assets', () => {
  async function serverWith(uiRoot: string) {
    return buildApiServer({
      db: api.runtime.db,
      wakeups: api.runtime.notifier,
      config: api.runtime.config,
      registry: heraldRegistry,
      logger: testLogger(),
      readiness: async () => ({ ready: true, checks: [] }) as never,
      uiRoot,
    });
  }

  it('serves the build at /ui: hashed assets cached immutable, client routes get index.html, GET / redirects', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'herald-ui-'));
    await mkdir(join(dir, 'assets'));
    await writeFile(join(dir, 'index.html'), '<!doctype html><div id="root"></div>');
    await writeFile(join(dir, 'assets', 'index-abc123.js'), 'console.log(1)');
    const app = await serverWith(dir);
    try {
      const root = await app.inject({ url: '/' });
      expect(root.statusCode).toBe(302);
      expect(root.headers.location).toBe('/ui/');
      expect((await app.inject({ url: '/ui' })).headers.location).toBe('/ui/');
      const shell = await app.inject({ url: '/ui/' });
      expect(shell.statusCode).toBe(200);
      expect(shell.headers['content-type']).toMatch(/^text\/html/);
      expect(shell.body).toContain('id="root"');
      const route = await app.inject({ url: '/ui/campaigns/123' });
      expect(route.statusCode).toBe(200);
      expect(route.body).toContain('id="root"');
      expect(route.headers['cache-control']).toBe('no-cache');
      const asset = await app.inject({ url: '/ui/assets/index-abc123.js' });
      expect(asset.statusCode).toBe(200);
      expect(asset.body).toBe('console.log(1)');
      expect(asset.headers['cache-control']).toMatch(/max-age=31536000.*immutable/);
      // No escape from the build directory.
      const outside = await app.inject({ url: '/ui/..%2f..%2fpackage.json' });
      expect(outside.body).not.toContain('"name"');
    } finally {
      await app.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('answers 503 with how to build it when the UI is not built', async () => {
    const app = await serverWith(join(tmpdir(), 'herald-ui-missing-build'));
    try {
      const reply = await app.inject({ url: '/ui/overview' });
      expect(reply.statusCode).toBe(503);
      expect(reply.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(reply.json()).toMatchObject({ status: 503, detail: 'dashboard not built: run npm run build' });
    } finally {
      await app.close();
    }
  });
});
