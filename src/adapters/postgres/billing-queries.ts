/**
 * The billing ledger's queries (the default billing port, ADR 0014). Each operation runs in one
 * transaction that locks the organization's account row first (operations of one organization are
 * serialized; different organizations never wait for each other), answers a key already applied from
 * its entry, and otherwise inserts one entry and moves the balance in the same statement pair. The
 * unique (organization, kind, key) index makes a second application of a key impossible even without
 * the lock; the account's check constraint keeps balance = credits - deductions + refunds and >= 0.
 */
import type { SqlClient } from '../../ports/database.js';

export type LedgerKind = 'credit' | 'deduction' | 'refund';

export interface LedgerEntry {
  kind: LedgerKind;
  key: string;
  amount: string;
  balanceAfter: string;
  reversedUnapplied: boolean;
  createdAt: Date;
}

export const ENSURE_ACCOUNT = `insert into billing_account (organization_id) values ($1) on conflict do nothing`;
export const LOCK_ACCOUNT = `select balance::text from billing_account where organization_id = $1 for update`;
export const SELECT_ENTRY = `
  select kind, key, amount::text, balance_after::text as "balanceAfter", reversed_unapplied as "reversedUnapplied",
         created_at as "createdAt"
    from billing_entry where organization_id = $1 and kind = $2 and key = $3`;

/** Applies one entry: the account moves by `delta` (credit/refund +, deduction −) and the entry records it. */
export const APPLY_ENTRY = `
  with moved as (
    update billing_account
       set balance = balance + $4::numeric * (case when $2 = 'deduction' then -1 else 1 end),
           credits = credits + (case when $2 = 'credit' then $4::numeric else 0 end),
           deductions = deductions + (case when $2 = 'deduction' then $4::numeric else 0 end),
           refunds = refunds + (case when $2 = 'refund' then $4::numeric else 0 end),
           updated_at = now()
     where organization_id = $1
    returning balance)
  insert into billing_entry (organization_id, kind, key, amount, balance_after, reversed_unapplied, reason)
  select $1, $2, $3, $4::numeric, moved.balance, $5, $6 from moved
  returning kind, key, amount::text, balance_after::text as "balanceAfter", reversed_unapplied as "reversedUnapplied",
            created_at as "createdAt"`;

export async function lockAccount(sql: SqlClient, organizationId: string): Promise<string> {
  await sql.query(ENSURE_ACCOUNT, [organizationId]);
  const { rows } = await sql.query<{ balance: string }>(LOCK_ACCOUNT, [organizationId]);
  return rows[0]!.balance;
}

export async function findEntry(
  sql: SqlClient,
  organizationId: string,
  kind: LedgerKind,
  key: string,
): Promise<LedgerEntry | null> {
  const { rows } = await sql.query<LedgerEntry>(SELECT_ENTRY, [organizationId, kind, key]);
  return rows[0] ?? null;
}

export async function applyEntry(
  sql: SqlClient,
  entry: {
    organizationId: string;
    kind: LedgerKind;
    key: string;
    amount: string;
    reversedUnapplied?: boolean;
    reason?: string | null;
  },
): Promise<LedgerEntry> {
  const { rows } = await sql.query<LedgerEntry>(APPLY_ENTRY, [
    entry.organizationId,
    entry.kind,
    entry.key,
    entry.amount,
    entry.reversedUnapplied ?? false,
    entry.reason ?? null,
  ]);
  return rows[0]!;
}

export interface LedgerTotals {
  balance: string;
  credits: string;
  deductions: string;
  refunds: string;
  /** The same sums counted from the entries. */
  entryCredits: string;
  entryDeductions: string;
  entryRefunds: string;
  entries: number;
}

export const SELECT_TOTALS = `
  select a.balance::text, a.credits::text, a.deductions::text, a.refunds::text,
         coalesce(sum(e.amount) filter (where e.kind = 'credit'), 0)::numeric(18, 4)::text as "entryCredits",
         coalesce(sum(e.amount) filter (where e.kind = 'deduction'), 0)::numeric(18, 4)::text as "entryDeductions",
         coalesce(sum(e.amount) filter (where e.kind = 'refund'), 0)::numeric(18, 4)::text as "entryRefunds",
         count(e.id)::int as entries
    from billing_account a left join billing_entry e on e.organization_id = a.organization_id
   where a.organization_id = $1
   group by a.organization_id`;

/** An organization's entries in the order they were applied. */
export const SELECT_ENTRIES = `
  select kind, key, amount::text, balance_after::text as "balanceAfter", reversed_unapplied as "reversedUnapplied",
         created_at as "createdAt"
    from billing_entry where organization_id = $1 order by id`;

export async function ledgerEntries(sql: SqlClient, organizationId: string): Promise<LedgerEntry[]> {
  return (await sql.query<LedgerEntry>(SELECT_ENTRIES, [organizationId])).rows;
}

export async function ledgerTotals(sql: SqlClient, organizationId: string): Promise<LedgerTotals | null> {
  const { rows } = await sql.query<LedgerTotals>(SELECT_TOTALS, [organizationId]);
  return rows[0] ?? null;
}
