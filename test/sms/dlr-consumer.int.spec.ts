/**
 * The DLR consumer over real Kafka and PostgreSQL: reports in the simulator's DeliveryReport shape are
 * stored in sms_delivery_report in the inbox transaction (a redelivery — the same message twice, or
 * the same report under another message id — is stored once), a malformed report is dead-lettered at
 * once to `<topic>.dead` (never retried in a loop), an unreadable one rejected; then the roll-up
 * applies what was stored. And end to end: scanner (dispatch + roll-up under its lease), relay,
 * `herald sms-simulator` and this consumer take two campaigns to COMPLETED and PARTIAL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dlrHandler, SMS_DLR_CONSUMER } from '../../src/aggregates/campaign/sms/dlr-consumer.js';
import { checkCampaignMoney } from '../../src/aggregates/campaign/sms/money-check.js';
import { SmsGatewaySimulator } from '../../src/aggregates/campaign/sms/simulator.js';
import { waitFor } from '../../src/testing/wait.js';
import { consumeKafka, deadTopicName } from '../../src/worker/consume-kafka.js';
import { KafkaFixture } from '../kafka/support/kafka-fixture.js';
import { runTestRole } from '../support/roles.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/services.js';
import { inlineRequest, msisdns, ORG, silentLogger, smsService } from '../support/sms.js';
import { deliveryFixture } from '../support/sms-delivery.js';

let t: TestDatabase;
let kafka: KafkaFixture;
let f: ReturnType<typeof deliveryFixture>;
beforeAll(async () => {
  t = await createTestDatabase();
  kafka = await KafkaFixture.open();
  f = deliveryFixture(t);
  await f.ledger.credit({ organizationId: ORG, key: 'top-up', amount: '100000' });
});
afterAll(async () => {
  await kafka?.close();
  await t?.drop();
});

async function stored(campaignId: string) {
  const { rows } = await t.db.query<{ dlr_id: string; status: string; recipient_id: string }>(
    `select dlr_id, status, recipient_id::text from sms_delivery_report where campaign_id = $1 order by dlr_id`,
    [campaignId],
  );
  return rows;
}

describe('the DLR consumer', () => {
  it('stores each report once, dead-letters a malformed one, and the roll-up applies them', async () => {
    const topic = await kafka.topic('sms_dlr', { partitions: 2 });
    kafka.adopt(`${topic}.retry`, deadTopicName(topic));
    const { id, rows } = await f.dispatchedCampaign(msisdns(2, '017', 800));
    const consumer = await consumeKafka(
      { db: t.db, brokers: kafka.brokers, logger: silentLogger },
      topic,
      dlrHandler({ schema: t.schema }),
      { consumer: SMS_DLR_CONSUMER, groupId: uniqueName('herald_test_dlr'), retryDelayMs: 100 },
    );
    const dead = await kafka.consume(deadTopicName(topic));
    try {
      const report = (row: (typeof rows)[number], status: string, dlrId = `dlr-${row.id}`) => ({
        dlrId,
        submissionId: row.submission_id,
        campaignId: id,
        organizationId: ORG,
        recipientId: row.id,
        msisdn: row.msisdn,
        operator: 'GP',
        status,
        errorCode: status === 'FAILED' ? '1' : null,
        epoch: 1,
        receivedAt: new Date().toISOString(),
        doneAt: new Date().toISOString(),
      });
      const message = (body: unknown, messageId: string) => ({
        key: id,
        value: typeof body === 'string' ? body : JSON.stringify(body),
        headers: { 'x-herald-message-id': messageId },
      });
      const delivered = report(rows[0]!, 'DELIVERED');
      await kafka.produce(topic, [
        message(delivered, delivered.dlrId),
        message(delivered, delivered.dlrId), // redelivered: the inbox drops it
        message(delivered, 'another-message-id'), // the same report again under another id: stored once
        message(report(rows[1]!, 'FAILED'), `dlr-${rows[1]!.id}`),
        message({ ...delivered, dlrId: 'poison', status: 'SENT_TO_MARS' }, 'poison'),
        message('not json at all', 'unreadable'),
      ]);
      await waitFor(async () => (await stored(id)).length === 2 && dead.length === 1, {
        timeoutMs: 30_000,
        what: 'two reports stored, one dead-lettered',
      });
      expect((await stored(id)).map((r) => r.status).sort()).toEqual(['DELIVERED', 'FAILED']);
      expect(dead[0]!.messageId).toBe('poison');
      expect(dead[0]!.headers['x-herald-error']).toMatch(/status/);
      const inbox = async () =>
        (
          await t.db.query<{ message_id: string; status: string }>(
            `select message_id, status from inbox where consumer = $1 order by message_id`,
            [SMS_DLR_CONSUMER],
          )
        ).rows;
      await waitFor(async () => (await inbox()).length === 5, { what: 'five inbox rows' });
      expect(Object.fromEntries((await inbox()).map((r) => [r.message_id, r.status]))).toEqual({
        [delivered.dlrId]: 'processed',
        'another-message-id': 'processed',
        [`dlr-${rows[1]!.id}`]: 'processed',
        poison: 'dead',
        unreadable: 'rejected',
      });
      expect(consumer.stats).toMatchObject({
        processed: 3,
        duplicates: 1,
        deadLettered: 1,
        rejected: 1,
        retried: 0,
      });

      const rolled = await f.rollup.rollUpCampaign(id);
      expect(rolled).toMatchObject({ applied: 2, status: 'PARTIAL' });
      expect((await f.rows(id)).map((r) => r.status)).toEqual(['DELIVERED', 'FAILED']);
    } finally {
      await consumer.stop();
    }
  });
});

describe('end to end through the simulator', () => {
  it('scanner, relay, simulator and the DLR consumer take campaigns to COMPLETED and PARTIAL; the money balances', async () => {
    const submitTopic = await kafka.topic('sms_submit');
    const dlrTopic = await kafka.topic('sms_dlr');
    kafka.adopt(`${dlrTopic}.retry`, `${dlrTopic}.dead`);
    const base = {
      HERALD_SMS_SUBMIT_TOPIC: submitTopic,
      HERALD_SMS_DLR_TOPIC: dlrTopic,
      HERALD_SMS_PROMOTIONAL_WINDOW: '00:00:00-23:59:59',
      HERALD_SMS_SIMULATOR_LATENCY_MS: '5-30',
      HERALD_SCANNER_POLL_MS: '500',
      HERALD_SMS_LEASE_TTL_SECONDS: '5',
      HERALD_SMS_RETRY_MINUTES: '0',
      HERALD_SMS_RETRY_JITTER_SECONDS: '0',
      AMQP_URL: '', // Kafka only: no tick or LINE consumers on the shared broker
    };
    const allDelivered = t.config({ ...base, HERALD_SMS_SIMULATOR_OUTCOMES: 'DELIVERED=1' });
    const mixed = t.config({
      ...base,
      HERALD_SMS_SIMULATOR_OUTCOMES: 'DELIVERED=50,REJECTED=25,NOT_AVAILABLE=25',
    });
    const { service } = smsService(t, { settings: allDelivered.sms });
    // The simulator's outcomes are a function of ids: one campaign through an all-delivering gateway,
    // then the other through a mixed one.
    const controller = new AbortController();
    const roles = [
      runTestRole('scanner', allDelivered, controller.signal),
      runTestRole('relay', allDelivered, controller.signal),
    ];
    // The worker's DLR consumer (the worker role itself would also consume the shared LINE queues).
    const dlr = await consumeKafka(
      { db: t.db, brokers: kafka.brokers, logger: silentLogger },
      dlrTopic,
      dlrHandler({ schema: t.schema }),
      { consumer: SMS_DLR_CONSUMER, groupId: uniqueName('herald_test_dlr') },
    );
    const simulate = async (config: typeof allDelivered) => {
      const simulator = new SmsGatewaySimulator({
        brokers: config.kafkaBrokers,
        settings: config.sms,
        logger: silentLogger,
        groupId: uniqueName('herald_test_simulator'),
        createTopics: false,
        fromBeginning: false,
      });
      await simulator.start();
      return simulator;
    };
    let simulator = await simulate(allDelivered);
    try {
      const good = await service.create(
        inlineRequest({
          templateType: 'GENERIC',
          template: 'সুসংবাদ!',
          recipients: msisdns(6, '018', 900).map((msisdn) => ({ msisdn })),
        }),
        { organizationId: ORG },
      );
      await waitFor(async () => (await service.get(good.body.campaignId)).status === 'COMPLETED', {
        timeoutMs: 60_000,
        what: 'the first campaign COMPLETED',
      });
      await simulator.stop();
      simulator = await simulate(mixed);
      const partial = await service.create(
        inlineRequest({
          templateType: 'GENERIC',
          template: 'অফার!',
          recipients: msisdns(12, '019', 950).map((msisdn) => ({ msisdn })),
        }),
        { organizationId: ORG },
      );
      const done = await waitFor(
        async () => {
          const c = await service.get(partial.body.campaignId);
          return ['PARTIAL', 'FAILED', 'COMPLETED'].includes(c.status) &&
            c.sms!.progress.refunded + c.sms!.progress.unconfirmed === c.sms!.progress.failed
            ? c
            : null;
        },
        { timeoutMs: 60_000, what: 'the second campaign final with its refunds' },
      );
      expect(done.status).toBe('PARTIAL');
      for (const id of [good.body.campaignId, partial.body.campaignId]) {
        expect(await checkCampaignMoney(t.db, id)).toMatchObject({ balanced: true, duplicates: [] });
      }
      // The scanner holds the SMS leases.
      const { rows: leases } = await t.db.query<{ name: string }>(
        `select name from lease where name like 'sms:%' and expires_at > now() order by name`,
      );
      expect(leases.map((l) => l.name)).toEqual(
        expect.arrayContaining(['sms:dlr-rollup', 'sms:refund-retry', 'sms:retry-dispatcher']),
      );
    } finally {
      await simulator.stop();
      await dlr.stop();
      controller.abort();
      await Promise.all(roles);
    }
  });
});
