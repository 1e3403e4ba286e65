import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../src/testing/wait.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { BrokerFixture, deliveryStats, outboxCounts, seedOutbox } from './support/fixtures.js';
import { RelayHarness } from './support/relay-harness.js';

let database: TestDatabase;
let broker: BrokerFixture;
let relays: RelayHarness;

beforeAll(async () => {
  database = await createTestDatabase();
  broker = await BrokerFixture.open();
  relays = new RelayHarness(database);
});

afterAll(async () => {
  await relays?.close();
  await broker?.close();
  await database?.drop();
});

describe('OutboxRelay replicas (invariant 7)', () => {
  it('four relays drain 20,000 rows together: every row published, none twice', async () => {
    const queue = await broker.queue('parallel');
    const received = await broker.consume(queue);
    const seeded = await seedOutbox(database.db, { count: 20_000, destination: queue });
    const four = Array.from({ length: 4 }, () =>
      relays.make({ HERALD_RELAY_BATCH_SIZE: '250', HERALD_RELAY_IN_FLIGHT: '500' }),
    );

    await Promise.all(four.map(({ relay }) => relay.start()));
    await waitFor(async () => (await outboxCounts(database.db)).sent === 20_000, {
      timeoutMs: 60_000,
      what: 'all rows sent',
    });
    await waitFor(() => received.length >= 20_000, { what: 'all deliveries' });

    expect(deliveryStats(broker.deliveries, seeded.messageIds)).toEqual({
      distinct: 20_000,
      total: 20_000,
      maxPerId: 1,
    });
    expect(received).toHaveLength(20_000);
    const published = four.map(({ relay }) => relay.counters.published);
    expect(published.reduce((a, b) => a + b, 0)).toBe(20_000);
    // every replica took part (SKIP LOCKED spreads the claims)
    for (const count of published) expect(count).toBeGreaterThan(0);
    const { rows } = await database.db.query<{ owners: number; maxAttempts: number }>(
      `select count(distinct locked_by)::int as owners, max(attempts)::int as "maxAttempts" from outbox`,
    );
    expect(rows[0]).toEqual({ owners: 0, maxAttempts: 1 }); // marks clear the claim; one attempt each
  });
});
