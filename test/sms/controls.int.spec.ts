/**
 * The SMS campaign controls over real PostgreSQL, each with its legal and illegal transitions and its
 * effect on recipients and money (ADR 0019): pause stops new claims and refunds nothing; resume goes
 * back to SCHEDULED or QUEUED; reschedule validates the new time as creation does and moves the
 * dispatch deadline; cancel during dispatch withdraws the unsent recipients (CANCELLED), refunds them
 * once with the stable key and settles only after the refund, while already-submitted recipients are
 * still rolled up and counted; a resend's preview equals its actual charge, a resend with refunds
 * pending is refused, a refused charge (402) changes nothing.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readStream } from '../../src/adapters/postgres/event-queries.js';
import { checkCampaignMoney } from '../../src/aggregates/campaign/sms/money-check.js';
import type { SmsRecovery } from '../../src/aggregates/campaign/sms/recovery.js';
import { addMoney, toUnits } from '../../src/domain/sms/money.js';
import { IllegalStateError, InsufficientBalanceError } from '../../src/errors.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { inlineRequest, msisdns, ORG, silentLogger } from '../support/sms.js';
import {
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

const ALICE = { meta: { actor: 'alice', correlationId: 'req-1' } };

/** Claims it and dispatches its first batch (HERALD_SMS_DISPATCH_BATCH_SIZE=2; other campaigns may go first). */
async function claimAndOneBatch(campaignId: string) {
  await f.claim.sweep();
  for (let i = 0; i < 50; i++) {
    if ((await f.rows(campaignId)).some((r) => r.status === 'SUBMITTED')) return;
    await f.dispatch.sweep();
  }
  throw new Error(`campaign ${campaignId} got no dispatch batch`);
}

async function events(id: string) {
  return readStream(t.db, 'campaign', id);
}

/** A local Dhaka wall time (no offset) `days` ahead at `hh:mm`, and the instant it means. */
async function dhaka(days: number, time: string): Promise<{ local: string; instant: string }> {
  const { rows } = await t.db.query<{ day: string }>(
    `select to_char((now() at time zone 'Asia/Dhaka') + make_interval(days => $1), 'YYYY-MM-DD') as day`,
    [days],
  );
  const local = `${rows[0]!.day}T${time}:00`;
  return { local, instant: new Date(`${local}+06:00`).toISOString() };
}

describe('pause and resume', () => {
  it('pause during dispatch: no new claims, nothing recalled or refunded; resume → QUEUED', async () => {
    const c = await create(msisdns(5, '017', 1_000));
    await claimAndOneBatch(c.campaignId);
    const dispatching = await f.service.get(c.campaignId);
    expect(dispatching.status).toBe('DISPATCHING');
    const refundsBefore = await ledgerEntries(t, 'refund');

    const paused = await f.service.pause(c.campaignId, 'customer asked to hold', ALICE);
    expect(paused).toMatchObject({
      status: 'PAUSED',
      pausedFrom: 'DISPATCHING',
      pauseReason: 'customer asked to hold',
      claimEpoch: dispatching.claimEpoch + 1,
    });
    const last = (await events(c.campaignId)).at(-1)!;
    expect(last.type).toBe('CampaignPaused');
    expect(last.meta.actor).toBe('alice');
    expect(last.data).toMatchObject({ reason: 'customer asked to hold' });

    // No new claims: the sweeps leave it, its unsent rows stay PENDING.
    await f.dispatchAll();
    const rows = await f.rows(c.campaignId);
    expect(rows.filter((r) => r.status === 'SUBMITTED')).toHaveLength(2);
    expect(rows.filter((r) => r.status === 'PENDING')).toHaveLength(3);
    // Nothing refunded.
    expect(await ledgerEntries(t, 'refund')).toEqual(refundsBefore);
    await f.countersMatchRows(c.campaignId);

    // Illegal: pausing a paused campaign.
    await expect(f.service.pause(c.campaignId, 'again')).rejects.toBeInstanceOf(IllegalStateError);

    const resumed = await f.service.resume(c.campaignId, 'go on', ALICE);
    expect(resumed).toMatchObject({ status: 'QUEUED', pausedFrom: null, pauseReason: null });
    await expect(f.service.resume(c.campaignId)).rejects.toBeInstanceOf(IllegalStateError);
    await f.dispatchAll();
    expect((await f.rows(c.campaignId)).every((r) => r.status === 'SUBMITTED')).toBe(true);
  });

  it('a scheduled campaign paused and resumed goes back to SCHEDULED at its start', async () => {
    const at = await dhaka(1, '10:00');
    const c = await create(msisdns(2, '018', 1_100), { scheduleType: 'SCHEDULED', scheduledAt: at.local });
    expect(c).toMatchObject({ status: 'SCHEDULED', startAt: at.instant });
    expect(Date.parse(c.dispatchDeadline!) - Date.parse(at.instant)).toBe(f.settings.dispatchDeadlineMs);
    const paused = await f.service.pause(c.campaignId, undefined, ALICE);
    expect(paused).toMatchObject({ status: 'PAUSED', pausedFrom: 'SCHEDULED', pauseReason: null });
    const resumed = await f.service.resume(c.campaignId);
    expect(resumed).toMatchObject({ status: 'SCHEDULED', startAt: at.instant });
  });

  it('a final campaign cannot be paused or resumed', async () => {
    const c = await create(msisdns(1, '019', 1_200));
    await f.dispatchAll();
    const [row] = await f.rows(c.campaignId);
    await f.report(c.campaignId, [{ row: row!, status: 'DELIVERED' }]);
    await f.rollup.rollUpCampaign(c.campaignId);
    expect((await f.service.get(c.campaignId)).status).toBe('COMPLETED');
    await expect(f.service.pause(c.campaignId)).rejects.toBeInstanceOf(IllegalStateError);
    await expect(f.service.resume(c.campaignId)).rejects.toBeInstanceOf(IllegalStateError);
  });
});

describe('reschedule', () => {
  it('validates the new time as at creation and moves the dispatch deadline with it', async () => {
    const first = await dhaka(2, '11:00');
    const c = await create(msisdns(2, '016', 1_300), { scheduleType: 'SCHEDULED', scheduledAt: first.local });
    const next = await dhaka(3, '15:30');
    const moved = await f.service.reschedule(
      c.campaignId,
      { scheduledAt: next.local, reason: 'later' },
      ALICE,
    );
    expect(moved).toMatchObject({ status: 'SCHEDULED', startAt: next.instant });
    expect(Date.parse(moved.dispatchDeadline!) - Date.parse(next.instant)).toBe(
      f.settings.dispatchDeadlineMs,
    );
    expect((await events(c.campaignId)).at(-1)).toMatchObject({
      type: 'CampaignRescheduled',
      data: { startAt: next.instant, reason: 'later' },
    });

    // As at creation: the minimum lead, the maximum future date, the format — each naming scheduledAt.
    const { rows } = await t.db.query<{ soon: string }>(
      `select to_char(now() at time zone 'Asia/Dhaka' + interval '1 minute', 'YYYY-MM-DD"T"HH24:MI:SS') as soon`,
    );
    const cases: [string, string][] = [
      [rows[0]!.soon, 'scheduledAt.min-lead'],
      [(await dhaka(45, '10:00')).local, 'scheduledAt.max-future'],
      ['next tuesday', 'scheduledAt.format'],
    ];
    for (const [scheduledAt, rule] of cases) {
      await expect(f.service.reschedule(c.campaignId, { scheduledAt })).rejects.toMatchObject({
        code: 'VALIDATION_FAILED',
        details: { field: 'scheduledAt', rule },
      });
    }
    await expect(f.service.reschedule(c.campaignId, { when: 'x' })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    });
    expect((await f.service.get(c.campaignId)).startAt).toBe(next.instant);

    // Paused from SCHEDULED: allowed (stays PAUSED); a QUEUED campaign: illegal.
    await f.service.pause(c.campaignId);
    const third = await dhaka(4, '12:00');
    expect(await f.service.reschedule(c.campaignId, { scheduledAt: third.local })).toMatchObject({
      status: 'PAUSED',
      startAt: third.instant,
    });
    const queued = await create(msisdns(1, '017', 1_400));
    await expect(
      f.service.reschedule(queued.campaignId, { scheduledAt: third.local }),
    ).rejects.toBeInstanceOf(IllegalStateError);
  });

  it('outside the promotional window is refused for promotional traffic', async () => {
    const windowed = deliveryFixture(t, {
      billing,
      env: { HERALD_SMS_PROMOTIONAL_WINDOW: '09:00-21:00' },
    });
    const at = await dhaka(1, '10:00');
    const created = await windowed.service.create(
      inlineRequest({ scheduleType: 'SCHEDULED', scheduledAt: at.local }),
      { organizationId: ORG },
    );
    const night = await dhaka(2, '03:00');
    await expect(
      windowed.service.reschedule(created.body.campaignId, { scheduledAt: night.local }),
    ).rejects.toMatchObject({
      details: { field: 'scheduledAt', rule: 'scheduledAt.outside-promotional-window' },
    });
  });
});

describe('cancel', () => {
  it('during dispatch: unsent CANCELLED, refunded once with the stable key, CANCELLED after the refund; submitted ones still counted', async () => {
    const c = await create(msisdns(5, '017', 2_000));
    await claimAndOneBatch(c.campaignId);
    const before = await f.service.get(c.campaignId);
    const cost = before.sms!.totalCost;
    const perRecipient = toUnits(cost) / 5;

    const cancelling = await f.service.cancel(c.campaignId, 'wrong audience', ALICE);
    expect(cancelling).toMatchObject({ status: 'CANCELLING', claimEpoch: before.claimEpoch + 1 });
    await f.dispatchAll(); // the live batch is fenced, no new claims
    expect((await f.rows(c.campaignId)).filter((r) => r.status === 'SUBMITTED')).toHaveLength(2);

    // The refund fails first (billing down): withdrawn, refund owed, still CANCELLING.
    billing.failRefunds = (key) => key.startsWith('cancel:');
    const first = await recovery.cancellations();
    expect(first).toMatchObject({ processed: 0, failed: 1 });
    let state = await f.service.get(c.campaignId);
    const key = `cancel:${c.campaignId}:0`;
    expect(state.status).toBe('CANCELLING');
    expect(state.sms!.withdrawal).toMatchObject({
      key,
      reason: 'cancelled',
      recipients: 3,
      refundedAt: null,
    });
    expect(toUnits(state.sms!.withdrawal!.amount)).toBe(3 * perRecipient);
    const rows = await f.rows(c.campaignId);
    expect(rows.filter((r) => r.status === 'CANCELLED')).toHaveLength(3);
    expect(rows.filter((r) => r.status === 'SUBMITTED')).toHaveLength(2);
    expect((await ledgerEntries(t, 'refund')).get(key)).toBeUndefined();

    // Not retried before HERALD_SMS_CANCELLING_STALE_MINUTES…
    billing.failRefunds = null;
    expect((await recovery.cancellations()).processed).toBe(0);
    // …then retried with the same key (the window passed: the row's clock shifted, guarded).
    const shifted = await t.db.query(
      `update campaign set status_changed_at = status_changed_at - interval '6 minutes'
        where id = $1 and status = 'CANCELLING'`,
      [c.campaignId],
    );
    expect(shifted.rowCount).toBe(1);
    expect(await recovery.cancellations()).toMatchObject({ processed: 1, failed: 0 });
    state = await f.service.get(c.campaignId);
    expect(state.status).toBe('CANCELLED');
    expect(state.sms!.withdrawal!.refundedAt).not.toBeNull();
    expect(state.sms!.cancelledCost).toBe(state.sms!.withdrawal!.amount);
    const refund = (await ledgerEntries(t, 'refund')).get(key)!;
    expect(refund).toMatchObject({ n: 1 });
    expect(toUnits(refund.amount)).toBe(3 * perRecipient);
    // Another pass changes nothing (applied once).
    await recovery.cancellations();
    expect((await ledgerEntries(t, 'refund')).get(key)).toMatchObject({ n: 1 });

    // The two submitted recipients are still rolled up after CANCELLED: one delivered, one failed (refunded, never retried).
    const submitted = (await f.rows(c.campaignId)).filter((r) => r.status === 'SUBMITTED');
    await f.report(c.campaignId, [
      { row: submitted[0]!, status: 'DELIVERED' },
      { row: submitted[1]!, status: 'FAILED', code: '27' },
    ]);
    await f.rollup.rollUpCampaign(c.campaignId);
    const settled = await f.service.get(c.campaignId);
    expect(settled.status).toBe('CANCELLED');
    expect(settled.sms!.progress).toMatchObject({ delivered: 1, failed: 1, cancelled: 3, submitted: 0 });
    await f.countersMatchRows(c.campaignId);
    const late = (await f.rows(c.campaignId)).find((r) => r.id === submitted[1]!.id)!;
    expect(late.status).toBe('FAILED');
    const money = await checkCampaignMoney(t.db, c.campaignId);
    expect(money.problems).toEqual([]);
    expect(money.balanced).toBe(true);
  });

  it('from SCHEDULED: every recipient withdrawn and refunded; CANCELLED settles at once by the poller', async () => {
    const at = await dhaka(1, '12:00');
    const c = await create(msisdns(3, '019', 2_100), { scheduleType: 'SCHEDULED', scheduledAt: at.local });
    await f.service.cancel(c.campaignId);
    await recovery.cancellations();
    const state = await f.service.get(c.campaignId);
    expect(state.status).toBe('CANCELLED');
    expect(state.sms!.withdrawal).toMatchObject({ recipients: 3, amount: state.sms!.totalCost });
    expect((await checkCampaignMoney(t.db, c.campaignId)).balanced).toBe(true);
    // Illegal: a cancelled campaign is not cancelled, paused or resent again.
    await expect(f.service.cancel(c.campaignId)).rejects.toBeInstanceOf(IllegalStateError);
    await expect(f.service.pause(c.campaignId)).rejects.toBeInstanceOf(IllegalStateError);
    await expect(f.service.resendPreview(c.campaignId)).rejects.toBeInstanceOf(IllegalStateError);
  });
});

describe('resend failed', () => {
  /** A PARTIAL campaign: 2 delivered, 1 failed for good (refunded), 1 NOT_AVAILABLE (unconfirmed). */
  async function partial(offset: number) {
    const c = await create(msisdns(4, '018', offset));
    await f.dispatchAll();
    const [a, b, d, e] = await f.rows(c.campaignId);
    await f.report(c.campaignId, [
      { row: a!, status: 'DELIVERED' },
      { row: b!, status: 'DELIVERED' },
      { row: d!, status: 'REJECTED' },
      { row: e!, status: 'NOT_AVAILABLE' },
    ]);
    await f.rollup.rollUpCampaign(c.campaignId);
    return { id: c.campaignId, failed: [d!, e!] };
  }

  it("the preview equals the resend's actual charge; the failed rows reopen in a new cycle", async () => {
    const { id, failed } = await partial(3_000);
    const before = await f.service.get(id);
    expect(before.status).toBe('PARTIAL');
    const preview = await f.service.resendPreview(id, { organizationId: ORG });
    const failedCost = failed.reduce((sum, r) => addMoney(sum, r.cost), '0.0000');
    expect(preview).toEqual({
      campaignId: id,
      status: 'PARTIAL',
      recipients: 2,
      cost: failedCost,
      currentResendAttempt: 0,
      nextResendAttempt: 1,
      chargeKey: `campaign:${id}:resend:1`,
      refundsPending: 0,
    });
    // The preview charges nothing.
    expect((await ledgerEntries(t, 'deduction')).get(preview.chargeKey)).toBeUndefined();

    const resent = await f.service.resend(
      id,
      { reason: 'retry the failures' },
      { organizationId: ORG, ...ALICE },
    );
    expect(resent.body).toMatchObject({ status: 'QUEUED', resendAttempt: 1 });
    const charge = (await ledgerEntries(t, 'deduction')).get(preview.chargeKey)!;
    expect(charge).toEqual({ key: preview.chargeKey, amount: preview.cost, n: 1 });
    expect(resent.body.sms!.totalCost).toBe(addMoney(before.sms!.totalCost, preview.cost));
    expect(resent.body.sms!.progress).toMatchObject({ pending: 2, failed: 0, refunded: 0, unconfirmed: 0 });
    const reopened = (await f.rows(id)).filter((r) => failed.some((x) => x.id === r.id));
    for (const r of reopened) {
      expect(r).toMatchObject({
        status: 'PENDING',
        resend_attempt: 1,
        attempts: 0,
        dlr_status: null,
        failure_class: null,
        unconfirmed: false,
        refund_required: false,
        refund_key: null,
        refunded_at: null,
      });
    }
    await f.countersMatchRows(id);
    // A second resend of the same cycle: illegal (QUEUED now), nothing charged again.
    await expect(f.service.resend(id, {}, { organizationId: ORG })).rejects.toBeInstanceOf(IllegalStateError);

    // The new cycle delivers: COMPLETED, and the money balances (two charges).
    await f.dispatchAll();
    const again = (await f.rows(id)).filter((r) => r.status === 'SUBMITTED');
    expect(again).toHaveLength(2);
    await f.report(
      id,
      again.map((row) => ({ row, status: 'DELIVERED' })),
    );
    await f.rollup.rollUpCampaign(id);
    expect((await f.service.get(id)).status).toBe('COMPLETED');
    const money = await checkCampaignMoney(t.db, id);
    expect(money.problems).toEqual([]);
    expect(money.balanced).toBe(true);
  });

  it('refused while refunds are pending; a refused charge (402) changes nothing and a retry then works', async () => {
    billing.failRefunds = (key) => key.startsWith('recipient:');
    const { id } = await partial(3_100);
    billing.failRefunds = null;
    const preview = await f.service.resendPreview(id);
    expect(preview.refundsPending).toBe(1);
    await expect(f.service.resend(id, {}, { organizationId: ORG })).rejects.toThrow(
      /refunds? (is|are) still pending/,
    );
    expect((await ledgerEntries(t, 'deduction')).get(preview.chargeKey)).toBeUndefined();

    // The refund retry poller's work, done here by the roll-up's own refund path: refund it, then resend.
    const owed = (await f.rows(id)).find((r) => r.refund_required && r.refunded_at === null)!;
    await t.db.query(
      `update campaign_recipient set final_at = final_at - interval '1 hour', refund_tried_at = refund_tried_at - interval '1 hour'
        where id = $1 and refunded_at is null`,
      [owed.id],
    );
    const { smsRefundRetrySweeper } = await import('../../src/aggregates/campaign/sms/refunds.js');
    await smsRefundRetrySweeper({
      db: t.db,
      handler: f.handler,
      billing,
      logger: silentLogger,
      settings: f.settings,
    }).sweep();
    expect((await f.service.resendPreview(id)).refundsPending).toBe(0);

    billing.refuseDeducts = (key) => key.includes(':resend:');
    const version = (await events(id)).length;
    await expect(f.service.resend(id, {}, { organizationId: ORG })).rejects.toBeInstanceOf(
      InsufficientBalanceError,
    );
    expect((await events(id)).length).toBe(version);
    expect((await f.service.get(id)).status).toBe('PARTIAL');
    expect((await f.rows(id)).filter((r) => r.status === 'FAILED')).toHaveLength(2);
    const { rows: entries } = await t.db.query(`select kind from billing_entry where key = $1`, [
      preview.chargeKey,
    ]);
    expect(entries).toEqual([]); // no reversal either: the key stays usable

    billing.refuseDeducts = null;
    const resent = await f.service.resend(id, {}, { organizationId: ORG });
    expect(resent.body.status).toBe('QUEUED');
    expect((await ledgerEntries(t, 'deduction')).get(preview.chargeKey)).toMatchObject({
      amount: preview.cost,
      n: 1,
    });
  });

  it('illegal outside PARTIAL / FAILED', async () => {
    const c = await create(msisdns(1, '016', 3_200));
    await expect(f.service.resendPreview(c.campaignId)).rejects.toBeInstanceOf(IllegalStateError);
    await expect(f.service.resend(c.campaignId, {}, { organizationId: ORG })).rejects.toBeInstanceOf(
      IllegalStateError,
    );
    await expect(
      f.service.resendPreview(c.campaignId, { organizationId: 'someone-else' }),
    ).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
  });
});
