/**
 * End to end through real Kafka: `herald scanner` dispatches two SMS campaigns into the outbox, `herald
 * relay` publishes the submission chunks to the submit topic, and the SMS gateway simulator (the test
 * double of the operator network) consumes them and writes one delivery report per recipient to the DLR
 * topic, with the configured outcome mix (FAILED carrying an MNPSP code) — each report naming its
 * submission, recipient and the claim epoch, and each recipient's outcome a function of its ids.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import {
  type DeliveryReport,
  SmsGatewaySimulator,
  simulatedOutcome,
} from '../../src/aggregates/campaign/sms/simulator.js';
import { waitFor } from '../../src/testing/wait.js';
import { KafkaFixture } from '../kafka/support/kafka-fixture.js';
import { runTestRole } from '../support/roles.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/services.js';
import { inlineRequest, msisdns, ORG, silentLogger, smsService } from '../support/sms.js';

let t: TestDatabase;
let kafka: KafkaFixture;
beforeAll(async () => {
  t = await createTestDatabase();
  kafka = await KafkaFixture.open();
  await new PostgresLedger(t.db).credit({ organizationId: ORG, key: 'top-up', amount: '1000' });
});
afterAll(async () => {
  await kafka?.close();
  await t?.drop();
});

describe('sms-simulator', () => {
  it('answers every submitted recipient with a delivery report in the configured mix', async () => {
    const submitTopic = await kafka.topic('sms_submit');
    const dlrTopic = await kafka.topic('sms_dlr');
    const config = t.config({
      HERALD_SMS_SUBMIT_TOPIC: submitTopic,
      HERALD_SMS_DLR_TOPIC: dlrTopic,
      HERALD_SMS_PROMOTIONAL_WINDOW: '00:00:00-23:59:59',
      HERALD_SMS_SIMULATOR_OUTCOMES: 'DELIVERED=40,FAILED=20,EXPIRED=15,REJECTED=15,NOT_AVAILABLE=10',
      HERALD_SMS_SIMULATOR_LATENCY_MS: '5-40',
      HERALD_SMS_SIMULATOR_FAILED_CODES: '27,34',
      HERALD_SCANNER_POLL_MS: '1000',
      AMQP_URL: '', // a Kafka-only relay; no tick consumer on the shared broker
    });
    const reports = await kafka.consume(dlrTopic);
    const submitted = await kafka.consume(submitTopic);
    const simulator = new SmsGatewaySimulator({
      brokers: config.kafkaBrokers,
      settings: config.sms,
      logger: silentLogger,
      groupId: uniqueName('herald_test_simulator'),
      createTopics: false,
    });
    await simulator.start();
    const controller = new AbortController();
    const roles = [
      runTestRole('scanner', config, controller.signal),
      runTestRole('relay', config, controller.signal),
    ];
    const { service } = smsService(t, { settings: config.sms });
    try {
      const promo = await service.create(
        inlineRequest({
          templateType: 'GENERIC',
          template: 'বৈশাখী অফার!',
          recipients: [...msisdns(20, '017'), ...msisdns(10, '019')].map((msisdn) => ({ msisdn })),
        }),
        { organizationId: ORG },
      );
      const otp = await service.create(
        inlineRequest({
          messageType: 'TRANSACTIONAL',
          lang: 'en',
          campaignId: undefined,
          templateType: 'GENERIC',
          template: 'Your code is ready',
          recipients: msisdns(10, '018').map((msisdn) => ({ msisdn })),
        }),
        { organizationId: ORG },
      );
      await waitFor(() => new Set(reports.map((r) => r.messageId)).size >= 40, {
        timeoutMs: 60_000,
        what: '40 delivery reports',
      });
      expect(simulator.stats.recipients).toBeGreaterThanOrEqual(40);

      // Chunks: one per route for the promotional campaign (GP, Banglalink), one per recipient for the OTP.
      const chunks = submitted.map(
        (d) => JSON.parse(d.body) as { submissionId: string; campaignId: string; recipients: unknown[] },
      );
      expect(
        chunks
          .filter((c) => c.campaignId === promo.body.campaignId)
          .map((c) => c.recipients.length)
          .sort(),
      ).toEqual([10, 20]);
      expect(chunks.filter((c) => c.campaignId === otp.body.campaignId)).toHaveLength(10);
      for (const d of submitted)
        expect(d.messageId).toBe((JSON.parse(d.body) as { submissionId: string }).submissionId);

      const { rows } = await t.db.query<{
        id: string;
        submission_id: string;
        campaign_id: string;
        msisdn: string;
      }>(
        `select id::text, submission_id::text, campaign_id::text, msisdn from campaign_recipient where campaign_id = any($1::uuid[])`,
        [[promo.body.campaignId, otp.body.campaignId]],
      );
      const byRecipient = new Map(rows.map((r) => [r.id, r]));
      const first = new Map<string, DeliveryReport>();
      for (const delivery of reports) {
        const report = JSON.parse(delivery.body) as DeliveryReport;
        expect(delivery.messageId).toBe(report.dlrId);
        if (!first.has(report.dlrId)) first.set(report.dlrId, report);
      }
      expect(first.size).toBe(40);
      const statuses: Record<string, number> = {};
      for (const report of first.values()) {
        const row = byRecipient.get(report.recipientId)!;
        expect(report).toMatchObject({
          submissionId: row.submission_id,
          campaignId: row.campaign_id,
          msisdn: row.msisdn,
          epoch: 1,
        });
        const expected = simulatedOutcome(report.submissionId, report.recipientId, config.sms.simulator);
        expect(report.status).toBe(expected.status);
        expect(report.errorCode).toBe(expected.errorCode);
        if (report.status === 'FAILED') expect(['27', '34']).toContain(report.errorCode);
        expect(Date.parse(report.doneAt)).toBeGreaterThanOrEqual(Date.parse(report.receivedAt));
        statuses[report.status] = (statuses[report.status] ?? 0) + 1;
      }
      // 40 recipients over five outcomes: more than one kind comes back.
      expect(Object.keys(statuses).length).toBeGreaterThan(2);
    } finally {
      controller.abort();
      await Promise.all(roles);
      await simulator.stop();
    }
  });
});
