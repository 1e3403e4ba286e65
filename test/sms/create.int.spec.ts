/**
 * Inline SMS campaign creation (seed 003's ten steps) on a real database: the frozen recipient rows, one
 * deduction with the stable key, QUEUED or SCHEDULED; every validation rule rejected naming its field
 * and rule with nothing written; preview writes nothing; idempotency (a retry charges once, concurrent
 * retries, a different body); a refused deduction reversed and the key released; an ambiguous outcome
 * with an Idempotency-Key keeps the DRAFT for the retry (charged once, ADR 0023), without one it is
 * reversed by key; a reversal that cannot be made leaves the DRAFT for recovery.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readStream } from '../../src/adapters/postgres/event-queries.js';
import { countRecipientsByStatus, listRecipients } from '../../src/adapters/postgres/sms-queries.js';
import { type BillingPort, PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { SmsValidationError } from '../../src/domain/sms/campaign-request.js';
import { formatUnits, toUnits } from '../../src/domain/sms/money.js';
import {
  BillingUnavailableError,
  ConflictError,
  IdempotencyKeyError,
  InsufficientBalanceError,
} from '../../src/errors.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { idempotency, inlineRequest, msisdns, ORG, smsService, writtenRows } from '../support/sms.js';

let t: TestDatabase;
let ledger: PostgresLedger;
beforeAll(async () => {
  t = await createTestDatabase();
  ledger = new PostgresLedger(t.db);
  await ledger.credit({ organizationId: ORG, key: 'top-up-1', amount: '1000' });
});
afterAll(async () => t?.drop());

const errorOf = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );

/** A Dhaka wall time `ms` after the database clock (no offset: read in the campaign zone). */
async function dhakaLocal(ms: number): Promise<string> {
  const { rows } = await t.db.query<{ local: string }>(
    `select to_char((now() + make_interval(secs => $1 / 1000.0)) at time zone 'Asia/Dhaka', 'YYYY-MM-DD"T"HH24:MI:SS') as local`,
    [ms],
  );
  return rows[0]!.local;
}

describe('inline creation', () => {
  it('freezes each recipient (content, route, rate, segments, cost), deducts the total once, QUEUED', async () => {
    const { service } = smsService(t);
    const before = (await ledger.totals(ORG))!;
    const created = await service.create(inlineRequest(), { organizationId: ORG, meta: { actor: 'test' } });
    expect(created.replayed).toBe(false);
    const c = created.body;
    expect(c).toMatchObject({
      status: 'QUEUED',
      channel: 'sms',
      sms: {
        messageType: 'PROMOTIONAL',
        lang: 'bn',
        operatorCampaignId: 'BTRC-2030-001',
        recipients: 3,
        chargeKey: `campaign:${c.campaignId}`,
        progress: { pending: 3, deferred: 0, submitted: 0 },
      },
    });
    const rows = await listRecipients(t.db, c.campaignId, { limit: 10 });
    expect(rows.map((r) => [r.msisdn, r.operator, r.content, r.encoding, r.sender, r.rate])).toEqual([
      ['8801712345678', 'GP', 'প্রিয় Amina, আপনার ব্যালেন্স 250.00 টাকা।', 'UCS2', 'HERALD', '0.3000'],
      ['8801812345678', 'ROBI', 'প্রিয় Rahim, আপনার ব্যালেন্স 125.50 টাকা।', 'UCS2', 'HERALD', '0.3000'],
      ['8801912345678', 'BANGLALINK', 'প্রিয় নুসরাত, আপনার ব্যালেন্স 500.00 টাকা।', 'UCS2', 'HERALD', '0.3000'],
    ]);
    for (const r of rows) {
      expect(r.status).toBe('PENDING');
      expect(r.timezone).toBe('Asia/Dhaka');
      expect(Number(r.cost)).toBeCloseTo(r.segments * 0.3, 4);
    }
    const total = rows.reduce((sum, r) => sum + Number(r.cost), 0);
    expect(Number(c.sms!.totalCost)).toBeCloseTo(total, 4);
    const after = (await ledger.totals(ORG))!;
    expect(Number(before.balance) - Number(after.balance)).toBeCloseTo(total, 4);
    expect((await readStream(t.db, 'campaign', c.campaignId)).map((e) => [e.type, e.meta.actor])).toEqual([
      ['CampaignCreated', 'test'],
      ['CampaignRecipientsAdded', 'test'],
      ['CampaignActivated', 'test'],
    ]);
  });

  it('SCHEDULED: scheduledAt without an offset is Dhaka local time', async () => {
    const { service } = smsService(t);
    const local = await dhakaLocal(3_600_000);
    const { rows } = await t.db.query<{ instant: Date }>(
      `select ($1::timestamp at time zone 'Asia/Dhaka') as instant`,
      [local],
    );
    const created = await service.create(
      inlineRequest({
        messageType: 'TRANSACTIONAL',
        lang: 'en',
        templateType: 'GENERIC',
        template: 'Your OTP service is back',
        recipients: [{ msisdn: '01512345678' }],
        scheduleType: 'SCHEDULED',
        scheduledAt: local,
      }),
      { organizationId: ORG },
    );
    expect(created.body).toMatchObject({ status: 'SCHEDULED', startAt: rows[0]!.instant.toISOString() });
    expect(created.body.sms).toMatchObject({ recipients: 1, segments: 1, totalCost: '0.2500' });
  });
});

describe('every validation rule is rejected naming the field and the rule, and nothing is written', () => {
  const personal = (tags: Record<string, string>) => [{ msisdn: '01712345678', tags }];
  const cases: [string, string, string, () => Promise<Record<string, unknown>> | Record<string, unknown>][] =
    [
      [
        'promotional in English',
        'lang',
        'promotional.lang-bn',
        () => ({ lang: 'en', template: 'Hi {{name}} {{balance}}' }),
      ],
      [
        'promotional without campaignId',
        'campaignId',
        'promotional.campaign-id-required',
        () => ({ campaignId: undefined }),
      ],
      [
        'SCHEDULED without scheduledAt',
        'scheduledAt',
        'scheduledAt.required',
        () => ({ scheduleType: 'SCHEDULED' }),
      ],
      [
        'scheduledAt on an INSTANT campaign',
        'scheduledAt',
        'scheduledAt.only-for-scheduled',
        async () => ({ scheduledAt: await dhakaLocal(3_600_000) }),
      ],
      [
        'scheduledAt not a date-time',
        'scheduledAt',
        'scheduledAt.format',
        () => ({ scheduleType: 'SCHEDULED', scheduledAt: 'next tuesday' }),
      ],
      [
        'scheduledAt within the minimum lead',
        'scheduledAt',
        'scheduledAt.min-lead',
        async () => ({ scheduleType: 'SCHEDULED', scheduledAt: await dhakaLocal(60_000) }),
      ],
      [
        'scheduledAt beyond the maximum future date',
        'scheduledAt',
        'scheduledAt.max-future',
        async () => ({ scheduleType: 'SCHEDULED', scheduledAt: await dhakaLocal(31 * 86_400_000) }),
      ],
      [
        'promotional scheduled outside the BTRC window',
        'scheduledAt',
        'scheduledAt.outside-promotional-window',
        async () => {
          const { rows } = await t.db.query<{ d: string }>(
            `select to_char((now() + interval '2 days') at time zone 'Asia/Dhaka', 'YYYY-MM-DD') as d`,
          );
          return { scheduleType: 'SCHEDULED', scheduledAt: `${rows[0]!.d}T23:30:00` };
        },
      ],
      [
        'GENERIC with tags in the template',
        'template',
        'template.tags-not-allowed',
        () => ({ templateType: 'GENERIC' }),
      ],
      ['PERSONALIZED without a tag', 'template', 'template.tags-required', () => ({ template: 'অফার চলছে' })],
      [
        'a malformed tag',
        'template',
        'template.malformed-tag',
        () => ({ template: 'প্রিয় {{ name }} {{balance}}' }),
      ],
      [
        'an English template that is not GSM-7',
        'template',
        'template.not-gsm7',
        () => ({ messageType: 'TRANSACTIONAL', lang: 'en', template: 'প্রিয় {{name}} {{balance}}' }),
      ],
      [
        'an extra tag',
        'recipients[0].tags.city',
        'tags.extra',
        () => ({ recipients: personal({ name: 'A', balance: '1', city: 'Dhaka' }) }),
      ],
      [
        'a missing tag',
        'recipients[0].tags.balance',
        'tags.missing',
        () => ({ recipients: personal({ name: 'A' }) }),
      ],
      [
        'a value over 100 characters',
        'recipients[0].tags.name',
        'tags.too-long',
        () => ({ recipients: personal({ name: 'x'.repeat(101), balance: '1' }) }),
      ],
      [
        'template braces in a value',
        'recipients[0].tags.name',
        'tags.braces',
        () => ({ recipients: personal({ name: '{{balance}}', balance: '1' }) }),
      ],
      [
        'control characters in a value',
        'recipients[0].tags.name',
        'tags.control-characters',
        () => ({ recipients: personal({ name: 'A\u0000', balance: '1' }) }),
      ],
      [
        'a non-GSM-7 value with lang=en',
        'recipients[0].tags.name',
        'tags.not-gsm7',
        () => ({
          messageType: 'TRANSACTIONAL',
          lang: 'en',
          template: 'Hi {{name}}, {{balance}}',
          recipients: personal({ name: 'নুসরাত', balance: '1' }),
        }),
      ],
      [
        'tags on a GENERIC campaign',
        'recipients[0].tags',
        'tags.not-allowed',
        () => ({ templateType: 'GENERIC', template: 'অফার', recipients: personal({ name: 'A' }) }),
      ],
      [
        'an invalid MSISDN',
        'recipients[0].msisdn',
        'msisdn.invalid',
        () => ({ recipients: [{ msisdn: '0171234', tags: { name: 'A', balance: '1' } }] }),
      ],
      [
        'a number without a route',
        'recipients[0].msisdn',
        'msisdn.no-route',
        () => ({ recipients: [{ msisdn: '+447911123456', tags: { name: 'A', balance: '1' } }] }),
      ],
      [
        'more than ten segments',
        'recipients[0].tags',
        'content.too-many-segments',
        () => ({
          template: `${'অ'.repeat(670)} {{name}} {{balance}}`,
          recipients: personal({ name: 'আমিনা', balance: '100' }),
        }),
      ],
      [
        'an unknown time zone',
        'recipients[0].timezone',
        'timezone.unknown',
        () => ({
          recipients: [{ msisdn: '01712345678', tags: { name: 'A', balance: '1' }, timezone: 'Mars/Base' }],
        }),
      ],
      [
        'a send window that never opens',
        'sendWindow',
        'sendWindow.never-opens',
        () => ({
          sendWindow: {
            start: '09:00',
            end: '10:00',
            days: { sun: null, mon: null, tue: null, wed: null, thu: null, fri: null, sat: null },
          },
        }),
      ],
      [
        'a send window ending before it starts',
        'sendWindow.end',
        'end.custom',
        () => ({ sendWindow: { start: '21:00', end: '08:00' } }),
      ],
      ['no recipients', 'recipients', 'recipients.too-few', () => ({ recipients: [] })],
      [
        'more than 5,000 recipients',
        'recipients',
        'recipients.too-many',
        () => ({
          recipients: msisdns(5_001).map((msisdn) => ({ msisdn, tags: { name: 'A', balance: '1' } })),
        }),
      ],
      ['no name', 'name', 'name.required', () => ({ name: undefined })],
      ['an unknown field', 'priority', 'unknown-field', () => ({ priority: 'high' })],
      ['an unknown message type', 'messageType', 'messageType.one-of', () => ({ messageType: 'MARKETING' })],
    ];

  it.each(cases)('%s → %s / %s', async (_what, field, rule, overrides) => {
    const { service } = smsService(t);
    const body = { ...inlineRequest(), ...(await overrides()) };
    for (const [key, value] of Object.entries(body))
      if (value === undefined) delete (body as Record<string, unknown>)[key];
    const before = await writtenRows(t.db);
    const error = await errorOf(
      service.create(body, { organizationId: ORG, idempotency: idempotency(`bad-${rule}-${field}`, body) }),
    );
    expect(error).toBeInstanceOf(SmsValidationError);
    const details = (error as SmsValidationError).details as {
      field: string;
      rule: string;
      issues: unknown[];
    };
    expect(details.issues).toContainEqual(expect.objectContaining({ field, rule }));
    expect({ field: details.field, rule: details.rule }).toEqual({ field, rule });
    // Nothing written: no campaign, recipient, event, outbox row, charge — and the key was released.
    expect(await writtenRows(t.db)).toEqual(before);
    const preview = await errorOf(service.preview(body, { organizationId: ORG }));
    expect(preview).toBeInstanceOf(SmsValidationError);
  });
});

describe('preview', () => {
  it('validates, renders, routes and prices; saves, charges, reserves and queues nothing', async () => {
    const { service } = smsService(t);
    const before = await writtenRows(t.db);
    const balance = (await ledger.totals(ORG))!.balance;
    const preview = await service.preview(inlineRequest(), { organizationId: ORG });
    expect(preview).toMatchObject({ recipients: 3, messageType: 'PROMOTIONAL', startAt: null });
    expect(preview.messages[0]).toMatchObject({
      msisdn: '8801712345678',
      operator: 'GP',
      content: 'প্রিয় Amina, আপনার ব্যালেন্স 250.00 টাকা।',
      encoding: 'UCS2',
      rate: '0.3000',
    });
    expect(preview.byOperator.map((o) => o.operator).sort()).toEqual(['BANGLALINK', 'GP', 'ROBI']);
    const created = await smsService(t).service.create(inlineRequest(), { organizationId: ORG });
    expect(created.body.sms!.totalCost).toBe(preview.totalCost);
    const after = await writtenRows(t.db);
    expect(after.campaigns).toBe(before.campaigns + 1); // the create, not the preview
    expect((await ledger.totals(ORG))!.balance).not.toBe(balance);
  });
});

describe('idempotency', () => {
  it('a retried create is replayed and charges once', async () => {
    const { service } = smsService(t);
    const body = inlineRequest({ name: 'retried' });
    const options = { organizationId: ORG, idempotency: idempotency('retry-1', body) };
    const before = await writtenRows(t.db);
    const first = await service.create(body, options);
    const second = await service.create(body, options);
    expect(second).toEqual({ body: JSON.parse(JSON.stringify(first.body)), replayed: true });
    const after = await writtenRows(t.db);
    expect(after.campaigns - before.campaigns).toBe(1);
    expect(after.charges - before.charges).toBe(1);
    const reused = await errorOf(
      service.create(inlineRequest({ name: 'other' }), {
        ...options,
        idempotency: idempotency('retry-1', inlineRequest({ name: 'other' })),
      }),
    );
    expect(reused).toBeInstanceOf(IdempotencyKeyError);
    expect((reused as IdempotencyKeyError).code).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  it('concurrent requests with one key: one campaign and one charge; the others replay or are told to retry in 2 s', async () => {
    const body = inlineRequest({ name: 'concurrent' });
    const before = await writtenRows(t.db);
    const results = await Promise.allSettled(
      Array.from({ length: 6 }, () =>
        smsService(t).service.create(body, {
          organizationId: ORG,
          idempotency: idempotency('concurrent-1', body),
        }),
      ),
    );
    const created = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const refused = results.flatMap((r) =>
      r.status === 'rejected' ? [r.reason as IdempotencyKeyError] : [],
    );
    expect(created.filter((r) => !r.replayed)).toHaveLength(1);
    for (const error of refused) {
      expect(error).toBeInstanceOf(IdempotencyKeyError);
      expect(error.code).toBe('IDEMPOTENCY_KEY_IN_USE');
      expect(error.details.retryAfterSeconds).toBe(2);
    }
    const after = await writtenRows(t.db);
    expect(after.campaigns - before.campaigns).toBe(1);
    expect(after.charges - before.charges).toBe(1);
    // Once the first completed, a retry replays it.
    const retry = await smsService(t).service.create(body, {
      organizationId: ORG,
      idempotency: idempotency('concurrent-1', body),
    });
    expect(retry.replayed).toBe(true);
    expect(retry.body.campaignId).toBe(created.find((r) => !r.replayed)!.body.campaignId);
  });
});

/** The real ledger, with faults injected around it (not a fake: every applied operation is real). */
function faultyBilling(options: {
  applyThenLose?: boolean;
  failBefore?: boolean;
  failReverse?: boolean;
}): BillingPort {
  return {
    async deduct(operation) {
      if (options.failBefore) throw new BillingUnavailableError('connection refused');
      const receipt = await ledger.deduct(operation);
      if (options.applyThenLose) throw new BillingUnavailableError('timeout: the answer was lost');
      return receipt;
    },
    refund: (operation) => ledger.refund(operation),
    async reverse(organizationId, key, reason) {
      if (options.failReverse) throw new BillingUnavailableError('connection refused');
      return ledger.reverse(organizationId, key, reason);
    },
  };
}

describe('billing failures', () => {
  it('insufficient balance: 402, the campaign FAILED, the key released (a retry after a top-up succeeds)', async () => {
    const org = 'org-poor';
    await ledger.credit({ organizationId: org, key: 'top-up', amount: '0.5' });
    const { service } = smsService(t);
    const body = inlineRequest();
    const options = { organizationId: org, idempotency: idempotency('poor-1', body) };
    const error = await errorOf(service.create(body, options));
    expect(error).toBeInstanceOf(InsufficientBalanceError);
    const { rows } = await t.db.query<{ status: string; failure_reason: string }>(
      `select status, failure_reason from campaign where organization_id = $1`,
      [org],
    );
    expect(rows).toEqual([
      { status: 'FAILED', failure_reason: expect.stringMatching(/^insufficient balance/) },
    ]);
    expect((await ledger.totals(org))!).toMatchObject({ balance: '0.5000', deductions: '0.0000' });
    expect((await t.db.query(`select 1 from idempotency_key where key = 'poor-1'`)).rowCount).toBe(0);
    await ledger.credit({ organizationId: org, key: 'top-up-2', amount: '100' });
    const retried = await service.create(body, options);
    expect(retried).toMatchObject({ replayed: false, body: { status: 'QUEUED' } });
  });

  it('an ambiguous outcome (applied, answer lost) with an Idempotency-Key: 502, the DRAFT kept; the retry charges the same key once (ADR 0023)', async () => {
    const org = 'org-ambiguous';
    await ledger.credit({ organizationId: org, key: 'top-up', amount: '100' });
    const { service } = smsService(t, { billing: faultyBilling({ applyThenLose: true }) });
    const options = { organizationId: org, idempotency: idempotency('amb-1', inlineRequest()) };
    const error = await errorOf(service.create(inlineRequest(), options));
    expect(error).toBeInstanceOf(BillingUnavailableError);
    const { rows } = await t.db.query<{ id: string; status: string }>(
      `select id::text, status from campaign where organization_id = $1`,
      [org],
    );
    expect(rows.map((r) => r.status)).toEqual(['DRAFT']);
    const entries = async () =>
      (
        await t.db.query<{ kind: string; key: string; amount: string }>(
          `select kind, key, amount::text from billing_entry where organization_id = $1 and kind <> 'credit' order by id`,
          [org],
        )
      ).rows;
    expect((await entries()).map((e) => [e.kind, e.key])).toEqual([['deduction', `campaign:${rows[0]!.id}`]]);
    // The key is kept (suspended) for the retry, not released.
    const { rows: keys } = await t.db.query(
      `select state, response from idempotency_key where key = 'amb-1'`,
    );
    expect(keys).toEqual([{ state: 'in_progress', response: { resume: { campaignId: rows[0]!.id } } }]);

    // Billing answers again: the retry resumes the same campaign, answered the first deduction.
    const retried = await smsService(t).service.create(inlineRequest(), options);
    expect(retried.body).toMatchObject({ campaignId: rows[0]!.id, status: 'QUEUED' });
    expect((await entries()).map((e) => [e.kind, e.key])).toEqual([['deduction', `campaign:${rows[0]!.id}`]]);
    expect((await ledger.totals(org))!.balance).toBe(
      formatUnits(toUnits('100') - toUnits(retried.body.sms!.totalCost)),
    );
  });

  it('an ambiguous outcome without an Idempotency-Key: reversed by the same key, FAILED, 502, balance restored', async () => {
    const org = 'org-ambiguous-nokey';
    await ledger.credit({ organizationId: org, key: 'top-up', amount: '100' });
    const { service } = smsService(t, { billing: faultyBilling({ applyThenLose: true }) });
    const error = await errorOf(service.create(inlineRequest(), { organizationId: org }));
    expect(error).toBeInstanceOf(BillingUnavailableError);
    const { rows } = await t.db.query<{ id: string; status: string }>(
      `select id::text, status from campaign where organization_id = $1`,
      [org],
    );
    expect(rows.map((r) => r.status)).toEqual(['FAILED']);
    const { rows: entries } = await t.db.query<{ kind: string; key: string; amount: string }>(
      `select kind, key, amount::text from billing_entry where organization_id = $1 and kind <> 'credit' order by id`,
      [org],
    );
    expect(entries.map((e) => [e.kind, e.key])).toEqual([
      ['deduction', `campaign:${rows[0]!.id}`],
      ['refund', `campaign:${rows[0]!.id}`],
    ]);
    expect(entries[0]!.amount).toBe(entries[1]!.amount);
    expect((await ledger.totals(org))!.balance).toBe('100.0000');
  });

  it('billing unreachable before applying: the reversal blocks a late deduction with the key', async () => {
    const org = 'org-down';
    await ledger.credit({ organizationId: org, key: 'top-up', amount: '100' });
    const { service } = smsService(t, { billing: faultyBilling({ failBefore: true }) });
    const error = await errorOf(service.create(inlineRequest(), { organizationId: org }));
    expect(error).toBeInstanceOf(BillingUnavailableError);
    const { rows } = await t.db.query<{ id: string; status: string }>(
      `select id::text, status from campaign where organization_id = $1`,
      [org],
    );
    expect(rows[0]!.status).toBe('FAILED');
    const late = await errorOf(
      ledger.deduct({ organizationId: org, key: `campaign:${rows[0]!.id}`, amount: '1' }),
    );
    expect(late).toBeInstanceOf(ConflictError);
    expect((await ledger.totals(org))!.balance).toBe('100.0000');
  });

  it('when even the reversal fails, the DRAFT is left for recovery with its recipients', async () => {
    const org = 'org-draft';
    await ledger.credit({ organizationId: org, key: 'top-up', amount: '100' });
    const { service } = smsService(t, { billing: faultyBilling({ applyThenLose: true, failReverse: true }) });
    await expect(service.create(inlineRequest(), { organizationId: org })).rejects.toBeInstanceOf(
      BillingUnavailableError,
    );
    const { rows } = await t.db.query<{ id: string; status: string }>(
      `select id::text, status from campaign where organization_id = $1`,
      [org],
    );
    expect(rows[0]!.status).toBe('DRAFT');
    expect(await countRecipientsByStatus(t.db, rows[0]!.id)).toEqual({ PENDING: 3 });
  });
});

it('a scheduled create is SCHEDULED at its startAt with a dispatch deadline HERALD_SMS_DISPATCH_DEADLINE_MINUTES later', async () => {
  // 10:00 in Dhaka two days ahead: inside the promotional window whatever time the test runs at.
  const { rows } = await t.db.query<{ d: string }>(
    `select to_char((now() + interval '2 days') at time zone 'Asia/Dhaka', 'YYYY-MM-DD') as d`,
  );
  const { service } = smsService(t);
  const c = await service.create(
    inlineRequest({ scheduleType: 'SCHEDULED', scheduledAt: `${rows[0]!.d}T10:00:00` }),
    { organizationId: ORG },
  );
  const startAt = new Date(`${rows[0]!.d}T10:00:00+06:00`).toISOString();
  expect(c.body).toMatchObject({
    status: 'SCHEDULED',
    startAt,
    dispatchDeadline: new Date(Date.parse(startAt) + 1_440 * 60_000).toISOString(),
  });
});
