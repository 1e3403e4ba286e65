/**
 * Bulk CSV campaigns (seed 003): the upload is stored and a BUILDING campaign answered with 202; the build
 * worker (the campaign.sms-build sweep) claims it and builds: BOM stripped, header detection (generic:
 * a first value that is not an MSISDN; personalized: lowercase msisdn and every exact tag, else the
 * whole build fails), duplicates and invalid rows skipped and counted, one deduction → QUEUED and the
 * upload DONE; a recovered build with saved recipients fails without a second charge (and the stale
 * attempt is fenced off); a 100,000-row build in bounded memory; the idempotency fingerprint covers the file.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countRecipientsByStatus, listRecipients } from '../../src/adapters/postgres/sms-queries.js';
import { type BillingPort, PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { smsBuildSweeper } from '../../src/aggregates/campaign/sms/build.js';
import type { SmsSettings } from '../../src/aggregates/campaign/sms/settings.js';
import type { BulkCampaignMeta } from '../../src/domain/sms/campaign-request.js';
import { SmsValidationError } from '../../src/domain/sms/campaign-request.js';
import type { IdempotencyKeyError } from '../../src/errors.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { waitFor } from '../../src/testing/wait.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import {
  idempotency,
  msisdns,
  ORG,
  silentLogger,
  smsService,
  smsSettings,
  writtenRows,
} from '../support/sms.js';

let t: TestDatabase;
let ledger: PostgresLedger;
let settings: SmsSettings;
beforeAll(async () => {
  t = await createTestDatabase();
  ledger = new PostgresLedger(t.db);
  settings = smsSettings(t, { HERALD_SMS_BUILD_BATCH_SIZE: '500' });
  await ledger.credit({ organizationId: ORG, key: 'top-up', amount: '1000000' });
});
afterAll(async () => t?.drop());

const meta = (overrides: Partial<BulkCampaignMeta> = {}): BulkCampaignMeta => ({
  name: 'Boishakh sale',
  messageType: 'PROMOTIONAL',
  lang: 'bn',
  campaignId: 'BTRC-2030-007',
  templateType: 'GENERIC',
  template: 'পহেলা বৈশাখে ৩০% ছাড়!',
  fileName: 'numbers.csv',
  ...overrides,
});

/** The file in small pieces, as a multipart stream delivers it. */
async function* pieces(text: string | Buffer, size = 7): AsyncGenerator<Buffer> {
  const buffer = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  for (let i = 0; i < buffer.length; i += size) yield buffer.subarray(i, i + size);
}

function builder(billing: BillingPort = ledger, overrides: Partial<SmsSettings> = {}) {
  return smsBuildSweeper({
    db: t.db,
    handler: new CommandHandler({ db: t.db, pod: 'test' }),
    logger: silentLogger,
    billing,
    settings: { ...settings, ...overrides },
  });
}

/** Builds every upload still waiting (so a test's own sweeper takes its own upload). */
async function drain(): Promise<void> {
  const sweeper = builder();
  while ((await sweeper.sweep()).processed > 0);
}

async function upload(text: string | Buffer, m = meta()) {
  const { service } = smsService(t, { settings });
  return service.createBulk(m, pieces(text), { organizationId: ORG });
}

/** Creates and builds one campaign; returns the campaign, its upload and the build's outcome. */
async function build(text: string | Buffer, m = meta()) {
  const created = await upload(text, m);
  expect(created.body.campaign).toMatchObject({ status: 'BUILDING', sms: { recipients: 0, source: 'csv' } });
  const sweeper = builder();
  expect(await sweeper.sweep()).toMatchObject({ processed: 1 });
  const { service } = smsService(t, { settings });
  const id = created.body.campaign.campaignId;
  return {
    id,
    campaign: await service.get(id),
    upload: await service.upload(id),
    outcome: sweeper.builder.outcomes[0]!,
  };
}

describe('generic CSV', () => {
  it('strips the BOM, skips a header row, reads only the first column, charges once → QUEUED, upload DONE', async () => {
    const before = (await ledger.totals(ORG))!.balance;
    const csv = '\uFEFFmsisdn,ignored\n01712345678,x\n8801812345678,y\n+8801912345678,z\n';
    const { id, campaign, upload: u, outcome } = await build(csv);
    expect(outcome).toMatchObject({ status: 'QUEUED', rowsRead: 3, accepted: 3, rejected: 0 });
    expect(campaign).toMatchObject({
      status: 'QUEUED',
      sms: { recipients: 3, rejected: 0, chargeKey: `campaign:${id}`, progress: { pending: 3 } },
    });
    expect(u).toMatchObject({ status: 'DONE', rowsRead: 3, acceptedCount: 3, rejectedCount: 0 });
    expect((await listRecipients(t.db, id, { limit: 5 })).map((r) => r.msisdn)).toEqual([
      '8801712345678',
      '8801812345678',
      '8801912345678',
    ]);
    const charged = Number(before) - Number((await ledger.totals(ORG))!.balance);
    expect(charged).toBeCloseTo(Number(campaign.sms!.totalCost), 4);
  });

  it('a first row that is a valid MSISDN is data, not a header', async () => {
    const { outcome } = await build('01712345678\n01812345678\n');
    expect(outcome).toMatchObject({ status: 'QUEUED', rowsRead: 2, accepted: 2 });
  });

  it('duplicates (in any spelling), invalid numbers and numbers without a route are skipped and counted', async () => {
    const csv = [
      'phone',
      '01712345678',
      '+8801712345678',
      '0171234',
      'not-a-number',
      '+447911123456',
      '01512345678',
      '8801712345678',
    ].join('\r\n');
    const { campaign, upload: u, outcome } = await build(csv);
    expect(outcome).toMatchObject({
      status: 'QUEUED',
      rowsRead: 7,
      accepted: 2,
      rejected: 5,
      rejectedByReason: { duplicate: 2, 'invalid-msisdn': 2, 'no-route': 1 },
    });
    expect(campaign.sms).toMatchObject({ recipients: 2, rejected: 5 });
    expect(u).toMatchObject({
      rejectedCount: 5,
      rejectedByReason: { duplicate: 2, 'invalid-msisdn': 2, 'no-route': 1 },
    });
    // Each rejected row with its line in the file (the header is line 1) and its cell as written.
    expect(u.rejectedRows).toEqual([
      { line: 3, value: '+8801712345678', reason: 'duplicate' },
      { line: 4, value: '0171234', reason: 'invalid-msisdn' },
      { line: 5, value: 'not-a-number', reason: 'invalid-msisdn' },
      { line: 6, value: '+447911123456', reason: 'no-route' },
      { line: 8, value: '8801712345678', reason: 'duplicate' },
    ]);
  });

  it('no accepted recipient: FAILED, nothing charged', async () => {
    const before = (await ledger.totals(ORG))!.balance;
    const { campaign, upload: u } = await build('msisdn\n0171\n0181\n');
    expect(campaign).toMatchObject({
      status: 'FAILED',
      failureReason: 'no accepted recipient in the file',
      sms: { recipients: 0, rejected: 2 },
    });
    expect(u.status).toBe('FAILED');
    expect((await ledger.totals(ORG))!.balance).toBe(before);
  });

  it('a CSV the parser cannot read (an unbalanced quote): FAILED at once with its line, nothing charged, no retry', async () => {
    const before = (await ledger.totals(ORG))!.balance;
    const rows = Array.from({ length: 30 }, (_, i) => `0171${String(1_000_000 + i).slice(1)}`).join('\n');
    const { campaign, upload: u, outcome } = await build(`msisdn\n${rows}\n"01712345678\n01812345678\n`);
    expect(outcome.status).toBe('FAILED');
    expect(campaign).toMatchObject({ status: 'FAILED', sms: { recipients: 0 } });
    expect(campaign.failureReason).toMatch(/^the CSV cannot be read: .*line 3[23]/);
    expect(u).toMatchObject({ status: 'FAILED' });
    expect(u.error).toBe(campaign.failureReason);
    expect((await ledger.totals(ORG))!.balance).toBe(before);
    // Nothing is left for the next sweep to try again.
    expect((await builder().sweep()).processed).toBe(0);
  });

  it('more valid rows than campaign.bulk.max-recipients: the whole build fails and its rows are cleared', async () => {
    const created = await upload(['msisdn', ...msisdns(5)].join('\n'));
    const sweeper = builder(ledger, { bulkMaxRecipients: 4, buildBatchSize: 2 });
    await sweeper.sweep();
    const id = created.body.campaign.campaignId;
    const { service } = smsService(t, { settings });
    expect(await service.get(id)).toMatchObject({
      status: 'FAILED',
      failureReason: expect.stringMatching(/more than 4 valid rows/),
    });
    expect(await countRecipientsByStatus(t.db, id)).toEqual({});
  });
});

describe('personalized CSV', () => {
  const personalized = meta({
    templateType: 'PERSONALIZED',
    template: 'প্রিয় {{name}}, ব্যালেন্স {{balance}} টাকা',
  });

  it('renders each row from its header columns; rows with invalid tags are skipped and counted', async () => {
    const csv = [
      'msisdn,name,balance,extra',
      '01712345678,Amina,250.00,a',
      '8801812345678,Rahim,125.50,b',
      `+8801912345678,${'x'.repeat(101)},1,c`,
      '01512345678,Nusrat,',
      '01312345678,"Karim, Jr.",10',
    ].join('\n');
    const { id, campaign, outcome } = await build(csv, personalized);
    expect(outcome).toMatchObject({
      status: 'QUEUED',
      accepted: 3,
      rejected: 2,
      rejectedByReason: { 'invalid-tags': 2 },
    });
    expect(campaign.sms).toMatchObject({ recipients: 3, rejected: 2 });
    expect((await listRecipients(t.db, id, { limit: 5 })).map((r) => [r.msisdn, r.content, r.tags])).toEqual([
      ['8801712345678', 'প্রিয় Amina, ব্যালেন্স 250.00 টাকা', { name: 'Amina', balance: '250.00' }],
      ['8801812345678', 'প্রিয় Rahim, ব্যালেন্স 125.50 টাকা', { name: 'Rahim', balance: '125.50' }],
      ['8801312345678', 'প্রিয় Karim, Jr., ব্যালেন্স 10 টাকা', { name: 'Karim, Jr.', balance: '10' }],
    ]);
  });

  it('a header missing a template tag (or lowercase msisdn) fails the whole build; nothing charged', async () => {
    const before = (await ledger.totals(ORG))!.balance;
    for (const header of ['msisdn,name', 'MSISDN,name,balance', 'msisdn,Name,balance']) {
      const { campaign, upload: u } = await build(`${header}\n01712345678,Amina,250\n`, personalized);
      expect(campaign).toMatchObject({
        status: 'FAILED',
        failureReason: expect.stringMatching(/header must contain msisdn, name, balance/),
      });
      expect(u).toMatchObject({ status: 'FAILED', acceptedCount: 0 });
      expect(await countRecipientsByStatus(t.db, campaign.campaignId)).toEqual({});
    }
    expect((await ledger.totals(ORG))!.balance).toBe(before);
  });
});

describe('creating a bulk campaign', () => {
  it('is promotional only, in Bengali; an empty file is refused; nothing is written', async () => {
    const { service } = smsService(t, { settings });
    const before = await writtenRows(t.db);
    const cases: [Partial<BulkCampaignMeta>, string, string, string][] = [
      [{ messageType: 'TRANSACTIONAL' }, '01712345678\n', 'messageType', 'bulk.promotional-only'],
      [{ lang: 'en', template: 'Sale!' }, '01712345678\n', 'lang', 'promotional.lang-bn'],
      [{ templateType: 'PERSONALIZED' }, '01712345678\n', 'template', 'template.tags-required'],
      [{}, '', 'file', 'file.empty'],
    ];
    for (const [overrides, file, field, rule] of cases) {
      const error = await service
        .createBulk(meta(overrides), pieces(file), { organizationId: ORG })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SmsValidationError);
      expect((error as SmsValidationError).details).toMatchObject({ field, rule });
    }
    const tooLarge = smsService(t, { settings: { ...settings, bulkMaxBytes: 10 } }).service;
    const error = await tooLarge
      .createBulk(meta(), pieces('01712345678\n01812345678\n'), { organizationId: ORG })
      .catch((e: unknown) => e);
    expect((error as SmsValidationError).details).toMatchObject({ field: 'file', rule: 'file.too-large' });
    expect(await writtenRows(t.db)).toEqual(before);
  });

  it('the idempotency fingerprint covers the metadata and the file', async () => {
    const { service } = smsService(t, { settings });
    const m = meta({ name: 'idempotent upload' });
    const key = idempotency('bulk-1', m, '/v1/campaigns/bulk');
    const first = await service.createBulk(m, pieces('01712345678\n'), {
      organizationId: ORG,
      idempotency: key,
    });
    const replay = await service.createBulk(m, pieces('01712345678\n'), {
      organizationId: ORG,
      idempotency: key,
    });
    expect(replay).toEqual({ replayed: true, body: JSON.parse(JSON.stringify(first.body)) });
    const otherFile = await service
      .createBulk(m, pieces('01812345678\n'), { organizationId: ORG, idempotency: key })
      .catch((e: unknown) => e);
    expect((otherFile as IdempotencyKeyError).code).toBe('IDEMPOTENCY_KEY_REUSED');
    const { rows } = await t.db.query(`select 1 from campaign where name = 'idempotent upload'`);
    expect(rows).toHaveLength(1);
  });
});

describe('a recovered build', () => {
  it('that finds saved recipients fails without a second charge; the stale attempt is fenced off', async () => {
    await drain();
    const org = 'org-recovered';
    await ledger.credit({ organizationId: org, key: 'top-up', amount: '100' });
    const { service } = smsService(t, { settings });
    const created = await service.createBulk(meta(), pieces(['msisdn', ...msisdns(6)].join('\n')), {
      organizationId: org,
    });
    const id = created.body.campaign.campaignId;
    // Attempt 1 saves its batches, charges, then hangs (a worker that died in the billing call).
    let release!: () => void;
    const hung = new Promise<void>((resolve) => {
      release = resolve;
    });
    const dying: BillingPort = {
      async deduct(op) {
        const receipt = await ledger.deduct(op);
        await hung;
        return receipt;
      },
      refund: (op) => ledger.refund(op),
      reverse: (o, k, r) => ledger.reverse(o, k, r),
    };
    const stale = { buildStaleMs: 1_000, buildBatchSize: 2 };
    const first = builder(dying, stale);
    const firstSweep = first.sweep();
    await waitFor(async () => (await ledger.totals(org))!.deductions !== '0.0000', {
      what: 'attempt 1 charged',
    });
    expect(await countRecipientsByStatus(t.db, id)).toEqual({ PENDING: 6 });

    // Attempt 2 takes the stale build over (database clock), finds saved recipients: FAILED, no recharge.
    const second = builder(ledger, stale);
    await waitFor(async () => (await second.sweep()).processed === 1, { what: 'the stale build taken over' });
    expect(second.builder.outcomes[0]).toMatchObject({ attempt: 2, status: 'FAILED' });
    const failed = await service.get(id);
    expect(failed).toMatchObject({
      status: 'FAILED',
      failureReason: expect.stringMatching(
        /recovered build \(attempt 2\) found 6 saved recipients: failed without recharging/,
      ),
      sms: { recipients: 0, buildAttempt: 2 },
    });
    expect(await countRecipientsByStatus(t.db, id)).toEqual({});
    const { rows } = await t.db.query<{ kind: string; amount: string }>(
      `select kind, amount::text from billing_entry where organization_id = $1 and key = $2 order by id`,
      [org, `campaign:${id}`],
    );
    expect(rows.map((r) => r.kind)).toEqual(['deduction', 'refund']);
    expect(rows[1]!.amount).toBe(rows[0]!.amount);
    expect((await ledger.totals(org))!.balance).toBe('100.0000');

    // The dead attempt comes back: its activation is refused (it no longer holds the upload).
    release();
    await firstSweep;
    expect(first.builder.outcomes[0]).toMatchObject({ attempt: 1, status: 'SUPERSEDED' });
    expect((await service.get(id)).status).toBe('FAILED');
    expect((await service.upload(id)).status).toBe('FAILED');
  });
});

describe('back-pressure', () => {
  it('the parser runs at most one 4 KiB slice of the file ahead of the rows the build has taken', async () => {
    await drain();
    const rows = 30_000;
    const { service } = smsService(t, { settings });
    async function* file(): AsyncGenerator<Buffer> {
      yield Buffer.from('msisdn\n');
      for (let start = 0; start < rows; start += 5_000) {
        yield Buffer.from(`${msisdns(5_000, '018', start).join('\n')}\n`);
      }
    }
    await service.createBulk(meta({ name: 'back-pressure' }), file(), { organizationId: ORG });
    // Small batches: the build stops to save every 100 rows while the parser has the rest of the file.
    const sweeper = builder(ledger, { buildBatchSize: 100 });
    await sweeper.sweep();
    const outcome = sweeper.builder.outcomes[0]!;
    expect(outcome).toMatchObject({ status: 'QUEUED', rowsRead: rows, accepted: rows });
    // 12-byte rows: ~341 records per slice, plus the parser's readable buffer (16 records). With 64 KiB
    // slices 5,462 records waited; with the parser's default 16 KiB input buffer, ~1,000.
    expect(outcome.parsedAhead).toBeGreaterThan(0);
    expect(outcome.parsedAhead).toBeLessThanOrEqual(400);
  });
});

describe('a 50,000-row build', () => {
  it('streams in bounded memory, in batches: it retains no more than a build five times smaller', async () => {
    await drain();
    // Retained heap (after a full collection), sampled while a build runs: garbage does not count.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const retainedMb = () => {
      gc();
      return process.memoryUsage().heapUsed / 1024 / 1024;
    };
    const { service } = smsService(t, { settings });
    async function buildRows(rows: number) {
      async function* file(): AsyncGenerator<Buffer> {
        yield Buffer.from('\uFEFFmsisdn\n');
        for (let start = 0; start < rows; start += 5_000) {
          yield Buffer.from(`${msisdns(5_000, '017', start).join('\n')}\n`);
        }
      }
      const created = await service.createBulk(meta({ name: `big ${rows}` }), file(), {
        organizationId: ORG,
      });
      const sweeper = builder(ledger, { buildBatchSize: 1_000 });
      const baseline = retainedMb();
      const samples: number[] = [];
      const sampler = setInterval(() => samples.push(retainedMb()), 50);
      try {
        await sweeper.sweep();
      } finally {
        clearInterval(sampler);
      }
      expect(sweeper.builder.outcomes[0]).toMatchObject({ status: 'QUEUED', rowsRead: rows, accepted: rows });
      const id = created.body.campaign.campaignId;
      expect((await service.get(id)).sms).toMatchObject({ recipients: rows, progress: { pending: rows } });
      const { rows: batches } = await t.db.query<{ n: number }>(
        `select count(*)::int as n from event where stream_id = $1 and type = 'CampaignRecipientsAdded'`,
        [id],
      );
      expect(batches[0]!.n).toBe(rows / 1_000);
      expect(samples.length).toBeGreaterThan(8);
      return {
        peak: Math.max(...samples) - baseline,
        late: Math.max(...samples.slice(-Math.ceil(samples.length / 4))),
      };
    }
    const small = await buildRows(10_000);
    const large = await buildRows(50_000);
    // Keeping each frozen row (~150 bytes) would retain ~7.5 MB at the end of the large build and ~6 MB
    // more than at the end of the small one; the build holds one batch and one 4 KiB slice of the file.
    expect(large.peak).toBeLessThan(8);
    expect(large.late).toBeLessThan(small.late + 3);
  });
});
