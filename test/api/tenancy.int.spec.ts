/**
 * Tenancy: a key acts as its organization only. Organization B's key gets 404 (never 403) on A's
 * campaign, action, job, run, outbox row and API key, for every read and every command, and changes
 * nothing; B's lists never show A's rows; a viewer cannot run commands (403, nothing changed); a
 * revoked key gets 401.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../src/adapters/postgres/api-key-queries.js';
import { hashApiKey } from '../../src/api/auth.js';
import { type ApiFixture, dbTime, expectProblem, lineCampaignBody, startTestApi } from './support/api.js';

let api: ApiFixture;
const keys = { a: '', aViewer: '', aAdmin: '', b: '', bAdmin: '' };
const a = {
  campaign: '',
  dispatching: '',
  action: '',
  wait: '',
  job: '',
  run: '',
  outbox: 0,
  deadOutbox: 0,
  apiKey: '',
};

/** Everything A owns, as it stands: events per stream, outbox statuses, key revocations. */
async function snapshot() {
  const { rows: events } = await api.t.db.query<{ stream: string; n: number }>(
    `select stream_type || '/' || stream_id as stream, count(*)::int as n from event group by 1 order by 1`,
  );
  const { rows: outbox } = await api.t.db.query('select id, status, attempts from outbox order by id');
  const { rows: apiKeys } = await api.t.db.query('select id, revoked_at from api_key order by id');
  const { rows: runs } = await api.t.db.query('select count(*)::int as n from job_run');
  return { events, outbox, apiKeys, runs };
}

beforeAll(async () => {
  api = await startTestApi();
  keys.a = await api.key('org-a', 'operator');
  keys.aViewer = await api.key('org-a', 'viewer');
  keys.aAdmin = await api.key('org-a', 'admin');
  keys.b = await api.key('org-b', 'operator');
  keys.bAdmin = await api.key('org-b', 'admin');
  const as = (path: string, body?: unknown, method = 'POST') =>
    api.request(method, path, { key: keys.a, ...(body === undefined ? {} : { body }) });
  a.campaign = (
    await as('/v1/campaigns', lineCampaignBody({ startAt: await dbTime(api.t, 3600) }))
  ).body.campaignId;
  a.dispatching = (await as('/v1/campaigns', lineCampaignBody())).body.campaignId;
  await as(`/v1/campaigns/${a.dispatching}/send-now`);
  a.action = (
    await as('/v1/actions', { mode: 'normal', actionType: 'x', actionConfig: {}, delaySeconds: 3600 })
  ).body.actionId;
  a.wait = (
    await as('/v1/actions', {
      mode: 'waitForSignal',
      actionType: 'x',
      actionConfig: {},
      expiresSeconds: 3600,
      wait: { names: ['clicked'], correlationKey: 'shared-key' },
    })
  ).body.actionId;
  await api.request('PUT', '/v1/subjects/customer-a', { key: keys.a, body: { attributes: { vip: true } } });
  a.job = (
    await as('/v1/cron-jobs', {
      name: 'a job',
      schedule: '0 * * * *',
      timezone: 'UTC',
      jobType: 'ping',
      payload: { url: 'https://example.com' },
    })
  ).body.jobId;
  a.run = (await as(`/v1/cron-jobs/${a.job}/trigger`)).body.runId;
  const { rows } = await api.t.db.query<{ id: number }>(
    `select o.id from outbox o join event e on e.position = o.event_position
      where e.stream_type = 'campaign' and e.stream_id = $1`,
    [a.dispatching],
  );
  a.outbox = rows[0]!.id;
  const sent = await as('/v1/campaigns', lineCampaignBody());
  await as(`/v1/campaigns/${sent.body.campaignId}/send-now`);
  const { rows: dead } = await api.t.db.query<{ id: number }>(
    `update outbox o set status = 'dead', dead_at = now(), ordered = true from event e
      where e.position = o.event_position and e.stream_type = 'campaign' and e.stream_id = $1 returning o.id`,
    [sent.body.campaignId],
  );
  a.deadOutbox = dead[0]!.id;
  const { rows: key } = await api.t.db.query<{ id: string }>(
    'select id::text from api_key where secret_hash = $1',
    [hashApiKey(keys.aViewer)],
  );
  a.apiKey = key[0]!.id;
});
afterAll(async () => {
  await api?.close();
});

const reads = () => [
  `/v1/campaigns/${a.campaign}`,
  `/v1/campaigns/${a.campaign}/history`,
  `/v1/actions/${a.action}`,
  `/v1/actions/${a.action}/history`,
  '/v1/subjects/customer-a',
  `/v1/cron-jobs/${a.job}`,
  `/v1/cron-jobs/${a.job}/runs`,
  `/v1/cron-jobs/${a.job}/ledger`,
  `/v1/cron-jobs/${a.job}/upcoming`,
  `/v1/cron-runs/${a.run}`,
  `/v1/outbox/${a.outbox}`,
  `/v1/outbox/${a.deadOutbox}`,
];

const commands = async (): Promise<[string, string, unknown?][]> => {
  const later = await dbTime(api.t, 7200);
  const past = await dbTime(api.t, -7200);
  const recent = await dbTime(api.t, -60);
  return [
    ['POST', `/v1/campaigns/${a.campaign}/activate`],
    ['POST', `/v1/campaigns/${a.campaign}/schedule`, { startAt: later }],
    ['POST', `/v1/campaigns/${a.campaign}/send-now`],
    ['POST', `/v1/campaigns/${a.campaign}/pause`],
    ['POST', `/v1/campaigns/${a.campaign}/resume`],
    ['POST', `/v1/campaigns/${a.campaign}/reschedule`, { startAt: later }],
    ['POST', `/v1/campaigns/${a.campaign}/cancel`, { reason: 'b was here' }],
    ['DELETE', `/v1/campaigns/${a.campaign}`],
    ['POST', `/v1/campaigns/${a.dispatching}/pause`],
    ['POST', `/v1/actions/${a.action}/cancel`, { reason: 'b was here' }],
    ['POST', `/v1/actions/${a.action}/fire`],
    ['POST', `/v1/actions/${a.action}/reschedule`, { executeAt: later }],
    ['PATCH', `/v1/cron-jobs/${a.job}`, { schedule: '*/5 * * * *' }],
    ['DELETE', `/v1/cron-jobs/${a.job}`],
    ['POST', `/v1/cron-jobs/${a.job}/pause`, { reason: 'b was here' }],
    ['POST', `/v1/cron-jobs/${a.job}/resume`],
    ['POST', `/v1/cron-jobs/${a.job}/trigger`],
    ['POST', `/v1/cron-jobs/${a.job}/backfill`, { from: past, to: recent }],
    ['POST', `/v1/cron-jobs/${a.job}/backfill?dryRun=true`, { from: past, to: recent }],
    ['POST', `/v1/outbox/${a.deadOutbox}/requeue`],
    ['POST', `/v1/outbox/${a.deadOutbox}/skip`, { reason: 'b was here' }],
    ['POST', `/v1/outbox/${a.outbox}/requeue`],
  ];
};

describe("another organization's resources", () => {
  it('are 404 for every read', async () => {
    for (const path of reads()) {
      const r = await api.request('GET', path, { key: keys.b });
      expectProblem(r, 404);
      expect(r.text).not.toContain('org-a');
    }
    expectProblem(await api.request('GET', `/v1/api-keys/${a.apiKey}`, { key: keys.bAdmin }), 404);
  });

  it('are 404 for every command, and nothing of theirs changes', async () => {
    const before = await snapshot();
    for (const [method, path, body] of await commands()) {
      const r = await api.request(method, path, { key: keys.b, ...(body === undefined ? {} : { body }) });
      expectProblem(r, 404);
    }
    expectProblem(await api.request('POST', `/v1/api-keys/${a.apiKey}/revoke`, { key: keys.bAdmin }), 404);
    expect(await snapshot()).toEqual(before);
    // And A itself still can (the commands were refused for B, not broken).
    expect((await api.request('POST', `/v1/campaigns/${a.campaign}/pause`, { key: keys.a })).status).toBe(
      200,
    );
    expect((await api.request('POST', `/v1/campaigns/${a.campaign}/resume`, { key: keys.a })).status).toBe(
      200,
    );
  });

  it("never appear in lists, and B's signal does not unlock A's wait", async () => {
    // B has rows of its own, so its lists are not trivially empty.
    await api.request('POST', '/v1/campaigns', { key: keys.b, body: lineCampaignBody() });
    const lists = [
      '/v1/campaigns?limit=500&includeDeleted=true',
      '/v1/actions?limit=500',
      '/v1/cron-jobs?limit=500&includeDeleted=true',
      '/v1/outbox/pending?limit=500',
      '/v1/outbox/dead?limit=500',
      '/v1/outbox/parked?limit=500',
      '/v1/stats',
    ];
    const aIds = [a.campaign, a.dispatching, a.action, a.wait, a.job, a.run];
    for (const path of lists) {
      const r = await api.request('GET', path, { key: keys.b });
      expect(r.status, path).toBe(200);
      for (const id of aIds) expect(r.text, path).not.toContain(id);
      expect(r.text, path).not.toContain('org-a');
    }
    const mine = await api.request('GET', '/v1/campaigns', { key: keys.b });
    expect(mine.body.items).toHaveLength(1);
    const outboxOfA = await api.request('GET', '/v1/outbox/pending?limit=500', { key: keys.b });
    expect(outboxOfA.body.items.map((r: { id: number }) => r.id)).not.toContain(a.outbox);
    const bKeys = await api.request('GET', '/v1/api-keys?limit=500&includeRevoked=true', {
      key: keys.bAdmin,
    });
    expect(bKeys.body.items.every((k: { organizationId: string }) => k.organizationId === 'org-b')).toBe(
      true,
    );
    const signal = await api.request('POST', '/v1/signals', {
      key: keys.b,
      body: { correlationKey: 'shared-key', name: 'clicked' },
    });
    expect(signal.body.unlocked).toEqual([]);
    expect((await api.request('GET', `/v1/actions/${a.wait}`, { key: keys.a })).body.unlockedBy).toBeNull();
  });
});

describe('roles and revocation', () => {
  it('a viewer reads but every command is 403, and nothing changes', async () => {
    expect((await api.request('GET', `/v1/campaigns/${a.campaign}`, { key: keys.aViewer })).status).toBe(200);
    const before = await snapshot();
    for (const [method, path, body] of await commands()) {
      expectProblem(
        await api.request(method, path, { key: keys.aViewer, ...(body === undefined ? {} : { body }) }),
        403,
      );
    }
    expectProblem(
      await api.request('POST', '/v1/campaigns', { key: keys.aViewer, body: lineCampaignBody() }),
      403,
    );
    expectProblem(
      await api.request('POST', '/v1/signals', {
        key: keys.aViewer,
        body: { correlationKey: 'shared-key', name: 'clicked' },
      }),
      403,
    );
    expect(await snapshot()).toEqual(before);
  });

  it('a revoked key, an unknown key and no key are 401', async () => {
    const doomed = await api.key('org-a', 'operator');
    expect((await api.request('GET', '/v1/campaigns', { key: doomed })).status).toBe(200);
    const { rows } = await api.t.db.query<{ id: string }>(
      'select id::text from api_key where secret_hash = $1',
      [hashApiKey(doomed)],
    );
    await revokeApiKey(api.t.db, rows[0]!.id, null);
    expectProblem(await api.request('GET', '/v1/campaigns', { key: doomed }), 401);
    expectProblem(await api.request('GET', `/v1/campaigns/${a.campaign}`, { key: doomed }), 401);
    expectProblem(await api.request('GET', '/v1/campaigns', { key: `hk_00000000_${'A'.repeat(43)}` }), 401);
    expectProblem(await api.request('GET', '/v1/campaigns', { key: 'not-a-key' }), 401);
    expectProblem(await api.request('GET', '/v1/campaigns'), 401);
  });
});
