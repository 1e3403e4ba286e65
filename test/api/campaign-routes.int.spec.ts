/**
 * `/v1/campaigns` over a real socket: every route's happy path, its validation errors (400 for the
 * request's shape, 422 for the domain's rules, each naming the field) and the 409 of a command the
 * campaign's status forbids (naming the status); the actor and correlation id the events record.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ApiFixture,
  dbTime,
  expectIllegal,
  expectProblem,
  lineCampaignBody,
  startTestApi,
} from './support/api.js';

let api: ApiFixture;
let key: string;
let keyId: string;

beforeAll(async () => {
  api = await startTestApi();
  key = await api.key('org-routes');
  const { rows } = await api.t.db.query<{ id: string }>(
    "select id::text from api_key where organization_id = 'org-routes'",
  );
  keyId = rows[0]!.id;
});
afterAll(async () => {
  await api?.close();
});

const create = async (overrides: Record<string, unknown> = {}) => {
  const r = await api.request('POST', '/v1/campaigns', { key, body: lineCampaignBody(overrides) });
  expect(r.status, r.text).toBe(201);
  return r.body as { campaignId: string; status: string; startAt: string | null };
};
const post = (path: string, body?: unknown) =>
  api.request('POST', path, { key, ...(body === undefined ? {} : { body }) });

describe('POST /v1/campaigns', () => {
  it('creates a draft, or a scheduled campaign given startAt, with a Location', async () => {
    const draft = await api.request('POST', '/v1/campaigns', { key, body: lineCampaignBody() });
    expect(draft.status).toBe(201);
    expect(draft.body).toMatchObject({
      status: 'DRAFT',
      organizationId: 'org-routes',
      channel: 'line',
      castType: 'broadcast',
    });
    expect(draft.headers.get('location')).toBe(`/v1/campaigns/${draft.body.campaignId}`);
    const startAt = await dbTime(api.t, 3600);
    const scheduled = await create({ startAt, castType: 'multicast', audienceId: 'aud-1' });
    expect(scheduled).toMatchObject({ status: 'SCHEDULED', startAt });
  });

  it('400 for the request shape, naming the field (unknown fields too)', async () => {
    expectProblem(await post('/v1/campaigns', lineCampaignBody({ name: '' })), 400, 'name');
    expectProblem(await post('/v1/campaigns', lineCampaignBody({ startAt: 'tomorrow' })), 400, 'startAt');
    expectProblem(await post('/v1/campaigns', lineCampaignBody({ colour: 'red' })), 400, 'colour');
    expectProblem(await post('/v1/campaigns', { ...lineCampaignBody(), channel: 'fax' }), 400, 'channel');
  });

  it("422 for the domain's rules, naming the field", async () => {
    expectProblem(await post('/v1/campaigns', lineCampaignBody({ castType: null })), 422, 'castType');
    expectProblem(
      await post('/v1/campaigns', lineCampaignBody({ castType: 'multicast' })),
      422,
      'audienceId',
    );
    const startAt = await dbTime(api.t, 60);
    expectProblem(
      await post('/v1/campaigns', lineCampaignBody({ startAt, dispatchDeadline: startAt })),
      422,
      'dispatchDeadline',
    );
    expectProblem(
      await post('/v1/campaigns', lineCampaignBody({ startAt: await dbTime(api.t, -60) })),
      422,
      'startAt',
    );
  });

  it('422 naming startAt beyond HERALD_CAMPAIGN_MAX_START_AHEAD_DAYS (366), on create and reschedule; nothing written', async () => {
    const day = 86_400;
    const before = await api.t.db.query<{ n: number }>('select count(*)::int as n from campaign');
    const far = await post('/v1/campaigns', lineCampaignBody({ startAt: await dbTime(api.t, 367 * day) }));
    expectProblem(far, 422, 'startAt');
    expect(far.body.detail).toContain('HERALD_CAMPAIGN_MAX_START_AHEAD_DAYS');
    // The refused create wrote no draft either (create and schedule share the transaction).
    const after = await api.t.db.query<{ n: number }>('select count(*)::int as n from campaign');
    expect(after.rows[0]!.n).toBe(before.rows[0]!.n);
    const c = await create({ startAt: await dbTime(api.t, 365 * day) });
    expect(c.status).toBe('SCHEDULED');
    expectProblem(
      await post(`/v1/campaigns/${c.campaignId}/reschedule`, { startAt: await dbTime(api.t, 400 * day) }),
      422,
      'startAt',
    );
    expect((await api.request('GET', `/v1/campaigns/${c.campaignId}`, { key })).body.startAt).toBe(c.startAt);
  });

  it("409 when the organization's own campaign key is taken", async () => {
    await create({ idempotencyKey: 'spring-2026' });
    const again = await post('/v1/campaigns', lineCampaignBody({ idempotencyKey: 'spring-2026' }));
    expectProblem(again, 409);
    expect(again.body.code).toBe('CONFLICT');
  });
});

describe('GET /v1/campaigns', () => {
  it('lists newest first, filtered by status, page by page with a cursor', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await create({ name: `page ${i}` })).campaignId);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r = await api.request(
        'GET',
        `/v1/campaigns?status=DRAFT&limit=2${cursor ? `&cursor=${cursor}` : ''}`,
        { key },
      );
      expect(r.status).toBe(200);
      expect(r.body.items.length).toBeLessThanOrEqual(2);
      for (const c of r.body.items) expect(c.status).toBe('DRAFT');
      seen.push(...r.body.items.map((c: { campaignId: string }) => c.campaignId));
      cursor = r.body.nextCursor;
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    // Newest first: the five made last come first, in reverse order of creation.
    expect(seen.slice(0, 5)).toEqual([...ids].reverse());
  });

  it('400 for a bad filter or cursor', async () => {
    expectProblem(await api.request('GET', '/v1/campaigns?status=SOON', { key }), 400, 'querystring.status');
    expectProblem(
      await api.request('GET', '/v1/campaigns?cursor=not-a-cursor', { key }),
      400,
      'querystring.cursor',
    );
    expectProblem(await api.request('GET', '/v1/campaigns?limit=0', { key }), 400, 'querystring.limit');
  });
});

describe('GET /v1/campaigns/:id and /history', () => {
  it('gets a campaign; 400 for a malformed id, 404 for an unknown one', async () => {
    const c = await create();
    const r = await api.request('GET', `/v1/campaigns/${c.campaignId}`, { key });
    expect(r.status).toBe(200);
    expect(r.body.campaignId).toBe(c.campaignId);
    expectProblem(await api.request('GET', '/v1/campaigns/12', { key }), 400, 'params.id');
    expectProblem(await api.request('GET', `/v1/campaigns/${crypto.randomUUID()}`, { key }), 404);
  });

  it('history: the events with the key as actor and the request id as correlation id', async () => {
    const c = await create();
    const sent = await api.request('POST', `/v1/campaigns/${c.campaignId}/send-now`, {
      key,
      headers: { 'x-request-id': 'req-send-now-1' },
    });
    expect(sent.status).toBe(200);
    expect(sent.headers.get('x-request-id')).toBe('req-send-now-1');
    const r = await api.request('GET', `/v1/campaigns/${c.campaignId}/history`, { key });
    expect(r.status).toBe(200);
    // Send now from a draft: activated and claimed by one command.
    expect(r.body.events.map((e: { type: string }) => e.type)).toEqual([
      'CampaignCreated',
      'CampaignActivated',
      'CampaignClaimed',
    ]);
    for (const e of r.body.events) expect(e.meta.actor).toBe(`api-key:${keyId}`);
    const claim = r.body.commands.find(
      (cmd: { correlationId: string }) => cmd.correlationId === 'req-send-now-1',
    );
    expect(claim.actor).toBe(`api-key:${keyId}`);
    expect(claim.messages).toHaveLength(1);
    expect(claim.messages[0].destination).toBe('line_broadcast_rich_message');
    expect(r.body.state.status).toBe('DISPATCHING');
    expectProblem(await api.request('GET', '/v1/campaigns/x/history', { key }), 400, 'params.id');
  });
});

describe('campaign commands', () => {
  it('activate: a draft without startAt is QUEUED; again is 409 QUEUED', async () => {
    const c = await create();
    const r = await post(`/v1/campaigns/${c.campaignId}/activate`);
    expect(r.status).toBe(200);
    expect(r.body.status).toBe('QUEUED');
    expectIllegal(await post(`/v1/campaigns/${c.campaignId}/activate`), 'QUEUED');
    expectProblem(await post('/v1/campaigns/nope/activate'), 400, 'params.id');
  });

  it('schedule: 200; 400 without startAt; 422 for a past startAt; 409 when already scheduled', async () => {
    const c = await create();
    expectProblem(await post(`/v1/campaigns/${c.campaignId}/schedule`, {}), 400, 'startAt');
    expectProblem(
      await post(`/v1/campaigns/${c.campaignId}/schedule`, { startAt: await dbTime(api.t, -5) }),
      422,
      'startAt',
    );
    const startAt = await dbTime(api.t, 600);
    const r = await post(`/v1/campaigns/${c.campaignId}/schedule`, { startAt });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'SCHEDULED', startAt });
    expectIllegal(await post(`/v1/campaigns/${c.campaignId}/schedule`, { startAt }), 'SCHEDULED');
  });

  it('send-now: DISPATCHING with epoch 1; again is 409 DISPATCHING', async () => {
    const c = await create({ startAt: await dbTime(api.t, 600) });
    const r = await post(`/v1/campaigns/${c.campaignId}/send-now`);
    expect(r.body).toMatchObject({ status: 'DISPATCHING', claimEpoch: 1 });
    expectIllegal(await post(`/v1/campaigns/${c.campaignId}/send-now`), 'DISPATCHING');
  });

  it('pause and resume; resume when not paused is 409', async () => {
    const c = await create({ startAt: await dbTime(api.t, 600) });
    expectIllegal(await post(`/v1/campaigns/${c.campaignId}/resume`), 'SCHEDULED');
    expect((await post(`/v1/campaigns/${c.campaignId}/pause`)).body).toMatchObject({
      status: 'PAUSED',
      pausedFrom: 'SCHEDULED',
    });
    expectIllegal(await post(`/v1/campaigns/${c.campaignId}/pause`), 'PAUSED');
    expect((await post(`/v1/campaigns/${c.campaignId}/resume`)).body.status).toBe('SCHEDULED');
  });

  it('reschedule: 200; 400 for a malformed time; 409 for a draft', async () => {
    const draft = await create();
    const startAt = await dbTime(api.t, 900);
    expectIllegal(await post(`/v1/campaigns/${draft.campaignId}/reschedule`, { startAt }), 'DRAFT');
    const c = await create({ startAt: await dbTime(api.t, 600) });
    expectProblem(
      await post(`/v1/campaigns/${c.campaignId}/reschedule`, { startAt: 'later' }),
      400,
      'startAt',
    );
    const r = await post(`/v1/campaigns/${c.campaignId}/reschedule`, { startAt });
    expect(r.body).toMatchObject({ status: 'SCHEDULED', startAt });
  });

  it('cancel (with or without a reason): 200; 400 for an empty reason; 409 for a draft', async () => {
    const draft = await create();
    expectIllegal(await post(`/v1/campaigns/${draft.campaignId}/cancel`), 'DRAFT');
    const c = await create({ startAt: await dbTime(api.t, 600) });
    expectProblem(await post(`/v1/campaigns/${c.campaignId}/cancel`, { reason: '' }), 400, 'reason');
    const r = await post(`/v1/campaigns/${c.campaignId}/cancel`, { reason: 'wrong audience' });
    expect(r.status).toBe(200);
    // A LINE campaign has nothing to refund: its cancellation settles in the same command.
    expect(['CANCELLING', 'CANCELLED']).toContain(r.body.status);
    const other = await create({ startAt: await dbTime(api.t, 600) });
    const withoutReason = await post(`/v1/campaigns/${other.campaignId}/cancel`);
    expect(['CANCELLING', 'CANCELLED']).toContain(withoutReason.body.status);
  });

  it('DELETE: soft delete; 409 while dispatching; 400 for a malformed id', async () => {
    const c = await create();
    const r = await api.request('DELETE', `/v1/campaigns/${c.campaignId}`, { key });
    expect(r.status).toBe(200);
    expect(r.body.deletedAt).not.toBeNull();
    const listed = await api.request('GET', '/v1/campaigns?limit=500', { key });
    expect(listed.body.items.map((x: { campaignId: string }) => x.campaignId)).not.toContain(c.campaignId);
    const withDeleted = await api.request('GET', '/v1/campaigns?limit=500&includeDeleted=true', { key });
    expect(withDeleted.body.items.map((x: { campaignId: string }) => x.campaignId)).toContain(c.campaignId);
    const busy = await create({ startAt: await dbTime(api.t, 600) });
    await post(`/v1/campaigns/${busy.campaignId}/send-now`);
    expectIllegal(await api.request('DELETE', `/v1/campaigns/${busy.campaignId}`, { key }), 'DISPATCHING');
    expectProblem(await api.request('DELETE', '/v1/campaigns/%00', { key }), 400, 'params.id');
  });
});
