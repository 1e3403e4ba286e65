/**
 * Per-key order across relay replicas (ADR 0007, invariant 7) on real PostgreSQL and Kafka: four
 * relays drain 20,000 ordered rows over 200 keys into one topic, and a raw reader (not Herald's
 * consumer) checks that each key's messages arrive in outbox order, every message present.
 * (Which replica publishes what is not asserted: the replica that marks a head also wakes and usually
 * claims the next one; order must hold whoever wins.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../src/testing/wait.js';
import { keyNames, seedOrdered } from '../outbox/support/ordered-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { firstDeliveriesByKey, KafkaFixture } from './support/kafka-fixture.js';
import { KafkaRelayHarness } from './support/kafka-relay-harness.js';

let database: TestDatabase;
let kafka: KafkaFixture;
let relays: KafkaRelayHarness;

beforeAll(async () => {
  database = await createTestDatabase();
  kafka = await KafkaFixture.open();
  relays = new KafkaRelayHarness(database);
});

afterAll(async () => {
  await relays?.close();
  await kafka?.close();
  await database?.drop();
});

describe('ordered relay replicas → Kafka', () => {
  it('four relays, 200 keys, 20,000 ordered rows: each key arrives in outbox order', async () => {
    const topic = await kafka.topic('ordered', { partitions: 8 });
    const received = await kafka.consume(topic);
    const keys = keyNames(200, 'order');
    const seeded = await seedOrdered(database.db, { sink: 'kafka', destination: topic, keys, perKey: 100 });
    const four = Array.from({ length: 4 }, () =>
      // a short idle poll keeps all four competing for the heads other replicas wake
      relays.make({
        HERALD_RELAY_BATCH_SIZE: '200',
        HERALD_RELAY_IN_FLIGHT: '400',
        HERALD_RELAY_IDLE_POLL_MS: '50',
      }),
    );

    await Promise.all(four.map(({ relay }) => relay.start()));
    await waitFor(
      async () => {
        const { rows } = await database.db.query<{ sent: number }>(
          `select count(*)::int as sent from outbox where status = 'sent'`,
        );
        return rows[0]!.sent === 20_000;
      },
      { timeoutMs: 60_000, intervalMs: 100, what: 'all 20,000 rows sent' },
    );
    await waitFor(() => new Set(received.map((d) => d.messageId)).size >= 20_000, {
      what: 'all 20,000 messages read back',
    });

    const byKey = firstDeliveriesByKey(received);
    expect(byKey.size).toBe(200);
    const expected = Array.from({ length: 100 }, (_, i) => i);
    const outOfOrder: string[] = [];
    for (const key of keys) {
      const seqs = (byKey.get(key) ?? []).map((d) => (JSON.parse(d.body) as { seq: number }).seq);
      if (JSON.stringify(seqs) !== JSON.stringify(expected)) outOfOrder.push(key);
    }
    expect(outOfOrder).toEqual([]);
    expect(new Set(received.map((d) => d.messageId))).toEqual(new Set(seeded.messageIds));
    // one claim per row (no head was ever claimed twice), and the replicas shared the work: rows one
    // replica deferred behind a head in flight were published by whichever replica claimed them later
    const sum = (pick: (c: (typeof four)[number]['relay']['counters']) => number) =>
      four.reduce((total, { relay }) => total + pick(relay.counters), 0);
    expect(sum((c) => c.published)).toBe(20_000);
    expect(sum((c) => c.claimed)).toBe(20_000);
    expect(
      four.filter(({ relay }) => relay.counters.claimed + relay.counters.deferred > 0).length,
    ).toBeGreaterThan(1);
  });
});
