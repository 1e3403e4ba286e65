/**
 * Recipient refunds: a FAILED recipient that owes one is refunded its saved cost under
 * `recipient:{id}:{resendAttempt}` (invariant 9), then, in one transaction per campaign, its row is marked
 * while `refunded_at` is still null and `RecordRefunds` moves the counters (invariant 1). The roll-up calls
 * it after its commit; the `sms:refund-retry` poller calls it for refunds still missing
 * HERALD_SMS_REFUND_RETRY_AFTER_SECONDS after the failure. A crash between refund and record repeats the
 * call with the same key; a billing error is kept on the row and retried later, never in a loop. ADR 0019.
 */
import {
  markRefunded,
  nextRefundRetryDueInMs,
  type OwedRefund,
  owedRefunds,
  recordRefundError,
} from '../../../adapters/postgres/sms-delivery-queries.js';
import { addMoney, toUnits, ZERO_MONEY } from '../../../domain/sms/money.js';
import { errorMessage } from '../../../errors.js';
import type { CommandHandler } from '../../../eventstore/command-handler.js';
import type { Logger } from '../../../logger.js';
import type { Database } from '../../../ports/database.js';
import type { WakeupSignal } from '../../../ports/wakeups.js';
import type { Sweeper, SweepResult } from '../../../scanner/scanner.js';
import { campaignAggregate, campaignStore } from '../descriptor.js';
import type { BillingPort } from './billing.js';
import type { SmsSettings } from './settings.js';

export const SMS_REFUND_RETRY_LEASE = 'sms:refund-retry';
/** The shortest wait before a refund billing refused is asked again. */
export const MIN_REFUND_RETRY_BACKOFF_MS = 1_000;

export interface RefundDeps {
  db: Database;
  handler: CommandHandler;
  billing: BillingPort;
  logger: Logger;
  wakeups?: WakeupSignal | undefined;
}

export interface RefundOutcome {
  /** Recipients whose refund was recorded now (billing accepted it, the row was still unrefunded). */
  refunded: number;
  /** Recipients billing did not accept this time (recorded on the row; retried later). */
  failed: number;
}

/** Refunds the given owed recipients one by one, then records them per campaign. */
export async function refundRecipients(
  deps: RefundDeps,
  owed: readonly OwedRefund[],
  reason: string,
): Promise<RefundOutcome> {
  const accepted = new Map<string, string[]>();
  let failed = 0;
  for (const r of owed) {
    try {
      // A free recipient (rate 0) owes nothing: recorded without a ledger entry.
      if (toUnits(r.cost) > 0) {
        await deps.billing.refund({ organizationId: r.organizationId, key: r.key, amount: r.cost, reason });
      }
      const ids = accepted.get(r.campaignId) ?? [];
      ids.push(r.id);
      accepted.set(r.campaignId, ids);
    } catch (error) {
      failed++;
      deps.logger.warn(
        { aggregateId: r.campaignId, recipientId: r.id, key: r.key, err: error },
        `sms refund not accepted by billing (retried later with the same key): ${errorMessage(error)}`,
      );
      await recordRefundError(deps.db, r.id, errorMessage(error)).catch(() => {});
    }
  }
  const commands = deps.handler.for(campaignAggregate);
  let refunded = 0;
  for (const [campaignId, ids] of accepted) {
    const result = await deps.db.transaction(async (tx) => {
      // The campaign row first, then its recipients: the order every writer of both takes.
      await campaignStore.load(tx, campaignId, { forUpdate: true });
      const marked = await markRefunded(tx, ids, reason);
      if (marked.length === 0) return null;
      const amount = marked.reduce((sum, m) => addMoney(sum, m.cost), ZERO_MONEY);
      const done = await commands.handleInTransaction(
        tx,
        campaignId,
        (now) => ({ type: 'RecordRefunds', campaignId, now, recipients: marked.length, amount }),
        { meta: { actor: 'sms-refunds' } },
      );
      return { done, count: marked.length };
    });
    if (result) {
      commands.signalAfterCommit([result.done], deps.wakeups);
      refunded += result.count;
    }
  }
  return { refunded, failed };
}

export interface RefundRetryDeps extends RefundDeps {
  settings: Pick<SmsSettings, 'refundRetryAfterMs'>;
  /** Recipients per pass (default 500). */
  batchSize?: number;
}

/** The refund retry poller as a sweeper (wrap it in `leasedSweeper` with SMS_REFUND_RETRY_LEASE). */
export function smsRefundRetrySweeper(deps: RefundRetryDeps): Sweeper & { stats: Record<string, number> } {
  const batchSize = deps.batchSize ?? 500;
  const stats: Record<string, number> = { refundsRetried: 0, refundsStillFailing: 0 };
  const logger = deps.logger.child({ sweeper: 'campaign.sms-refund-retry' });
  const afterMs = deps.settings.refundRetryAfterMs;
  // After billing refused a refund, wait at least this long before asking again (no hot loop while
  // billing is down, even with a retry-after of 0).
  const triedBeforeMs = Math.max(afterMs, MIN_REFUND_RETRY_BACKOFF_MS);
  return {
    name: 'campaign.sms-refund-retry',
    stats,
    async sweep(): Promise<SweepResult> {
      const owed = await owedRefunds(deps.db, { olderThanMs: afterMs, triedBeforeMs, limit: batchSize });
      if (owed.length === 0) return { processed: 0, more: false };
      const outcome = await refundRecipients({ ...deps, logger }, owed, 'recipient failed (refund retry)');
      stats.refundsRetried! += outcome.refunded;
      stats.refundsStillFailing! += outcome.failed;
      return { processed: outcome.refunded, more: owed.length === batchSize && outcome.failed === 0 };
    },
    nextDueInMs: () => nextRefundRetryDueInMs(deps.db, afterMs, triedBeforeMs),
  };
}
