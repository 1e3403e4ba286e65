/**
 * Inline SMS creation charging through the HTTP billing adapter (HERALD_BILLING=http, the port the
 * settings choose), on real PostgreSQL and real HTTP to the billing test server, whose own ledger is the
 * one checked: billing does not answer (502) → the DRAFT is kept and the Idempotency-Key suspended; the
 * client's retry with the key charges the same `campaign:{id}` → QUEUED, one deduction, even when the
 * first attempt was applied and only its answers were lost. Without a key it is reversed and FAILED. A
 * short balance → 402, FAILED, nothing charged or queued, the key released. ADR 0023.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BillingUnavailableError, InsufficientBalanceError } from '../../src/errors.js';
import { type BillingMoneyFixture, billingMoneyFixture, errorOf } from '../support/billing.js';
import { idempotency, inlineRequest, ORG } from '../support/sms.js';

let m: BillingMoneyFixture;
beforeAll(async () => {
  m = await billingMoneyFixture();
  m.server.credit(ORG, '100000', 'top-up');
});
afterAll(async () => m?.close());

describe('inline create', () => {
  it('502 (every attempt 5xx): DRAFT kept, key suspended; the retry with the key charges it once → QUEUED', async () => {
    const org = 'org-create-502';
    m.server.credit(org, '100', 'top-up');
    const body = inlineRequest({ name: 'create 502' });
    const options = { organizationId: org, idempotency: idempotency('create-502', body) };
    m.server.inject(
      { kind: 'status', status: 503 },
      { times: 3, organizationId: org, operation: 'deduction' },
    );
    const error = await errorOf(m.service.create(body, options));
    expect(error).toBeInstanceOf(BillingUnavailableError);
    const [draft] = await m.campaignsOf(org);
    expect(draft).toMatchObject({ status: 'DRAFT' });
    expect(await m.outboxRowsOf(draft!.id)).toBe(0);
    const { rows: keys } = await m.t.db.query(
      `select state, response from idempotency_key where key = 'create-502'`,
    );
    expect(keys).toEqual([{ state: 'in_progress', response: { resume: { campaignId: draft!.id } } }]);
    expect(m.server.balance(org)).toBe('100.0000');

    const retried = await m.service.create(body, options);
    expect(retried.replayed).toBe(false);
    expect(retried.body).toMatchObject({ campaignId: draft!.id, status: 'QUEUED' });
    const key = `campaign:${draft!.id}`;
    expect(m.deductions(org, key)).toHaveLength(1);
    expect(m.refunds(org, key)).toEqual([]);
    expect(m.server.requests.filter((r) => r.key === key).map((r) => r.outcome)).toEqual([
      'fault:status-503',
      'fault:status-503',
      'fault:status-503',
      'applied',
    ]);
    expect(await m.campaignsOf(org)).toHaveLength(1);
    // And the completed key replays it.
    expect(await m.service.create(body, options)).toMatchObject({
      replayed: true,
      body: { campaignId: draft!.id },
    });
  });

  it('502 after billing applied it (answers held past every timeout): the retry is answered the first result; charged once', async () => {
    const org = 'org-create-held';
    m.server.credit(org, '100', 'top-up');
    const body = inlineRequest({ name: 'create held' });
    const options = { organizationId: org, idempotency: idempotency('create-held', body) };
    m.server.inject({ kind: 'hold', apply: true }, { organizationId: org, operation: 'deduction' });
    m.server.inject(
      { kind: 'hold', apply: false },
      { times: 2, organizationId: org, operation: 'deduction' },
    );
    expect(await errorOf(m.service.create(body, options))).toBeInstanceOf(BillingUnavailableError);
    const [draft] = await m.campaignsOf(org);
    const key = `campaign:${draft!.id}`;
    expect(m.deductions(org, key)).toHaveLength(1); // applied, never answered

    const retried = await m.service.create(body, options);
    expect(retried.body).toMatchObject({ campaignId: draft!.id, status: 'QUEUED' });
    expect(m.deductions(org, key)).toHaveLength(1);
    expect(m.refunds(org, key)).toEqual([]);
    expect(m.server.balance(org)).toBe(`${(100 - Number(retried.body.sms!.totalCost)).toFixed(4)}`);
  });

  it('502 without an Idempotency-Key: nothing to resume, so the key is reversed and the campaign FAILED', async () => {
    const org = 'org-create-nokey';
    m.server.credit(org, '100', 'top-up');
    m.server.inject({ kind: 'lose' }, { times: 3, organizationId: org, operation: 'deduction' });
    expect(await errorOf(m.service.create(inlineRequest(), { organizationId: org }))).toBeInstanceOf(
      BillingUnavailableError,
    );
    const [failed] = await m.campaignsOf(org);
    expect(failed).toMatchObject({
      status: 'FAILED',
      failure_reason: expect.stringMatching(/^billing failed/),
    });
    const key = `campaign:${failed!.id}`;
    expect(m.deductions(org, key)).toHaveLength(1);
    expect(m.refunds(org, key).map((e) => e.amount)).toEqual([m.deductions(org, key)[0]!.amount]);
    expect(m.server.balance(org)).toBe('100.0000');
  });

  it('insufficient balance: 402, FAILED, nothing charged, nothing queued, the key released', async () => {
    const org = 'org-create-poor';
    m.server.credit(org, '0.1', 'top-up');
    const body = inlineRequest({ name: 'poor' });
    const error = await errorOf(
      m.service.create(body, { organizationId: org, idempotency: idempotency('poor-http', body) }),
    );
    expect(error).toBeInstanceOf(InsufficientBalanceError);
    const [failed] = await m.campaignsOf(org);
    expect(failed).toMatchObject({
      status: 'FAILED',
      failure_reason: expect.stringMatching(/^insufficient balance/),
    });
    expect(await m.outboxRowsOf(failed!.id)).toBe(0);
    expect(m.server.entries(org).filter((e) => e.kind === 'deduction')).toEqual([]);
    expect(m.server.balance(org)).toBe('0.1000');
    expect((await m.t.db.query(`select 1 from idempotency_key where key = 'poor-http'`)).rowCount).toBe(0);
  });
});
