/**
 * The pure pieces of SMS campaigns: MSISDN normalization (the seed's Bangladesh spellings), exact {{tag}}
 * rules, rendering, routing by longest prefix, money arithmetic, the compact MSISDN set, grouping into
 * submission chunks (999 promotional, 1 transactional) and the simulator's outcome mix.
 */
import { parsePhoneNumberFromString } from 'libphonenumber-js/mobile';
import { describe, expect, it } from 'vitest';
import type { ReadyRecipient } from '../../src/adapters/postgres/sms-queries.js';
import { chunkRecipients } from '../../src/aggregates/campaign/sms/dispatch.js';
import { simulatedOutcome } from '../../src/aggregates/campaign/sms/simulator.js';
import { campaignDecider, type ExistingCampaign } from '../../src/domain/campaign.js';
import { fold } from '../../src/domain/decider.js';
import { prepareRecipient } from '../../src/domain/sms/campaign-request.js';
import { addMoney, canonicalMoney, formatUnits, toUnits } from '../../src/domain/sms/money.js';
import { normalizeMsisdn } from '../../src/domain/sms/msisdn.js';
import { MsisdnSet } from '../../src/domain/sms/msisdn-set.js';
import { RoutingTable } from '../../src/domain/sms/routing.js';
import { recipientTagIssues, render, templateIssues, templateTags } from '../../src/domain/sms/template.js';

describe('MSISDN normalization', () => {
  it.each(['01712345678', '8801712345678', '+8801712345678', '+880 1712-345678', '008801712345678'])(
    '%s → 8801712345678 (BD)',
    (raw) => expect(normalizeMsisdn(raw)).toEqual({ msisdn: '8801712345678', country: 'BD' }),
  );

  it('refuses what is not a valid mobile number', () => {
    for (const raw of ['0171234567', '880171234567', '017123456789', 'msisdn', '', '+88029123456x']) {
      expect(normalizeMsisdn(raw), raw).toBeNull();
    }
  });

  it('the fast path for Bangladesh numbers agrees with libphonenumber-js on every operator range', () => {
    for (const range of ['13', '14', '15', '16', '17', '18', '19']) {
      for (let i = 0; i < 200; i++) {
        const subscriber = String(Math.floor(Math.random() * 1e8)).padStart(8, '0');
        for (const spelling of [
          `01${range.slice(1)}${subscriber}`,
          `8801${range.slice(1)}${subscriber}`,
          `+8801${range.slice(1)}${subscriber}`,
        ]) {
          const parsed = parsePhoneNumberFromString(
            spelling.startsWith('880') ? `+${spelling}` : spelling,
            'BD',
          );
          const expected = parsed?.isValid() ? { msisdn: parsed.number.slice(1), country: 'BD' } : null;
          expect(normalizeMsisdn(spelling), spelling).toEqual(expected);
        }
      }
    }
  });

  it('reads international numbers with their country', () => {
    expect(normalizeMsisdn('+447911123456')?.msisdn).toBe('447911123456');
    expect(normalizeMsisdn('+12015550123')).toEqual({ msisdn: '12015550123', country: 'US' });
  });
});

describe('templates and tags', () => {
  it('reads exact {{tag}} names only', () => {
    expect(templateTags('Hello {{name}}, your balance is {{balance}} BDT ({{name}})')).toEqual([
      'name',
      'balance',
    ]);
    const rules = (template: string, type: 'GENERIC' | 'PERSONALIZED', lang: 'bn' | 'en' = 'bn') =>
      templateIssues(template, type, lang).map((i) => i.rule);
    expect(rules('Hello {{ name }}', 'PERSONALIZED')).toEqual([
      'template.malformed-tag',
      'template.tags-required',
    ]);
    expect(rules('Hello {name}', 'GENERIC')).toEqual(['template.malformed-tag']);
    expect(rules('Hello {{name}}', 'GENERIC')).toEqual(['template.tags-not-allowed']);
    expect(rules('Hello', 'PERSONALIZED')).toEqual(['template.tags-required']);
    expect(rules('হ্যালো {{name}}', 'PERSONALIZED', 'en')).toEqual(['template.not-gsm7']);
    expect(rules('Hello\u0007', 'GENERIC')).toEqual(['template.control-characters']);
    expect(rules('   ', 'GENERIC')).toEqual(['template.empty']);
    expect(rules('Hello {{name}}\nBye', 'PERSONALIZED')).toEqual([]);
  });

  it("a recipient gives exactly the template's tags, each value valid", () => {
    const tags = ['name', 'balance'];
    const issues = (values: Record<string, string> | undefined, lang: 'bn' | 'en' = 'bn') =>
      recipientTagIssues('recipients[0]', tags, values, 'PERSONALIZED', lang).map(
        (i) => `${i.field} ${i.rule}`,
      );
    expect(issues({ name: 'Amina', balance: '250.00' })).toEqual([]);
    expect(issues({ name: 'Amina' })).toEqual(['recipients[0].tags.balance tags.missing']);
    expect(issues({ name: 'Amina', balance: ' ' })).toEqual(['recipients[0].tags.balance tags.missing']);
    expect(issues({ name: 'Amina', balance: '1', extra: 'x' })).toEqual([
      'recipients[0].tags.extra tags.extra',
    ]);
    expect(issues({ name: 'x'.repeat(101), balance: '1' })).toEqual([
      'recipients[0].tags.name tags.too-long',
    ]);
    expect(issues({ name: 'x'.repeat(100), balance: '1' })).toEqual([]);
    expect(issues({ name: '{{balance}}', balance: '1' })).toEqual(['recipients[0].tags.name tags.braces']);
    expect(issues({ name: 'a\tb', balance: '1' })).toEqual([
      'recipients[0].tags.name tags.control-characters',
    ]);
    expect(issues({ name: 'নুসরাত', balance: '1' }, 'en')).toEqual(['recipients[0].tags.name tags.not-gsm7']);
    expect(issues({ name: 'নুসরাত', balance: '1' }, 'bn')).toEqual([]);
    expect(recipientTagIssues('r', [], { a: '1' }, 'GENERIC', 'bn').map((i) => i.rule)).toEqual([
      'tags.not-allowed',
    ]);
  });

  it('renders every occurrence', () => {
    expect(render('Hi {{name}}, {{name}}! {{balance}}', { name: 'Rahim', balance: '125.50' })).toBe(
      'Hi Rahim, Rahim! 125.50',
    );
  });
});

describe('routing, pricing and money', () => {
  const routing = new RoutingTable(
    [
      { prefix: '88017', operator: 'GP' },
      { prefix: '880171', operator: 'GP-SPECIAL' },
      { prefix: '88018', operator: 'ROBI' },
    ],
    [
      { operator: 'GP', sender: 'HERALD', channel: 'gp-1', mnoUser: 'u-gp', rate: '0.3000' },
      { operator: 'GP-SPECIAL', sender: 'HERALD', channel: 'gp-2', mnoUser: 'u-gp2', rate: '0.2500' },
    ],
  );

  it('longest prefix wins; no route for an operator without one', () => {
    expect(routing.route('8801712345678')?.operator).toBe('GP-SPECIAL');
    expect(routing.route('8801712345678')?.rateUnits).toBe(2500);
    expect(routing.route('8801722345678')?.operator).toBe('GP');
    expect(routing.operatorOf('8801812345678')).toBe('ROBI');
    expect(routing.route('8801812345678')).toBeNull();
    expect(routing.route('447911123456')).toBeNull();
  });

  it('prices a recipient as segments × rate and refuses more than ten segments', () => {
    const context = {
      templateType: 'PERSONALIZED' as const,
      template: 'প্রিয় {{name}}',
      tags: ['name'],
      lang: 'bn' as const,
      routing,
      defaultZone: 'Asia/Dhaka',
    };
    const ok = prepareRecipient('r', { msisdn: '01722345678', tags: { name: 'অ'.repeat(70) } }, context);
    expect(ok).toMatchObject({
      ok: true,
      recipient: {
        msisdn: '8801722345678',
        operator: 'GP',
        encoding: 'UCS2',
        segments: 2,
        costUnits: 6000,
        timezone: 'Asia/Dhaka',
      },
    });
    const long = prepareRecipient(
      'r',
      { msisdn: '01722345678', tags: { name: 'অ'.repeat(100) } },
      {
        ...context,
        template: `${'অ'.repeat(600)}{{name}}`,
      },
    );
    expect(long).toMatchObject({ ok: false, reason: 'too-many-segments' });
    expect(prepareRecipient('r', { msisdn: '01812345678', tags: { name: 'x' } }, context)).toMatchObject({
      ok: false,
      reason: 'no-route',
    });
    expect(
      prepareRecipient(
        'r',
        { msisdn: '01722345678', tags: { name: 'x' }, timezone: 'Mars/Olympus' },
        context,
      ),
    ).toMatchObject({
      ok: false,
      reason: 'invalid-tags',
      issues: [{ rule: 'timezone.unknown' }],
    });
  });

  it('money is exact to four digits', () => {
    expect(toUnits('0.3')).toBe(3000);
    expect(formatUnits(toUnits('12.35'))).toBe('12.3500');
    expect(canonicalMoney('7')).toBe('7.0000');
    expect(addMoney('0.1', '0.2')).toBe('0.3000');
    expect(() => toUnits('1.23456')).toThrow(/at most 4 fraction digits/);
    expect(() => toUnits('-1')).toThrow();
  });
});

describe('MsisdnSet', () => {
  it('de-duplicates E.164 numbers and grows', () => {
    const set = new MsisdnSet(4);
    for (let i = 0; i < 10_000; i++) expect(set.add(String(8801700000000 + i))).toBe(true);
    for (let i = 0; i < 10_000; i += 7) expect(set.add(String(8801700000000 + i))).toBe(false);
    expect(set.size).toBe(10_000);
  });
});

describe('submission chunks', () => {
  const campaignWith = (messageType: 'PROMOTIONAL' | 'TRANSACTIONAL') =>
    fold(campaignDecider, [
      {
        type: 'CampaignCreated',
        data: {
          campaignId: '7d1c2a44-3b5e-4f60-9a1b-2c3d4e5f6a7b',
          organizationId: 'org-1',
          channel: 'sms',
          castType: null,
          audienceId: null,
          lineOaId: null,
          name: 'x',
          startAt: null,
          dispatchDeadline: null,
          idempotencyKey: null,
          mode: 'draft',
          at: '2030-01-01T00:00:00.000Z',
          sms: {
            messageType,
            lang: 'bn',
            operatorCampaignId: 'OP',
            templateType: 'GENERIC',
            template: 'x',
            source: 'inline',
            sendWindow: null,
          },
        },
      },
    ]) as ExistingCampaign;
  const recipient = (i: number, over: Partial<ReadyRecipient> = {}): ReadyRecipient => ({
    id: String(i),
    msisdn: String(8801700000000 + i),
    operator: 'GP',
    timezone: 'Asia/Dhaka',
    content: 'offer',
    encoding: 'UCS2',
    segments: 1,
    lang: 'bn',
    sender: 'HERALD',
    routeChannel: 'gp-1',
    mnoUser: 'u',
    status: 'PENDING',
    ...over,
  });

  it('groups by content, language, sender and route; a promotional chunk holds at most 999', () => {
    const ready = [
      ...Array.from({ length: 1_000 }, (_, i) => recipient(i)),
      ...Array.from({ length: 3 }, (_, i) =>
        recipient(2_000 + i, { operator: 'ROBI', routeChannel: 'robi-1' }),
      ),
      recipient(3_000, { content: 'other offer' }),
      recipient(3_001, { sender: 'OTHER' }),
    ];
    const chunks = chunkRecipients(campaignWith('PROMOTIONAL'), ready);
    expect(chunks.map((c) => c.recipients.length).sort((a, b) => a - b)).toEqual([1, 1, 1, 3, 999]);
    for (const chunk of chunks) {
      const members = ready.filter((r) => chunk.recipients.some((c) => c.recipientId === r.id));
      expect(
        new Set(members.map((r) => `${r.content}|${r.sender}|${r.operator}|${r.routeChannel}`)).size,
      ).toBe(1);
      expect(chunk.priority).toBe(2);
    }
    expect(new Set(chunks.map((c) => c.submissionId)).size).toBe(5);
  });

  it('a transactional chunk holds one recipient, at priority 1', () => {
    const chunks = chunkRecipients(campaignWith('TRANSACTIONAL'), [recipient(1), recipient(2), recipient(3)]);
    expect(chunks.map((c) => [c.recipients.length, c.priority])).toEqual([
      [1, 1],
      [1, 1],
      [1, 1],
    ]);
  });
});

describe("the simulator's outcome mix", () => {
  it('follows the configured weights, is stable per recipient, and draws latencies in range', () => {
    const simulator = {
      outcomes: [
        { outcome: 'DELIVERED', weight: 70 },
        { outcome: 'FAILED', weight: 20 },
        { outcome: 'NOT_AVAILABLE', weight: 10 },
      ],
      latencyMs: { min: 10, max: 50 },
      failedCodes: ['27', '34'],
      fixed: new Map([['8801700000009', { status: 'REJECTED', errorCode: null }]]),
    };
    const counts: Record<string, number> = {};
    for (let i = 0; i < 20_000; i++) {
      const o = simulatedOutcome(`sub-${i % 97}`, String(i), simulator);
      counts[o.status] = (counts[o.status] ?? 0) + 1;
      expect(o.latencyMs).toBeGreaterThanOrEqual(10);
      expect(o.latencyMs).toBeLessThanOrEqual(50);
      if (o.status === 'FAILED') expect(['27', '34']).toContain(o.errorCode);
      else expect(o.errorCode).toBeNull();
    }
    expect(counts.DELIVERED! / 20_000).toBeCloseTo(0.7, 1);
    expect(counts.FAILED! / 20_000).toBeCloseTo(0.2, 1);
    expect(counts.NOT_AVAILABLE! / 20_000).toBeCloseTo(0.1, 1);
    expect(counts.EXPIRED).toBeUndefined();
    expect(simulatedOutcome('s', '1', simulator)).toEqual(simulatedOutcome('s', '1', simulator));
    // A fixed test number gets its outcome whatever the submission (a sandbox's test numbers).
    for (const sub of ['a', 'b', 'c']) {
      expect(simulatedOutcome(sub, '1', simulator, '+8801700000009')).toMatchObject({
        status: 'REJECTED',
        errorCode: null,
      });
    }
  });
});
