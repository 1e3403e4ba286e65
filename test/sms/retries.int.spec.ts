/**
 * Classifier and retries over real PostgreSQL, by the database clock: transient codes make a recipient
 * RETRY_PENDING at now + retry delay + jitter; the retry dispatcher releases it only once that time has
 * come (the test moves next_retry_at back with guarded SQL instead of sleeping 5 minutes), the campaign
 * goes DISPATCHING → QUEUED, is claimed again with a new epoch and the dispatch sweep submits it under a
 * new submission — the only place an attempt is counted. After HERALD_SMS_MAX_ATTEMPTS submissions the
 * next transient failure is final (EXHAUSTED) and refunded; a late report of an old submission changes
 * nothing; the money check balances.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkCampaignMoney } from '../../src/aggregates/campaign/sms/money-check.js';
import { smsRetryDispatcher } from '../../src/aggregates/campaign/sms/retries.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { msisdns, ORG, silentLogger } from '../support/sms.js';
import { type DeliveryRow, deliveryFixture, ledgerEntries } from '../support/sms-delivery.js';

let t: TestDatabase;
let f: ReturnType<typeof deliveryFixture>;
let retries: ReturnType<typeof smsRetryDispatcher>;
beforeAll(async () => {
  t = await createTestDatabase();
  f = deliveryFixture(t, {
    env: {
      HERALD_SMS_RETRY_MINUTES: '5',
      HERALD_SMS_RETRY_JITTER_SECONDS: '30',
      HERALD_SMS_MAX_ATTEMPTS: '3',
    },
  });
  retries = smsRetryDispatcher({ db: t.db, handler: f.handler, logger: silentLogger });
  await f.ledger.credit({ organizationId: ORG, key: 'top-up', amount: '100000' });
});
afterAll(async () => t?.drop());

/** Moves this campaign's waiting retries to "due" (guarded: only RETRY_PENDING rows), by database time. */
async function retriesComeDue(campaignId: string): Promise<number> {
  const { rowCount } = await t.db.query(
    `update campaign_recipient set next_retry_at = now() - interval '1 millisecond'
      where campaign_id = $1 and status = 'RETRY_PENDING'`,
    [campaignId],
  );
  return rowCount;
}

const byId = (rows: DeliveryRow[]) => new Map(rows.map((r) => [r.id, r]));

describe('transient failures are retried with the delay until the attempts run out', () => {
  it('RETRY_PENDING → released → resubmitted (attempt + 1) … → FAILED EXHAUSTED and refunded', async () => {
    const { id, rows } = await f.dispatchedCampaign(msisdns(2, '017', 500));
    const [flaky, lateSuccess] = rows;
    expect(rows.map((r) => r.attempts)).toEqual([1, 1]);
    const submissions = new Map<string, string[]>([
      [flaky!.id, [flaky!.submission_id!]],
      [lateSuccess!.id, [lateSuccess!.submission_id!]],
    ]);

    // Attempt 1: both fail with the simulator's "absent subscriber" (27), a retryable code.
    await f.report(
      id,
      rows.map((row) => ({ row, status: 'FAILED', code: '27' })),
    );
    await f.rollup.rollUpCampaign(id);
    const { rows: now1 } = await t.db.query<{ now: Date }>('select now()');
    let current = byId(await f.rows(id));
    for (const row of current.values()) {
      expect(row).toMatchObject({ status: 'RETRY_PENDING', attempts: 1, failure_class: 'TEMPORARY' });
      const wait = row.next_retry_at!.getTime() - now1[0]!.now.getTime();
      expect(wait).toBeGreaterThan(4.9 * 60_000);
      expect(wait).toBeLessThanOrEqual(5.5 * 60_000);
    }
    expect(await f.facts(id)).toMatchObject({
      status: 'DISPATCHING',
      sms: { progress: { retryPending: 2 } },
    });
    await f.countersMatchRows(id);

    // Not due yet: the retry dispatcher releases nothing, and its timer points at the delay.
    expect((await retries.sweep()).processed).toBe(0);
    const dueIn = (await retries.nextDueInMs())!;
    expect(dueIn).toBeGreaterThan(4.8 * 60_000);
    expect(dueIn).toBeLessThanOrEqual(5.5 * 60_000);
    // A poller touching statuses never counts an attempt.
    expect([...byId(await f.rows(id)).values()].map((r) => r.attempts)).toEqual([1, 1]);

    for (let attempt = 2; attempt <= 3; attempt++) {
      expect(await retriesComeDue(id)).toBe(2);
      expect(await retries.nextDueInMs()).toBe(0);
      expect((await retries.sweep()).processed).toBe(1);
      const released = await f.facts(id);
      expect(released.status).toBe('QUEUED');
      expect(released.sms.progress).toMatchObject({ pending: 2, retryPending: 0 });
      expect((await f.rows(id)).map((r) => [r.status, r.attempts])).toEqual([
        ['PENDING', attempt - 1],
        ['PENDING', attempt - 1],
      ]);
      await f.countersMatchRows(id);
      // The main dispatcher claims it again (a new epoch) and submits under new submissions.
      await f.dispatchAll();
      current = byId(await f.rows(id));
      for (const row of current.values()) {
        expect(row).toMatchObject({ status: 'SUBMITTED', attempts: attempt });
        expect(submissions.get(row.id)).not.toContain(row.submission_id);
        submissions.get(row.id)!.push(row.submission_id!);
      }
      const campaign = await f.service.get(id);
      expect(campaign).toMatchObject({ status: 'DISPATCHING', claimEpoch: attempt });
      // A late report of the first submission is stored but changes nothing.
      await f.report(id, [
        {
          row: { ...flaky!, submission_id: submissions.get(flaky!.id)![0]! },
          status: 'DELIVERED',
          dlrId: `late-${attempt}`,
        },
      ]);
      if (attempt === 2) {
        await f.report(id, [
          { row: current.get(flaky!.id)!, status: 'EXPIRED' },
          { row: current.get(lateSuccess!.id)!, status: 'FAILED', code: '34' },
        ]);
      } else {
        await f.report(id, [
          { row: current.get(flaky!.id)!, status: 'FAILED', code: '31' },
          { row: current.get(lateSuccess!.id)!, status: 'DELIVERED' },
        ]);
      }
      const rolled = await f.rollup.rollUpCampaign(id);
      expect(rolled).toMatchObject({ applied: 2, ignored: 1 });
      if (attempt === 2) {
        expect((await f.rows(id)).map((r) => r.status)).toEqual(['RETRY_PENDING', 'RETRY_PENDING']);
      }
      await f.countersMatchRows(id);
    }

    // Attempt 3 was the last: the transient failure is final, refunded once under its key.
    const final = byId(await f.rows(id));
    expect(final.get(flaky!.id)).toMatchObject({
      status: 'FAILED',
      attempts: 3,
      failure_class: 'EXHAUSTED',
      dlr_code: '31',
      refund_required: true,
      refund_key: `recipient:${flaky!.id}:0`,
    });
    expect(final.get(flaky!.id)!.refunded_at).not.toBeNull();
    expect(final.get(lateSuccess!.id)).toMatchObject({ status: 'DELIVERED', attempts: 3 });
    const { status, sms } = await f.facts(id);
    expect(status).toBe('PARTIAL');
    expect(sms.progress).toMatchObject({
      delivered: 1,
      failed: 1,
      refunded: 1,
      retryPending: 0,
      submitted: 0,
    });
    expect(sms.submissions).toBe(3); // one chunk (same route) per dispatch
    const refunds = await ledgerEntries(t, 'refund');
    expect(refunds.get(`recipient:${flaky!.id}:0`)).toMatchObject({ amount: flaky!.cost, n: 1 });
    expect(refunds.has(`recipient:${lateSuccess!.id}:0`)).toBe(false);
    expect(await checkCampaignMoney(t.db, id)).toMatchObject({ balanced: true, outstanding: '0.0000' });
    expect(await retries.nextDueInMs()).toBeNull();
  });

  it('a retryable failure of a paused campaign waits RETRY_PENDING; released while PAUSED it stays PAUSED', async () => {
    const { id, rows } = await f.dispatchedCampaign(msisdns(1, '018', 600));
    await f.report(id, [{ row: rows[0]!, status: 'FAILED', code: 'HTTP_503' }]);
    await f.rollup.rollUpCampaign(id);
    const commands = f.handler.for(
      (await import('../../src/aggregates/campaign/descriptor.js')).campaignAggregate,
    );
    await commands.handle(id, (now) => ({ type: 'PauseCampaign', campaignId: id, now }));
    await retriesComeDue(id);
    expect((await retries.sweep()).processed).toBe(1);
    expect(await f.facts(id)).toMatchObject({
      status: 'PAUSED',
      sms: { progress: { pending: 1, retryPending: 0 } },
    });
    expect((await f.rows(id))[0]).toMatchObject({ status: 'PENDING', attempts: 1 });
    await f.countersMatchRows(id);
  });
});
