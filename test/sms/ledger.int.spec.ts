/**
 * The billing ledger (the default billing port) under concurrency: many concurrent deducts, refunds and
 * reversals with repeated keys keep balance = credits − deductions + refunds, on the account row and
 * counted from the entries, with no key applied twice; a repeat returns the first result; the balance
 * never goes negative, and an insufficient balance charges nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { InsufficientBalanceError } from '../../src/errors.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
let ledger: PostgresLedger;
beforeAll(async () => {
  t = await createTestDatabase();
  ledger = new PostgresLedger(t.db);
});
afterAll(async () => t?.drop());

/** Deterministic pseudo-random numbers (mulberry32). */
function prng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

describe('billing ledger', () => {
  it('a repeated deduct, refund or credit changes nothing and returns the first result', async () => {
    const org = 'org-repeat';
    await ledger.credit({ organizationId: org, key: 'c-1', amount: '10' });
    const first = await ledger.deduct({ organizationId: org, key: 'campaign:a', amount: '2.5' });
    const again = await ledger.deduct({ organizationId: org, key: 'campaign:a', amount: '2.5' });
    expect(first).toMatchObject({ applied: true, amount: '2.5000', balanceAfter: '7.5000' });
    expect(again).toEqual({ ...first, applied: false });
    const refund = await ledger.refund({ organizationId: org, key: 'recipient:1:0', amount: '0.3' });
    expect(await ledger.refund({ organizationId: org, key: 'recipient:1:0', amount: '0.3' })).toEqual({
      ...refund,
      applied: false,
    });
    const reversal = await ledger.reverse(org, 'campaign:a', 'test');
    expect(reversal).toMatchObject({ applied: true, amount: '2.5000', reversedUnapplied: false });
    expect(await ledger.reverse(org, 'campaign:a', 'test')).toEqual({ ...reversal, applied: false });
    expect(await ledger.totals(org)).toMatchObject({
      balance: '10.3000',
      deductions: '2.5000',
      refunds: '2.8000',
    });
  });

  it('an insufficient balance charges nothing', async () => {
    const org = 'org-short';
    await ledger.credit({ organizationId: org, key: 'c-1', amount: '1' });
    await expect(
      ledger.deduct({ organizationId: org, key: 'campaign:b', amount: '1.0001' }),
    ).rejects.toBeInstanceOf(InsufficientBalanceError);
    expect(await ledger.totals(org)).toMatchObject({ balance: '1.0000', deductions: '0.0000', entries: 1 });
  });

  it('concurrent deducts, refunds and reversals with repeated keys keep the invariant; no key twice', async () => {
    const org = 'org-busy';
    await ledger.credit({ organizationId: org, key: 'c-1', amount: '500' });
    const random = prng(12);
    const keys = Array.from({ length: 40 }, (_, i) => `campaign:k${i}`);
    const amountOf = (key: string) => (Number(key.slice(10)) % 7) + 0.25;
    const operations = Array.from({ length: 400 }, () => {
      const key = keys[Math.floor(random() * keys.length)]!;
      const roll = random();
      if (roll < 0.6)
        return () => ledger.deduct({ organizationId: org, key, amount: amountOf(key).toFixed(2) });
      if (roll < 0.8) return () => ledger.reverse(org, key, 'concurrent test');
      return () => ledger.refund({ organizationId: org, key: `recipient:${key}:0`, amount: '0.10' });
    });
    // 16 at a time, every one racing others with the same keys.
    const outcomes: PromiseSettledResult<unknown>[] = [];
    for (let i = 0; i < operations.length; i += 16) {
      outcomes.push(...(await Promise.allSettled(operations.slice(i, i + 16).map((op) => op()))));
    }
    const unexpected = outcomes.filter(
      (o) => o.status === 'rejected' && !/reversed before its deduction arrived/.test(String(o.reason)),
    );
    expect(unexpected).toEqual([]);

    const totals = (await ledger.totals(org))!;
    const n = (v: string) => Math.round(Number(v) * 10_000);
    expect(n(totals.balance)).toBe(n(totals.credits) - n(totals.deductions) + n(totals.refunds));
    expect([totals.entryCredits, totals.entryDeductions, totals.entryRefunds]).toEqual([
      totals.credits,
      totals.deductions,
      totals.refunds,
    ]);
    expect(n(totals.balance)).toBeGreaterThanOrEqual(0);
    const { rows } = await t.db.query<{ kind: string; key: string; n: number }>(
      `select kind, key, count(*)::int as n from billing_entry where organization_id = $1 group by 1, 2 having count(*) > 1`,
      [org],
    );
    expect(rows).toEqual([]);
    // Every reversal of an applied deduction refunded exactly its amount; the others reversed nothing.
    const { rows: pairs } = await t.db.query<{
      key: string;
      deducted: string | null;
      refunded: string;
      unapplied: boolean;
    }>(
      `select r.key, d.amount::text as deducted, r.amount::text as refunded, r.reversed_unapplied as unapplied
         from billing_entry r left join billing_entry d
           on d.organization_id = r.organization_id and d.kind = 'deduction' and d.key = r.key
        where r.organization_id = $1 and r.kind = 'refund' and r.key like 'campaign:%'`,
      [org],
    );
    expect(pairs.length).toBeGreaterThan(5);
    for (const p of pairs) {
      if (p.unapplied) expect([p.deducted, p.refunded]).toEqual([null, '0.0000']);
      else expect(p.refunded).toBe(p.deducted);
    }
  });
});
