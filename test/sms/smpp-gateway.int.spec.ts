/**
 * `herald sms-gateway` end to end over real SMPP (ADR 0022): the scanner dispatches, the relay publishes
 * the chunks to Kafka, the gateway binds to the SMSC simulator over TCP and submits every recipient's
 * parts (UCS-2, concatenated), the simulator's receipts come back as deliver_sm, the gateway writes them
 * to the DLR topic through the outbox, the DLR consumer stores them and the roll-up ends the campaign —
 * with the simulator's test numbers (rejected, absent subscriber retried until its attempts run out,
 * never confirmed) and the money check balanced.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayPartCounts } from '../../src/adapters/postgres/sms-gateway-queries.js';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { heraldMetrics } from '../../src/observability/metrics.js';
import { waitFor } from '../../src/testing/wait.js';
import { KafkaFixture } from '../kafka/support/kafka-fixture.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { smppWorld } from '../support/smpp-world.js';
import { msisdns, ORG } from '../support/sms.js';

let t: TestDatabase;
let kafka: KafkaFixture;
beforeAll(async () => {
  t = await createTestDatabase();
  kafka = await KafkaFixture.open();
  await new PostgresLedger(t.db).credit({ organizationId: ORG, key: 'top-up', amount: '10000' });
});
afterAll(async () => {
  await kafka?.close();
  await t?.drop();
});

describe('sms-gateway over SMPP', () => {
  it('every recipient’s receipt rolls up to the campaign’s final status; the money check balances', async () => {
    const rejected = '8801711000001';
    const absent = '8801711000002';
    const unknown = '8801711000003';
    const world = await smppWorld(t, kafka, {
      env: {
        HERALD_SMS_SIMULATOR_FIXED_OUTCOMES: `${rejected}=REJECTED,${absent}=FAILED:27,${unknown}=NOT_AVAILABLE`,
        HERALD_SMS_MAX_ATTEMPTS: '2',
      },
    });
    try {
      const numbers = [
        ...msisdns(17, '017', 500),
        ...msisdns(10, '018', 500),
        `+${rejected}`,
        `+${absent}`,
        `+${unknown}`,
      ];
      const campaignId = await world.campaign(numbers);
      expect(await world.final(campaignId)).toBe('PARTIAL');
      const rows = await world.recipients(campaignId);
      const by = new Map(rows.map((r) => [r.msisdn, r]));
      expect(rows.filter((r) => r.status === 'DELIVERED')).toHaveLength(27);
      expect(by.get(rejected)).toMatchObject({
        status: 'FAILED',
        dlr_status: 'REJECTED',
        failure_class: 'PERMANENT',
      });
      expect(by.get(absent)).toMatchObject({
        status: 'FAILED',
        dlr_status: 'FAILED',
        dlr_code: '27',
        failure_class: 'EXHAUSTED',
        attempts: 2,
      });
      expect(by.get(unknown)).toMatchObject({
        status: 'FAILED',
        dlr_status: 'NOT_AVAILABLE',
        unconfirmed: true,
      });
      // Refunds follow the roll-up's commit.
      const money = await waitFor(
        async () => {
          const check = await world.money(campaignId);
          return check.balanced ? check : undefined;
        },
        { timeoutMs: 20_000, what: 'the money check balanced' },
      );
      // Refunded: the rejected and the exhausted recipient (2 segments × 0.30 each); unconfirmed: the unknown.
      expect(Number(money.refunded)).toBeCloseTo(1.2, 4);
      expect(Number(money.unconfirmed)).toBeCloseTo(0.6, 4);
      expect(money.duplicates).toEqual([]);

      // Each message went as two UCS-2 parts; every number got each part once (the absent subscriber's
      // retry is a new submission: a new concatenation reference).
      const parts = await gatewayPartCounts(t.db, campaignId);
      expect(parts).toEqual({ accepted: 62 });
      expect(world.smsc.duplicates()).toEqual([]);
      expect(world.smsc.receivedBy(rejected).size).toBe(2);
      expect(world.smsc.stats.malformed).toBe(0);
      expect(world.gateway!.status()[0]).toMatchObject({ transmitBinds: 1, receiveBinds: 1 });
      // The process's /metrics: submit outcomes, receipts and binds per SMSC.
      const { body } = await heraldMetrics.exposition();
      expect(body).toMatch(
        /herald_sms_gateway_submits_total\{smsc="sim",outcome="accepted"\} ([6-9]\d|\d{3,})/,
      );
      expect(body).toMatch(/herald_sms_gateway_receipts_total\{smsc="sim",kind="receipt"\} ([6-9]\d|\d{3,})/);
      expect(body).toMatch(/herald_sms_gateway_binds\{smsc="sim",mode="transceiver"\} 1/);
    } finally {
      await world.stop();
    }
  });
});
