/**
 * Cron quotas over a real socket on a real database (issue 23, item 6): a schedule that can fire sooner
 * than the organization's minimum interval is 422 naming `schedule` (on create and on update, nothing
 * changed), an organization with its own limits gets them, and past the most active jobs a create or a
 * resume is 409 naming the limit — also when many creates race for the last places.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, expectProblem, startTestApi } from './support/api.js';

const MAX_ACTIVE = 3;

let api: ApiFixture;

beforeAll(async () => {
  api = await startTestApi({
    HERALD_CRON_MIN_INTERVAL_SECONDS: '10',
    HERALD_CRON_MAX_ACTIVE_JOBS: String(MAX_ACTIVE),
    HERALD_CRON_ORGANIZATION_LIMITS: JSON.stringify({
      'org-fast': { minIntervalSeconds: 1, maxActiveJobs: 50 },
    }),
  });
}, 60_000);
afterAll(async () => api?.close());

const pingJob = (overrides: Record<string, unknown> = {}) => ({
  name: `job ${crypto.randomUUID().slice(0, 8)}`,
  schedule: '0 * * * *',
  timezone: 'Europe/Berlin',
  jobType: 'ping',
  payload: { url: 'https://example.com/health' },
  ...overrides,
});
const create = (key: string, overrides: Record<string, unknown> = {}) =>
  api.request('POST', '/v1/cron-jobs', { key, body: pingJob(overrides) });
const activeJobs = async (organizationId: string) =>
  (
    await api.t.db.query<{ n: number }>(
      "select count(*)::int as n from cron_job where organization_id = $1 and status = 'active'",
      [organizationId],
    )
  ).rows[0]!.n;

describe('the minimum interval between occurrences', () => {
  it('refuses a schedule that fires sooner, with 422 naming schedule, and allows one that does not', async () => {
    const key = await api.key('org-interval');
    for (const schedule of ['*/5 * * * * *', '* * * * * *', '0,5 * * * * *', '0,59 0,1 * * * *']) {
      const refused = await create(key, { schedule });
      expectProblem(refused, 422, 'schedule');
      expect(refused.body.detail).toContain('HERALD_CRON_MIN_INTERVAL_SECONDS');
    }
    expect((await create(key, { schedule: '*/10 * * * * *' })).status).toBe(201);
    expect((await create(key, { schedule: '*/10 * * * *' })).status).toBe(201);
    expect(await activeJobs('org-interval')).toBe(2);
  });

  it('refuses an update to a faster schedule and leaves the job as it was', async () => {
    const key = await api.key('org-interval-update');
    const created = await create(key, { schedule: '*/30 * * * * *' });
    expect(created.status).toBe(201);
    const id = created.body.jobId as string;
    const refused = await api.request('PATCH', `/v1/cron-jobs/${id}`, {
      key,
      body: { schedule: '*/2 * * * * *' },
    });
    expectProblem(refused, 422, 'schedule');
    const job = await api.request('GET', `/v1/cron-jobs/${id}`, { key });
    expect(job.body.schedule).toBe('*/30 * * * * *');
    const allowed = await api.request('PATCH', `/v1/cron-jobs/${id}`, {
      key,
      body: { schedule: '*/15 * * * * *' },
    });
    expect(allowed.status, allowed.text).toBe(200);
  });

  it('the preview refuses it too, naming expression', async () => {
    const key = await api.key('org-interval-preview');
    const preview = (expression: string) =>
      api.request('POST', '/v1/cron-jobs/preview', { key, body: { expression, timezone: 'UTC' } });
    const refused = await preview('*/5 * * * * *');
    expectProblem(refused, 422, 'expression');
    expect(refused.body.detail).toContain('HERALD_CRON_MIN_INTERVAL_SECONDS');
    const allowed = await preview('*/10 * * * * *');
    expect(allowed.status, allowed.text).toBe(200);
    expect(allowed.body.valid).toBe(true);
  });

  it("applies an organization's own limits", async () => {
    const key = await api.key('org-fast');
    expect((await create(key, { schedule: '* * * * * *' })).status).toBe(201);
  });
});

describe('the most active jobs per organization', () => {
  it('refuses one more active job with 409 naming the limit; paused jobs do not count until resumed', async () => {
    const key = await api.key('org-cap');
    const ids: string[] = [];
    for (let i = 0; i < MAX_ACTIVE; i++) {
      const r = await create(key);
      expect(r.status, r.text).toBe(201);
      ids.push(r.body.jobId);
    }
    const refused = await create(key);
    expectProblem(refused, 409);
    expect(refused.body.detail).toContain('HERALD_CRON_MAX_ACTIVE_JOBS');
    expect(refused.body.detail).toContain(`${MAX_ACTIVE} active cron jobs`);

    const paused = await create(key, { paused: true });
    expect(paused.status, paused.text).toBe(201);
    expectProblem(await api.request('POST', `/v1/cron-jobs/${paused.body.jobId}/resume`, { key }), 409);
    expect(await activeJobs('org-cap')).toBe(MAX_ACTIVE);

    // Pausing one frees a place: the paused job may be resumed.
    const pause = await api.request('POST', `/v1/cron-jobs/${ids[0]}/pause`, {
      key,
      body: { reason: 'make room' },
    });
    expect(pause.status, pause.text).toBe(200);
    const resumed = await api.request('POST', `/v1/cron-jobs/${paused.body.jobId}/resume`, { key });
    expect(resumed.status, resumed.text).toBe(200);
    // Deleting one frees a place for a create.
    expect((await api.request('DELETE', `/v1/cron-jobs/${ids[1]}`, { key })).status).toBe(200);
    expect((await create(key)).status).toBe(201);
    expect(await activeJobs('org-cap')).toBe(MAX_ACTIVE);
  });

  it('lets exactly the free places through when creates race (the count is taken under a lock)', async () => {
    const key = await api.key('org-race');
    expect((await create(key)).status).toBe(201);
    const replies = await Promise.all(Array.from({ length: 12 }, () => create(key)));
    const statuses = replies.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(MAX_ACTIVE - 1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(12 - (MAX_ACTIVE - 1));
    expect(await activeJobs('org-race')).toBe(MAX_ACTIVE);
  });

  it('counts each organization on its own', async () => {
    const key = await api.key('org-other');
    for (let i = 0; i < MAX_ACTIVE; i++) expect((await create(key)).status).toBe(201);
  });
});
