/**
 * Auto-pause on error rate over real PostgreSQL, evaluated by the DLR roll-up inside its transaction
 * (ADR 0019): a campaign created with `autoPause: {maxFailureRate: 0.2, window: 10}` is not evaluated
 * before 10 reports were rolled up, is not paused at exactly 20% failed, and is paused by the first
 * report that takes its last 10 above 20% — with the measured rate in the reason and the event, actor
 * `herald:auto-pause`, no refund of anything unsent, and resume left to an operator. A campaign without
 * the rule is never paused; the request's `autoPause` is validated with field errors.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readStream } from '../../src/adapters/postgres/event-queries.js';
import { autoPauseReason } from '../../src/aggregates/campaign/sms/auto-pause.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { msisdns, ORG } from '../support/sms.js';
import { type DeliveryRow, deliveryFixture } from '../support/sms-delivery.js';

let t: TestDatabase;
let f: ReturnType<typeof deliveryFixture>;
beforeAll(async () => {
  t = await createTestDatabase();
  f = deliveryFixture(t, { random: () => 0 });
  await f.ledger.credit({ organizationId: ORG, key: 'top-up', amount: '100000' });
});
afterAll(async () => t?.drop());

/** One report rolled up in its own roll-up transaction (so "the last N" has a strict order). */
async function rollOne(id: string, row: DeliveryRow, status: 'DELIVERED' | 'REJECTED') {
  expect(await f.report(id, [{ row, status }])).toBe(1);
  const rolled = await f.rollup.rollUpCampaign(id);
  expect(rolled).toMatchObject({ applied: 1 });
  return f.service.get(id);
}

describe('auto-pause', () => {
  it('triggers above the threshold (not at it, not before a full window) and records the rate', async () => {
    const { id, rows } = await f.dispatchedCampaign(msisdns(20, '017', 500), {
      autoPause: { maxFailureRate: 0.2, window: 10 },
    });
    expect((await f.service.get(id)).sms!.autoPause).toEqual({ maxFailureRate: 0.2, window: 10 });
    // r1 D, r2 F, r3 F, r4..r10 D: at r9 fewer than 10 reports; at r10 exactly 20% failed.
    const plan: ('DELIVERED' | 'REJECTED')[] = [
      'DELIVERED',
      'REJECTED',
      'REJECTED',
      ...Array(7).fill('DELIVERED'),
    ];
    for (const [i, status] of plan.entries()) {
      const state = await rollOne(id, rows[i]!, status);
      expect(state.status, `after report ${i + 1}`).toBe('DISPATCHING');
    }
    // r11 F: the last 10 are r2..r11, 3 failed = 30% > 20%.
    const paused = await rollOne(id, rows[10]!, 'REJECTED');
    const reason = 'auto-pause: 30.0% of the last 10 delivery reports failed (threshold 20%)';
    expect(reason).toBe(autoPauseReason(0.3, 10, 0.2));
    expect(paused).toMatchObject({ status: 'PAUSED', pausedFrom: 'DISPATCHING', pauseReason: reason });
    const event = (await readStream(t.db, 'campaign', id)).find((e) => e.type === 'CampaignPaused')!;
    expect(event.meta.actor).toBe('herald:auto-pause');
    expect(event.data).toMatchObject({ reason, auto: { rate: 0.3, window: 10, maxFailureRate: 0.2 } });

    // Paused: more failures roll up and are counted, no second pause; resume is an operator's decision.
    const state = await rollOne(id, rows[11]!, 'REJECTED');
    expect(state.status).toBe('PAUSED');
    expect((await readStream(t.db, 'campaign', id)).filter((e) => e.type === 'CampaignPaused')).toHaveLength(
      1,
    );
    expect(state.sms!.progress).toMatchObject({ delivered: 8, failed: 4, submitted: 8 });
    await f.countersMatchRows(id);
    const resumed = await f.service.resume(id, 'checked the route', { meta: { actor: 'ops' } });
    expect(resumed).toMatchObject({ status: 'QUEUED', pauseReason: null });
  });

  it('a campaign without the rule is never paused', async () => {
    const { id, rows } = await f.dispatchedCampaign(msisdns(12, '018', 600));
    for (const row of rows.slice(0, 11)) {
      const state = await rollOne(id, row, 'REJECTED');
      expect(state.status).toBe('DISPATCHING');
    }
  });

  it('the request validates autoPause with field errors', async () => {
    const bad = await f.service
      .create(
        {
          name: 'x',
          messageType: 'PROMOTIONAL',
          lang: 'bn',
          campaignId: 'BTRC-1',
          templateType: 'GENERIC',
          template: 'ঈদ মোবারক!',
          recipients: [{ msisdn: '01712345678' }],
          autoPause: { maxFailureRate: 1.5, window: 5 },
        },
        { organizationId: ORG },
      )
      .catch((error: unknown) => error);
    expect(bad).toMatchObject({ code: 'VALIDATION_FAILED' });
    const fields = (bad as { details: { issues: { field: string }[] } }).details.issues.map((i) => i.field);
    expect(fields).toEqual(expect.arrayContaining(['autoPause.maxFailureRate', 'autoPause.window']));
  });
});
