/**
 * SMS campaigns over the HTTP API (a real socket): `POST /v1/campaigns` with `channel: "sms"` (201,
 * charged once, replayed with the same Idempotency-Key, 409 with `Retry-After: 2` while the first
 * request is still charging, 402 when the balance is short, 422 naming field and rule with nothing
 * written), `POST /v1/campaigns/preview` (nothing written), `POST /v1/campaigns/bulk` (multipart: 202
 * BUILDING, replayed, refused without meta or for transactional traffic), and the campaign's SMS facts
 * on `GET /v1/campaigns/{id}`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { waitFor } from '../../src/testing/wait.js';
import { inlineRequest, writtenRows } from '../support/sms.js';
import { type ApiFixture, type ApiReply, expectProblem, startTestApi } from './support/api.js';

let api: ApiFixture;
let key: string;
let ledger: PostgresLedger;
const ORG = 'org-sms-api';

beforeAll(async () => {
  api = await startTestApi();
  key = await api.key(ORG);
  ledger = new PostgresLedger(api.t.db);
  await ledger.credit({ organizationId: ORG, key: 'top-up', amount: '1000' });
});
afterAll(async () => {
  await api?.close();
});

const smsBody = (overrides: Record<string, unknown> = {}) => ({
  channel: 'sms',
  ...inlineRequest(),
  ...overrides,
});
const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  api.request('POST', path, { key, body, headers });

async function bulk(meta: unknown, csv: string | null, headers: Record<string, string> = {}) {
  const form = new FormData();
  if (meta !== undefined) form.append('meta', JSON.stringify(meta));
  if (csv !== null) form.append('file', new Blob([csv], { type: 'text/csv' }), 'numbers.csv');
  const response = await fetch(`${api.url}/v1/campaigns/bulk`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, ...headers },
    body: form,
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, body: text ? JSON.parse(text) : null };
}

describe('POST /v1/campaigns (sms)', () => {
  it('201: the campaign QUEUED and charged once; the same Idempotency-Key replays it', async () => {
    const body = smsBody({ name: 'api sms' });
    const first = await post('/v1/campaigns', body, { 'idempotency-key': 'sms-api-1' });
    expect(first.status, first.text).toBe(201);
    expect(first.body).toMatchObject({
      channel: 'sms',
      status: 'QUEUED',
      organizationId: ORG,
      sms: { recipients: 3, chargeKey: `campaign:${first.body.campaignId}`, progress: { pending: 3 } },
    });
    expect(first.headers.get('location')).toBe(`/v1/campaigns/${first.body.campaignId}`);
    const again = await post('/v1/campaigns', body, { 'idempotency-key': 'sms-api-1' });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.campaignId).toBe(first.body.campaignId);
    const { rows } = await api.t.db.query<{ n: number }>(
      `select count(*)::int as n from billing_entry where organization_id = $1 and kind = 'deduction'`,
      [ORG],
    );
    expect(rows[0]!.n).toBe(1);
    const got = await api.request('GET', `/v1/campaigns/${first.body.campaignId}`, { key });
    expect(got.body.sms).toMatchObject({ messageType: 'PROMOTIONAL', totalCost: first.body.sms.totalCost });
    // The actor of its events is the key; the correlation id the request id.
    const { rows: events } = await api.t.db.query<{ actor: string }>(
      `select meta->>'actor' as actor from event where stream_id = $1 order by version limit 1`,
      [first.body.campaignId],
    );
    expect(events[0]!.actor).toMatch(/^api-key:/);
  });

  it('409 with Retry-After: 2 while the first request with the key is still charging', async () => {
    // Hold the organization's ledger row: the first request waits in its deduction, key reserved.
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let held!: () => void;
    const locked = new Promise<void>((resolve) => {
      held = resolve;
    });
    const holder = api.t.db.transaction(async (tx) => {
      await tx.query('select 1 from billing_account where organization_id = $1 for update', [ORG]);
      held();
      await released;
    });
    await locked;
    const body = smsBody({ name: 'slow charge' });
    const first = post('/v1/campaigns', body, { 'idempotency-key': 'sms-api-slow' });
    await waitFor(
      async () =>
        (
          await api.t.db.query(
            `select 1 from idempotency_key where key = 'sms-api-slow' and state = 'in_progress'`,
          )
        ).rowCount === 1,
      { what: 'the first request reserved its key' },
    );
    const second = await post('/v1/campaigns', body, { 'idempotency-key': 'sms-api-slow' });
    expectProblem(second, 409);
    expect(second.headers.get('retry-after')).toBe('2');
    expect(second.body.code).toBe('IDEMPOTENCY_KEY_IN_USE');
    release();
    await holder;
    expect((await first).status).toBe(201);
    const third = await post('/v1/campaigns', body, { 'idempotency-key': 'sms-api-slow' });
    expect(third.headers.get('idempotent-replayed')).toBe('true');
  });

  it('402 when the balance does not cover the total', async () => {
    const poor = await api.key('org-sms-poor');
    const reply = await api.request('POST', '/v1/campaigns', { key: poor, body: smsBody() });
    expectProblem(reply, 402);
    expect(reply.body.code).toBe('INSUFFICIENT_BALANCE');
  });

  it('422 naming the field and the rule, nothing written; 400 for the shape', async () => {
    const before = await writtenRows(api.t.db);
    const tooLong = await post(
      '/v1/campaigns',
      smsBody({ recipients: [{ msisdn: '01712345678', tags: { name: 'x'.repeat(101), balance: '1' } }] }),
    );
    expectProblem(tooLong, 422, 'recipients[0].tags.name');
    expect(tooLong.body.errors).toContainEqual(
      expect.objectContaining({ field: 'recipients[0].tags.name', rule: 'tags.too-long' }),
    );
    const english = await post('/v1/campaigns', smsBody({ lang: 'en', template: 'Hi {{name}} {{balance}}' }));
    expect(english.body.errors).toContainEqual(
      expect.objectContaining({ field: 'lang', rule: 'promotional.lang-bn' }),
    );
    expectProblem(await post('/v1/campaigns', smsBody({ colour: 'red' })), 400, 'colour');
    expect(await writtenRows(api.t.db)).toEqual(before);
  });
});

describe('POST /v1/campaigns/preview', () => {
  it('prices every recipient and writes nothing', async () => {
    const before = await writtenRows(api.t.db);
    const reply = await post('/v1/campaigns/preview', inlineRequest());
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body).toMatchObject({ recipients: 3, messageType: 'PROMOTIONAL' });
    expect(reply.body.messages[0]).toMatchObject({
      msisdn: '8801712345678',
      operator: 'GP',
      encoding: 'UCS2',
    });
    expect(await writtenRows(api.t.db)).toEqual(before);
    const invalid = await post('/v1/campaigns/preview', inlineRequest({ templateType: 'GENERIC' }));
    expect(invalid.body.errors).toContainEqual(
      expect.objectContaining({ field: 'template', rule: 'template.tags-not-allowed' }),
    );
  });
});

describe('POST /v1/campaigns/bulk', () => {
  const meta = {
    name: 'api upload',
    messageType: 'PROMOTIONAL',
    lang: 'bn',
    campaignId: 'BTRC-API-1',
    templateType: 'GENERIC',
    template: 'বৈশাখী অফার!',
  };

  it('202 with the BUILDING campaign and its upload; the same key and file replay it', async () => {
    const csv = '\uFEFFmsisdn\n01712345678\n01812345678\n';
    const first = await bulk(meta, csv, { 'idempotency-key': 'bulk-api-1' });
    expect(first.status, first.text).toBe(202);
    expect(first.body.campaign).toMatchObject({ status: 'BUILDING', channel: 'sms', sms: { source: 'csv' } });
    expect(first.body.upload).toMatchObject({
      status: 'PENDING',
      fileName: null,
      sizeBytes: Buffer.byteLength(csv),
    });
    const again = await bulk(meta, csv, { 'idempotency-key': 'bulk-api-1' });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.campaign.campaignId).toBe(first.body.campaign.campaignId);
    const otherFile = await bulk(meta, '01912345678\n', { 'idempotency-key': 'bulk-api-1' });
    expectProblem(otherFile, 422);
    expect(otherFile.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  it('GET /v1/campaigns/{id}/upload: the build as it stands; 404 for another organization or an inline campaign', async () => {
    const csv = 'msisdn\n01712345679\n';
    const created = await bulk({ ...meta, name: 'upload view' }, csv);
    const id = created.body.campaign.campaignId;
    const upload = await api.request('GET', `/v1/campaigns/${id}/upload`, { key });
    expect(upload.status, upload.text).toBe(200);
    expect(upload.body).toMatchObject({
      id: created.body.upload.id,
      status: 'PENDING',
      attempt: 0,
      rejectedCount: 0,
      rejectedRows: [],
      error: null,
    });
    const stranger = await api.request('GET', `/v1/campaigns/${id}/upload`, {
      key: await api.key('org-sms-api-other'),
    });
    expectProblem(stranger, 404);
    const inline = await post('/v1/campaigns', smsBody({ name: 'inline, no upload' }));
    expect(inline.status, inline.text).toBe(201);
    expectProblem(await api.request('GET', `/v1/campaigns/${inline.body.campaignId}/upload`, { key }), 404);
  });

  it('a BUILDING campaign without saved recipients is cancelled at once (nothing charged): its upload FAILED', async () => {
    const created = await bulk({ ...meta, name: 'cancel while building' }, 'msisdn\n01712345680\n');
    const id = created.body.campaign.campaignId;
    const before = await api.request('GET', `/v1/campaigns/${id}`, { key });
    expect(before.body.commands).toContain('cancel');
    const cancelled = await post(`/v1/campaigns/${id}/cancel`, { reason: 'wrong file' });
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'CANCELLED', sms: { recipients: 0 } });
    const upload = await api.request('GET', `/v1/campaigns/${id}/upload`, { key });
    expect(upload.body).toMatchObject({ status: 'FAILED', error: 'cancelled during its build: wrong file' });
    const { rows } = await api.t.db.query(
      'select 1 from billing_entry where organization_id = $1 and key = $2',
      [ORG, `campaign:${id}`],
    );
    expect(rows).toEqual([]);
    // Cancelled is final: a second cancel is refused naming the status.
    expectProblem(await post(`/v1/campaigns/${id}/cancel`, {}), 409);
  });

  it('422: transactional traffic, a missing meta or file, a non-multipart body', async () => {
    const transactional = await bulk({ ...meta, messageType: 'TRANSACTIONAL' }, '01712345678\n');
    expect(transactional.body.errors).toContainEqual(
      expect.objectContaining({ field: 'messageType', rule: 'bulk.promotional-only' }),
    );
    const noMeta = await bulk(undefined, '01712345678\n');
    expect(noMeta.body.errors).toContainEqual(
      expect.objectContaining({ field: 'meta', rule: 'meta.required' }),
    );
    const noFile = await bulk(meta, null);
    expect(noFile.body.errors).toContainEqual(
      expect.objectContaining({ field: 'file', rule: 'file.required' }),
    );
    const json = await post('/v1/campaigns/bulk', meta);
    expect(json.status).toBeGreaterThanOrEqual(400);
    expect(json.status).toBeLessThan(500);
  });

  it('a meta part PostgreSQL cannot store or recursion cannot walk is a 422 naming the field, nothing written (fuzzer: 500)', async () => {
    const before = await api.t.db.query<{ n: number }>('select count(*)::int as n from event');
    const csv = '01712345678\n';
    const rawMeta = async (text: string): Promise<ApiReply> => {
      const form = new FormData();
      form.append('meta', text);
      form.append('file', new Blob([csv], { type: 'text/csv' }), 'numbers.csv');
      return fetch(`${api.url}/v1/campaigns/bulk`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: form,
      }).then(async (r) => ({ status: r.status, headers: r.headers, text: '', body: await r.json() }));
    };
    const deep = await rawMeta(`{"name":${'['.repeat(5_000)}1${']'.repeat(5_000)}}`);
    expectProblem(deep, 422);
    expect(deep.body.errors[0]).toMatchObject({
      rule: 'meta.unstorable',
      field: expect.stringMatching(/^meta\.name(\[0\])+$/),
    });
    expectProblem(await rawMeta(JSON.stringify({ ...meta, name: 'x\ud800' })), 422, 'meta.name');
    expectProblem(await rawMeta(JSON.stringify({ ...meta, template: 'a\u0000b' })), 422, 'meta.template');
    expectProblem(await rawMeta(`{"__proto__":{"polluted":true},"name":"n"}`), 422, 'meta.__proto__');
    const after = await api.t.db.query<{ n: number }>('select count(*)::int as n from event');
    expect(after.rows[0]!.n).toBe(before.rows[0]!.n);
  });
});
