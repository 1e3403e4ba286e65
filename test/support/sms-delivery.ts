/**
 * Fixtures for the SMS delivery tests (roll-up, retries, refunds): an SMS campaign created, claimed and
 * dispatched by the real sweeps (so its recipients are SUBMITTED with submission ids and attempts),
 * reports stored as the DLR consumer stores them, and the rows and counters read back.
 */
import {
  insertDeliveryReports,
  type NewDeliveryReport,
} from '../../src/adapters/postgres/sms-delivery-queries.js';
import { countRecipientsByStatus } from '../../src/adapters/postgres/sms-queries.js';
import {
  type BillingOperation,
  type BillingPort,
  type BillingReceipt,
  PostgresLedger,
} from '../../src/aggregates/campaign/sms/billing.js';
import { smsDispatchSweeper } from '../../src/aggregates/campaign/sms/dispatch.js';
import { SmsRecovery } from '../../src/aggregates/campaign/sms/recovery.js';
import { smsRollupSweeper } from '../../src/aggregates/campaign/sms/rollup.js';
import type { SmsSettings } from '../../src/aggregates/campaign/sms/settings.js';
import { campaignSweeper } from '../../src/aggregates/campaign/sweepers.js';
import type { SmsCampaignFacts } from '../../src/domain/campaign.js';
import { BillingUnavailableError, InsufficientBalanceError } from '../../src/errors.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import type { TestDatabase } from './services.js';
import { inlineRequest, ORG, silentLogger, smsService } from './sms.js';

export const ALWAYS_OPEN = { HERALD_SMS_PROMOTIONAL_WINDOW: '00:00:00-23:59:59' };

export interface DeliveryRow {
  id: string;
  msisdn: string;
  status: string;
  submission_id: string | null;
  attempts: number;
  cost: string;
  dlr_status: string | null;
  dlr_code: string | null;
  failure_class: string | null;
  unconfirmed: boolean;
  next_retry_at: Date | null;
  final_at: Date | null;
  refund_required: boolean;
  refund_key: string | null;
  refunded_at: Date | null;
  refund_reason: string | null;
  refund_attempts: number;
  refund_error: string | null;
  resend_attempt: number;
}

export function deliveryFixture(
  t: TestDatabase,
  options: { env?: Record<string, string>; billing?: BillingPort; random?: () => number } = {},
) {
  const config = t.config({ ...ALWAYS_OPEN, ...options.env });
  const settings: SmsSettings = config.sms;
  const { service, ledger } = smsService(t, {
    settings,
    ...(options.billing ? { billing: options.billing } : {}),
  });
  const billing = options.billing ?? ledger;
  // The fixture's configuration reaches the descriptors' messages (the completion notice's sink).
  const handler = new CommandHandler({ db: t.db, pod: 'test', config });
  const claim = campaignSweeper({ db: t.db, handler, logger: silentLogger, batchSize: 50 }).claim;
  const dispatch = smsDispatchSweeper({ db: t.db, handler, logger: silentLogger, settings });
  const rollup = smsRollupSweeper({
    db: t.db,
    handler,
    billing,
    logger: silentLogger,
    settings,
    relayRecoveryRounds: t.config().relay.recoveryMaxRounds,
    ...(options.random ? { random: options.random } : {}),
  });

  async function rows(campaignId: string): Promise<DeliveryRow[]> {
    const { rows } = await t.db.query<DeliveryRow>(
      `select id::text, msisdn, status, submission_id::text, attempts, cost::text, dlr_status, dlr_code,
              failure_class, unconfirmed, next_retry_at, final_at, refund_required, refund_key, refunded_at, refund_reason,
              refund_attempts, refund_error, resend_attempt
         from campaign_recipient where campaign_id = $1 order by id`,
      [campaignId],
    );
    return rows;
  }

  /** Claims and dispatches every QUEUED campaign until nothing is left to send. */
  async function dispatchAll(): Promise<void> {
    await claim.sweep();
    for (let i = 0; i < 100; i++) {
      const swept = await dispatch.sweep();
      if (swept.processed === 0) return;
    }
    throw new Error('dispatch did not finish');
  }

  /** An inline campaign of `numbers` (GENERIC, Bangla text, instant unless `request` says otherwise). */
  async function createInline(numbers: readonly string[], request: Record<string, unknown> = {}) {
    const created = await service.create(
      inlineRequest({
        templateType: 'GENERIC',
        template: 'ঈদ মোবারক!',
        recipients: numbers.map((msisdn) => ({ msisdn })),
        ...request,
      }),
      { organizationId: ORG },
    );
    return created.body;
  }

  /** An instant promotional campaign to these numbers (GENERIC: one chunk per route), dispatched. */
  async function dispatchedCampaign(numbers: readonly string[], request: Record<string, unknown> = {}) {
    const id = (await createInline(numbers, request)).campaignId;
    await dispatchAll();
    return { id, rows: await rows(id) };
  }

  /** Stores one report per (row, status[, code]) as the DLR consumer would. */
  async function report(
    campaignId: string,
    reports: readonly { row: DeliveryRow; status: string; code?: string | null; dlrId?: string }[],
  ): Promise<number> {
    const stored: NewDeliveryReport[] = reports.map(({ row, status, code, dlrId }) => ({
      dlrId: dlrId ?? `dlr:${row.submission_id}:${row.id}`,
      submissionId: row.submission_id!,
      campaignId,
      recipientId: row.id,
      status,
      errorCode: code ?? null,
      epoch: 1,
      doneAt: new Date().toISOString(),
    }));
    return insertDeliveryReports(t.db, stored);
  }

  async function facts(campaignId: string): Promise<{ status: string; sms: SmsCampaignFacts }> {
    const c = await service.get(campaignId);
    return { status: c.status, sms: c.sms! };
  }

  /** The counters agree with the rows (statuses, and refunded/unconfirmed flags). */
  async function countersMatchRows(campaignId: string): Promise<void> {
    const byStatus = await countRecipientsByStatus(t.db, campaignId);
    const { sms } = await facts(campaignId);
    const p = sms.progress;
    const all = await rows(campaignId);
    const expected = {
      pending: byStatus.PENDING ?? 0,
      deferred: byStatus.DEFERRED ?? 0,
      submitted: byStatus.SUBMITTED ?? 0,
      retryPending: byStatus.RETRY_PENDING ?? 0,
      delivered: byStatus.DELIVERED ?? 0,
      failed: byStatus.FAILED ?? 0,
      cancelled: byStatus.CANCELLED ?? 0,
      unconfirmed: all.filter((r) => r.status === 'FAILED' && r.unconfirmed).length,
      refunded: all.filter((r) => r.status === 'FAILED' && r.refunded_at !== null).length,
    };
    const actual = {
      pending: p.pending,
      deferred: p.deferred,
      submitted: p.submitted,
      retryPending: p.retryPending,
      delivered: p.delivered,
      failed: p.failed,
      cancelled: p.cancelled,
      unconfirmed: p.unconfirmed,
      refunded: p.refunded,
    };
    if (JSON.stringify(actual) !== JSON.stringify(expected)) {
      throw new Error(`counters ${JSON.stringify(actual)} differ from the rows ${JSON.stringify(expected)}`);
    }
  }

  return {
    settings,
    service,
    ledger,
    billing,
    handler,
    claim,
    dispatch,
    rollup,
    rows,
    dispatchAll,
    createInline,
    dispatchedCampaign,
    report,
    facts,
    countersMatchRows,
  };
}

/** The ledger's entries by key for an organization (kind, key, amount, entries). */
export async function ledgerEntries(t: TestDatabase, kind: 'deduction' | 'refund') {
  const { rows } = await t.db.query<{ key: string; amount: string; n: number }>(
    `select key, sum(amount)::text as amount, count(*)::int as n from billing_entry
      where organization_id = $1 and kind = $2 group by key`,
    [ORG, kind],
  );
  return new Map(rows.map((r) => [r.key, r]));
}

/** The ledger with failures switched on per operation: a billing service that is down, refuses, or loses answers. */
export class SwitchableBilling implements BillingPort {
  failRefunds: ((key: string) => boolean) | null = null;
  refuseDeducts: ((key: string) => boolean) | null = null;
  /** Deduct applied, answer lost; reversal unreachable: the campaign is left DRAFT with its charge. */
  loseDeducts = false;
  constructor(readonly ledger: PostgresLedger) {}

  reset(): void {
    this.failRefunds = null;
    this.refuseDeducts = null;
    this.loseDeducts = false;
  }

  async deduct(operation: BillingOperation): Promise<BillingReceipt> {
    if (this.refuseDeducts?.(operation.key)) {
      throw new InsufficientBalanceError('refused by the test', { key: operation.key });
    }
    const receipt = await this.ledger.deduct(operation);
    if (this.loseDeducts) throw new BillingUnavailableError('answer lost (test)', { key: operation.key });
    return receipt;
  }

  refund(operation: BillingOperation): Promise<BillingReceipt> {
    if (this.failRefunds?.(operation.key)) {
      return Promise.reject(new BillingUnavailableError('billing down (test)', { key: operation.key }));
    }
    return this.ledger.refund(operation);
  }

  reverse(organizationId: string, key: string, reason: string): Promise<BillingReceipt> {
    if (this.loseDeducts) return Promise.reject(new BillingUnavailableError('billing down (test)', { key }));
    return this.ledger.reverse(organizationId, key, reason);
  }
}

/**
 * The controls and recovery tests' set-up: switchable billing over a credited ledger, the delivery
 * fixture dispatching two recipients per batch, the `sms:recovery` poller, and its inline campaign maker.
 */
export async function controlsFixture(t: TestDatabase) {
  const billing = new SwitchableBilling(new PostgresLedger(t.db));
  const f = deliveryFixture(t, { billing, random: () => 0, env: { HERALD_SMS_DISPATCH_BATCH_SIZE: '2' } });
  const recovery = new SmsRecovery({
    db: t.db,
    handler: f.handler,
    logger: silentLogger,
    billing,
    settings: f.settings,
  });
  await billing.ledger.credit({ organizationId: ORG, key: 'top-up', amount: '100000' });
  return { billing, f, recovery, create: f.createInline };
}
