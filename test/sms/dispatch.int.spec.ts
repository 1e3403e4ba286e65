/**
 * SMS dispatch in `herald scanner` (seed 003's CampaignDispatcher with row claims instead of a lease):
 * four scanner processes' worth of roles over one campaign of 20,000 recipients submit every recipient
 * exactly once, in chunks grouped by content, language, sender and route (≤ 999 promotional), each an
 * outbox message to the Kafka submit topic linked from its recipients; transactional chunks hold one
 * recipient at priority 1, and RabbitMQ is a configuration away; promotional traffic outside the BTRC
 * window goes back to SCHEDULED at the next opening (the window placed around the database clock) and
 * is dispatched when it opens. `herald verify` agrees with every campaign row throughout.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readStream } from '../../src/adapters/postgres/event-queries.js';
import { countRecipientsByStatus } from '../../src/adapters/postgres/sms-queries.js';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { smsBuildSweeper } from '../../src/aggregates/campaign/sms/build.js';
import type { SmsSubmission } from '../../src/aggregates/campaign/sms/dispatch.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { verifyStates } from '../../src/projections/verify.js';
import { waitFor } from '../../src/testing/wait.js';
import { runTestRole } from '../support/roles.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { inlineRequest, msisdns, ORG, silentLogger, smsService, windowAroundNow } from '../support/sms.js';

let t: TestDatabase;
let ledger: PostgresLedger;
const ALWAYS_OPEN = { HERALD_SMS_PROMOTIONAL_WINDOW: '00:00:00-23:59:59' };
/** Scanners without AMQP: no tick consumer on the shared broker (timers, NOTIFY and polls only). */
const NO_TICKS = { AMQP_URL: '' };
beforeAll(async () => {
  t = await createTestDatabase();
  ledger = new PostgresLedger(t.db);
  await ledger.credit({ organizationId: ORG, key: 'top-up', amount: '1000000' });
});
afterAll(async () => t?.drop());

interface OutboxRow {
  message_id: string;
  sink: string;
  destination: string;
  priority: number;
  payload: SmsSubmission;
  headers: Record<string, unknown>;
}

async function submissions(campaignId: string): Promise<OutboxRow[]> {
  const { rows } = await t.db.query<OutboxRow>(
    `select o.message_id::text, o.sink, o.destination, o.priority, o.payload, o.headers
       from outbox o join event e on e.position = o.event_position
      where e.stream_type = 'campaign' and e.stream_id = $1 and e.type = 'CampaignRecipientsDispatched'`,
    [campaignId],
  );
  return rows;
}

/** Runs `n` scanner roles (each its own runtime and pool, as n pods would) until stopped. */
function scanners(n: number, overrides: Record<string, string> = {}) {
  const controller = new AbortController();
  const running = Array.from({ length: n }, (_, i) =>
    runTestRole(
      'scanner',
      t.config({
        ...ALWAYS_OPEN,
        ...NO_TICKS,
        HERALD_SCANNER_POLL_MS: '1000',
        HERALD_POD: `scanner-${i}`,
        ...overrides,
      }),
      controller.signal,
    ),
  );
  return {
    async stop() {
      controller.abort();
      await Promise.all(running);
    },
  };
}

describe('four scanners over one campaign of 20,000 recipients', () => {
  it('submit every recipient exactly once, in grouped chunks of at most 999', async () => {
    // A CSV campaign over four operators (GP, Robi, Banglalink, Teletalk): four routes, one content.
    const settings = t.config(ALWAYS_OPEN).sms;
    const numbers = [
      ...msisdns(5_000, '017'),
      ...msisdns(5_000, '018'),
      ...msisdns(5_000, '019'),
      ...msisdns(5_000, '015'),
    ];
    const { service } = smsService(t, { settings });
    const created = await service.createBulk(
      {
        name: '20k',
        messageType: 'PROMOTIONAL',
        lang: 'bn',
        campaignId: 'BTRC-20K',
        templateType: 'GENERIC',
        template: 'ঈদ মোবারক! ২০% ছাড়',
      },
      (async function* () {
        yield Buffer.from(`msisdn\n${numbers.join('\n')}\n`);
      })(),
      { organizationId: ORG },
    );
    const id = created.body.campaign.campaignId;
    const build = smsBuildSweeper({
      db: t.db,
      handler: new CommandHandler({ db: t.db }),
      logger: silentLogger,
      billing: ledger,
      settings,
    });
    await build.sweep();
    expect((await service.get(id)).status).toBe('QUEUED');

    const four = scanners(4);
    try {
      await waitFor(async () => (await service.get(id)).sms!.progress.submitted === 20_000, {
        timeoutMs: 90_000,
        what: '20,000 recipients submitted',
      });
    } finally {
      await four.stop();
    }
    const campaign = await service.get(id);
    expect(campaign).toMatchObject({
      status: 'DISPATCHING',
      claimEpoch: 1,
      sms: { progress: { pending: 0, deferred: 0, submitted: 20_000 } },
    });
    expect(await countRecipientsByStatus(t.db, id)).toEqual({ SUBMITTED: 20_000 });

    const rows = await submissions(id);
    expect(rows.length).toBe(campaign.sms!.submissions);
    const seen = new Map<string, string>();
    for (const row of rows) {
      expect(row).toMatchObject({ sink: 'kafka', destination: 'sms.submit', priority: 3 });
      expect(row.payload.submissionId).toBe(row.message_id);
      expect(row.payload.epoch).toBe(1);
      expect(row.headers['x-herald-epoch']).toBe(1);
      expect(row.payload.recipients.length).toBeGreaterThan(0);
      expect(row.payload.recipients.length).toBeLessThanOrEqual(999);
      const expectedOperator = { '88017': 'GP', '88018': 'ROBI', '88019': 'BANGLALINK', '88015': 'TELETALK' };
      for (const r of row.payload.recipients) {
        expect(seen.has(r.recipientId), `recipient ${r.recipientId} twice`).toBe(false);
        seen.set(r.recipientId, row.message_id);
        // Grouping: every recipient of a chunk has the chunk's route.
        expect(expectedOperator[r.msisdn.slice(0, 5) as keyof typeof expectedOperator]).toBe(
          row.payload.route.operator,
        );
      }
    }
    expect(seen.size).toBe(20_000);
    // Each recipient row links to the submission that carried it, with one attempt.
    const { rows: links } = await t.db.query<{ id: string; submission_id: string; attempts: number }>(
      `select id::text, submission_id::text, attempts from campaign_recipient where campaign_id = $1`,
      [id],
    );
    for (const link of links) {
      expect(link.submission_id).toBe(seen.get(link.id));
      expect(link.attempts).toBe(1);
    }
    // Batches of 999: ceil(20,000 / 999) dispatch events at least (each split into one chunk per route).
    const events = (await readStream(t.db, 'campaign', id)).filter(
      (e) => e.type === 'CampaignRecipientsDispatched',
    );
    expect(events.length).toBe(Math.ceil(20_000 / 999));
    // Which scanners took the batches varies (one may take them all while the others skip the locked
    // campaign); exactly once is what holds.
    const report = await verifyStates(t.db, heraldRegistry);
    expect(report.driftedStreams).toBe(0);
  });
});

describe('chunks and sinks', () => {
  it('a transactional chunk holds one recipient at priority 1; HERALD_SMS_SINK=amqp sends them over RabbitMQ', async () => {
    const { service } = smsService(t);
    const created = await service.create(
      inlineRequest({
        messageType: 'TRANSACTIONAL',
        lang: 'en',
        templateType: 'GENERIC',
        template: 'Your parcel is on its way',
        campaignId: undefined,
        recipients: msisdns(7, '018').map((msisdn) => ({ msisdn })),
      }),
      { organizationId: ORG },
    );
    const id = created.body.campaignId;
    const one = scanners(1, { HERALD_SMS_SINK: 'amqp', HERALD_SMS_SUBMIT_TOPIC: 'sms.submit' });
    try {
      await waitFor(async () => (await service.get(id)).sms!.progress.submitted === 7, {
        what: '7 submitted',
      });
    } finally {
      await one.stop();
    }
    const rows = await submissions(id);
    expect(rows).toHaveLength(7);
    for (const row of rows) {
      expect(row).toMatchObject({ sink: 'amqp', destination: 'sms.submit', priority: 1 });
      expect(row.payload.recipients).toHaveLength(1);
      expect(row.payload).toMatchObject({
        messageType: 'TRANSACTIONAL',
        encoding: 'GSM7',
        content: 'Your parcel is on its way',
      });
    }
  });
});

describe('the promotional window', () => {
  it('outside it, a claimed campaign goes back to SCHEDULED at the next opening (the event says why), and is sent then', async () => {
    // The window opens 4 s after the database's now (in the first zone where it does not cross midnight).
    const { zone, window } = await windowAroundNow(t.db, 4, 3_600);
    const overrides = { HERALD_SMS_PROMOTIONAL_WINDOW: window, HERALD_SMS_TIMEZONE: zone };
    const settings = t.config(overrides).sms;
    const { service } = smsService(t, { settings });
    const created = await service.create(inlineRequest({ name: 'too early' }), { organizationId: ORG });
    const id = created.body.campaignId;
    expect(created.body.status).toBe('QUEUED');
    const one = scanners(1, overrides);
    try {
      const deferred = await waitFor(
        async () => (await readStream(t.db, 'campaign', id)).find((e) => e.type === 'CampaignDeferred'),
        { what: 'the campaign deferred' },
      );
      const data = deferred.data as { startAt: string; reason: string; epoch: number };
      expect(data.reason).toMatch(
        new RegExp(`outside the promotional window ${window.replace('-', '–')} ${zone} \\(BTRC\\)`),
      );
      const { rows } = await t.db.query<{ opening: Date }>(
        `select ((now() at time zone $2)::date + $1::time) at time zone $2 as opening`,
        [window.split('-')[0], zone],
      );
      expect(data.startAt).toBe(rows[0]!.opening.toISOString());
      expect(await countRecipientsByStatus(t.db, id)).toEqual({ PENDING: 3 });
      // At the opening the scanner claims it again and sends it.
      await waitFor(async () => (await service.get(id)).sms!.progress.submitted === 3, {
        timeoutMs: 30_000,
        what: 'sent at the opening',
      });
    } finally {
      await one.stop();
    }
    const history = (await readStream(t.db, 'campaign', id)).map((e) => e.type);
    expect(history).toEqual([
      'CampaignCreated',
      'CampaignRecipientsAdded',
      'CampaignActivated',
      'CampaignClaimed',
      'CampaignDeferred',
      'CampaignClaimed',
      'CampaignRecipientsDispatched',
    ]);
    const dispatched = (await readStream(t.db, 'campaign', id)).at(-1)!;
    expect(dispatched.recordedAt.getTime()).toBeGreaterThanOrEqual(
      Date.parse((await service.get(id)).startAt!),
    );
  });
});
