/**
 * `herald campaigns pause|resume|cancel|reschedule|resend [--dry-run]` (the real CLI process) on SMS
 * campaigns: each with its reason, the illegal ones exiting 1 with the decider's message, the resend's
 * dry run printing what it would charge (and charging nothing), and `show` printing the money, the
 * withdrawal and the money check.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SmsRecovery } from '../../src/aggregates/campaign/sms/recovery.js';
import { herald } from '../support/cli.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { inlineRequest, msisdns, ORG, silentLogger } from '../support/sms.js';
import { deliveryFixture, ledgerEntries } from '../support/sms-delivery.js';

let t: TestDatabase;
let f: ReturnType<typeof deliveryFixture>;
beforeAll(async () => {
  t = await createTestDatabase();
  f = deliveryFixture(t, { random: () => 0 });
  await f.ledger.credit({ organizationId: ORG, key: 'top-up', amount: '1000' });
});
afterAll(async () => t?.drop());

describe('herald campaigns controls', () => {
  it('pause / resume / reschedule / cancel with a reason; show prints the money and the withdrawal', async () => {
    const { rows } = await t.db.query<{ day: string }>(
      `select to_char((now() at time zone 'Asia/Dhaka') + interval '1 day', 'YYYY-MM-DD') as day`,
    );
    const c = (
      await f.service.create(
        inlineRequest({ scheduleType: 'SCHEDULED', scheduledAt: `${rows[0]!.day}T10:00:00` }),
        {
          organizationId: ORG,
        },
      )
    ).body;
    const id = c.campaignId;
    const paused = await herald(t, ['campaigns', 'pause', id, '--reason', 'budget review']);
    expect(paused.code, paused.stderr).toBe(0);
    expect(paused.stdout).toContain('paused from SCHEDULED: budget review');
    const again = await herald(t, ['campaigns', 'pause', id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/status PAUSED/);
    expect((await herald(t, ['campaigns', 'resume', id])).stdout).toContain('resumed: SCHEDULED');
    const moved = await herald(t, [
      'campaigns',
      'reschedule',
      id,
      `${rows[0]!.day}T11:30:00`,
      '--reason',
      'later',
    ]);
    expect(moved.code, moved.stderr).toBe(0);
    expect(moved.stdout).toContain(
      `rescheduled to ${new Date(`${rows[0]!.day}T11:30:00+06:00`).toISOString()}`,
    );
    const cancelled = await herald(t, ['campaigns', 'cancel', id, '--reason', 'wrong list']);
    expect(cancelled.stdout).toContain('cancelling');
    await new SmsRecovery({
      db: t.db,
      handler: f.handler,
      logger: silentLogger,
      billing: f.billing,
      settings: f.settings,
    }).cancellations();
    const show = await herald(t, ['campaigns', 'show', id]);
    expect(show.stdout).toContain('CANCELLED');
    expect(show.stdout).toMatch(
      new RegExp(
        `withdrawal \\(cancelled\\): 3 unsent recipients, ${c.sms!.totalCost}, key cancel:${id}:0, refunded at`,
      ),
    );
    expect(show.stdout).toContain(
      `money: total ${c.sms!.totalCost}, actual 0.0000, refunded ${c.sms!.totalCost}`,
    );
    expect(show.stdout).toMatch(/money check: charged .*: balanced/);
  });

  it('resend --dry-run prints the charge and charges nothing; resend charges it', async () => {
    const { id, rows } = await f.dispatchedCampaign(msisdns(2, '017', 700));
    await f.report(id, [
      { row: rows[0]!, status: 'DELIVERED' },
      { row: rows[1]!, status: 'REJECTED' },
    ]);
    await f.rollup.rollUpCampaign(id);
    const preview = await f.service.resendPreview(id);
    const dry = await herald(t, ['campaigns', 'resend', id, '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain(
      `resend 1 of ${id} would send 1 failed recipients for ${preview.cost} (key campaign:${id}:resend:1); refunds pending 0`,
    );
    expect((await ledgerEntries(t, 'deduction')).get(preview.chargeKey)).toBeUndefined();
    const resent = await herald(t, ['campaigns', 'resend', id, '--reason', 'retry']);
    expect(resent.code, resent.stderr).toBe(0);
    expect(resent.stdout).toContain(`resend 1: 1 recipients charged ${preview.cost}`);
    expect((await ledgerEntries(t, 'deduction')).get(preview.chargeKey)).toMatchObject({
      amount: preview.cost,
      n: 1,
    });
  });
});
