/**
 * Outbox operations, verify, dispatch statistics, API keys and the health/metrics endpoints of the API
 * port, over a real socket: happy paths, 400/422 naming the field, 409 naming the status, 403 for a
 * role that may not, and series on /metrics that change as requests are answered.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { verifyStates } from '../../src/projections/verify.js';
import { waitFor } from '../../src/testing/wait.js';
import { herald } from '../support/cli.js';
import { startRoles } from '../support/roles.js';
import {
  type ApiFixture,
  dbTime,
  expectIllegal,
  expectProblem,
  httpRequestCount,
  lineCampaignBody,
  startTestApi,
} from './support/api.js';

let api: ApiFixture;
let key: string;
let admin: string;

beforeAll(async () => {
  api = await startTestApi();
  key = await api.key('org-ops', 'operator');
  admin = await api.key('org-ops', 'admin');
});
afterAll(async () => {
  await api?.close();
});

/** A dispatching campaign of org-ops: its claim's outbox row is pending (no relay runs here). */
async function claimedCampaign(): Promise<{ campaignId: string; outboxId: number }> {
  const c = await api.request('POST', '/v1/campaigns', { key, body: lineCampaignBody() });
  const sent = await api.request('POST', `/v1/campaigns/${c.body.campaignId}/send-now`, { key });
  expect(sent.body.status).toBe('DISPATCHING');
  const { rows } = await api.t.db.query<{ id: number }>(
    `select o.id from outbox o join event e on e.position = o.event_position
      where e.stream_type = 'campaign' and e.stream_id = $1`,
    [c.body.campaignId],
  );
  return { campaignId: c.body.campaignId, outboxId: rows[0]!.id };
}

/** The relay gave up on the row (its attempts ran out): what an operator then requeues or skips. */
const makeDead = (id: number, ordered = false) =>
  api.t.db.query(
    `update outbox set status = 'dead', dead_at = now(), attempts = 5, last_error = 'test: unroutable', ordered = $2
      where id = $1`,
    [id, ordered],
  );

describe('outbox', () => {
  it('pending rows of the organization, with its organization recorded; a row; 400; 404', async () => {
    const { outboxId } = await claimedCampaign();
    const { rows } = await api.t.db.query<{ organization_id: string }>(
      'select organization_id from outbox where id = $1',
      [outboxId],
    );
    expect(rows[0]!.organization_id).toBe('org-ops');
    const pending = await api.request('GET', '/v1/outbox/pending?limit=500', { key });
    expect(pending.status).toBe(200);
    expect(pending.body.items.map((r: { id: number }) => r.id)).toContain(outboxId);
    const row = await api.request('GET', `/v1/outbox/${outboxId}`, { key });
    expect(row.body).toMatchObject({
      id: outboxId,
      status: 'pending',
      destination: 'line_broadcast_rich_message',
    });
    expectProblem(await api.request('GET', '/v1/outbox/abc', { key }), 400, 'params.id');
    expectProblem(await api.request('GET', '/v1/outbox/999999999', { key }), 404);
    expectProblem(
      await api.request('GET', '/v1/outbox/pending?cursor=xyz', { key }),
      400,
      'querystring.cursor',
    );
  });

  it('pages by id with a cursor', async () => {
    const ids = [
      (await claimedCampaign()).outboxId,
      (await claimedCampaign()).outboxId,
      (await claimedCampaign()).outboxId,
    ];
    const seen: number[] = [];
    let cursor: string | null = null;
    do {
      const r = await api.request('GET', `/v1/outbox/pending?limit=2${cursor ? `&cursor=${cursor}` : ''}`, {
        key,
      });
      seen.push(...r.body.items.map((x: { id: number }) => x.id));
      cursor = r.body.nextCursor;
    } while (cursor);
    for (const id of ids) expect(seen).toContain(id);
    expect([...seen].sort((a, b) => a - b)).toEqual(seen);
  });

  it('requeue: a dead row is pending again; 409 for a pending row', async () => {
    const { outboxId } = await claimedCampaign();
    expectIllegal(await api.request('POST', `/v1/outbox/${outboxId}/requeue`, { key }), 'pending');
    await makeDead(outboxId);
    const dead = await api.request('GET', '/v1/outbox/dead', { key });
    expect(dead.body.items.map((r: { id: number }) => r.id)).toContain(outboxId);
    const r = await api.request('POST', `/v1/outbox/${outboxId}/requeue`, { key });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: outboxId, status: 'pending', attempts: 0 });
  });

  it('skip with a reason: skipped, the reason and the key kept; 400 without a reason; 409 once skipped', async () => {
    const { outboxId } = await claimedCampaign();
    await makeDead(outboxId, true);
    const parked = await api.request('GET', '/v1/outbox/parked', { key });
    expect(parked.status).toBe(200);
    expect(parked.body.items.map((p: { id: number }) => p.id)).toContain(outboxId);
    expectProblem(await api.request('POST', `/v1/outbox/${outboxId}/skip`, { key, body: {} }), 400, 'reason');
    const r = await api.request('POST', `/v1/outbox/${outboxId}/skip`, {
      key,
      body: { reason: 'audience deleted' },
    });
    expect(r.status).toBe(200);
    expect(r.body.status).toBe('skipped');
    expect(r.body.lastError).toMatch(/^skipped by api-key:[0-9a-f-]+: audience deleted/);
    expectIllegal(
      await api.request('POST', `/v1/outbox/${outboxId}/skip`, { key, body: { reason: 'again' } }),
      'skipped',
    );
  });
});

describe('verify and stats', () => {
  it("verify: green, then reports the organization's drifted row, not another organization's", async () => {
    const ok = await api.request('GET', '/v1/verify', { key });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ organizationId: 'org-ops', ok: true, drifts: [] });
    expect(ok.body.streamTypes).toContain('campaign');
    const mine = await api.request('POST', '/v1/campaigns', { key, body: lineCampaignBody() });
    const otherKey = await api.key('org-verify-other');
    const theirs = await api.request('POST', '/v1/campaigns', { key: otherKey, body: lineCampaignBody() });
    await api.t.db.query("update campaign set name = 'tampered' where id = any($1::uuid[])", [
      [mine.body.campaignId, theirs.body.campaignId],
    ]);
    const drifted = await api.request('GET', '/v1/verify', { key });
    expect(drifted.body.ok).toBe(false);
    expect(drifted.body.drifts).toHaveLength(1);
    expect(drifted.body.drifts[0]).toMatchObject({
      streamId: mine.body.campaignId,
      field: 'name',
      row: 'tampered',
    });
    const other = await api.request('GET', '/v1/verify', { key: otherKey });
    expect(other.body.drifts.map((d: { streamId: string }) => d.streamId)).toEqual([theirs.body.campaignId]);
    await api.t.db.query("update campaign set name = 'spring sale' where id = any($1::uuid[])", [
      [mine.body.campaignId, theirs.body.campaignId],
    ]);
    const viewer = await api.key('org-ops', 'viewer');
    expectProblem(await api.request('GET', '/v1/verify', { key: viewer }), 403);
  });

  it("verify scans only the caller's organization's streams (counts included); a stream is the organization's its first event names", async () => {
    const a = await api.key('org-scope-a');
    const b = await api.key('org-scope-b');
    const job = (k: string) =>
      api.request('POST', '/v1/cron-jobs', {
        key: k,
        body: {
          name: `job ${crypto.randomUUID().slice(0, 8)}`,
          schedule: '0 * * * *',
          timezone: 'UTC',
          jobType: 'ping',
          payload: { url: 'https://example.com/health' },
        },
      });
    const action = (k: string) =>
      api.request('POST', '/v1/actions', {
        key: k,
        body: {
          mode: 'normal',
          actionType: 'send_message',
          actionConfig: { template: 'hi' },
          delaySeconds: 3600,
        },
      });
    const created = [
      await job(a),
      await job(a),
      await action(a),
      await job(b),
      await action(b),
      await action(b),
    ];
    for (const r of created) expect(r.status, r.text).toBe(201);
    const [, , , jobOfB] = created.map((r) => r.body as { jobId?: string; actionId?: string });
    // What each organization holds, by the log itself: streams and events whose first event names it.
    const holdings = async (organizationId: string) => {
      const { rows } = await api.t.db.query<{ streams: number; events: number }>(
        `select count(distinct (e.stream_type, e.stream_id))::int as streams, count(*)::int as events
           from event e join event f on f.stream_type = e.stream_type and f.stream_id = e.stream_id and f.version = 1
          where e.stream_type = any($1::text[]) and f.data->>'organizationId' = $2`,
        [[...heraldRegistry.stateModels.keys()], organizationId],
      );
      return rows[0]!;
    };
    const verify = async (k: string) => {
      const r = await api.request('GET', '/v1/verify', { key: k });
      expect(r.status, r.text).toBe(200);
      return r.body as { ok: boolean; streams: number; events: number; drifts: { streamId: string }[] };
    };
    expect(await holdings('org-scope-a')).toEqual({ streams: 3, events: expect.any(Number) });
    expect(await verify(a)).toMatchObject({ ok: true, ...(await holdings('org-scope-a')) });
    expect(await verify(b)).toMatchObject({ ok: true, ...(await holdings('org-scope-b')) });

    // A divergence planted in B: its row is moved to A (and renamed). The log says the job is B's: B is
    // told, A hears nothing of it (neither the drift nor the stream's count).
    await api.t.db.query(
      "update cron_job set organization_id = 'org-scope-a', name = 'planted' where id = $1",
      [jobOfB!.jobId],
    );
    const seenByA = await verify(a);
    expect(seenByA).toMatchObject({ ok: true, drifts: [], ...(await holdings('org-scope-a')) });
    const seenByB = await verify(b);
    expect(seenByB.ok).toBe(false);
    expect(seenByB.streams).toBe((await holdings('org-scope-b')).streams);
    expect(new Set(seenByB.drifts.map((d) => d.streamId))).toEqual(new Set([jobOfB!.jobId]));
    expect(seenByB.drifts.map((d) => (d as unknown as { field: string }).field).sort()).toEqual([
      'name',
      'organizationId',
    ]);
    // The CLI stays every organization's unless given one.
    const all = await verifyStates(api.t.db, heraldRegistry);
    expect(all.streams).toBeGreaterThan(seenByA.streams + seenByB.streams);
    expect(all.drifts.map((d) => d.streamId)).toContain(jobOfB!.jobId);
    const cli = await herald(api.t, ['verify', '--organization', 'org-scope-a', '--json']);
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({
      organizationId: 'org-scope-a',
      driftedStreams: 0,
      streams: seenByA.streams,
      events: seenByA.events,
    });
    await api.t.db.query("update cron_job set organization_id = 'org-scope-b', name = $2 where id = $1", [
      jobOfB!.jobId,
      created[3]!.body.name,
    ]);
    expect((await verify(b)).ok).toBe(true);
  });

  it('stats: the dispatch_stats projection of the organization; 400 and 422 for bad ranges', async () => {
    const roles = startRoles(api.runtime.config, { projector: true });
    try {
      await claimedCampaign();
      const stats = await waitFor(
        async () => {
          const r = await api.request('GET', '/v1/stats', { key });
          const claimed = r.body.rows.reduce((n: number, row: { claimed: number }) => n + row.claimed, 0);
          return claimed > 0 ? r : null;
        },
        { what: 'the projector to count the claims' },
      );
      expect(stats.body.rows[0]).toMatchObject({ destination: 'line_broadcast_rich_message' });
      expect(stats.body.rows[0]).not.toHaveProperty('organizationId');
      const otherKey = await api.key('org-stats-other');
      expect((await api.request('GET', '/v1/stats', { key: otherKey })).body.rows).toEqual([]);
    } finally {
      await roles.stop();
    }
    expectProblem(await api.request('GET', '/v1/stats?from=monday', { key }), 400, 'querystring.from');
    const to = await dbTime(api.t, 0);
    const from = await dbTime(api.t, -40 * 86_400);
    expectProblem(await api.request('GET', `/v1/stats?from=${from}&to=${to}`, { key }), 422, 'from');
  });
});

describe('/v1/api-keys', () => {
  it('an admin creates, lists, reads and revokes keys; the new key works until revoked', async () => {
    const created = await api.request('POST', '/v1/api-keys', {
      key: admin,
      body: { role: 'viewer', name: 'dashboard' },
    });
    expect(created.status).toBe(201);
    expect(created.body.apiKey).toMatchObject({
      organizationId: 'org-ops',
      role: 'viewer',
      name: 'dashboard',
      revokedAt: null,
    });
    expect(created.body.key).toMatch(/^hk_[0-9a-f]{8}_/);
    expect(created.body.key.startsWith(created.body.apiKey.prefix)).toBe(true);
    const id = created.body.apiKey.id;
    expect((await api.request('GET', '/v1/campaigns', { key: created.body.key })).status).toBe(200);
    const listed = await api.request('GET', '/v1/api-keys?limit=500', { key: admin });
    expect(listed.body.items.map((k: { id: string }) => k.id)).toContain(id);
    expect(listed.text).not.toContain(created.body.key);
    expect((await api.request('GET', `/v1/api-keys/${id}`, { key: admin })).body.name).toBe('dashboard');
    const revoked = await api.request('POST', `/v1/api-keys/${id}/revoke`, { key: admin });
    expect(revoked.status).toBe(200);
    expect(revoked.body.revokedAt).not.toBeNull();
    expectProblem(await api.request('GET', '/v1/campaigns', { key: created.body.key }), 401);
    expectIllegal(await api.request('POST', `/v1/api-keys/${id}/revoke`, { key: admin }), 'revoked');
    const live = await api.request('GET', '/v1/api-keys?limit=500', { key: admin });
    expect(live.body.items.map((k: { id: string }) => k.id)).not.toContain(id);
  });

  it("an organization's last active admin key cannot be revoked, not even by two revocations at once", async () => {
    const first = await api.key('org-last-admin', 'admin');
    const idOf = async (key: string) =>
      (await api.request('GET', '/v1/api-keys?limit=500', { key: first })).body.items.find(
        (k: { prefix: string }) => key.startsWith(k.prefix),
      ).id as string;
    const firstId = await idOf(first);
    expectIllegal(await api.request('POST', `/v1/api-keys/${firstId}/revoke`, { key: first }), 'last-admin');
    expect((await api.request('GET', '/v1/campaigns', { key: first })).status).toBe(200);
    const second = await api.request('POST', '/v1/api-keys', {
      key: first,
      body: { role: 'admin', name: 'b' },
    });
    expect(second.status).toBe(201);
    const secondId = second.body.apiKey.id as string;
    // Each admin revokes the other at the same moment: one of them stays. The loser
    // gets 409 when both passed authentication before either committed, and 401
    // when the winner's revocation of its key committed first.
    const answers = await Promise.all([
      api.request('POST', `/v1/api-keys/${secondId}/revoke`, { key: first }),
      api.request('POST', `/v1/api-keys/${firstId}/revoke`, { key: second.body.key }),
    ]);
    const [won, lost] = answers.map((a) => a.status).sort();
    expect(won).toBe(200);
    expect([401, 409]).toContain(lost);
    const { rows } = await api.t.db.query<{ n: number }>(
      "select count(*)::int as n from api_key where organization_id = 'org-last-admin' and role = 'admin' and revoked_at is null",
    );
    expect(rows[0]!.n).toBe(1);
  });

  it('400 for a bad role; 403 for an operator; 404 for an unknown key', async () => {
    expectProblem(
      await api.request('POST', '/v1/api-keys', { key: admin, body: { role: 'root' } }),
      400,
      'role',
    );
    expectProblem(await api.request('POST', '/v1/api-keys', { key, body: { role: 'viewer' } }), 403);
    expectProblem(await api.request('GET', '/v1/api-keys', { key }), 403);
    expectProblem(await api.request('GET', `/v1/api-keys/${crypto.randomUUID()}`, { key: admin }), 404);
  });

  it('records the last use at most once a minute', async () => {
    const fresh = await api.key('org-ops', 'viewer');
    await api.request('GET', '/v1/campaigns', { key: fresh });
    const { rows } = await api.t.db.query<{ id: string; last_used_at: Date }>(
      'select id::text, last_used_at from api_key where secret_hash = $1',
      [(await import('../../src/api/auth.js')).hashApiKey(fresh)],
    );
    const first = await waitFor(async () => {
      const r = await api.t.db.query<{ last_used_at: Date | null }>(
        'select last_used_at from api_key where id = $1',
        [rows[0]!.id],
      );
      return r.rows[0]!.last_used_at;
    });
    for (let i = 0; i < 3; i++) await api.request('GET', '/v1/campaigns', { key: fresh });
    const after = await api.t.db.query<{ last_used_at: Date }>(
      'select last_used_at from api_key where id = $1',
      [rows[0]!.id],
    );
    expect(after.rows[0]!.last_used_at.getTime()).toBe(first.getTime());
  });
});

describe('health and metrics on the API port', () => {
  it('/healthz and /readyz answer without a key; /metrics counts requests by route and status', async () => {
    expect((await api.request('GET', '/healthz')).status).toBe(200);
    const ready = await api.request('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.checks.find((c: { name: string }) => c.name === 'database').ok).toBe(true);
    const count = () => httpRequestCount(api, 'GET', '/v1/campaigns/:id', 404);
    const before = await count();
    await api.request('GET', `/v1/campaigns/${crypto.randomUUID()}`, { key });
    await api.request('GET', `/v1/campaigns/${crypto.randomUUID()}`, { key });
    expect(await count()).toBe(before + 2);
    const text = (await api.request('GET', '/metrics')).text;
    expect(text).toMatch(
      /herald_http_request_duration_seconds_bucket\{[^}]*route="\/v1\/campaigns\/:id"[^}]*status="404"/,
    );
    expectProblem(await api.request('GET', '/v2/nothing', { key }), 404);
    expect((await api.request('GET', '/metrics')).text).toContain('route="unmatched",status="404"');
  });
});
