/**
 * The DLR roll-up over real PostgreSQL, driven directly (the dispatch sweep submits, reports are stored
 * as the DLR consumer stores them, the roll-up copies them onto the rows and counters): every mapping
 * (DELIVERED, FAILED permanent, FAILED retryable, EXPIRED, REJECTED, NOT_AVAILABLE, SEND_FAILED from a
 * dead submission), duplicate MSISDNs as distinct rows, a report arriving twice (or a stray one) changes
 * nothing, the recount to COMPLETED / PARTIAL / FAILED, refunds of the failed recipients by key, the
 * completion notice, and counters that equal the rows; the money check balances at the end.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkCampaignMoney } from '../../src/aggregates/campaign/sms/money-check.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { verifyStates } from '../../src/projections/verify.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { msisdns, ORG } from '../support/sms.js';
import { deliveryFixture, ledgerEntries } from '../support/sms-delivery.js';

let t: TestDatabase;
let f: ReturnType<typeof deliveryFixture>;
beforeAll(async () => {
  t = await createTestDatabase();
  f = deliveryFixture(t, { random: () => 0 });
  await f.ledger.credit({ organizationId: ORG, key: 'top-up', amount: '100000' });
});
afterAll(async () => t?.drop());

async function notices(campaignId: string) {
  const { rows } = await t.db.query<{
    destination: string;
    sink: string;
    priority: number;
    payload: Record<string, unknown>;
  }>(
    `select o.destination, o.sink, o.priority, o.payload from outbox o join event e on e.position = o.event_position
      where e.stream_id = $1 and o.destination = 'sms.reporting'`,
    [campaignId],
  );
  return rows;
}

describe('the roll-up maps every report', () => {
  it('each outcome lands on its own row (duplicate MSISDNs are distinct rows); retries wait; refunds by key', async () => {
    const [a, b, c, d, e, g] = msisdns(6, '017', 100);
    // a appears twice: two recipients, one phone number.
    const { id, rows } = await f.dispatchedCampaign([a!, a!, b!, c!, d!, e!, g!]);
    expect(rows.map((r) => r.status)).toEqual(Array(7).fill('SUBMITTED'));
    expect(rows[0]!.msisdn).toBe(rows[1]!.msisdn);
    const [dupDelivered, dupFailed, retryable, expired, rejected, notAvailable, sendFailed] = rows;

    expect(
      await f.report(id, [
        { row: dupDelivered!, status: 'DELIVERED' },
        { row: dupFailed!, status: 'FAILED', code: '1' },
        { row: retryable!, status: 'FAILED', code: '27' },
        { row: expired!, status: 'EXPIRED' },
        { row: rejected!, status: 'REJECTED' },
        { row: notAvailable!, status: 'NOT_AVAILABLE' },
      ]),
    ).toBe(6);
    const rolled = await f.rollup.rollUpCampaign(id);
    expect(rolled).toMatchObject({ reports: 6, applied: 6, ignored: 0, refunded: 2, status: 'DISPATCHING' });

    const { rows: dbNow } = await t.db.query<{ now: Date }>('select now()');
    const after = new Map((await f.rows(id)).map((r) => [r.id, r]));
    expect(after.get(dupDelivered!.id)).toMatchObject({
      status: 'DELIVERED',
      dlr_status: 'DELIVERED',
      failure_class: null,
      refund_required: false,
    });
    expect(after.get(dupDelivered!.id)!.final_at).not.toBeNull();
    expect(after.get(dupFailed!.id)).toMatchObject({
      status: 'FAILED',
      dlr_code: '1',
      failure_class: 'PERMANENT',
      refund_required: true,
      refund_key: `recipient:${dupFailed!.id}:0`,
    });
    expect(after.get(dupFailed!.id)!.refunded_at).not.toBeNull();
    for (const r of [retryable!, expired!]) {
      const row = after.get(r.id)!;
      expect(row).toMatchObject({ status: 'RETRY_PENDING', failure_class: 'TEMPORARY', attempts: 1 });
      expect(row.final_at).toBeNull();
      // random 0: exactly now + 5 minutes (database time), never earlier
      const wait = row.next_retry_at!.getTime() - dbNow[0]!.now.getTime();
      expect(wait).toBeGreaterThan(4 * 60_000);
      expect(wait).toBeLessThanOrEqual(5 * 60_000);
    }
    expect(after.get(rejected!.id)).toMatchObject({ status: 'FAILED', failure_class: 'PERMANENT' });
    expect(after.get(rejected!.id)!.refunded_at).not.toBeNull();
    expect(after.get(notAvailable!.id)).toMatchObject({
      status: 'FAILED',
      failure_class: 'UNCONFIRMED',
      unconfirmed: true,
      refund_required: false,
      refunded_at: null,
    });
    expect(after.get(sendFailed!.id)!.status).toBe('SUBMITTED');
    await f.countersMatchRows(id);

    // The chunk's outbox row goes dead for good (the Kafka send kept failing, the relay's recovery
    // rounds used up): the one recipient still SUBMITTED under it gets a synthetic SEND_FAILED report,
    // a temporary failure. While the relay may still recover the row, it is left alone.
    const dead = await t.db.query(
      `update outbox set status = 'dead', last_error = 'broker down' where message_id = $1`,
      [sendFailed!.submission_id],
    );
    expect(dead.rowCount).toBe(1);
    await f.rollup.sweep();
    expect((await f.rows(id)).find((r) => r.id === sendFailed!.id)!.status).toBe('SUBMITTED');
    await t.db.query(`update outbox set recovery_count = $2 where message_id = $1 and status = 'dead'`, [
      sendFailed!.submission_id,
      t.config().relay.recoveryMaxRounds,
    ]);
    await f.rollup.sweep();
    const sent = (await f.rows(id)).find((r) => r.id === sendFailed!.id)!;
    expect(sent).toMatchObject({
      status: 'RETRY_PENDING',
      failure_class: 'SEND_FAILED',
      dlr_status: 'SEND_FAILED',
    });
    const { rows: synthetic } = await t.db.query<{ dlr_id: string; outcome: string }>(
      `select dlr_id, outcome from sms_delivery_report where status = 'SEND_FAILED' and campaign_id = $1`,
      [id],
    );
    expect(synthetic).toEqual([
      { dlr_id: `send-failed:${sendFailed!.submission_id}:${sendFailed!.id}`, outcome: 'RETRY_PENDING' },
    ]);

    const { sms } = await f.facts(id);
    expect(sms.progress).toMatchObject({
      submitted: 0,
      delivered: 1,
      failed: 3,
      unconfirmed: 1,
      refunded: 2,
      retryPending: 3,
    });
    const cost = dupDelivered!.cost;
    expect(sms.actualCost).toBe(cost);
    const refunds = await ledgerEntries(t, 'refund');
    expect(refunds.get(`recipient:${dupFailed!.id}:0`)).toMatchObject({ amount: cost, n: 1 });
    expect(refunds.get(`recipient:${rejected!.id}:0`)).toMatchObject({ amount: cost, n: 1 });
    expect(refunds.has(`recipient:${notAvailable!.id}:0`)).toBe(false);
    await f.countersMatchRows(id);

    // The same reports again (redelivered: same dlr ids) are not even stored; a second report for a
    // row with another id (a gateway's duplicate), one naming a stale submission and one for an unknown
    // recipient are stored and ignored: nothing changes.
    expect(await f.report(id, [{ row: dupDelivered!, status: 'DELIVERED' }])).toBe(0);
    await f.report(id, [
      { row: dupDelivered!, status: 'FAILED', code: '1', dlrId: 'gateway-duplicate' },
      { row: { ...rejected!, submission_id: crypto.randomUUID() }, status: 'DELIVERED', dlrId: 'stale' },
      { row: { ...rejected!, id: '999999999' }, status: 'DELIVERED', dlrId: 'unknown-recipient' },
    ]);
    const before = await f.rows(id);
    const again = await f.rollup.rollUpCampaign(id);
    expect(again).toMatchObject({ reports: 3, applied: 0, ignored: 3 });
    expect(await f.rows(id)).toEqual(before);
    expect((await f.facts(id)).sms.progress).toEqual(sms.progress);
    const { rows: ignored } = await t.db.query<{ n: number }>(
      `select count(*)::int as n from sms_delivery_report where campaign_id = $1 and outcome = 'ignored'`,
      [id],
    );
    expect(ignored[0]!.n).toBe(3);
    expect((await f.rollup.rollUpCampaign(id)).reports).toBe(0);
    await f.countersMatchRows(id);
  });
});

describe('the recount', () => {
  it('all delivered → COMPLETED, with one completion notice; money balances', async () => {
    const { id, rows } = await f.dispatchedCampaign(msisdns(3, '018', 200));
    await f.report(
      id,
      rows.map((row) => ({ row, status: 'DELIVERED' })),
    );
    expect((await f.rollup.rollUpCampaign(id)).status).toBe('COMPLETED');
    const { status, sms } = await f.facts(id);
    expect(status).toBe('COMPLETED');
    expect(sms.actualCost).toBe(sms.totalCost);
    const sent = await notices(id);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({
      sink: 'kafka',
      priority: 5,
      payload: {
        type: 'campaign.completed',
        campaignId: id,
        organizationId: ORG,
        status: 'COMPLETED',
        counts: { recipients: 3, delivered: 3, failed: 0, unconfirmed: 0, refunded: 0, cancelled: 0 },
        money: { totalCost: sms.totalCost, actualCost: sms.totalCost, refundedCost: '0.0000' },
        resendAttempt: 0,
      },
    });
    const money = await checkCampaignMoney(t.db, id);
    expect(money).toMatchObject({
      balanced: true,
      outstanding: '0.0000',
      charged: sms.totalCost,
      duplicates: [],
    });
    await f.countersMatchRows(id);
  });

  it('a terminal mix → PARTIAL: delivered + refunded + unconfirmed = charged', async () => {
    const { id, rows } = await f.dispatchedCampaign(msisdns(4, '019', 300));
    await f.report(id, [
      { row: rows[0]!, status: 'DELIVERED' },
      { row: rows[1]!, status: 'DELIVERED' },
      { row: rows[2]!, status: 'NOT_AVAILABLE' },
      { row: rows[3]!, status: 'REJECTED' },
    ]);
    expect((await f.rollup.rollUpCampaign(id)).status).toBe('PARTIAL');
    const { status, sms } = await f.facts(id);
    expect(status).toBe('PARTIAL');
    expect(sms.progress).toMatchObject({ delivered: 2, failed: 2, unconfirmed: 1, refunded: 1 });
    const money = await checkCampaignMoney(t.db, id);
    expect(money.balanced).toBe(true);
    expect(money.problems).toEqual([]);
    const [notice] = await notices(id);
    expect(notice!.payload).toMatchObject({ type: 'campaign.partial', status: 'PARTIAL' });
    await f.countersMatchRows(id);
  });

  it('none delivered → FAILED, every permanent failure refunded once', async () => {
    const { id, rows } = await f.dispatchedCampaign(msisdns(3, '015', 400));
    await f.report(
      id,
      rows.map((row) => ({ row, status: 'FAILED', code: '36' })),
    );
    expect((await f.rollup.rollUpCampaign(id)).status).toBe('FAILED');
    const { status, sms } = await f.facts(id);
    expect(status).toBe('FAILED');
    expect(sms.refundedCost).toBe(sms.totalCost);
    expect(sms.progress).toMatchObject({ failed: 3, refunded: 3 });
    const refunds = await ledgerEntries(t, 'refund');
    for (const row of rows) expect(refunds.get(`recipient:${row.id}:0`)?.n).toBe(1);
    expect(await checkCampaignMoney(t.db, id)).toMatchObject({ balanced: true, refunded: sms.totalCost });
    const [notice] = await notices(id);
    expect(notice!.payload).toMatchObject({ type: 'campaign.failed', status: 'FAILED' });
    await f.countersMatchRows(id);
  });

  it('herald verify agrees with every campaign row', async () => {
    expect((await verifyStates(t.db, heraldRegistry)).driftedStreams).toBe(0);
  });
});

describe('one campaign per transaction', () => {
  it('a campaign whose roll-up is refused keeps its reports for the next pass and does not hold back others', async () => {
    const poisoned = await f.dispatchedCampaign(msisdns(2, '017', 1_000));
    const healthy = await f.dispatchedCampaign(msisdns(2, '018', 1_000));
    // Counter drift on one campaign (its state row says nothing is submitted): the decider refuses
    // its RecordDeliveryReports, so its transaction rolls back — rows and reports untouched.
    await t.db.query(`update campaign set sms = jsonb_set(sms, '{progress,submitted}', '0') where id = $1`, [
      poisoned.id,
    ]);
    await f.report(
      poisoned.id,
      poisoned.rows.map((row) => ({ row, status: 'DELIVERED' })),
    );
    await f.report(
      healthy.id,
      healthy.rows.map((row) => ({ row, status: 'DELIVERED' })),
    );
    const refusedBefore = f.rollup.stats.rollupsRefused!;
    await f.rollup.sweep();
    expect(f.rollup.stats.rollupsRefused).toBe(refusedBefore + 1);
    expect((await f.facts(healthy.id)).status).toBe('COMPLETED');
    expect((await f.rows(poisoned.id)).map((r) => r.status)).toEqual(['SUBMITTED', 'SUBMITTED']);
    const { rows } = await t.db.query<{ n: number }>(
      `select count(*)::int as n from sms_delivery_report where campaign_id = $1 and rolled_up_at is null`,
      [poisoned.id],
    );
    expect(rows[0]!.n).toBe(2);
  });
});
