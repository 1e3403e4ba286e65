/**
 * `herald campaigns show` and `herald campaigns recipients` (the real CLI process): an SMS campaign's
 * status, definition, totals, charge and progress counters as kept on the campaign, and its CSV build;
 * its frozen recipients; exit codes for an unknown campaign (1) and a usage error (2).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { smsBuildSweeper } from '../../src/aggregates/campaign/sms/build.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { herald } from '../support/cli.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { inlineRequest, ORG, silentLogger, smsService } from '../support/sms.js';

let t: TestDatabase;
let ledger: PostgresLedger;
beforeAll(async () => {
  t = await createTestDatabase();
  ledger = new PostgresLedger(t.db);
  await ledger.credit({ organizationId: ORG, key: 'top-up', amount: '100' });
});
afterAll(async () => t?.drop());

describe('herald campaigns', () => {
  it('show prints the SMS counters, totals and charge; recipients lists the frozen rows', async () => {
    const { service } = smsService(t);
    const c = (await service.create(inlineRequest(), { organizationId: ORG })).body;
    const show = await herald(t, ['campaigns', 'show', c.campaignId]);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain(`campaign ${c.campaignId}  "Eid offer"  sms  QUEUED`);
    expect(show.stdout).toContain('PROMOTIONAL lang=bn campaignId=BTRC-2030-001 PERSONALIZED (inline)');
    expect(show.stdout).toContain(
      `recipients 3 (rejected 0), segments ${c.sms!.segments}, total cost ${c.sms!.totalCost}; charged campaign:${c.campaignId}`,
    );
    expect(show.stdout).toContain(
      'progress: pending 3, deferred 0, submitted 0, retry pending 0, delivered 0, failed 0 (unconfirmed 0, refunded 0), cancelled 0 (deferrals 0, submissions 0)',
    );
    const json = await herald(t, ['campaigns', 'show', c.campaignId, '--json']);
    expect(JSON.parse(json.stdout).campaign.sms.progress).toEqual({
      pending: 3,
      deferred: 0,
      submitted: 0,
      retryPending: 0,
      delivered: 0,
      failed: 0,
      cancelled: 0,
      unconfirmed: 0,
      refunded: 0,
    });
    const recipients = await herald(t, ['campaigns', 'recipients', c.campaignId]);
    expect(recipients.code).toBe(0);
    expect(recipients.stdout.trim().split('\n')).toHaveLength(3);
    expect(recipients.stdout).toContain('8801712345678  GP  PENDING');
  });

  it("show prints a CSV campaign's build", async () => {
    const { service } = smsService(t);
    const created = await service.createBulk(
      {
        name: 'csv',
        messageType: 'PROMOTIONAL',
        lang: 'bn',
        campaignId: 'C-1',
        templateType: 'GENERIC',
        template: 'অফার',
        fileName: 'list.csv',
      },
      (async function* () {
        yield Buffer.from('msisdn\n01712345678\n0171\n01712345678\n');
      })(),
      { organizationId: ORG },
    );
    await smsBuildSweeper({
      db: t.db,
      handler: new CommandHandler({ db: t.db }),
      logger: silentLogger,
      billing: ledger,
      settings: t.config().sms,
    }).sweep();
    const show = await herald(t, ['campaigns', 'show', created.body.campaign.campaignId]);
    expect(show.stdout).toMatch(
      /upload list\.csv: DONE, \d+ bytes, 3 rows read, accepted 1, rejected 2 \((invalid-msisdn 1, duplicate 1|duplicate 1, invalid-msisdn 1)\), build attempt 1/,
    );
  });

  it("billing credit applies a top-up once per key; balance shows the invariant's sides", async () => {
    const first = await herald(t, ['billing', 'credit', 'org-cli', '25.5', '--key', 'top-up-1']);
    expect(first.stdout).toContain('credited 25.5000 to org-cli (key top-up-1): balance 25.5000');
    const again = await herald(t, ['billing', 'credit', 'org-cli', '25.5', '--key', 'top-up-1']);
    expect(again.stdout).toContain('already credited 25.5000');
    const balance = await herald(t, ['billing', 'balance', 'org-cli']);
    expect(balance.stdout).toContain(
      'org-cli: balance 25.5000 = credits 25.5000 − deductions 0.0000 + refunds 0.0000 (1 entries)',
    );
    expect((await herald(t, ['billing', 'credit', 'org-cli', '1'])).code).toBe(2);
  });

  it('an unknown campaign exits 1, a usage error 2', async () => {
    expect((await herald(t, ['campaigns', 'show', '3f0c4c8e-0000-4000-8000-000000000000'])).code).toBe(1);
    expect((await herald(t, ['campaigns', 'frobnicate', 'x'])).code).toBe(2);
  });
});
