/**
 * A resend's charge through the HTTP billing adapter, on real PostgreSQL and real HTTP to the billing
 * test server: billing does not answer → 502, the campaign unchanged (PARTIAL), the key NOT reversed; the
 * retry charges the same `campaign:{id}:resend:1` once → QUEUED. Before ADR 0023 the reversal spent the
 * key and every retry was refused (409). A short balance → 402, nothing changes, nothing queued.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BillingUnavailableError, InsufficientBalanceError } from '../../src/errors.js';
import { type BillingMoneyFixture, billingEnv, billingMoneyFixture, errorOf } from '../support/billing.js';
import { msisdns, ORG } from '../support/sms.js';
import { deliveryFixture } from '../support/sms-delivery.js';

let m: BillingMoneyFixture;
beforeAll(async () => {
  m = await billingMoneyFixture();
  m.server.credit(ORG, '100000', 'top-up');
});
afterAll(async () => m?.close());

describe('resend', () => {
  let f: ReturnType<typeof deliveryFixture>;
  beforeAll(() => {
    f = deliveryFixture(m.t, { billing: m.billing, random: () => 0, env: billingEnv(m.server) });
  });

  /** A PARTIAL campaign: 2 delivered, 1 rejected (refunded through billing), 1 unconfirmed. */
  async function partial(offset: number) {
    const c = await f.createInline(msisdns(4, '018', offset));
    await f.dispatchAll();
    const [a, b, d, e] = await f.rows(c.campaignId);
    await f.report(c.campaignId, [
      { row: a!, status: 'DELIVERED' },
      { row: b!, status: 'DELIVERED' },
      { row: d!, status: 'REJECTED' },
      { row: e!, status: 'NOT_AVAILABLE' },
    ]);
    await f.rollup.rollUpCampaign(c.campaignId);
    expect((await f.service.get(c.campaignId)).status).toBe('PARTIAL');
    return c.campaignId;
  }

  it('502 leaves the campaign unchanged and the key unspent; the retry charges it once → QUEUED', async () => {
    const id = await partial(4_000);
    const key = `campaign:${id}:resend:1`;
    const before = await f.service.get(id);
    const events = await m.eventsOf(id);
    m.server.inject({ kind: 'hold', apply: true }, { key });
    m.server.inject({ kind: 'status', status: 502 }, { times: 2, key });
    const error = await errorOf(f.service.resend(id, { reason: 'retry failures' }, { organizationId: ORG }));
    expect(error).toBeInstanceOf(BillingUnavailableError);
    const after = await f.service.get(id);
    expect(after).toMatchObject({ status: 'PARTIAL', resendAttempt: 0 });
    expect(await m.eventsOf(id)).toBe(events);
    expect(m.refunds(ORG, key)).toEqual([]); // not reversed: the key stays this resend's

    const resent = await f.service.resend(id, { reason: 'retry failures' }, { organizationId: ORG });
    expect(resent.body).toMatchObject({ status: 'QUEUED', resendAttempt: 1 });
    expect(m.deductions(ORG, key)).toHaveLength(1);
    expect(m.deductions(ORG, key)[0]!.amount).toBe(before.sms!.failedCost);
    expect(m.refunds(ORG, key)).toEqual([]);
    expect(m.server.requests.filter((r) => r.key === key).map((r) => r.outcome)).toEqual([
      'fault:hold-after-201',
      'fault:status-502',
      'fault:status-502',
      'repeat',
    ]);
  });

  it('insufficient balance: 402, nothing changes, nothing queued; the key stays usable', async () => {
    const id = await partial(5_000);
    const key = `campaign:${id}:resend:1`;
    const events = await m.eventsOf(id);
    const outbox = await m.outboxRowsOf(id);
    m.server.inject({ kind: 'insufficient' }, { key });
    expect(await errorOf(f.service.resend(id, {}, { organizationId: ORG }))).toBeInstanceOf(
      InsufficientBalanceError,
    );
    expect((await f.service.get(id)).status).toBe('PARTIAL');
    expect(await m.eventsOf(id)).toBe(events);
    expect(await m.outboxRowsOf(id)).toBe(outbox);
    expect(m.server.entries(ORG).filter((e) => e.key === key)).toEqual([]);
    expect((await f.service.resend(id, {}, { organizationId: ORG })).body.status).toBe('QUEUED');
  });
});
