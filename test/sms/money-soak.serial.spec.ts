/**
 * The money soak (ADR 0019): one SMS campaign through the simulator with transient and permanent
 * failures while the processes that move money — scanners (dispatcher, DLR roll-up, retry
 * dispatcher, refund retry, recovery), the worker (CSV build, DLR consumer) and the relay — are killed
 * with SIGKILL and restarted at random. At the end every recipient is final, no recipient is charged
 * or refunded twice (the ledger's keys), and charged = delivered + refunded + unconfirmed.
 *
 * Size: HERALD_SOAK_RECIPIENTS (default 2,000 here; `npm run soak:sms` runs 100,000).
 */
import { randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafka } from '../../src/adapters/kafka/kafka-client.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { verifyStates } from '../../src/projections/verify.js';
import { waitFor } from '../../src/testing/wait.js';
import { type RunningHerald, spawnHerald } from '../support/cli.js';
import { createTestDatabase, requireEnv, type TestDatabase, uniqueName } from '../support/services.js';
import { msisdns, ORG, smsService } from '../support/sms.js';

const RECIPIENTS = Number(process.env.HERALD_SOAK_RECIPIENTS ?? 2_000);
const SOAK_TIMEOUT_MS = Number(process.env.HERALD_SOAK_TIMEOUT_MS ?? 15 * 60_000);
const FINAL = ['DELIVERED', 'FAILED', 'CANCELLED'];

let t: TestDatabase;
let env: Record<string, string>;

beforeAll(async () => {
  t = await createTestDatabase();
  const suffix = uniqueName('soak');
  const submitTopic = `sms.submit.${suffix}`;
  const dlrTopic = `sms.dlr.${suffix}`;
  const kafka = createKafka({
    clientId: 'herald-soak-admin',
    brokers: requireEnv('KAFKA_BROKERS').split(','),
  });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    waitForLeaders: true,
    topics: [
      { topic: submitTopic, numPartitions: 4 },
      { topic: dlrTopic, numPartitions: 4 },
    ],
  });
  await admin.disconnect();
  env = {
    DATABASE_URL: t.url,
    HERALD_SCHEMA: t.schema,
    AMQP_URL: requireEnv('AMQP_URL'),
    KAFKA_BROKERS: requireEnv('KAFKA_BROKERS'),
    REDIS_URL: requireEnv('REDIS_URL'),
    HERALD_LOG_LEVEL: 'warn',
    HERALD_METRICS_HOST: '127.0.0.1',
    HERALD_METRICS_PORT: '0',
    HERALD_SMS_SUBMIT_TOPIC: submitTopic,
    HERALD_SMS_DLR_TOPIC: dlrTopic,
    HERALD_SMS_PROMOTIONAL_WINDOW: '00:00:00-23:59:59',
    HERALD_SMS_BULK_MAX_RECIPIENTS: String(Math.max(RECIPIENTS, 1)),
    // 5% transient (a retryable MNPSP code), 2% permanent (REJECTED), 1% unconfirmed.
    HERALD_SMS_SIMULATOR_OUTCOMES: 'DELIVERED=92,FAILED=5,REJECTED=2,NOT_AVAILABLE=1',
    HERALD_SMS_SIMULATOR_FAILED_CODES: '27',
    HERALD_SMS_RETRYABLE_CODES: '27',
    HERALD_SMS_SIMULATOR_LATENCY_MS: '5-200',
    HERALD_SMS_MAX_ATTEMPTS: '3',
    HERALD_SMS_RETRY_MINUTES: '0',
    HERALD_SMS_RETRY_JITTER_SECONDS: '1',
    HERALD_SMS_REFUND_RETRY_AFTER_SECONDS: '2',
    HERALD_SMS_LEASE_TTL_SECONDS: '3',
    HERALD_SCANNER_POLL_MS: '500',
  };
});
afterAll(async () => t?.drop());

interface Slot {
  name: string;
  args: string[];
  proc: RunningHerald;
  kills: number;
}

describe('money soak', () => {
  it(
    `${RECIPIENTS} recipients, transient and permanent failures, processes SIGKILLed at random: every recipient final, nothing charged or refunded twice, the money balances`,
    async () => {
      const { service, ledger } = smsService(t, { settings: t.config(env).sms });
      await ledger.credit({
        organizationId: ORG,
        key: 'soak-credit',
        amount: '1000000.0000',
        reason: 'soak',
      });
      const numbers = [
        ...msisdns(Math.ceil(RECIPIENTS / 2), '017'),
        ...msisdns(Math.floor(RECIPIENTS / 2), '018'),
      ];
      async function* file() {
        yield 'msisdn\n';
        for (let i = 0; i < numbers.length; i += 1000) yield `${numbers.slice(i, i + 1000).join('\n')}\n`;
      }
      const created = await service.createBulk(
        {
          name: 'soak',
          messageType: 'PROMOTIONAL',
          lang: 'bn',
          campaignId: 'BTRC-SOAK-1',
          templateType: 'GENERIC',
          template: 'পহেলা বৈশাখে ৩০% ছাড়!',
          fileName: 'soak.csv',
        },
        file(),
        { organizationId: ORG },
      );
      const campaignId = created.body.campaign.campaignId;

      const slots: Slot[] = [
        ['scanner-a', ['scanner']],
        ['scanner-b', ['scanner']],
        ['worker', ['worker']],
        ['relay', ['relay']],
        ['simulator', ['sms-simulator']],
      ].map(([name, args]) => ({
        name: name as string,
        args: args as string[],
        proc: spawnHerald(args as string[], { ...env, HERALD_POD: name as string }),
        kills: 0,
      }));
      const killable = slots.filter((s) => s.name !== 'simulator');
      // The kills start once the worker has built and charged the campaign: a build killed after it
      // saved recipients fails safe by design (FAILED, recipients cleared: test/sms/bulk.int.spec.ts),
      // which is not what this soak measures; dispatch, reports, retries and refunds are.
      await waitFor(
        async () => {
          const { rows } = await t.db.query<{ status: string }>('select status from campaign where id = $1', [
            campaignId,
          ]);
          return rows[0] && rows[0].status !== 'BUILDING' ? rows[0].status : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 200, what: 'the soak campaign built' },
      );
      let killing = true;
      const killer = (async () => {
        // The first kill within a second of the build (roles started from dist/ settle 2,000 recipients in
        // a few seconds), the next ones every 2–6 s.
        for (let pause = randomInt(1_000); killing; pause = 2_000 + randomInt(4_000)) {
          await new Promise((resolve) => setTimeout(resolve, pause));
          if (!killing) break;
          const victim = killable[randomInt(killable.length)]!;
          victim.proc.process.kill('SIGKILL');
          await victim.proc.exited();
          victim.kills++;
          await new Promise((resolve) => setTimeout(resolve, 200 + randomInt(1_500)));
          if (killing) victim.proc = spawnHerald(victim.args, { ...env, HERALD_POD: victim.name });
        }
      })();

      try {
        await waitFor(
          async () => {
            const { rows } = await t.db.query<{ status: string; open: number; refunds_due: number }>(
              `select c.status,
                      (select count(*)::int from campaign_recipient r
                        where r.campaign_id = c.id and r.status <> all($2::text[])) as open,
                      (select count(*)::int from campaign_recipient r
                        where r.campaign_id = c.id and r.refund_required and r.refunded_at is null) as refunds_due
                 from campaign c where c.id = $1`,
              [campaignId, FINAL],
            );
            const row = rows[0];
            return row &&
              ['COMPLETED', 'PARTIAL', 'FAILED'].includes(row.status) &&
              row.open === 0 &&
              row.refunds_due === 0
              ? row
              : undefined;
          },
          { timeoutMs: SOAK_TIMEOUT_MS, intervalMs: 500, what: 'the soak campaign to settle' },
        );
      } finally {
        killing = false;
        await killer;
        await Promise.all(slots.map((s) => s.proc.stop(10_000)));
      }
      const kills = killable.reduce((sum, s) => sum + s.kills, 0);
      expect(kills).toBeGreaterThan(0);

      // Every recipient final; attempts within the limit; duplicates of a key impossible (unique), and
      // each refund entry belongs to exactly one refunded FAILED row of this campaign.
      const { rows: byStatus } = await t.db.query<{ status: string; n: number; cost: string }>(
        `select status, count(*)::int as n, sum(cost)::text as cost from campaign_recipient
          where campaign_id = $1 group by status`,
        [campaignId],
      );
      expect(byStatus.every((r) => FINAL.includes(r.status))).toBe(true);
      expect(byStatus.reduce((sum, r) => sum + r.n, 0)).toBe(RECIPIENTS);
      const { rows: attempts } = await t.db.query<{ max: number }>(
        'select max(attempts)::int as max from campaign_recipient where campaign_id = $1',
        [campaignId],
      );
      expect(attempts[0]!.max).toBeLessThanOrEqual(3);

      const { rows: money } = await t.db.query<{
        charged: string;
        deductions: number;
        refunded: string;
        refund_entries: number;
        refunded_rows: number;
        refunded_rows_cost: string;
        delivered: string;
        unconfirmed: string;
        unconfirmed_refunded: number;
        orphan_refunds: number;
      }>(
        `with r as (select * from campaign_recipient where campaign_id = $1),
              e as (select * from billing_entry where organization_id = $2 and kind in ('deduction', 'refund'))
         select (select coalesce(sum(amount), 0)::text from e where kind = 'deduction') as charged,
                (select count(*)::int from e where kind = 'deduction') as deductions,
                (select coalesce(sum(amount), 0)::text from e where kind = 'refund') as refunded,
                (select count(*)::int from e where kind = 'refund') as refund_entries,
                (select count(*)::int from r where refunded_at is not null) as refunded_rows,
                (select coalesce(sum(cost), 0)::text from r where refunded_at is not null) as refunded_rows_cost,
                (select coalesce(sum(cost), 0)::text from r where status = 'DELIVERED') as delivered,
                (select coalesce(sum(cost), 0)::text from r where status = 'FAILED' and unconfirmed) as unconfirmed,
                (select count(*)::int from r where unconfirmed and refunded_at is not null) as unconfirmed_refunded,
                (select count(*)::int from e where kind = 'refund'
                   and not exists (select 1 from r where r.refund_key = e.key and r.refunded_at is not null)) as orphan_refunds`,
        [campaignId, ORG],
      );
      const m = money[0]!;
      expect(m.deductions).toBe(1);
      expect(m.refund_entries).toBe(m.refunded_rows);
      expect(m.orphan_refunds).toBe(0);
      expect(m.unconfirmed_refunded).toBe(0);
      expect(Number(m.refunded)).toBeCloseTo(Number(m.refunded_rows_cost), 4);
      expect(Number(m.charged)).toBeCloseTo(
        Number(m.delivered) + Number(m.refunded) + Number(m.unconfirmed),
        4,
      );

      // The campaign's event-sourced counters and money agree with the rows, and verify agrees with replay.
      const campaign = await service.get(campaignId);
      const sms = campaign.sms!;
      const count = (status: string) => byStatus.find((r) => r.status === status)?.n ?? 0;
      expect(sms.progress).toMatchObject({
        delivered: count('DELIVERED'),
        failed: count('FAILED'),
        pending: 0,
        submitted: 0,
      });
      expect(Number(sms.totalCost)).toBeCloseTo(Number(m.charged), 4);
      expect(Number(sms.actualCost)).toBeCloseTo(Number(m.delivered), 4);
      expect(Number(sms.refundedCost)).toBeCloseTo(Number(m.refunded), 4);
      const report = await verifyStates(t.db, heraldRegistry);
      expect(report.drifts).toEqual([]);
      process.stdout.write(
        `soak: ${RECIPIENTS} recipients, ${kills} SIGKILLs (${killable.map((s) => `${s.name} ${s.kills}`).join(', ')}), ` +
          `${byStatus.map((r) => `${r.status} ${r.n}`).join(', ')}; charged ${m.charged} = delivered ${m.delivered} + refunded ${m.refunded} + unconfirmed ${m.unconfirmed}\n`,
      );
    },
    SOAK_TIMEOUT_MS + 120_000,
  );
});
