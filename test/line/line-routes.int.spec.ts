/**
 * The LINE directory over HTTP: admin keys register channels (the token is never answered back, nor
 * stored in clear), operators build and seal audiences, bad input is a problem naming the field with
 * nothing written, another organization's channel or audience is a 404, and a LINE campaign is refused
 * (422 naming the field) until its channel and sealed audience are in place.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ApiFixture,
  dbTime,
  expectProblem,
  lineCampaignBody,
  startTestApi,
} from '../api/support/api.js';
import { lineUserId, TEST_LINE_CREDENTIALS_KEY } from '../support/line.js';

let api: ApiFixture;
let admin: string;
let operator: string;
let viewer: string;
let otherAdmin: string;
const TOKEN = 'long-lived-token-for-routes-0123456789';

beforeAll(async () => {
  api = await startTestApi({ HERALD_LINE_CREDENTIALS_KEY: TEST_LINE_CREDENTIALS_KEY }, { seedLine: false });
  admin = await api.key('org-1', 'admin');
  operator = await api.key('org-1', 'operator');
  viewer = await api.key('org-1', 'viewer');
  otherAdmin = await api.key('org-2', 'admin');
});
afterAll(async () => {
  await api?.close();
});

const channelBody = { lineOaId: 'oa-1', channelId: '1650000001', channelAccessToken: TOKEN };

describe('/v1/line/channels', () => {
  it('an admin registers a channel: 201 without the token, which is sealed at rest', async () => {
    expectProblem(await api.request('POST', '/v1/line/channels', { key: operator, body: channelBody }), 403);
    const created = await api.request('POST', '/v1/line/channels', { key: admin, body: channelBody });
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe('/v1/line/channels/oa-1');
    expect(created.body).toMatchObject({
      lineOaId: 'oa-1',
      organizationId: 'org-1',
      tokenKind: 'long_lived',
      keyId: 'k1',
    });
    expect(created.text).not.toContain(TOKEN);
    const { rows } = await api.t.db.query('select * from line_channel');
    expect(JSON.stringify(rows)).not.toContain(TOKEN);

    const listed = await api.request('GET', '/v1/line/channels', { key: viewer });
    expect(listed.body.items.map((c: { lineOaId: string }) => c.lineOaId)).toEqual(['oa-1']);
    expect(listed.text).not.toContain(TOKEN);
    expect((await api.request('GET', '/v1/line/channels/oa-1', { key: viewer })).body.channelId).toBe(
      '1650000001',
    );
  });

  it("400 naming the field for a bad body; another organization's channel is 409 to take and 404 to see", async () => {
    expectProblem(
      await api.request('POST', '/v1/line/channels', {
        key: admin,
        body: { ...channelBody, lineOaId: 'has space' },
      }),
      400,
      'lineOaId',
    );
    expectProblem(
      await api.request('POST', '/v1/line/channels', {
        key: admin,
        body: { lineOaId: 'oa-x', channelId: '1' },
      }),
      400,
    );
    expectProblem(
      await api.request('POST', '/v1/line/channels', { key: otherAdmin, body: channelBody }),
      409,
    );
    expectProblem(await api.request('GET', '/v1/line/channels/oa-1', { key: otherAdmin }), 404);
    expectProblem(await api.request('DELETE', '/v1/line/channels/oa-1', { key: otherAdmin }), 404);
    expect((await api.request('GET', '/v1/line/channels', { key: otherAdmin })).body.items).toEqual([]);
    const { rows } = await api.t.db.query<{ n: number }>('select count(*)::int as n from line_channel');
    expect(rows[0]!.n).toBe(1);
  });
});

describe('/v1/line/audiences', () => {
  it('create, upload in pages, seal; a sealed audience takes no members; bad ids name the item', async () => {
    const created = await api.request('POST', '/v1/line/audiences', {
      key: operator,
      body: { audienceId: 'aud-1', name: 'winter' },
    });
    expect(created.status).toBe(201);
    expectProblem(
      await api.request('POST', '/v1/line/audiences', {
        key: operator,
        body: { audienceId: 'aud-1', name: 'again' },
      }),
      409,
    );
    expectProblem(await api.request('POST', '/v1/line/audiences/aud-1/seal', { key: operator }), 409);
    expectProblem(
      await api.request('POST', '/v1/line/audiences/aud-1/members', {
        key: operator,
        body: { userIds: [lineUserId(1), 'Uxyz'] },
      }),
      400,
      'userIds.1',
    );
    const first = await api.request('POST', '/v1/line/audiences/aud-1/members', {
      key: operator,
      body: { userIds: [lineUserId(1), lineUserId(2), lineUserId(3)] },
    });
    expect(first.body.members).toBe(3);
    const again = await api.request('POST', '/v1/line/audiences/aud-1/members', {
      key: operator,
      body: { userIds: [lineUserId(3), lineUserId(4)] },
    });
    expect(again.body).toMatchObject({ members: 4, sealed: false });
    expectProblem(await api.request('GET', '/v1/line/audiences/aud-1', { key: otherAdmin }), 404);
    expectProblem(
      await api.request('POST', '/v1/line/audiences/aud-1/members', {
        key: otherAdmin,
        body: { userIds: [lineUserId(9)] },
      }),
      404,
    );
    const sealed = await api.request('POST', '/v1/line/audiences/aud-1/seal', { key: operator });
    expect(sealed.body).toMatchObject({ members: 4, sealed: true });
    expectProblem(
      await api.request('POST', '/v1/line/audiences/aud-1/members', {
        key: operator,
        body: { userIds: [lineUserId(5)] },
      }),
      409,
    );
    expect((await api.request('GET', '/v1/line/audiences/aud-1', { key: viewer })).body.members).toBe(4);

    await api.request('POST', '/v1/line/audiences', {
      key: operator,
      body: { audienceId: 'aud-2', name: 'two' },
    });
    const firstPage = await api.request('GET', '/v1/line/audiences?limit=1', { key: viewer });
    expect(firstPage.body.items.map((a: { audienceId: string }) => a.audienceId)).toEqual(['aud-1']);
    const secondPage = await api.request(
      'GET',
      `/v1/line/audiences?limit=1&cursor=${firstPage.body.nextCursor}`,
      {
        key: viewer,
      },
    );
    expect(secondPage.body).toMatchObject({ items: [{ audienceId: 'aud-2', members: 0 }], nextCursor: null });
  });
});

describe('a LINE campaign and its channel', () => {
  it('is refused (422 naming the field) until its channel and sealed audience are in place', async () => {
    const startAt = await dbTime(api.t, 3600);
    const draft = await api.request('POST', '/v1/campaigns', {
      key: operator,
      body: lineCampaignBody({ lineOaId: 'oa-none', castType: 'multicast', audienceId: 'aud-2' }),
    });
    expect(draft.status).toBe(201);
    const schedule = (id: string) =>
      api.request('POST', `/v1/campaigns/${id}/schedule`, { key: operator, body: { startAt } });
    expectProblem(await schedule(draft.body.campaignId), 422, 'lineOaId');
    await api.request('PATCH', `/v1/campaigns/${draft.body.campaignId}`, {
      key: operator,
      body: { lineOaId: 'oa-1' },
    });
    expectProblem(await schedule(draft.body.campaignId), 422, 'audienceId');
    await api.request('PATCH', `/v1/campaigns/${draft.body.campaignId}`, {
      key: operator,
      body: { audienceId: 'aud-1' },
    });
    const scheduled = await schedule(draft.body.campaignId);
    expect(scheduled.status).toBe(200);
    expect(scheduled.body.status).toBe('SCHEDULED');
  });
});
