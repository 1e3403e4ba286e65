/**
 * The money check of one SMS campaign (ADR 0019's money invariant), for tests, the soak and
 * `herald campaigns show`: the ledger's deductions and refunds under the campaign's keys (billing_entry:
 * campaign:{id}, campaign:{id}:resend:{n}, cancel:/expire:{id}:{n}, recipient:{rid}:{n}) against the
 * campaign's facts (event-sourced counters) and its recipient rows. At the end of a campaign
 *   charged (ledger deductions) = delivered (actualCost) + refunded (ledger refunds) + unconfirmed,
 * totalCost = charged, the ledger's refunds = refundedCost, the DELIVERED rows' cost = actualCost, and
 * no key was applied twice. `outstanding` is what is still in flight (unsent, submitted, waiting for
 * a retry or a refund): 0 when the campaign is settled. Read-only.
 */
import {
  type LedgerKeyRow,
  ledgerKeys,
  type RecipientMoneyRow,
  recipientMoney,
} from '../../../adapters/postgres/sms-delivery-queries.js';
import { formatUnits, toUnits } from '../../../domain/sms/money.js';
import { NotFoundError } from '../../../errors.js';
import type { SqlClient } from '../../../ports/database.js';
import { campaignAggregate } from '../descriptor.js';

export interface MoneyCheck {
  campaignId: string;
  /** Ledger deductions under the campaign's charge and resend keys. */
  charged: string;
  /** actualCost: the DELIVERED recipients' cost. */
  delivered: string;
  /** Ledger refunds under the campaign's keys (recipients, withdrawals, a reversal). */
  refunded: string;
  /** unconfirmedCost: FAILED-unconfirmed recipients (maybe delivered; never refunded). */
  unconfirmed: string;
  /** charged − delivered − refunded − unconfirmed (may be negative: more refunded than owed). */
  outstanding: string;
  /** Every side agrees and nothing is outstanding. */
  balanced: boolean;
  /** Ledger keys applied more than once (kind:key). */
  duplicates: string[];
  /** What disagrees, in words (empty when balanced). */
  problems: string[];
  facts: { totalCost: string; actualCost: string; refundedCost: string; unconfirmedCost: string };
  rows: { deliveredCost: string; owedRefunds: number; owedRefundCost: string; unsent: number };
}

const signed = (units: number) => (units < 0 ? `-${formatUnits(-units)}` : formatUnits(units));

export function evaluateMoney(
  campaignId: string,
  facts: MoneyCheck['facts'],
  ledger: readonly LedgerKeyRow[],
  rows: readonly RecipientMoneyRow[],
): MoneyCheck {
  let charged = 0;
  let refunded = 0;
  const duplicates: string[] = [];
  for (const entry of ledger) {
    if (entry.entries > 1) duplicates.push(`${entry.kind}:${entry.key}`);
    if (entry.kind === 'deduction') charged += toUnits(entry.amount);
    else refunded += toUnits(entry.amount);
  }
  let deliveredRows = 0;
  let owedRefunds = 0;
  let owedRefundCost = 0;
  let unsent = 0;
  for (const row of rows) {
    if (row.status === 'DELIVERED') deliveredRows += toUnits(row.cost);
    if (row.status === 'FAILED' && !row.unconfirmed && !row.refunded) {
      owedRefunds += row.recipients;
      owedRefundCost += toUnits(row.cost);
    }
    if (['PENDING', 'DEFERRED', 'SUBMITTED', 'RETRY_PENDING'].includes(row.status)) unsent += row.recipients;
  }
  const delivered = toUnits(facts.actualCost);
  const unconfirmed = toUnits(facts.unconfirmedCost);
  const outstanding = charged - delivered - refunded - unconfirmed;
  const problems: string[] = [];
  if (toUnits(facts.totalCost) !== charged)
    problems.push(`totalCost ${facts.totalCost} but the ledger charged ${formatUnits(charged)}`);
  if (toUnits(facts.refundedCost) !== refunded)
    problems.push(`refundedCost ${facts.refundedCost} but the ledger refunded ${formatUnits(refunded)}`);
  if (deliveredRows !== delivered)
    problems.push(`actualCost ${facts.actualCost} but the DELIVERED rows cost ${formatUnits(deliveredRows)}`);
  if (outstanding !== 0) problems.push(`${signed(outstanding)} outstanding`);
  if (duplicates.length > 0) problems.push(`keys applied more than once: ${duplicates.join(', ')}`);
  return {
    campaignId,
    charged: formatUnits(charged),
    delivered: formatUnits(delivered),
    refunded: formatUnits(refunded),
    unconfirmed: formatUnits(unconfirmed),
    outstanding: signed(outstanding),
    balanced: problems.length === 0,
    duplicates,
    problems,
    facts,
    rows: {
      deliveredCost: formatUnits(deliveredRows),
      owedRefunds,
      owedRefundCost: formatUnits(owedRefundCost),
      unsent,
    },
  };
}

/**
 * Where the ledger side is read: the charges and refunds under one campaign's keys. The default reads
 * the PostgreSQL ledger (billing_entry); with an external billing service (HERALD_BILLING=http) a
 * caller that can list that service's entries passes them through `ledgerKeysFromEntries`.
 */
export type CampaignLedgerReader = (
  campaign: { campaignId: string; organizationId: string },
  sql: SqlClient,
) => Promise<LedgerKeyRow[]>;

const postgresLedgerKeys: CampaignLedgerReader = (c, sql) => ledgerKeys(sql, c.campaignId, c.organizationId);

/**
 * A campaign's ledger keys from a list of entries (another ledger's): `campaign:{id}`, its resends,
 * `cancel:`/`expire:{id}:n`, and `recipient:{rid}:n` of its recipients — the keys LEDGER_KEYS selects.
 */
export function ledgerKeysFromEntries(
  entries: readonly { kind: string; key: string; amount: string }[],
  campaignId: string,
  recipientIds: ReadonlySet<string>,
): LedgerKeyRow[] {
  const id = campaignId.toLowerCase();
  const ours = (key: string) =>
    key === `campaign:${id}` ||
    key.startsWith(`campaign:${id}:resend:`) ||
    key.startsWith(`cancel:${id}:`) ||
    key.startsWith(`expire:${id}:`) ||
    (key.startsWith('recipient:') && recipientIds.has(key.split(':')[1] ?? ''));
  const rows = new Map<string, LedgerKeyRow>();
  for (const e of entries) {
    if ((e.kind !== 'deduction' && e.kind !== 'refund') || !ours(e.key)) continue;
    const at = `${e.kind}\u0000${e.key}`;
    const row = rows.get(at) ?? { kind: e.kind, key: e.key, amount: '0.0000', entries: 0 };
    rows.set(at, {
      ...row,
      amount: formatUnits(toUnits(row.amount) + toUnits(e.amount)),
      entries: row.entries + 1,
    });
  }
  return [...rows.values()];
}

/** Reads the three sides and compares them. Throws NotFoundError for an unknown or non-SMS campaign. */
export async function checkCampaignMoney(
  sql: SqlClient,
  campaignId: string,
  options: { ledger?: CampaignLedgerReader } = {},
): Promise<MoneyCheck> {
  const loaded = await campaignAggregate.store.load(sql, campaignId);
  const state = loaded?.state;
  if (!state || state.status === 'NONE' || state.sms === null) {
    throw new NotFoundError(`no SMS campaign ${campaignId}`, { campaignId });
  }
  const sms = state.sms;
  const [ledger, rows] = await Promise.all([
    (options.ledger ?? postgresLedgerKeys)(state, sql),
    recipientMoney(sql, state.campaignId),
  ]);
  return evaluateMoney(
    state.campaignId,
    {
      totalCost: sms.totalCost,
      actualCost: sms.actualCost,
      refundedCost: sms.refundedCost,
      unconfirmedCost: sms.unconfirmedCost,
    },
    ledger,
    rows,
  );
}
