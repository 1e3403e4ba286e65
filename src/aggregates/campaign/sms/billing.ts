/**
 * The billing port with stable keys: a campaign is charged once with `campaign:{uuid}`, reversed with the
 * same key when its creation fails or the outcome is ambiguous, and each failed recipient refunded with
 * `recipient:{id}:{resendAttempt}`. Every operation is idempotent by its key (invariant 9: a repeat
 * returns the first result, `applied: false`), so a caller that lost an answer asks again.
 * `PostgresLedger`, the default, keeps balance = credits − deductions + refunds, applies no key twice,
 * and refuses a late deduction under a key already reversed. ADR 0014 (also the HTTP shape), ADR 0019.
 */

import { HttpBillingClient } from '../../../adapters/http/billing-client.js';
import {
  applyEntry,
  findEntry,
  type LedgerEntry,
  type LedgerTotals,
  ledgerEntries,
  ledgerTotals,
  lockAccount,
} from '../../../adapters/postgres/billing-queries.js';
import { canonicalMoney, toUnits } from '../../../domain/sms/money.js';
import {
  BillingUnavailableError,
  ConflictError,
  HeraldError,
  InsufficientBalanceError,
  ValidationError,
} from '../../../errors.js';
import type { Logger } from '../../../logger.js';
import type { BillingOperation, BillingPort, BillingReceipt } from '../../../ports/billing.js';
import type { Database, SqlClient } from '../../../ports/database.js';
import type { BillingSettings, HttpBillingSettings } from './billing-settings.js';

export type {
  BillingOperation,
  BillingPort,
  BillingReceipt,
  BillingRequestOptions,
} from '../../../ports/billing.js';

const receipt = (entry: LedgerEntry, applied: boolean): BillingReceipt => ({
  key: entry.key,
  kind: entry.kind,
  amount: canonicalMoney(entry.amount),
  balanceAfter: canonicalMoney(entry.balanceAfter),
  applied,
  reversedUnapplied: entry.reversedUnapplied,
  at: entry.createdAt.toISOString(),
});

function checkAmount(amount: string): string {
  const canonical = canonicalMoney(amount);
  if (toUnits(canonical) === 0) {
    throw new ValidationError('a billing amount must be positive', {
      field: 'amount',
      rule: 'amount.positive',
    });
  }
  return canonical;
}

export class PostgresLedger implements BillingPort {
  constructor(private readonly db: Database) {}

  async deduct(operation: BillingOperation): Promise<BillingReceipt> {
    const amount = checkAmount(operation.amount);
    return this.run(async (tx) => {
      const balance = await lockAccount(tx, operation.organizationId);
      const done = await findEntry(tx, operation.organizationId, 'deduction', operation.key);
      if (done) return receipt(done, false);
      const reversal = await findEntry(tx, operation.organizationId, 'refund', operation.key);
      if (reversal) {
        throw new ConflictError(`billing key ${operation.key} was reversed before its deduction arrived`, {
          field: 'key',
          key: operation.key,
        });
      }
      if (toUnits(canonicalMoney(balance)) < toUnits(amount)) {
        throw new InsufficientBalanceError(
          `organization ${operation.organizationId} has ${canonicalMoney(balance)}, ${amount} needed`,
          {
            organizationId: operation.organizationId,
            balance: canonicalMoney(balance),
            amount,
            key: operation.key,
          },
        );
      }
      const entry = await applyEntry(tx, {
        ...operation,
        kind: 'deduction',
        amount,
        reason: operation.reason ?? null,
      });
      return receipt(entry, true);
    });
  }

  async refund(operation: BillingOperation): Promise<BillingReceipt> {
    const amount = checkAmount(operation.amount);
    return this.run(async (tx) => {
      await lockAccount(tx, operation.organizationId);
      const done = await findEntry(tx, operation.organizationId, 'refund', operation.key);
      if (done) return receipt(done, false);
      const entry = await applyEntry(tx, {
        ...operation,
        kind: 'refund',
        amount,
        reason: operation.reason ?? null,
      });
      return receipt(entry, true);
    });
  }

  reverse(organizationId: string, key: string, reason: string): Promise<BillingReceipt> {
    return this.run(async (tx) => {
      await lockAccount(tx, organizationId);
      const done = await findEntry(tx, organizationId, 'refund', key);
      if (done) return receipt(done, false);
      const deduction = await findEntry(tx, organizationId, 'deduction', key);
      const entry = await applyEntry(tx, {
        organizationId,
        kind: 'refund',
        key,
        amount: deduction ? deduction.amount : '0',
        reversedUnapplied: deduction === null,
        reason,
      });
      return receipt(entry, true);
    });
  }

  /** Adds money to an organization's balance once per key (top-ups; demo and tests). */
  async credit(operation: BillingOperation): Promise<BillingReceipt> {
    const amount = checkAmount(operation.amount);
    return this.run(async (tx) => {
      await lockAccount(tx, operation.organizationId);
      const done = await findEntry(tx, operation.organizationId, 'credit', operation.key);
      if (done) return receipt(done, false);
      const entry = await applyEntry(tx, {
        ...operation,
        kind: 'credit',
        amount,
        reason: operation.reason ?? null,
      });
      return receipt(entry, true);
    });
  }

  /** The organization's entries in the order they were applied (each key once per kind). */
  entries(organizationId: string): Promise<LedgerEntry[]> {
    return ledgerEntries(this.db, organizationId);
  }

  /** The account's balance and sums, and the same sums counted from its entries (the invariant's two sides). */
  totals(organizationId: string): Promise<LedgerTotals | null> {
    return ledgerTotals(this.db, organizationId);
  }

  private async run<T>(work: (tx: SqlClient) => Promise<T>): Promise<T> {
    try {
      return await this.db.transaction(work);
    } catch (error) {
      // The ledger's own answers pass through; anything else (the database is down, the connection
      // dropped during commit) leaves the outcome unknown to the caller.
      if (
        error instanceof HeraldError &&
        error.code !== 'DATABASE_UNAVAILABLE' &&
        error.code !== 'DATABASE_ERROR'
      ) {
        throw error;
      }
      throw new BillingUnavailableError(`billing ledger unavailable: ${(error as Error).message}`, {}, error);
    }
  }
}

/** One HTTP billing client per process and settings (its connection pool and TLS files), built on first use. */
const httpClients = new WeakMap<HttpBillingSettings, HttpBillingClient>();

/**
 * The billing port a deployment's settings choose (HERALD_BILLING): the PostgreSQL ledger on `db`, or
 * the HTTP billing client (shared by every request and sweeper of the process that resolves it).
 */
export function configuredBilling(settings: BillingSettings, db: Database, logger?: Logger): BillingPort {
  if (settings.mode === 'ledger' || !settings.http) return new PostgresLedger(db);
  let client = httpClients.get(settings.http);
  if (!client) {
    const { url, ...http } = settings.http;
    client = new HttpBillingClient({ baseUrl: url, ...http, ...(logger ? { logger } : {}) });
    httpClients.set(settings.http, client);
  }
  return client;
}
