/**
 * Completion notices follow the SMS sink the deployment configured (HERALD_SMS_SINK): with `amqp` a
 * completed campaign's `campaign.completed` notice is an outbox row for the RabbitMQ queue
 * `sms.reporting` (which the relay declares with the slice's queues), like its submission chunks; with
 * the default it goes to the Kafka topic of that name. The sink comes from the configuration of the
 * command handler that writes the final event; one without a configuration keeps the default.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { campaignRegistration } from '../../src/aggregates/campaign/index.js';
import { smsSinkOf } from '../../src/aggregates/campaign/sms/completion-notice.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { msisdns, ORG } from '../support/sms.js';
import { deliveryFixture } from '../support/sms-delivery.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

async function outboxOf(campaignId: string) {
  const { rows } = await t.db.query<{
    sink: string;
    destination: string;
    priority: number;
    type: string | null;
  }>(
    `select o.sink, o.destination, o.priority, o.payload->>'type' as type
       from outbox o join event e on e.position = o.event_position
      where e.stream_id = $1 order by o.id`,
    [campaignId],
  );
  return rows;
}

async function completed(f: ReturnType<typeof deliveryFixture>, offset: number): Promise<string> {
  await f.ledger.credit({ organizationId: ORG, key: `top-up-${offset}`, amount: '100' });
  const { id, rows } = await f.dispatchedCampaign(msisdns(2, '017', offset));
  await f.report(
    id,
    rows.map((row) => ({ row, status: 'DELIVERED' })),
  );
  await f.rollup.rollUpCampaign(id);
  expect((await f.service.get(id)).status).toBe('COMPLETED');
  return id;
}

describe('completion notices', () => {
  it('HERALD_SMS_SINK=amqp: the notice goes to the RabbitMQ queue sms.reporting, like the chunks', async () => {
    const f = deliveryFixture(t, { env: { HERALD_SMS_SINK: 'amqp' } });
    const rows = await outboxOf(await completed(f, 100));
    const notices = rows.filter((r) => r.destination === 'sms.reporting');
    expect(notices).toEqual([
      { sink: 'amqp', destination: 'sms.reporting', priority: 5, type: 'campaign.completed' },
    ]);
    expect(rows.filter((r) => r.destination === 'sms.submit').every((r) => r.sink === 'amqp')).toBe(true);
    // The relay declares the queue with the slice's topology.
    expect(campaignRegistration.topology.amqpQueues).toContain('sms.reporting');
  });

  it('by default (kafka): the notice goes to the Kafka topic sms.reporting', async () => {
    const f = deliveryFixture(t);
    const notices = (await outboxOf(await completed(f, 200))).filter(
      (r) => r.destination === 'sms.reporting',
    );
    expect(notices).toEqual([
      { sink: 'kafka', destination: 'sms.reporting', priority: 5, type: 'campaign.completed' },
    ]);
  });

  it('a handler without a configuration keeps the default sink', () => {
    expect(smsSinkOf(undefined)).toBe('kafka');
    expect(smsSinkOf(t.config({ HERALD_SMS_SINK: 'amqp' }))).toBe('amqp');
  });
});
