/**
 * Per-recipient send windows (beyond the seed): one campaign, recipients in three zones, one window
 * policy read in each recipient's local time, evaluated on the database clock by `herald scanner`: the
 * zone inside its window is submitted at once; the one whose window opens seconds later is deferred
 * (counted, `next_allowed_at` on its row) and submitted at the opening, inside its window; the one whose
 * window is hours away — a zone with DST (London or New York), whose opening is computed DST-correctly (the
 * DST cases themselves: test/domain/sms-windows.unit.spec.ts) — stays deferred, never dropped.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listRecipients } from '../../src/adapters/postgres/sms-queries.js';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { localTime, nextAllowedAt, secondsOfDay } from '../../src/domain/sms/windows.js';
import { waitFor } from '../../src/testing/wait.js';
import { runTestRole } from '../support/roles.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { inlineRequest, msisdns, ORG, smsService } from '../support/sms.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
  await new PostgresLedger(t.db).credit({ organizationId: ORG, key: 'top-up', amount: '1000' });
});
afterAll(async () => t?.drop());

describe('send windows in three zones', () => {
  it('inside: sent; opening in seconds: deferred then sent inside it; hours away: deferred and counted', async () => {
    // The window opens 3 s from the database's now in the `opening` zone's local time; the `inside` zone
    // (30–60 minutes ahead) is already in it; the `later` zone (a DST zone, hours away) is far before it.
    // Three zone sets, so one of them has no midnight inside the 3-hour window whenever the test runs.
    const sets = [
      { inside: 'Asia/Yangon', opening: 'Asia/Dhaka', later: 'Europe/London' },
      { inside: 'Europe/Athens', opening: 'Europe/Berlin', later: 'America/New_York' },
      { inside: 'America/Denver', opening: 'America/Los_Angeles', later: 'Europe/London' },
    ];
    let zones: (typeof sets)[number] | undefined;
    let start = '';
    let end = '';
    for (const set of sets) {
      const { rows } = await t.db.query<{ start: string; end: string }>(
        `select to_char((now() + interval '3 seconds') at time zone $1, 'HH24:MI:SS') as start,
                to_char((now() + interval '3 hours') at time zone $1, 'HH24:MI:SS') as end`,
        [set.opening],
      );
      if (rows[0]!.start < rows[0]!.end) {
        zones = set;
        ({ start, end } = rows[0]!);
        break;
      }
    }
    if (!zones) throw new Error('every zone set has a midnight in the window');
    const sendWindow = { start, end };
    const { service } = smsService(t);
    const created = await service.create(
      inlineRequest({
        messageType: 'TRANSACTIONAL',
        lang: 'en',
        templateType: 'GENERIC',
        template: 'Your statement is ready',
        campaignId: undefined,
        sendWindow,
        recipients: [
          ...msisdns(3, '017', 0).map((msisdn) => ({ msisdn, timezone: zones!.inside })),
          ...msisdns(3, '017', 100).map((msisdn) => ({ msisdn, timezone: zones!.opening })),
          ...msisdns(3, '017', 200).map((msisdn) => ({ msisdn, timezone: zones!.later })),
        ],
      }),
      { organizationId: ORG },
    );
    const id = created.body.campaignId;
    const controller = new AbortController();
    const scanner = runTestRole(
      'scanner',
      t.config({ AMQP_URL: '', HERALD_SCANNER_POLL_MS: '1000' }) /* no tick consumer */,
      controller.signal,
    );
    try {
      // First pass: `inside` sent, `opening` and `later` deferred.
      const first = await waitFor(
        async () => {
          const s = (await service.get(id)).sms!;
          return s.progress.submitted === 3 && s.progress.deferred === 6 ? s : null;
        },
        { what: 'the first dispatch batch' },
      );
      expect(first).toMatchObject({ deferrals: 6, progress: { pending: 0 } });
      const deferredRows = (await listRecipients(t.db, id, { limit: 20 })).filter(
        (r) => r.status === 'DEFERRED',
      );
      const dispatchedAt = Date.parse(
        (
          await t.db.query<{ at: Date }>(
            `select min(submitted_at) as at from campaign_recipient where campaign_id = $1`,
            [id],
          )
        ).rows[0]!.at.toISOString(),
      );
      for (const r of deferredRows) {
        expect(r.deferrals).toBe(1);
        // next_allowed_at is the next opening in the recipient's own zone (DST-correct).
        expect(r.nextAllowedAt?.getTime()).toBe(nextAllowedAt(dispatchedAt, r.timezone, sendWindow));
      }
      // Then `opening`, at its opening.
      await waitFor(async () => (await service.get(id)).sms!.progress.submitted === 6, {
        timeoutMs: 30_000,
        what: 'the opening zone sent at its opening',
      });
    } finally {
      controller.abort();
      await scanner;
    }
    const final = await service.get(id);
    expect(final.sms).toMatchObject({ deferrals: 6, progress: { pending: 0, deferred: 3, submitted: 6 } });
    const recipients = await listRecipients(t.db, id, { limit: 20 });
    const inWindow = (at: Date, zone: string) => {
      const seconds = localTime(at.getTime(), zone).seconds;
      return seconds >= secondsOfDay(start)! && seconds < secondsOfDay(end)!;
    };
    for (const r of recipients) {
      if (r.timezone === zones.later) {
        expect(r).toMatchObject({ status: 'DEFERRED', submissionId: null, attempts: 0 });
        expect(r.nextAllowedAt!.getTime()).toBeGreaterThan(Date.now() + 3_600_000);
      } else {
        expect(r.status).toBe('SUBMITTED');
        expect(inWindow(r.submittedAt!, r.timezone), `${r.timezone} submitted inside its window`).toBe(true);
        expect(r.deferrals).toBe(r.timezone === zones.opening ? 1 : 0);
      }
    }
  });
});
