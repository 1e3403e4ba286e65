/**
 * No SMS twice (invariant 9, ADR 0022): `herald sms-gateway` as a real process, SIGKILLed three times while
 * it sends one CSV campaign over SMPP to the SMSC simulator (in this process, counting what each number
 * received), restarted each time. Every part the gateway had marked `sending` when it died is UNCONFIRMED
 * by the next gateway's sweep, never resent; at the end every recipient is final, no number received a part
 * twice, and the money check balances (charged = delivered + refunded + unconfirmed).
 *
 * Size: HERALD_SMPP_CRASH_RECIPIENTS (default 3,000 here; `npm run soak:smpp` runs 50,000).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayPartCounts } from '../../src/adapters/postgres/sms-gateway-queries.js';
import { smsBuildSweeper } from '../../src/aggregates/campaign/sms/build.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import { waitFor } from '../../src/testing/wait.js';
import { KafkaFixture } from '../kafka/support/kafka-fixture.js';
import { type RunningHerald, spawnHerald } from '../support/cli.js';
import { createTestDatabase, requireEnv, type TestDatabase } from '../support/services.js';
import { smppWorld } from '../support/smpp-world.js';
import { msisdns, ORG, smsService } from '../support/sms.js';

const RECIPIENTS = Number(process.env.HERALD_SMPP_CRASH_RECIPIENTS ?? 3_000);
const TIMEOUT_MS = Number(process.env.HERALD_SMPP_CRASH_TIMEOUT_MS ?? 10 * 60_000);

let t: TestDatabase;
let kafka: KafkaFixture;
beforeAll(async () => {
  t = await createTestDatabase();
  kafka = await KafkaFixture.open();
});
afterAll(async () => {
  await kafka?.close();
  await t?.drop();
});

describe('sms-gateway SIGKILLed mid-campaign', () => {
  it(
    `${RECIPIENTS} recipients, the gateway killed three times: each part at most once at the SMSC, unanswered ones UNCONFIRMED, the money balanced`,
    async () => {
      const started = Date.now();
      const world = await smppWorld(t, kafka, {
        gateway: false,
        env: {
          // No temporary failures: nothing is resent by the campaign's own retries either.
          HERALD_SMS_SIMULATOR_OUTCOMES: 'DELIVERED=97,REJECTED=2,NOT_AVAILABLE=1',
          HERALD_SMS_BULK_MAX_RECIPIENTS: String(Math.max(RECIPIENTS, 1)),
          HERALD_SMS_ROLLUP_BATCH_SIZE: '5000',
        },
        smsc: { binds: { transceivers: 2 }, window: 50, tpsPerBind: 5_000 },
      });
      const env: Record<string, string> = {
        ...world.env,
        DATABASE_URL: t.url,
        HERALD_SCHEMA: t.schema,
        KAFKA_BROKERS: requireEnv('KAFKA_BROKERS'),
        AMQP_URL: '',
        HERALD_LOG_LEVEL: process.env.HERALD_TEST_LOG ?? 'warn',
        HERALD_METRICS_HOST: '127.0.0.1',
        HERALD_METRICS_PORT: '0',
      };
      let gateway: RunningHerald | undefined;
      try {
        const { service, ledger } = smsService(t, { settings: world.config.sms });
        await ledger.credit({ organizationId: ORG, key: 'crash-credit', amount: '1000000', reason: 'test' });
        const numbers = msisdns(RECIPIENTS, '017', 100_000);
        async function* file() {
          yield 'msisdn\n';
          for (let i = 0; i < numbers.length; i += 1000) yield `${numbers.slice(i, i + 1000).join('\n')}\n`;
        }
        const created = await service.createBulk(
          {
            name: 'crash',
            messageType: 'PROMOTIONAL',
            lang: 'bn',
            campaignId: 'BTRC-CRASH-1',
            templateType: 'GENERIC',
            template: 'পহেলা বৈশাখে ৩০% ছাড়!',
            fileName: 'crash.csv',
          },
          file(),
          { organizationId: ORG },
        );
        const campaignId = created.body.campaign.campaignId;
        const build = smsBuildSweeper({
          db: t.db,
          handler: new CommandHandler({ db: t.db, pod: 'test' }),
          logger: silentLogger,
          billing: ledger,
          settings: world.config.sms,
        });
        await waitFor(
          async () => {
            await build.sweep();
            const { rows } = await t.db.query<{ status: string }>(
              'select status from campaign where id = $1',
              [campaignId],
            );
            return rows[0]?.status !== 'BUILDING';
          },
          { timeoutMs: 120_000, intervalMs: 100, what: 'the campaign built and charged' },
        );

        gateway = spawnHerald(['sms-gateway'], env);
        for (const fraction of [0.2, 0.45, 0.7]) {
          await waitFor(() => world.smsc.stats.accepted >= RECIPIENTS * fraction, {
            timeoutMs: TIMEOUT_MS,
            intervalMs: 10,
            what: `${fraction * 100}% submitted (gateway output: ${gateway.output().slice(-2000)})`,
          });
          gateway.process.kill('SIGKILL');
          await gateway.exited();
          gateway = spawnHerald(['sms-gateway'], env);
        }
        expect(await world.final(campaignId, TIMEOUT_MS)).toBe('PARTIAL');
        // SIGTERM: the last gateway unbinds its two binds cleanly and exits 0.
        const stopped = await gateway.stop(30_000);
        expect(stopped, `gateway output: ${gateway.output().slice(-4000)}`).toBe(0);
        expect(world.smsc.stats.unbinds).toBe(2);
        const money = await waitFor(
          async () => {
            const check = await world.money(campaignId);
            return check.balanced ? check : undefined;
          },
          { timeoutMs: 60_000, what: 'the money check balanced' },
        );
        expect(money.duplicates).toEqual([]);

        // At the SMSC: no number received its part twice, and every number that got something is a recipient.
        expect(world.smsc.duplicates()).toEqual([]);
        expect(world.smsc.partsReceived).toBeLessThanOrEqual(RECIPIENTS);
        const parts = await gatewayPartCounts(t.db, campaignId);
        expect(parts.sending ?? 0).toBe(0);
        expect(parts.queued ?? 0).toBe(0);
        const { rows } = await t.db.query<{
          status: string;
          unconfirmed: boolean;
          dlr_code: string | null;
          count: number;
        }>(
          `select status, unconfirmed, dlr_code, count(*)::int as count from campaign_recipient
            where campaign_id = $1 group by 1, 2, 3 order by 1, 2, 3`,
          [campaignId],
        );
        const total = rows.reduce((sum, r) => sum + r.count, 0);
        expect(total).toBe(RECIPIENTS);
        expect(rows.every((r) => r.status === 'DELIVERED' || r.status === 'FAILED')).toBe(true);
        const unanswered = rows.find((r) => r.dlr_code === 'SMPP_UNCONFIRMED')?.count ?? 0;
        // At most what was in flight at each kill: the binds' windows (2 × 50) and the answers received but
        // not yet recorded (each bind records them in batches every few milliseconds).
        expect(unanswered).toBeGreaterThan(0);
        expect(unanswered).toBeLessThan(RECIPIENTS / 4);
        expect(parts.unconfirmed ?? 0).toBe(unanswered);
        // Every recipient the SMSC never saw is one the gateway never wrote: the unconfirmed ones may or may not have arrived.
        expect(world.smsc.numbersReached).toBeGreaterThanOrEqual(RECIPIENTS - unanswered);
        process.stdout.write(
          `smpp crash: ${RECIPIENTS} recipients, 3 SIGKILLs, ${unanswered} unconfirmed, ${world.smsc.partsReceived} parts at the SMSC, 0 twice, ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
        );
      } finally {
        if (gateway) await gateway.stop(10_000);
        await world.stop();
      }
    },
    TIMEOUT_MS + 120_000,
  );

  it('SIGTERM while the submit consumer cannot join its group yet: the binds unbind and the process exits 0', async () => {
    const world = await smppWorld(t, kafka, { gateway: false, smsc: { binds: { transceivers: 1 } } });
    // Nothing listens on port 9: the consumer keeps connecting while the bind is up (as it does while a
    // group waits for dead members' sessions to end).
    const gateway = spawnHerald(['sms-gateway'], {
      ...world.env,
      DATABASE_URL: t.url,
      HERALD_SCHEMA: t.schema,
      KAFKA_BROKERS: '127.0.0.1:9',
      AMQP_URL: '',
      HERALD_LOG_LEVEL: 'info',
      HERALD_METRICS_HOST: '127.0.0.1',
      HERALD_METRICS_PORT: '0',
    });
    try {
      await waitFor(() => world.smsc.stats.binds >= 1, { timeoutMs: 30_000, what: 'the gateway bound' });
      const code = await gateway.stop(30_000);
      expect(code, `gateway output: ${gateway.output().slice(-4000)}`).toBe(0);
      expect(gateway.output()).toContain('stopped before the submit consumer joined');
      expect(world.smsc.stats.unbinds).toBe(1);
    } finally {
      await gateway.stop(5_000);
      await world.stop();
    }
  }, 90_000);
});
