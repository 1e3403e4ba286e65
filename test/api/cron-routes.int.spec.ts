/**
 * `/v1/cron-jobs` and `/v1/cron-runs` over a real socket: every route's happy path, 400/422 naming the
 * field, 409 naming the status; commands record the key as `by`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, dbTime, expectIllegal, expectProblem, startTestApi } from './support/api.js';

let api: ApiFixture;
let key: string;

beforeAll(async () => {
  api = await startTestApi();
  key = await api.key('org-cron');
});
afterAll(async () => {
  await api?.close();
});

const pingJob = (overrides: Record<string, unknown> = {}) => ({
  name: `job ${crypto.randomUUID().slice(0, 8)}`,
  schedule: '0 * * * *',
  timezone: 'Europe/Berlin',
  jobType: 'ping',
  payload: { url: 'https://example.com/health' },
  ...overrides,
});
const send = (method: string, path: string, body?: unknown) =>
  api.request(method, path, { key, ...(body === undefined ? {} : { body }) });
const createJob = async (overrides: Record<string, unknown> = {}) => {
  const r = await send('POST', '/v1/cron-jobs', pingJob(overrides));
  expect(r.status, r.text).toBe(201);
  return r.body as { jobId: string; status: string; name: string };
};

describe('POST /v1/cron-jobs', () => {
  it('creates a job with its policies and next run; secrets are never returned', async () => {
    const r = await send(
      'POST',
      '/v1/cron-jobs',
      pingJob({ overlap: 'buffer-one', catchUp: { mode: 'run-latest' } }),
    );
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      status: 'active',
      overlap: 'buffer-one',
      catchUp: { mode: 'run-latest', cap: 10 },
    });
    expect(r.body.nextRunAt).not.toBeNull();
    const signed = await send(
      'POST',
      '/v1/cron-jobs',
      pingJob({
        jobType: 'webhook',
        payload: { url: 'https://example.com/hook', signingSecret: 'a-very-long-signing-secret' },
      }),
    );
    expect(signed.status).toBe(201);
    expect(signed.body.payload).toMatchObject({ url: 'https://example.com/hook' });
    expect(signed.text).not.toContain('a-very-long-signing-secret');
  });

  it('400 for the shape, 422 for the domain rules, naming the field', async () => {
    expectProblem(await send('POST', '/v1/cron-jobs', pingJob({ schedule: '' })), 400, 'schedule');
    expectProblem(await send('POST', '/v1/cron-jobs', pingJob({ overlap: 'queue' })), 400, 'overlap');
    expectProblem(
      await send('POST', '/v1/cron-jobs', pingJob({ schedule: 'every minute' })),
      422,
      'schedule',
    );
    expectProblem(
      await send('POST', '/v1/cron-jobs', pingJob({ timezone: 'Mars/Olympus' })),
      422,
      'timezone',
    );
    expectProblem(await send('POST', '/v1/cron-jobs', pingJob({ jobType: 'fax' })), 422, 'jobType');
  });
});

describe('reads', () => {
  it('get, list by name with a cursor; 400 and 404', async () => {
    const jobs = [
      await createJob({ name: 'aaa 1' }),
      await createJob({ name: 'aaa 2' }),
      await createJob({ name: 'aaa 3' }),
    ];
    expect((await send('GET', `/v1/cron-jobs/${jobs[0]!.jobId}`)).body.name).toBe('aaa 1');
    const names: string[] = [];
    let cursor: string | null = null;
    do {
      const r = await send('GET', `/v1/cron-jobs?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(r.status).toBe(200);
      names.push(...r.body.items.map((j: { name: string }) => j.name));
      cursor = r.body.nextCursor;
    } while (cursor);
    expect(names.slice(0, 3)).toEqual(['aaa 1', 'aaa 2', 'aaa 3']);
    expect([...names].sort()).toEqual(names);
    expectProblem(await send('GET', '/v1/cron-jobs?includeDeleted=maybe'), 400, 'querystring.includeDeleted');
    expectProblem(await send('GET', '/v1/cron-jobs/abc'), 400, 'params.id');
    expectProblem(await send('GET', `/v1/cron-jobs/${crypto.randomUUID()}`), 404);
  });
});

describe('job commands', () => {
  it('PATCH changes the schedule; 400 for nothing to change; 409 once deleted', async () => {
    const job = await createJob();
    const r = await send('PATCH', `/v1/cron-jobs/${job.jobId}`, { schedule: '*/5 * * * *' });
    expect(r.status).toBe(200);
    expect(r.body.schedule).toBe('*/5 * * * *');
    expectProblem(await send('PATCH', `/v1/cron-jobs/${job.jobId}`, {}), 400, '(root)');
    expectProblem(
      await send('PATCH', `/v1/cron-jobs/${job.jobId}`, { schedule: '61 * * * *' }),
      422,
      'schedule',
    );
    expect((await send('DELETE', `/v1/cron-jobs/${job.jobId}`)).body.status).toBe('deleted');
    expectIllegal(await send('PATCH', `/v1/cron-jobs/${job.jobId}`, { schedule: '0 0 * * *' }), 'deleted');
    expectIllegal(await send('DELETE', `/v1/cron-jobs/${job.jobId}`), 'deleted');
  });

  it('pause (by the key) and resume; 400 without a reason; 409 for the wrong status', async () => {
    const job = await createJob();
    expectIllegal(await send('POST', `/v1/cron-jobs/${job.jobId}/resume`), 'active');
    expectProblem(await send('POST', `/v1/cron-jobs/${job.jobId}/pause`, {}), 400, 'reason');
    const paused = await send('POST', `/v1/cron-jobs/${job.jobId}/pause`, { reason: 'vendor outage' });
    expect(paused.body).toMatchObject({ status: 'paused', pausedReason: 'vendor outage' });
    expect(paused.body.pausedBy).toMatch(/^api-key:/);
    expectIllegal(await send('POST', `/v1/cron-jobs/${job.jobId}/pause`, { reason: 'again' }), 'paused');
    expect((await send('POST', `/v1/cron-jobs/${job.jobId}/resume`)).body.status).toBe('active');
  });

  it('trigger: a manual run (201, readable at /v1/cron-runs/:id); 409 for a deleted job', async () => {
    const job = await createJob();
    const r = await send('POST', `/v1/cron-jobs/${job.jobId}/trigger`);
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ jobId: job.jobId, trigger: 'manual', fate: 'manual', status: 'queued' });
    expect(r.headers.get('location')).toBe(`/v1/cron-runs/${r.body.runId}`);
    expect((await send('GET', `/v1/cron-runs/${r.body.runId}`)).body.runId).toBe(r.body.runId);
    expectProblem(await send('GET', '/v1/cron-runs/x'), 400, 'params.id');
    expectProblem(await send('GET', `/v1/cron-runs/${crypto.randomUUID()}`), 404);
    await send('DELETE', `/v1/cron-jobs/${job.jobId}`);
    expectIllegal(await send('POST', `/v1/cron-jobs/${job.jobId}/trigger`), 'deleted');
  });

  it('runs, ledger and upcoming; 400 for bad ranges or counts', async () => {
    const job = await createJob();
    const run = (await send('POST', `/v1/cron-jobs/${job.jobId}/trigger`)).body;
    const runs = await send('GET', `/v1/cron-jobs/${job.jobId}/runs?limit=10`);
    expect(runs.body.items.map((r: { runId: string }) => r.runId)).toEqual([run.runId]);
    expect(runs.body.nextCursor).toBeNull();
    const ledger = await send('GET', `/v1/cron-jobs/${job.jobId}/ledger`);
    expect(ledger.status).toBe(200);
    expect(
      ledger.body.entries.some(
        (e: { runId: string; fate: string }) => e.runId === run.runId && e.fate === 'manual',
      ),
    ).toBe(true);
    const upcoming = await send('GET', `/v1/cron-jobs/${job.jobId}/upcoming?count=3`);
    expect(upcoming.body.occurrences).toHaveLength(3);
    for (const o of upcoming.body.occurrences) expect(new Date(o.at).getUTCMinutes()).toBe(0);
    expectProblem(
      await send('GET', `/v1/cron-jobs/${job.jobId}/runs?from=yesterday`),
      400,
      'querystring.from',
    );
    expectProblem(await send('GET', `/v1/cron-jobs/${job.jobId}/ledger?limit=0`), 400, 'querystring.limit');
    expectProblem(
      await send('GET', `/v1/cron-jobs/${job.jobId}/upcoming?count=101`),
      400,
      'querystring.count',
    );
  });

  it('backfill: a dry run lists and writes nothing, the real one creates those runs; 400; 422; 409', async () => {
    const job = await createJob();
    const to = await dbTime(api.t, -60);
    const from = await dbTime(api.t, -3 * 3600 - 60);
    const dry = await send('POST', `/v1/cron-jobs/${job.jobId}/backfill?dryRun=true`, { from, to });
    expect(dry.status).toBe(200);
    expect(dry.body.dryRun).toBe(true);
    expect(dry.body.runs).toHaveLength(3);
    expect((await send('GET', `/v1/cron-jobs/${job.jobId}/runs`)).body.items).toHaveLength(0);
    const real = await send('POST', `/v1/cron-jobs/${job.jobId}/backfill`, { from, to });
    expect(real.body.runs.map((r: { scheduledFor: string }) => r.scheduledFor)).toEqual(
      dry.body.runs.map((r: { scheduledFor: string }) => r.scheduledFor),
    );
    expect((await send('GET', `/v1/cron-jobs/${job.jobId}/runs`)).body.items).toHaveLength(3);
    expectProblem(await send('POST', `/v1/cron-jobs/${job.jobId}/backfill`, { from }), 400, 'to');
    expectProblem(
      await send('POST', `/v1/cron-jobs/${job.jobId}/backfill`, { from: to, to: from }),
      422,
      'to',
    );
    await send('DELETE', `/v1/cron-jobs/${job.jobId}`);
    expectIllegal(await send('POST', `/v1/cron-jobs/${job.jobId}/backfill`, { from, to }), 'deleted');
  });
});
