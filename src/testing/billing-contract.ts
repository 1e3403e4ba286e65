/**
 * The billing port's contract (src/ports/billing.ts, ADR 0014, ADR 0023), one suite for every
 * implementation: the same cases and assertions run against the PostgreSQL ledger and the HTTP billing
 * client talking to the billing test server (test/sms/billing-contract.int.spec.ts). A fixture hides
 * only what differs: how an organization is credited and how the implementation's own ledger is read.
 *
 * What every implementation must do: apply a key once per kind (a repeat returns the first result with
 * `applied: false`); reverse a deduction by its key once, whole, whether or not it was applied (a key
 * reversed before its deduction arrived refuses that deduction with ConflictError); refuse a deduction
 * the balance does not cover with InsufficientBalanceError, charging nothing and leaving the key
 * usable; refuse a zero amount with ValidationError; keep organizations apart; and under concurrent
 * operations with repeated keys keep balance = credits − deductions + refunds ≥ 0 with no key applied
 * twice.
 *
 * Not a spec file itself: a spec calls `describeBillingContract(name, fixture)` at its top level
 * (`herald/testing`: a billing adapter of one's own can run it too).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConflictError, InsufficientBalanceError, ValidationError } from '../errors.js';
import type { BillingPort } from '../ports/billing.js';

/** One entry of the implementation's own ledger, as the fixture reads it. */
export interface ContractLedgerEntry {
  kind: 'credit' | 'deduction' | 'refund';
  key: string;
  amount: string;
  reversedUnapplied: boolean;
}

export interface BillingContractHarness {
  readonly billing: BillingPort;
  /** Adds `amount` to the organization's balance (a top-up outside the port). */
  credit(organizationId: string, amount: string): Promise<void>;
  /** The organization's balance as the implementation's ledger holds it ("12.3400"). */
  balance(organizationId: string): Promise<string>;
  /** The organization's entries in the order they were applied. */
  entries(organizationId: string): Promise<ContractLedgerEntry[]>;
}

export interface BillingContractFixture {
  /** Builds the implementation and whatever it talks to (beforeAll). */
  open(): Promise<BillingContractHarness>;
  /** Tears it down (afterAll). */
  close(): Promise<void>;
  /** Operations in flight at once in the concurrency case (default 16). */
  concurrency?: number;
}

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

const units = (v: string) => Math.round(Number(v) * 10_000);

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

export function describeBillingContract(name: string, fixture: BillingContractFixture): void {
  describe(`billing port contract: ${name}`, () => {
    let h: BillingContractHarness;
    // Organizations of this run only: a fixture may share its ledger with other suites.
    const run = randomUUID().slice(0, 8);
    const org = (label: string) => `contract-${run}-${label}`;
    beforeAll(async () => {
      h = await fixture.open();
    });
    afterAll(async () => fixture.close());

    it('a deduction applies once; a repeat returns the first result (applied: false) and charges nothing', async () => {
      const o = org('deduct');
      await h.credit(o, '10');
      const first = await h.billing.deduct({
        organizationId: o,
        key: 'campaign:a',
        amount: '2.5',
        reason: 'test',
      });
      expect(first).toMatchObject({
        key: 'campaign:a',
        kind: 'deduction',
        amount: '2.5000',
        balanceAfter: '7.5000',
        applied: true,
        reversedUnapplied: false,
      });
      expect(Number.isNaN(Date.parse(first.at))).toBe(false);
      const again = await h.billing.deduct({ organizationId: o, key: 'campaign:a', amount: '2.5' });
      expect(again).toEqual({ ...first, applied: false });
      expect(await h.balance(o)).toBe('7.5000');
      expect((await h.entries(o)).filter((e) => e.kind === 'deduction')).toHaveLength(1);
    });

    it('a refund applies once; a repeat returns the first result', async () => {
      const o = org('refund');
      const first = await h.billing.refund({ organizationId: o, key: 'recipient:1:0', amount: '0.3' });
      expect(first).toMatchObject({
        kind: 'refund',
        amount: '0.3000',
        balanceAfter: '0.3000',
        applied: true,
      });
      expect(await h.billing.refund({ organizationId: o, key: 'recipient:1:0', amount: '0.3' })).toEqual({
        ...first,
        applied: false,
      });
      expect(await h.balance(o)).toBe('0.3000');
    });

    it('a reversal refunds the whole deduction once; repeating it changes nothing', async () => {
      const o = org('reverse');
      await h.credit(o, '10');
      await h.billing.deduct({ organizationId: o, key: 'campaign:r', amount: '4' });
      const reversal = await h.billing.reverse(o, 'campaign:r', 'test');
      expect(reversal).toMatchObject({
        key: 'campaign:r',
        kind: 'refund',
        amount: '4.0000',
        balanceAfter: '10.0000',
        applied: true,
        reversedUnapplied: false,
      });
      expect(await h.billing.reverse(o, 'campaign:r', 'again')).toEqual({ ...reversal, applied: false });
      // The deduction itself is still the first result (nothing is charged again).
      expect(await h.billing.deduct({ organizationId: o, key: 'campaign:r', amount: '4' })).toMatchObject({
        applied: false,
        amount: '4.0000',
      });
      expect(await h.balance(o)).toBe('10.0000');
    });

    it('a reversal of a key never deducted records nothing moved and refuses its late deduction (ConflictError)', async () => {
      const o = org('reverse-first');
      await h.credit(o, '10');
      const reversal = await h.billing.reverse(o, 'campaign:late', 'the deduction timed out');
      expect(reversal).toMatchObject({
        kind: 'refund',
        amount: '0.0000',
        applied: true,
        reversedUnapplied: true,
      });
      const late = await errorOf(h.billing.deduct({ organizationId: o, key: 'campaign:late', amount: '1' }));
      expect(late).toBeInstanceOf(ConflictError);
      expect(await h.balance(o)).toBe('10.0000');
      expect((await h.entries(o)).filter((e) => e.kind === 'deduction')).toEqual([]);
    });

    it('an insufficient balance charges nothing and leaves the key usable after a top-up', async () => {
      const o = org('short');
      await h.credit(o, '1');
      const refused = await errorOf(
        h.billing.deduct({ organizationId: o, key: 'campaign:b', amount: '1.0001' }),
      );
      expect(refused).toBeInstanceOf(InsufficientBalanceError);
      expect(await h.balance(o)).toBe('1.0000');
      expect((await h.entries(o)).map((e) => e.kind)).toEqual(['credit']);
      await h.credit(o, '5');
      expect(
        await h.billing.deduct({ organizationId: o, key: 'campaign:b', amount: '1.0001' }),
      ).toMatchObject({
        applied: true,
        balanceAfter: '4.9999',
      });
    });

    it('a zero amount is refused (ValidationError) and nothing is recorded', async () => {
      const o = org('zero');
      await h.credit(o, '1');
      expect(
        await errorOf(h.billing.deduct({ organizationId: o, key: 'campaign:z', amount: '0' })),
      ).toBeInstanceOf(ValidationError);
      expect(
        await errorOf(h.billing.refund({ organizationId: o, key: 'recipient:z', amount: '0.0000' })),
      ).toBeInstanceOf(ValidationError);
      expect((await h.entries(o)).map((e) => e.kind)).toEqual(['credit']);
    });

    it('organizations are apart: one key in two organizations applies in each', async () => {
      const [a, b] = [org('apart-a'), org('apart-b')];
      await h.credit(a, '5');
      await h.credit(b, '5');
      await h.billing.deduct({ organizationId: a, key: 'campaign:same', amount: '1' });
      const inB = await h.billing.deduct({ organizationId: b, key: 'campaign:same', amount: '2' });
      expect(inB).toMatchObject({ applied: true, amount: '2.0000', balanceAfter: '3.0000' });
      expect([await h.balance(a), await h.balance(b)]).toEqual(['4.0000', '3.0000']);
    });

    it('concurrent deductions, refunds and reversals with repeated keys: no key twice, the balance adds up', async () => {
      const o = org('busy');
      await h.credit(o, '500');
      const random = prng(12);
      const keys = Array.from({ length: 30 }, (_, i) => `campaign:k${i}`);
      const amountOf = (key: string) => ((Number(key.slice(10)) % 7) + 0.25).toFixed(2);
      const operations = Array.from({ length: 240 }, () => {
        const key = keys[Math.floor(random() * keys.length)]!;
        const roll = random();
        if (roll < 0.6) return () => h.billing.deduct({ organizationId: o, key, amount: amountOf(key) });
        if (roll < 0.8) return () => h.billing.reverse(o, key, 'concurrent test');
        return () => h.billing.refund({ organizationId: o, key: `recipient:${key}:0`, amount: '0.10' });
      });
      const width = fixture.concurrency ?? 16;
      const outcomes: PromiseSettledResult<unknown>[] = [];
      for (let i = 0; i < operations.length; i += width) {
        outcomes.push(...(await Promise.allSettled(operations.slice(i, i + width).map((op) => op()))));
      }
      const unexpected = outcomes.filter(
        (o) => o.status === 'rejected' && !(o.reason instanceof ConflictError),
      );
      expect(unexpected).toEqual([]);

      const entries = await h.entries(o);
      const seen = new Set<string>();
      for (const e of entries) {
        expect(seen.has(`${e.kind}:${e.key}`), `${e.kind}:${e.key} applied twice`).toBe(false);
        seen.add(`${e.kind}:${e.key}`);
      }
      const sum = (kind: ContractLedgerEntry['kind']) =>
        entries.filter((e) => e.kind === kind).reduce((total, e) => total + units(e.amount), 0);
      const balance = units(await h.balance(o));
      expect(balance).toBe(sum('credit') - sum('deduction') + sum('refund'));
      expect(balance).toBeGreaterThanOrEqual(0);
      // Every reversal of an applied deduction refunded exactly its amount; the others refunded nothing.
      const deducted = new Map(entries.filter((e) => e.kind === 'deduction').map((e) => [e.key, e.amount]));
      const reversals = entries.filter((e) => e.kind === 'refund' && e.key.startsWith('campaign:'));
      expect(reversals.length).toBeGreaterThan(3);
      for (const r of reversals) {
        if (r.reversedUnapplied) expect(units(r.amount)).toBe(0);
        else expect(r.amount).toBe(deducted.get(r.key));
      }
    });
  });
}
