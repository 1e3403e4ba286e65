/**
 * The `sms:recovery` poller over real PostgreSQL, its steps driven directly with the database clock
 * (timestamps shifted by guarded SQL instead of waiting minutes): expiry past the dispatch deadline with
 * the unsent recipients refunded (and the LINE claim leaving it alone), a failed expiry refund retried;
 * stale DRAFT (charge reversed by its key, FAILED, recipients cleared), stale BUILDING (FAILED, upload
 * again), stale DISPATCHING (requeued, then dispatched to the end), DLR timeouts (synthetic reports the
 * roll-up applies); one poisoned campaign in a batch — its command refused — logged and skipped while the
 * rest of the batch proceeds; and the poller as the scanner runs it, under its lease, settling a cancel
 * woken by NOTIFY.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CoalescingNotifier } from '../../src/adapters/postgres/notifications.js';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { checkCampaignMoney } from '../../src/aggregates/campaign/sms/money-check.js';
import { SMS_RECOVERY_LEASE, type SmsRecovery } from '../../src/aggregates/campaign/sms/recovery.js';
import { SmsCampaignService } from '../../src/aggregates/campaign/sms/service.js';
import { toUnits } from '../../src/domain/sms/money.js';
import { BillingUnavailableError } from '../../src/errors.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { waitFor } from '../../src/testing/wait.js';
import { runTestRole } from '../support/roles.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { inlineRequest, msisdns, ORG } from '../support/sms.js';
import {
  ALWAYS_OPEN,
  controlsFixture,
  deliveryFixture,
  ledgerEntries,
  type SwitchableBilling,
} from '../support/sms-delivery.js';

let t: TestDatabase;
let billing: SwitchableBilling;
let f: ReturnType<typeof deliveryFixture>;
let recovery: SmsRecovery;
let create: Awaited<ReturnType<typeof controlsFixture>>['create'];
beforeAll(async () => {
  t = await createTestDatabase();
  ({ billing, f, recovery, create } = await controlsFixture(t));
});
afterAll(async () => t?.drop());
afterEach(() => billing.reset());

async function scheduled(numbers: readonly string[]) {
  const { rows } = await t.db.query<{ day: string }>(
    `select to_char((now() at time zone 'Asia/Dhaka') + interval '1 day', 'YYYY-MM-DD') as day`,
  );
  return create(numbers, { scheduleType: 'SCHEDULED', scheduledAt: `${rows[0]!.day}T10:00:00` });
}

/** Guarded: moves a campaign row's clock columns back by `minutes` while it is in `status`. */
async function shift(id: string, status: string, column: string, minutes: number) {
  const result = await t.db.query(
    `update campaign set ${column} = ${column} - make_interval(mins => $3) where id = $1 and status = $2`,
    [id, status, minutes],
  );
  expect(result.rowCount).toBe(1);
}

/** A SCHEDULED campaign whose start and dispatch deadline have passed (the deadline 1 minute ago). */
async function pastDeadline(id: string) {
  const result = await t.db.query(
    `update campaign set start_at = now() - interval '2 hours', dispatch_deadline = now() - interval '1 minute'
      where id = $1 and status = 'SCHEDULED'`,
    [id],
  );
  expect(result.rowCount).toBe(1);
}

describe('expiry', () => {
  it('a SCHEDULED SMS campaign past its deadline: EXPIRED, unsent CANCELLED and refunded; the LINE claim leaves it', async () => {
    const c = await scheduled(msisdns(3, '017', 10));
    expect(c.dispatchDeadline).not.toBeNull();
    await pastDeadline(c.campaignId);
    // The generic claim neither claims nor expires it.
    await f.claim.sweep();
    expect((await f.service.get(c.campaignId)).status).toBe('SCHEDULED');

    expect(await recovery.expiries()).toMatchObject({ processed: 1, failed: 0 });
    const state = await f.service.get(c.campaignId);
    const key = `expire:${c.campaignId}:0`;
    expect(state.status).toBe('EXPIRED');
    expect(state.sms!.withdrawal).toMatchObject({ key, reason: 'expired', recipients: 3 });
    expect(state.sms!.withdrawal!.refundedAt).not.toBeNull();
    expect(state.sms!.progress).toMatchObject({ pending: 0, cancelled: 3 });
    expect((await f.rows(c.campaignId)).every((r) => r.status === 'CANCELLED')).toBe(true);
    expect((await ledgerEntries(t, 'refund')).get(key)).toEqual({ key, amount: state.sms!.totalCost, n: 1 });
    expect((await checkCampaignMoney(t.db, c.campaignId)).balanced).toBe(true);
    expect((await recovery.expiries()).processed).toBe(0);
  });

  it('a failed expiry refund is retried by a later pass with the same key', async () => {
    const c = await scheduled(msisdns(2, '018', 20));
    await pastDeadline(c.campaignId);
    billing.failRefunds = (key) => key.startsWith('expire:');
    expect(await recovery.expiries()).toMatchObject({ processed: 0, failed: 1 });
    let state = await f.service.get(c.campaignId);
    expect(state.status).toBe('EXPIRED');
    expect(state.sms!.withdrawal!.refundedAt).toBeNull();
    billing.failRefunds = null;
    expect((await recovery.expiredRefunds()).processed).toBe(0); // within the retry window
    await shift(c.campaignId, 'EXPIRED', 'status_changed_at', 6);
    expect(await recovery.expiredRefunds()).toMatchObject({ processed: 1, failed: 0 });
    state = await f.service.get(c.campaignId);
    expect(state.sms!.withdrawal!.refundedAt).not.toBeNull();
    expect((await ledgerEntries(t, 'refund')).get(`expire:${c.campaignId}:0`)).toMatchObject({ n: 1 });
    expect((await checkCampaignMoney(t.db, c.campaignId)).balanced).toBe(true);
  });
});

describe('stale recovery', () => {
  it('DRAFT older than the window: the charge reversed by its key, FAILED, recipients cleared', async () => {
    billing.loseDeducts = true;
    await expect(create(msisdns(2, '019', 30))).rejects.toBeInstanceOf(BillingUnavailableError);
    billing.loseDeducts = false;
    const { rows } = await t.db.query<{ id: string }>(
      `select id::text from campaign where status = 'DRAFT' and channel = 'sms'`,
    );
    expect(rows).toHaveLength(1);
    const id = rows[0]!.id;
    const key = `campaign:${id}`;
    const charged = (await ledgerEntries(t, 'deduction')).get(key)!;
    expect(charged).toBeDefined();

    expect((await recovery.staleDrafts()).processed).toBe(0); // not stale yet
    await shift(id, 'DRAFT', 'status_changed_at', 11);
    expect(await recovery.staleDrafts()).toMatchObject({ processed: 1, failed: 0 });
    const state = await f.service.get(id);
    expect(state.status).toBe('FAILED');
    expect(state.sms).toMatchObject({ recipients: 0, totalCost: '0.0000' });
    expect(await f.rows(id)).toEqual([]);
    expect((await ledgerEntries(t, 'refund')).get(key)).toEqual({ key, amount: charged.amount, n: 1 });
  });

  it('BUILDING without a charge or saved recipients, older than the window: FAILED, upload again', async () => {
    const bulk = await f.service.createBulk(
      {
        name: 'csv',
        messageType: 'PROMOTIONAL',
        lang: 'bn',
        campaignId: 'BTRC-1',
        templateType: 'GENERIC',
        template: 'ঈদ মোবারক!',
      },
      (async function* () {
        yield Buffer.from('msisdn\n01711111111\n');
      })(),
      { organizationId: ORG },
    );
    const id = bulk.body.campaign.campaignId;
    expect((await recovery.staleBuilds()).processed).toBe(0);
    await shift(id, 'BUILDING', 'status_changed_at', 61);
    expect(await recovery.staleBuilds()).toMatchObject({ processed: 1, failed: 0 });
    const state = await f.service.get(id);
    expect(state.status).toBe('FAILED');
    expect(state.failureReason).toMatch(/upload the file again/);
    expect((await f.service.upload(id)).status).toBe('FAILED');
  });

  it('DISPATCHING without progress: unsent work requeued (new epoch at the next claim), then dispatched to the end', async () => {
    const c = await create(msisdns(5, '016', 40));
    await f.claim.sweep();
    for (let i = 0; i < 20 && !(await f.rows(c.campaignId)).some((r) => r.status === 'SUBMITTED'); i++) {
      await f.dispatch.sweep();
    }
    const before = await f.service.get(c.campaignId);
    expect(before.status).toBe('DISPATCHING');
    expect((await recovery.staleDispatching()).processed).toBe(0);
    await shift(c.campaignId, 'DISPATCHING', 'claimed_at', 31);
    expect(await recovery.staleDispatching()).toMatchObject({ processed: 1, failed: 0 });
    const requeued = await f.service.get(c.campaignId);
    expect(requeued.status).toBe('QUEUED');
    expect(requeued.claimEpoch).toBe(before.claimEpoch + 1);
    await f.dispatchAll();
    const rows = await f.rows(c.campaignId);
    expect(rows.every((r) => r.status === 'SUBMITTED')).toBe(true);
    expect(rows.every((r) => r.attempts === 1)).toBe(true); // nothing submitted twice
    await f.countersMatchRows(c.campaignId);
  });

  it('recipients SUBMITTED past the DLR timeout get synthetic NOT_AVAILABLE reports the roll-up applies', async () => {
    const { id, rows } = await f.dispatchedCampaign(msisdns(2, '017', 50));
    expect(rows.every((r) => r.status === 'SUBMITTED')).toBe(true);
    expect((await recovery.dlrTimeouts()).processed).toBe(0);
    const moved = await t.db.query(
      `update campaign_recipient set submitted_at = submitted_at - interval '2881 minutes'
        where campaign_id = $1 and status = 'SUBMITTED'`,
      [id],
    );
    expect(moved.rowCount).toBe(2);
    expect(await recovery.dlrTimeouts()).toMatchObject({ processed: 1 });
    const { rows: reports } = await t.db.query<{ dlr_id: string; status: string; error_code: string }>(
      `select dlr_id, status, error_code from sms_delivery_report where campaign_id = $1 order by dlr_id`,
      [id],
    );
    expect(reports).toEqual(
      rows
        .map((r) => ({
          dlr_id: `dlr-timeout:${r.submission_id}:${r.id}`,
          status: 'NOT_AVAILABLE',
          error_code: 'DLR_TIMEOUT',
        }))
        .sort((a, b) => a.dlr_id.localeCompare(b.dlr_id)),
    );
    // A second pass writes nothing new.
    await recovery.dlrTimeouts();
    expect(
      (await t.db.query('select 1 from sms_delivery_report where campaign_id = $1', [id])).rowCount,
    ).toBe(2);
    await f.rollup.rollUpCampaign(id);
    const after = await f.rows(id);
    expect(after.every((r) => r.status === 'FAILED' && r.unconfirmed && !r.refund_required)).toBe(true);
    expect((await f.service.get(id)).status).toBe('FAILED');
    await f.countersMatchRows(id);
  });
});

describe('one poisoned campaign in a batch', () => {
  it('is logged and skipped; the rest of the batch is settled', async () => {
    const a = await scheduled(msisdns(2, '017', 60));
    const b = await scheduled(msisdns(2, '018', 60));
    const c = await scheduled(msisdns(2, '019', 60));
    for (const x of [a, b, c]) await f.service.cancel(x.campaignId);
    // b's counters no longer match its rows: its WithdrawUnsent is refused by the decider (it throws).
    const corrupted = await t.db.query(
      `update campaign set sms = jsonb_set(sms, '{progress,pending}', '7') where id = $1 and status = 'CANCELLING'`,
      [b.campaignId],
    );
    expect(corrupted.rowCount).toBe(1);
    const poisonedBefore = recovery.stats.poisoned ?? 0;
    expect(await recovery.cancellations()).toMatchObject({ processed: 2, failed: 1 });
    expect(recovery.stats.poisoned).toBe(poisonedBefore + 1);
    expect((await f.service.get(a.campaignId)).status).toBe('CANCELLED');
    expect((await f.service.get(c.campaignId)).status).toBe('CANCELLED');
    // b: nothing of its transaction stayed (rows still PENDING, no withdrawal, no refund).
    const poisoned = await f.service.get(b.campaignId);
    expect(poisoned.status).toBe('CANCELLING');
    expect(poisoned.sms!.withdrawal).toBeNull();
    expect((await f.rows(b.campaignId)).every((r) => r.status === 'PENDING')).toBe(true);
    expect((await ledgerEntries(t, 'refund')).get(`cancel:${b.campaignId}:0`)).toBeUndefined();
    // It is tried again on the next pass (and refused again) without blocking anything.
    expect(await recovery.cancellations()).toMatchObject({ processed: 0, failed: 1 });
  });
});

describe('in herald scanner', () => {
  it('the poller holds sms:recovery and settles a cancellation right after it commits', async () => {
    // A fresh database: the poisoned campaign above would keep failing in this one's passes.
    const u = await createTestDatabase();
    try {
      const ledger = new PostgresLedger(u.db);
      await ledger.credit({ organizationId: ORG, key: 'top-up', amount: '1000' });
      const g = deliveryFixture(u, {});
      const created = await g.service.create(
        inlineRequest({ scheduleType: 'SCHEDULED', scheduledAt: await tomorrowAt10(u) }),
        { organizationId: ORG },
      );
      const controller = new AbortController();
      const role = runTestRole(
        'scanner',
        // A 60 s poll and a 300 s lease (renewed every 100 s): only the NOTIFY can wake the scanner sooner.
        u.config({
          ...ALWAYS_OPEN,
          AMQP_URL: '',
          HERALD_SCANNER_POLL_MS: '60000',
          HERALD_SMS_LEASE_TTL_SECONDS: '300',
          HERALD_POD: 'scanner-r',
        }),
        controller.signal,
      );
      try {
        await waitFor(
          async () =>
            (
              await u.db.query(`select 1 from lease where name = $1 and expires_at > now()`, [
                SMS_RECOVERY_LEASE,
              ])
            ).rowCount === 1,
          { timeoutMs: 15_000, what: 'the sms:recovery lease' },
        );
        // The cancel commits through a handler that NOTIFYs, as the API's and the CLI's do (the
        // fixture's own sends none: a wake-up could then only come from the listener connecting).
        const notifier = new CoalescingNotifier(u.db, 0);
        const notifying = new SmsCampaignService({
          db: u.db,
          handler: new CommandHandler({ db: u.db, wakeups: notifier, wakeHorizonMs: 60_000 }),
          billing: ledger,
          settings: u.config({ ...ALWAYS_OPEN }).sms,
          idempotencyTtlMs: 24 * 3_600_000,
        });
        const started = Date.now();
        await notifying.cancel(created.body.campaignId);
        await waitFor(async () => (await g.service.get(created.body.campaignId)).status === 'CANCELLED', {
          timeoutMs: 10_000,
          what: 'the cancellation settled',
        }).finally(() => notifier.close());
        // Woken by NOTIFY, not by the 60 s poll.
        expect(Date.now() - started).toBeLessThan(10_000);
        const settled = await g.service.get(created.body.campaignId);
        expect(toUnits(settled.sms!.refundedCost)).toBe(toUnits(settled.sms!.totalCost));
      } finally {
        controller.abort();
        await role;
      }
    } finally {
      await u.drop();
    }
  });
});

async function tomorrowAt10(db: TestDatabase): Promise<string> {
  const { rows } = await db.db.query<{ day: string }>(
    `select to_char((now() at time zone 'Asia/Dhaka') + interval '1 day', 'YYYY-MM-DD') as day`,
  );
  return `${rows[0]!.day}T10:00:00`;
}
