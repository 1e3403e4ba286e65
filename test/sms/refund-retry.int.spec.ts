/**
 * Refund retry over real PostgreSQL: billing is down (a fault-injecting wrapper around the real
 * PostgresLedger that throws BillingUnavailableError while switched off) when the roll-up fails the
 * recipients, so their refunds are owed, recorded on the rows (refund_attempts, refund_error) and not
 * counted; the refund retry poller waits HERALD_SMS_REFUND_RETRY_AFTER_SECONDS, keeps failing while
 * billing is down (never in a hot loop), and once it is back refunds each with the same key, exactly
 * once — also when a refund was applied but its record was lost (a crash between the two), and with two
 * pollers at once. The ledger's entries by key and the money check prove it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type BillingOperation,
  type BillingPort,
  PostgresLedger,
} from '../../src/aggregates/campaign/sms/billing.js';
import { checkCampaignMoney } from '../../src/aggregates/campaign/sms/money-check.js';
import { smsRefundRetrySweeper } from '../../src/aggregates/campaign/sms/refunds.js';
import { BillingUnavailableError } from '../../src/errors.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { msisdns, ORG, silentLogger } from '../support/sms.js';
import { deliveryFixture, ledgerEntries } from '../support/sms-delivery.js';

/** The real ledger behind a switch: while off, refunds fail as an unreachable billing service would. */
class SwitchableBilling implements BillingPort {
  up = true;
  refundCalls: string[] = [];
  constructor(readonly ledger: PostgresLedger) {}
  deduct(operation: BillingOperation) {
    return this.ledger.deduct(operation);
  }
  reverse(organizationId: string, key: string, reason: string) {
    return this.ledger.reverse(organizationId, key, reason);
  }
  async refund(operation: BillingOperation) {
    this.refundCalls.push(operation.key);
    if (!this.up)
      throw new BillingUnavailableError('billing: connect ECONNREFUSED (switched off by the test)');
    return this.ledger.refund(operation);
  }
}

let t: TestDatabase;
let billing: SwitchableBilling;
let f: ReturnType<typeof deliveryFixture>;
const poller = (afterSeconds = 2) =>
  smsRefundRetrySweeper({
    db: t.db,
    handler: f.handler,
    billing,
    logger: silentLogger,
    settings: { refundRetryAfterMs: afterSeconds * 1000 },
  });

beforeAll(async () => {
  t = await createTestDatabase();
  billing = new SwitchableBilling(new PostgresLedger(t.db));
  f = deliveryFixture(t, { billing });
  await billing.ledger.credit({ organizationId: ORG, key: 'top-up', amount: '100000' });
});
afterAll(async () => t?.drop());

/** Ages the campaign's failures and refund attempts by `seconds` (database time; no sleeping). */
async function age(campaignId: string, seconds: number): Promise<void> {
  await t.db.query(
    `update campaign_recipient
        set final_at = final_at - make_interval(secs => $2), refund_tried_at = refund_tried_at - make_interval(secs => $2)
      where campaign_id = $1 and status = 'FAILED' and refunded_at is null`,
    [campaignId, seconds],
  );
}

describe('billing down → refunds retried with the same key after it returns, applied once', () => {
  it('owed refunds are recorded on the rows, retried after the wait, and applied exactly once', async () => {
    const { id, rows } = await f.dispatchedCampaign(msisdns(3, '019', 700));
    billing.up = false;
    await f.report(
      id,
      rows.map((row) => ({ row, status: 'REJECTED' })),
    );
    const rolled = await f.rollup.rollUpCampaign(id);
    expect(rolled).toMatchObject({ applied: 3, refunded: 0, status: 'FAILED' });
    let current = await f.rows(id);
    for (const row of current) {
      expect(row).toMatchObject({
        status: 'FAILED',
        refund_required: true,
        refunded_at: null,
        refund_attempts: 1,
      });
      expect(row.refund_error).toMatch(/ECONNREFUSED/);
    }
    expect((await f.facts(id)).sms.progress).toMatchObject({ failed: 3, refunded: 0 });
    expect((await ledgerEntries(t, 'refund')).size).toBe(0);
    expect((await checkCampaignMoney(t.db, id)).balanced).toBe(false);

    const retry = poller(2);
    // Not yet: the failures are younger than the wait.
    expect((await retry.sweep()).processed).toBe(0);
    const dueIn = (await retry.nextDueInMs())!;
    expect(dueIn).toBeGreaterThan(0);
    expect(dueIn).toBeLessThanOrEqual(2_000);

    // Due, billing still down: one attempt each, recorded; the rows are not due again at once.
    await age(id, 3);
    const calls = billing.refundCalls.length;
    expect((await retry.sweep()).processed).toBe(0);
    expect(billing.refundCalls.length).toBe(calls + 3);
    expect((await f.rows(id)).map((r) => r.refund_attempts)).toEqual([2, 2, 2]);
    expect((await retry.sweep()).processed).toBe(0);
    expect(billing.refundCalls.length).toBe(calls + 3);
    expect(await retry.nextDueInMs()).toBeGreaterThan(0);

    // A refund that billing applied but whose record was lost (the process died in between).
    billing.up = true;
    const lost = current[0]!;
    await billing.ledger.refund({ organizationId: ORG, key: lost.refund_key!, amount: lost.cost });

    // Billing is back: two pollers at once (two scanners without the lease) refund each key once.
    await age(id, 3);
    const [a, b] = await Promise.all([retry.sweep(), poller(2).sweep()]);
    expect(a.processed + b.processed).toBe(3);
    current = await f.rows(id);
    for (const row of current) {
      expect(row.refunded_at).not.toBeNull();
      expect(row.refund_reason).toBe('recipient failed (refund retry)');
      expect(row.refund_error).toBeNull();
    }
    const refunds = await ledgerEntries(t, 'refund');
    for (const row of rows) {
      expect(refunds.get(`recipient:${row.id}:0`)).toMatchObject({ amount: row.cost, n: 1 });
      // Every call for a key used the same key.
      expect(billing.refundCalls.filter((k) => k === `recipient:${row.id}:0`).length).toBeGreaterThanOrEqual(
        3,
      );
    }
    const { sms } = await f.facts(id);
    expect(sms.progress).toMatchObject({ failed: 3, refunded: 3 });
    expect(sms.refundedCost).toBe(sms.totalCost);
    expect(await checkCampaignMoney(t.db, id)).toMatchObject({ balanced: true, duplicates: [] });
    await f.countersMatchRows(id);

    // Nothing is owed any more: further passes call billing no more.
    await age(id, 3);
    const settled = billing.refundCalls.length;
    expect((await retry.sweep()).processed).toBe(0);
    expect(billing.refundCalls.length).toBe(settled);
    expect(await retry.nextDueInMs()).toBeNull();
  });
});
