/**
 * A resource created with an Idempotency-Key shows it (issue 23, item 5), over a real socket on a real
 * database: cron jobs and scheduled actions as `idempotencyKey`, campaigns (LINE, SMS inline, SMS CSV)
 * as `requestIdempotencyKey` — a campaign's `idempotencyKey` is the organization's own unique key from
 * the body — in the create's answer, its replay, the GET and the list; null without the header; and
 * the history's replay of the events gives the same.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { inlineRequest } from '../support/sms.js';
import { type ApiFixture, lineCampaignBody, startTestApi } from './support/api.js';

const ORG = 'org-keys';
let api: ApiFixture;
let key: string;

beforeAll(async () => {
  api = await startTestApi();
  key = await api.key(ORG);
  await new PostgresLedger(api.t.db).credit({ organizationId: ORG, key: 'top-up', amount: '1000' });
}, 60_000);
afterAll(async () => api?.close());

const post = (path: string, body: unknown, idempotencyKey?: string) =>
  api.request('POST', path, {
    key,
    body,
    ...(idempotencyKey ? { headers: { 'idempotency-key': idempotencyKey } } : {}),
  });
const get = (path: string) => api.request('GET', path, { key });

const cronJob = () => ({
  name: `job ${crypto.randomUUID().slice(0, 8)}`,
  schedule: '0 * * * *',
  timezone: 'UTC',
  jobType: 'ping',
  payload: { url: 'https://example.com/health' },
});

describe('the Idempotency-Key on the resource', () => {
  it('a cron job: in the answer, its replay, the GET and the list; null without one', async () => {
    const body = cronJob();
    const created = await post('/v1/cron-jobs', body, 'cron-create-1');
    expect(created.status, created.text).toBe(201);
    expect(created.body.idempotencyKey).toBe('cron-create-1');
    const replayed = await post('/v1/cron-jobs', body, 'cron-create-1');
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.body.idempotencyKey).toBe('cron-create-1');
    const id = created.body.jobId as string;
    expect((await get(`/v1/cron-jobs/${id}`)).body.idempotencyKey).toBe('cron-create-1');
    const listed = (await get('/v1/cron-jobs?limit=500')).body.items as {
      jobId: string;
      idempotencyKey: string;
    }[];
    expect(listed.find((j) => j.jobId === id)?.idempotencyKey).toBe('cron-create-1');

    const plain = await post('/v1/cron-jobs', cronJob());
    expect(plain.status).toBe(201);
    expect((await get(`/v1/cron-jobs/${plain.body.jobId}`)).body.idempotencyKey).toBeNull();
  });

  it('a scheduled action', async () => {
    const body = {
      mode: 'normal',
      actionType: 'send_message',
      actionConfig: { template: 'hi' },
      delaySeconds: 3600,
    };
    const created = await post('/v1/actions', body, 'action-create-1');
    expect(created.status, created.text).toBe(201);
    const id = created.body.actionId as string;
    expect((await get(`/v1/actions/${id}`)).body.idempotencyKey).toBe('action-create-1');
    const listed = (await get('/v1/actions?limit=500')).body.items as {
      actionId: string;
      idempotencyKey: string;
    }[];
    expect(listed.find((a) => a.actionId === id)?.idempotencyKey).toBe('action-create-1');
    const plain = await post('/v1/actions', body);
    expect((await get(`/v1/actions/${plain.body.actionId}`)).body.idempotencyKey).toBeNull();
  });

  it('a LINE campaign: requestIdempotencyKey, beside the body’s own idempotencyKey', async () => {
    const created = await post(
      '/v1/campaigns',
      lineCampaignBody({ idempotencyKey: 'org-own-key' }),
      'line-create-1',
    );
    expect(created.status, created.text).toBe(201);
    const id = created.body.campaignId as string;
    const read = (await get(`/v1/campaigns/${id}`)).body;
    expect(read).toMatchObject({ requestIdempotencyKey: 'line-create-1', idempotencyKey: 'org-own-key' });
    const listed = (await get('/v1/campaigns?limit=500')).body.items as { campaignId: string }[];
    expect(listed.find((c) => c.campaignId === id)).toMatchObject({ requestIdempotencyKey: 'line-create-1' });
    // The history replays the events into the same state.
    const history = await get(`/v1/campaigns/${id}/history`);
    expect(history.status, history.text).toBe(200);
    expect(JSON.stringify(history.body)).toContain('line-create-1');

    const plain = await post('/v1/campaigns', lineCampaignBody());
    expect((await get(`/v1/campaigns/${plain.body.campaignId}`)).body.requestIdempotencyKey).toBeNull();
  });

  it('an SMS campaign, inline and from a CSV upload', async () => {
    const inline = await post('/v1/campaigns', { channel: 'sms', ...inlineRequest() }, 'sms-create-1');
    expect(inline.status, inline.text).toBe(201);
    expect(inline.body.requestIdempotencyKey).toBe('sms-create-1');
    expect((await get(`/v1/campaigns/${inline.body.campaignId}`)).body.requestIdempotencyKey).toBe(
      'sms-create-1',
    );

    const meta = {
      name: 'keyed upload',
      messageType: 'PROMOTIONAL',
      lang: 'bn',
      campaignId: 'BTRC-KEY-1',
      templateType: 'GENERIC',
      template: 'বৈশাখী অফার!',
    };
    const form = new FormData();
    form.append('meta', JSON.stringify(meta));
    form.append(
      'file',
      new Blob(['msisdn\n01712345678\n01812345678\n'], { type: 'text/csv' }),
      'numbers.csv',
    );
    const response = await fetch(`${api.url}/v1/campaigns/bulk`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'idempotency-key': 'sms-bulk-1' },
      body: form,
    });
    const text = await response.text();
    expect(response.status, text).toBe(202);
    const campaignId = JSON.parse(text).campaign.campaignId as string;
    expect((await get(`/v1/campaigns/${campaignId}`)).body.requestIdempotencyKey).toBe('sms-bulk-1');
  });
});
