/**
 * The HTTP API charging through the HTTP billing adapter (HERALD_BILLING=http, the API role's own port),
 * over real sockets both ways: billing that does not answer is a 502 problem with `Retry-After: 2` and
 * nothing charged that a retry does not finish — the retry with the same Idempotency-Key answers 201 and
 * the billing server's ledger holds one deduction (create and resend alike); a short balance is a 402
 * problem with nothing queued; and the API's logs never print the billing token.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CampaignConfig } from '../../src/aggregates/campaign/settings.js';
import { configuredBilling } from '../../src/aggregates/campaign/sms/billing.js';
import type { BillingSimulator } from '../../src/aggregates/campaign/sms/billing-simulator.js';
import { billingEnv, startTestBillingServer, TEST_BILLING_TOKEN } from '../support/billing.js';
import { inlineRequest, msisdns } from '../support/sms.js';
import { ALWAYS_OPEN, deliveryFixture } from '../support/sms-delivery.js';
import { type ApiFixture, expectProblem, startTestApi } from './support/api.js';

let api: ApiFixture;
let server: BillingSimulator;
let key: string;
const lines: string[] = [];
const ORG = 'org-sms'; // the delivery fixture's organization
beforeAll(async () => {
  server = await startTestBillingServer();
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    }),
  );
  api = await startTestApi({ ...ALWAYS_OPEN, ...billingEnv(server) }, { logger, seedLine: false });
  key = await api.key(ORG);
  server.credit(ORG, '1000', 'top-up');
});
afterAll(async () => {
  await api?.close();
  await server?.close();
});

const smsBody = (overrides: Record<string, unknown> = {}) => ({
  channel: 'sms',
  ...inlineRequest(),
  ...overrides,
});
const deductionsOf = (k: string) => server.entries(ORG).filter((e) => e.kind === 'deduction' && e.key === k);

describe('POST /v1/campaigns (sms) through the HTTP billing adapter', () => {
  it('502 with Retry-After: 2 while billing does not answer; the retry with the key is 201, charged once', async () => {
    const body = smsBody({ name: 'api 502' });
    server.inject({ kind: 'status', status: 503 }, { times: 3, operation: 'deduction' });
    const first = await api.request('POST', '/v1/campaigns', {
      key,
      body,
      headers: { 'idempotency-key': 'api-502' },
    });
    expectProblem(first, 502);
    expect(first.headers.get('retry-after')).toBe('2');
    expect(first.body.code).toBe('BILLING_UNAVAILABLE');
    const { rows } = await api.t.db.query<{ id: string; status: string }>(
      `select id::text, status from campaign where organization_id = $1 and name = 'api 502'`,
      [ORG],
    );
    expect(rows.map((r) => r.status)).toEqual(['DRAFT']);

    const retry = await api.request('POST', '/v1/campaigns', {
      key,
      body,
      headers: { 'idempotency-key': 'api-502' },
    });
    expect(retry.status, retry.text).toBe(201);
    expect(retry.body).toMatchObject({ campaignId: rows[0]!.id, status: 'QUEUED' });
    expect(deductionsOf(`campaign:${rows[0]!.id}`)).toHaveLength(1);
    const replay = await api.request('POST', '/v1/campaigns', {
      key,
      body,
      headers: { 'idempotency-key': 'api-502' },
    });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(deductionsOf(`campaign:${rows[0]!.id}`)).toHaveLength(1);
  });

  it('402 problem+json when the balance is short; nothing charged, nothing queued', async () => {
    const poorKey = await api.key('org-api-poor');
    server.credit('org-api-poor', '0.2', 'top-up');
    const reply = await api.request('POST', '/v1/campaigns', {
      key: poorKey,
      body: smsBody({ name: 'poor' }),
    });
    expectProblem(reply, 402);
    expect(reply.body.code).toBe('INSUFFICIENT_BALANCE');
    expect(reply.headers.get('retry-after')).toBeNull();
    expect(server.entries('org-api-poor').filter((e) => e.kind === 'deduction')).toEqual([]);
    const { rows } = await api.t.db.query<{ n: number }>(
      `select count(*)::int as n from outbox where organization_id = 'org-api-poor'`,
    );
    expect(rows[0]!.n).toBe(0);
  });
});

describe('POST /v1/campaigns/{id}/resend through the HTTP billing adapter', () => {
  it('502 with Retry-After: 2, the campaign unchanged; the retry is 200, the resend key charged once', async () => {
    // The fixture drives dispatch and delivery reports (refunds through the same HTTP billing port the
    // API resolved); the resend goes through the API.
    const billing = configuredBilling((api.runtime.config as CampaignConfig).billing, api.t.db);
    const f = deliveryFixture(api.t, { billing, random: () => 0, env: billingEnv(server) });
    const c = await f.createInline(msisdns(3, '019', 700));
    await f.dispatchAll();
    const [a, b, d] = await f.rows(c.campaignId);
    await f.report(c.campaignId, [
      { row: a!, status: 'DELIVERED' },
      { row: b!, status: 'DELIVERED' },
      { row: d!, status: 'REJECTED' },
    ]);
    await f.rollup.rollUpCampaign(c.campaignId);
    const resendKey = `campaign:${c.campaignId}:resend:1`;
    server.inject({ kind: 'status', status: 500 }, { times: 3, key: resendKey });
    const path = `/v1/campaigns/${c.campaignId}/resend`;
    const first = await api.request('POST', path, {
      key,
      body: {},
      headers: { 'idempotency-key': 'resend-502' },
    });
    expectProblem(first, 502);
    expect(first.headers.get('retry-after')).toBe('2');
    expect((await api.request('GET', `/v1/campaigns/${c.campaignId}`, { key })).body).toMatchObject({
      status: 'PARTIAL',
      resendAttempt: 0,
    });
    const retry = await api.request('POST', path, {
      key,
      body: {},
      headers: { 'idempotency-key': 'resend-502' },
    });
    expect(retry.status, retry.text).toBe(200);
    expect(retry.body).toMatchObject({ status: 'QUEUED', resendAttempt: 1 });
    expect(deductionsOf(resendKey)).toHaveLength(1);
    expect(server.entries(ORG).filter((e) => e.kind === 'refund' && e.key === resendKey)).toEqual([]);
  });
});

it('the API process never logs the billing token', () => {
  const text = lines.join('');
  expect(text).toContain('billing attempt failed');
  expect(text).not.toContain(TEST_BILLING_TOKEN);
});
