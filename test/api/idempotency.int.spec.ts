/**
 * Idempotency-Key (IETF draft, Stripe semantics; ADR 0012), over a real socket: a retry with the same
 * key and request replays the first response (`Idempotent-Replayed: true`) and changes nothing — one
 * campaign, one outbox row — also when two requests race; a different request with the key is 422; a
 * request while the first is in flight is 409 with Retry-After; an expired key is a new request; a
 * command that failed consumed nothing (the key's row commits with the command or not at all).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expireIdempotencyKeys } from '../../src/adapters/postgres/retention-queries.js';
import { IdempotencyKeys } from '../../src/api/idempotency.js';
import { waitFor } from '../../src/testing/wait.js';
import {
  type ApiFixture,
  type ApiReply,
  dbTime,
  expectProblem,
  holdRowLock,
  lineCampaignBody,
  startTestApi,
  waitForLockWait,
} from './support/api.js';

let api: ApiFixture;
let key: string;

beforeAll(async () => {
  api = await startTestApi();
  key = await api.key('org-idem');
});
afterAll(async () => {
  await api?.close();
});

const withKey = (idempotencyKey: string) => ({ 'idempotency-key': idempotencyKey });
const countCampaigns = async (name: string) =>
  (await api.t.db.query<{ n: number }>('select count(*)::int as n from campaign where name = $1', [name]))
    .rows[0]!.n;
const outboxRowsOf = async (campaignId: string) =>
  (
    await api.t.db.query<{ n: number }>(
      `select count(*)::int as n from outbox o join event e on e.position = o.event_position
        where e.stream_type = 'campaign' and e.stream_id = $1`,
      [campaignId],
    )
  ).rows[0]!.n;
const eventsOf = async (campaignId: string) =>
  (
    await api.t.db.query<{ n: number }>(
      "select count(*)::int as n from event where stream_type = 'campaign' and stream_id = $1",
      [campaignId],
    )
  ).rows[0]!.n;

describe('a retry with the same key and request', () => {
  it('replays the first response: one campaign', async () => {
    const body = lineCampaignBody({ name: 'replayed create', startAt: await dbTime(api.t, 3600) });
    const first = await api.request('POST', '/v1/campaigns', { key, body, headers: withKey('create-1') });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const retry = await api.request('POST', '/v1/campaigns', { key, body, headers: withKey('create-1') });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.body).toEqual(first.body);
    expect(retry.headers.get('location')).toBe(first.headers.get('location'));
    expect(await countCampaigns('replayed create')).toBe(1);
  });

  it('send now twice: the retry is the first 200 again (not a 409), and one outbox row', async () => {
    const c = await api.request('POST', '/v1/campaigns', { key, body: lineCampaignBody() });
    const path = `/v1/campaigns/${c.body.campaignId}/send-now`;
    const first = await api.request('POST', path, { key, headers: withKey('send-1') });
    expect(first.body.status).toBe('DISPATCHING');
    const retry = await api.request('POST', path, { key, headers: withKey('send-1') });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.body).toEqual(first.body);
    expect(await outboxRowsOf(c.body.campaignId)).toBe(1);
    // Without the key the same retry is what it is: a command the status forbids.
    expectProblem(await api.request('POST', path, { key }), 409);
  });

  it('two concurrent requests: one campaign, one outbox row; the other replays or is told to retry', async () => {
    for (let round = 0; round < 5; round++) {
      const name = `concurrent ${round}`;
      const body = lineCampaignBody({ name });
      const replies = await Promise.all(
        [0, 1].map(() =>
          api.request('POST', '/v1/campaigns', { key, body, headers: withKey(`race-${round}`) }),
        ),
      );
      expect(await countCampaigns(name)).toBe(1);
      const created = replies.filter((r) => r.status === 201);
      expect(created.length).toBeGreaterThanOrEqual(1);
      for (const r of created) expect(r.body.campaignId).toBe(created[0]!.body.campaignId);
      for (const r of replies.filter((x) => x.status !== 201)) {
        expectProblem(r, 409);
        expect(r.headers.get('retry-after')).toBe('2');
      }
      const id = created[0]!.body.campaignId;
      const sends = await Promise.all(
        [0, 1].map(() =>
          api.request('POST', `/v1/campaigns/${id}/send-now`, {
            key,
            headers: withKey(`race-send-${round}`),
          }),
        ),
      );
      for (const r of sends) expect([200, 409]).toContain(r.status);
      expect(sends.some((r) => r.status === 200 && r.headers.get('idempotent-replayed') === null)).toBe(true);
      expect(await outboxRowsOf(id)).toBe(1);
    }
  });
});

describe('refusals', () => {
  it('the same key with a different request is 422 and changes nothing', async () => {
    const body = lineCampaignBody({ name: 'first body' });
    expect(
      (await api.request('POST', '/v1/campaigns', { key, body, headers: withKey('reuse-1') })).status,
    ).toBe(201);
    const other = await api.request('POST', '/v1/campaigns', {
      key,
      body: { ...body, name: 'second body' },
      headers: withKey('reuse-1'),
    });
    expectProblem(other, 422, 'Idempotency-Key');
    expect(other.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(await countCampaigns('second body')).toBe(0);
    // Same key, same body, on another resource: also another request.
    const c1 = (
      await api.request('POST', '/v1/campaigns', {
        key,
        body: lineCampaignBody({ startAt: await dbTime(api.t, 600) }),
      })
    ).body;
    const c2 = (
      await api.request('POST', '/v1/campaigns', {
        key,
        body: lineCampaignBody({ startAt: await dbTime(api.t, 600) }),
      })
    ).body;
    expect(
      (
        await api.request('POST', `/v1/campaigns/${c1.campaignId}/pause`, {
          key,
          headers: withKey('reuse-2'),
        })
      ).status,
    ).toBe(200);
    expectProblem(
      await api.request('POST', `/v1/campaigns/${c2.campaignId}/pause`, { key, headers: withKey('reuse-2') }),
      422,
    );
    expect((await api.request('GET', `/v1/campaigns/${c2.campaignId}`, { key })).body.status).toBe(
      'SCHEDULED',
    );
  });

  it('a request while the first with the key is in flight is 409 with Retry-After; afterwards it replays', async () => {
    const c = (
      await api.request('POST', '/v1/campaigns', {
        key,
        body: lineCampaignBody({ startAt: await dbTime(api.t, 600) }),
      })
    ).body;
    const path = `/v1/campaigns/${c.campaignId}/pause`;
    // Another writer holds the campaign's row: the first pause waits on it, holding its key.
    const lock = await holdRowLock(api.t, 'campaign', c.campaignId);
    let first: Promise<ApiReply>;
    try {
      first = api.request('POST', path, { key, headers: withKey('flight-1') });
      await waitForLockWait(api.t, 'herald-api-test');
      const during = await api.request('POST', path, { key, headers: withKey('flight-1') });
      expectProblem(during, 409);
      expect(during.body.code).toBe('IDEMPOTENCY_KEY_IN_USE');
      expect(during.headers.get('retry-after')).toBe('2');
    } finally {
      await lock.release();
    }
    const done = await first;
    expect(done.status).toBe(200);
    expect(done.body.status).toBe('PAUSED');
    const after = await api.request('POST', path, { key, headers: withKey('flight-1') });
    expect(after.status).toBe(200);
    expect(after.headers.get('idempotent-replayed')).toBe('true');
    expect(after.body).toEqual(done.body);
  });

  it('a command that failed consumed nothing: the key is free, and it is not stored', async () => {
    const c = (
      await api.request('POST', '/v1/campaigns', {
        key,
        body: lineCampaignBody({ startAt: await dbTime(api.t, 600) }),
      })
    ).body;
    const path = `/v1/campaigns/${c.campaignId}/resume`;
    const events = await eventsOf(c.campaignId);
    expectProblem(await api.request('POST', path, { key, headers: withKey('failed-1') }), 409);
    const { rows } = await api.t.db.query<{ n: number }>(
      "select count(*)::int as n from idempotency_key where key = 'failed-1'",
    );
    expect(rows[0]!.n).toBe(0);
    expect(await eventsOf(c.campaignId)).toBe(events);
    await api.request('POST', `/v1/campaigns/${c.campaignId}/pause`, { key });
    const now = await api.request('POST', path, { key, headers: withKey('failed-1') });
    expect(now.status).toBe(200);
    expect(now.headers.get('idempotent-replayed')).toBeNull();
  });
});

describe('expiry and scope', () => {
  it('an expired key is a new request; the maintenance service deletes expired keys', async () => {
    const body = lineCampaignBody({ name: 'expiring' });
    const first = await api.request('POST', '/v1/campaigns', { key, body, headers: withKey('expire-1') });
    const { rows } = await api.t.db.query<{ hours: number }>(
      "select extract(epoch from expires_at - created_at)::int / 3600 as hours from idempotency_key where key = 'expire-1'",
    );
    expect(rows[0]!.hours).toBe(24);
    await api.t.db.query(
      "update idempotency_key set expires_at = now() - interval '1 second' where key = 'expire-1'",
    );
    const again = await api.request('POST', '/v1/campaigns', { key, body, headers: withKey('expire-1') });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(again.body.campaignId).not.toBe(first.body.campaignId);
    expect(await countCampaigns('expiring')).toBe(2);
    await api.t.db.query(
      "update idempotency_key set expires_at = now() - interval '1 second' where key = 'expire-1'",
    );
    expect(await expireIdempotencyKeys(api.t.db, { limit: 100 })).toBe(1);
    const gone = await api.t.db.query("select 1 from idempotency_key where key = 'expire-1'");
    expect(gone.rowCount).toBe(0);
  });

  it('a reservation cut before it completed or released holds its key for a lease, not the TTL', async () => {
    // A request that reserved in a transaction of its own (an SMS creation) and was cut before either
    // completing or releasing the key: a process or database failover lost its release.
    const keys = new IdempotencyKeys(24 * 3_600_000, 400);
    const cut = { scope: 'org-idem:lease', key: 'lease-1', fingerprint: 'f-1' };
    expect(await api.t.db.transaction((tx) => keys.reserve(tx, cut))).toBeNull();
    const lease = async () =>
      (
        await api.t.db.query<{ ms: number; over: boolean }>(
          `select extract(epoch from expires_at - created_at) * 1000 as ms, now() >= expires_at as over
             from idempotency_key where key = 'lease-1'`,
        )
      ).rows[0]!;
    expect(Number((await lease()).ms)).toBe(400);
    // The retry within the lease is told the key is in use (409, with Retry-After) ...
    await expect(api.t.db.transaction((tx) => keys.reserve(tx, cut))).rejects.toMatchObject({
      code: 'IDEMPOTENCY_KEY_IN_USE',
    });
    // ... and once the lease is over (on the database clock) it is the request's again, kept for the TTL
    // when it completes.
    await waitFor(async () => (await lease()).over, { what: 'the lease over', timeoutMs: 10_000 });
    await api.t.db.transaction(async (tx) => {
      expect(await keys.reserve(tx, cut)).toBeNull();
      await keys.complete(tx, cut, { done: true });
    });
    expect(Math.round(Number((await lease()).ms) / 3_600_000)).toBe(24);
    await expect(api.t.db.transaction((tx) => keys.reserve(tx, cut))).resolves.toEqual({
      stored: { done: true },
    });
  });

  it("another organization's request with the same key is its own", async () => {
    const other = await api.key('org-idem-2');
    const body = lineCampaignBody({ name: 'shared key' });
    const mine = await api.request('POST', '/v1/campaigns', { key, body, headers: withKey('shared-1') });
    const theirs = await api.request('POST', '/v1/campaigns', {
      key: other,
      body,
      headers: withKey('shared-1'),
    });
    expect(theirs.status).toBe(201);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    expect(theirs.body.organizationId).toBe('org-idem-2');
    expect(theirs.body.campaignId).not.toBe(mine.body.campaignId);
  });

  it('a malformed key is 400', async () => {
    expectProblem(
      await api.request('POST', '/v1/campaigns', {
        key,
        body: lineCampaignBody(),
        headers: withKey('x'.repeat(300)),
      }),
      400,
      'headers.idempotency-key',
    );
  });
});
