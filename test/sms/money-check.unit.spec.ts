/**
 * The money check's ledger side from another ledger's entries (an external billing service's, e.g. the
 * billing test server's in the demo): exactly the keys the PostgreSQL query selects for one campaign —
 * its charge and resends, its withdrawals, its recipients' refunds — summed and counted per kind and key,
 * so a key applied twice shows as a duplicate.
 */
import { describe, expect, it } from 'vitest';
import { evaluateMoney, ledgerKeysFromEntries } from '../../src/aggregates/campaign/sms/money-check.js';

const ID = '5d7c6a7e-0b0c-4e6f-9a51-1f1f0f3c9b11';
const OTHER = '9e0c1b44-3a0e-4f0e-8d0b-6c1a2b3c4d5e';

describe('ledgerKeysFromEntries', () => {
  it("keeps the campaign's keys only, summed per kind and key", () => {
    const rows = ledgerKeysFromEntries(
      [
        { kind: 'credit', key: 'top-up', amount: '100' },
        { kind: 'deduction', key: `campaign:${ID}`, amount: '1.8000' },
        { kind: 'deduction', key: `campaign:${ID}:resend:1`, amount: '0.6000' },
        { kind: 'deduction', key: `campaign:${OTHER}`, amount: '9.0000' },
        { kind: 'refund', key: 'recipient:10:0', amount: '0.3000' },
        { kind: 'refund', key: 'recipient:99:0', amount: '0.3000' },
        { kind: 'refund', key: `cancel:${ID}:0`, amount: '0.3000' },
        { kind: 'refund', key: `expire:${OTHER}:0`, amount: '0.3000' },
      ],
      ID.toUpperCase(),
      new Set(['10', '11']),
    );
    expect(rows).toEqual([
      { kind: 'deduction', key: `campaign:${ID}`, amount: '1.8000', entries: 1 },
      { kind: 'deduction', key: `campaign:${ID}:resend:1`, amount: '0.6000', entries: 1 },
      { kind: 'refund', key: 'recipient:10:0', amount: '0.3000', entries: 1 },
      { kind: 'refund', key: `cancel:${ID}:0`, amount: '0.3000', entries: 1 },
    ]);
  });

  it('a key applied twice is summed and reported as a duplicate by the check', () => {
    const rows = ledgerKeysFromEntries(
      [
        { kind: 'deduction', key: `campaign:${ID}`, amount: '1.0000' },
        { kind: 'deduction', key: `campaign:${ID}`, amount: '1.0000' },
      ],
      ID,
      new Set(),
    );
    expect(rows).toEqual([{ kind: 'deduction', key: `campaign:${ID}`, amount: '2.0000', entries: 2 }]);
    const check = evaluateMoney(
      ID,
      { totalCost: '1.0000', actualCost: '1.0000', refundedCost: '0.0000', unconfirmedCost: '0.0000' },
      rows,
      [],
    );
    expect(check.balanced).toBe(false);
    expect(check.duplicates).toEqual([`deduction:campaign:${ID}`]);
  });
});
