/**
 * The billing port (ADR 0014, ADR 0023): charges and refunds of SMS campaigns, each idempotent by its
 * stable key (invariant 9: a repeat returns the first result with `applied: false`, so a caller that lost
 * an answer asks again with the same key). Implemented by the PostgreSQL ledger (the default, in the
 * campaign slice) and by the HTTP billing client (src/adapters/http/billing-client.ts). Errors:
 * InsufficientBalanceError (refused, nothing charged), ConflictError (a deduction under a key already
 * reversed), ValidationError (a zero amount), BillingUnavailableError (not reached, or the answer lost:
 * the outcome is unknown, so callers retry with the same key or reverse by it).
 */

export interface BillingOperation {
  organizationId: string;
  key: string;
  /** A money string ("12.3500"). */
  amount: string;
  reason?: string;
}

export interface BillingReceipt {
  key: string;
  kind: 'credit' | 'deduction' | 'refund';
  amount: string;
  balanceAfter: string;
  /** False when the key had been applied before: this is the first application's result. */
  applied: boolean;
  /** A reversal of a deduction that never happened (nothing moved). */
  reversedUnapplied: boolean;
  at: string;
}

/** What travels with an operation besides its key: the correlation id of the request that caused it. */
export interface BillingRequestOptions {
  correlationId?: string | undefined;
}

export interface BillingPort {
  /** Charges `amount` under `key` once. */
  deduct(operation: BillingOperation, options?: BillingRequestOptions): Promise<BillingReceipt>;
  /** Refunds `amount` under `key` once (part 2: failed recipients). */
  refund(operation: BillingOperation, options?: BillingRequestOptions): Promise<BillingReceipt>;
  /** Undoes the deduction with `key` (its whole amount) once; safe whether or not it was applied. */
  reverse(
    organizationId: string,
    key: string,
    reason: string,
    options?: BillingRequestOptions,
  ): Promise<BillingReceipt>;
}
