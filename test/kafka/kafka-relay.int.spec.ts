/**
 * The relay with the Kafka sink on real PostgreSQL and Kafka: end to end (outbox rows → `herald relay`
 * role → topic → consumeKafka, every message handled once by message id, headers present), and a key
 * whose destination refuses its message (over the topic's max.message.bytes): its later rows wait, the
 * other keys complete, and after an operator skip (or a fix and a requeue) the key drains in order.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { listParkedKeys } from '../../src/adapters/postgres/outbox-order-queries.js';
import { silentLogger } from '../../src/logger.js';
import { requeueRow, skipRow } from '../../src/outbox/outbox-admin.js';
import { waitFor } from '../../src/testing/wait.js';
import type { Consumer } from '../../src/worker/consume.js';
import { consumeKafka, deadTopicName, retryTopicName } from '../../src/worker/consume-kafka.js';
import { keyNames, seedOrdered } from '../outbox/support/ordered-fixtures.js';
import { runTestRole } from '../support/roles.js';
import { createTestDatabase, requireEnv, type TestDatabase } from '../support/services.js';
import { firstDeliveriesByKey, type KafkaDelivery, KafkaFixture } from './support/kafka-fixture.js';
import { KafkaRelayHarness } from './support/kafka-relay-harness.js';

let database: TestDatabase;
let kafka: KafkaFixture;
let relays: KafkaRelayHarness;

beforeAll(async () => {
  database = await createTestDatabase();
  await database.db.query(
    `create table handled (n bigserial, message_id text primary key, key text, seq int, headers jsonb not null)`,
  );
  kafka = await KafkaFixture.open();
  relays = new KafkaRelayHarness(database);
});

beforeEach(async () => {
  await database.db.query('truncate outbox, handled');
});

afterAll(async () => {
  await relays?.close();
  await kafka?.close();
  await database?.drop();
});

const statusCounts = async () =>
  (
    await database.db.query<{ status: string; n: number }>(
      'select status, count(*)::int as n from outbox group by status order by status',
    )
  ).rows.reduce<Record<string, number>>((all, row) => Object.assign(all, { [row.status]: row.n }), {});

/** seq numbers of the first delivery of each message id of `key`, in arrival order. */
const seqs = (deliveries: readonly KafkaDelivery[], key: string) =>
  (firstDeliveriesByKey(deliveries).get(key) ?? []).map((d) => (JSON.parse(d.body) as { seq: number }).seq);

describe('relay → Kafka', () => {
  it('end to end through the relay role and consumeKafka: every message handled once, headers present, keys in order', async () => {
    const topic = await kafka.topic('e2e', { partitions: 4 });
    kafka.adopt(retryTopicName(topic), deadTopicName(topic));
    const ordered = await seedOrdered(database.db, {
      sink: 'kafka',
      destination: topic,
      keys: keyNames(20, 'e2e'),
      perKey: 10,
    });
    const free = await seedOrdered(database.db, {
      sink: 'kafka',
      destination: topic,
      keys: keyNames(50, 'free'),
      perKey: 4,
      ordered: false,
    });
    const all = [...ordered.messageIds, ...free.messageIds];

    const consumer: Consumer = await consumeKafka<{ key: string; seq: number }>(
      { db: database.db, brokers: requireEnv('KAFKA_BROKERS').split(','), logger: silentLogger },
      topic,
      async (m, tx) => {
        await tx.query('insert into handled (message_id, key, seq, headers) values ($1, $2, $3, $4)', [
          m.messageId,
          m.payload.key,
          m.payload.seq,
          JSON.stringify(m.headers),
        ]);
      },
      { consumer: 'e2e-consumer', concurrency: 4 },
    );
    const controller = new AbortController();
    const relay = runTestRole(
      'relay',
      database.config({ HERALD_RELAY_IDLE_POLL_MS: '200' }),
      controller.signal,
      {
        logger: silentLogger,
      },
    );
    try {
      await waitFor(() => consumer.stats.processed >= all.length, {
        timeoutMs: 30_000,
        what: 'all messages handled',
      });
    } finally {
      controller.abort();
      await relay;
      await consumer.stop();
    }
    expect(await statusCounts()).toEqual({ sent: all.length });
    const { rows } = await database.db.query<{
      message_id: string;
      key: string;
      seq: number;
      headers: Record<string, string>;
    }>('select message_id, key, seq, headers from handled');
    expect(rows).toHaveLength(all.length); // the primary key makes "once" structural; none missing
    expect(new Set(rows.map((r) => r.message_id))).toEqual(new Set(all));
    const sample = rows.find((r) => r.message_id === ordered.messageIds[0])!;
    expect(sample.headers).toMatchObject({
      'x-herald-message-id': sample.message_id,
      'x-herald-event-type': 'OrderedHappened',
      'x-herald-stream-type': 'test',
      'x-herald-stream-id': expect.any(String),
      'x-correlation-id': expect.any(String),
      'content-type': 'application/json',
    });
    expect(consumer.stats).toMatchObject({ rejected: 0, retried: 0, deadLettered: 0 });
    // handled in commit order (n): each ordered key's rows in outbox order
    const { rows: order } = await database.db.query<{ key: string; seqs: number[] }>(
      `select key, array_agg(seq order by n) as seqs from handled where key like 'e2e-%' group by key`,
    );
    expect(order).toHaveLength(20);
    for (const { key, seqs: handled } of order) expect(handled, key).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it("one key's refused message parks only that key; the others complete; skip or fix-and-requeue drains it in order", async () => {
    // 64 KB per record batch: a 100 KB message can never be written; small ones always can.
    const topic = await kafka.topic('limited', {
      partitions: 4,
      configEntries: [{ name: 'max.message.bytes', value: String(64 * 1024) }],
    });
    const received = await kafka.consume(topic);
    const good = keyNames(20, 'good');
    const poisoned = (key: string, seq: number) =>
      (key === 'skip-me' || key === 'fix-me') && seq === 3
        ? { key, seq, pad: 'x'.repeat(100_000) }
        : { key, seq };
    await seedOrdered(database.db, {
      sink: 'kafka',
      destination: topic,
      keys: [...good, 'skip-me', 'fix-me'],
      perKey: 10,
      payload: poisoned,
    });
    const { relay } = relays.make({
      HERALD_RELAY_MAX_ATTEMPTS: '2',
      HERALD_RELAY_BACKOFF_BASE_MS: '20',
      HERALD_RELAY_BACKOFF_MAX_MS: '100',
      HERALD_RELAY_IDLE_POLL_MS: '200',
    });
    await relay.start();

    await waitFor(
      async () => {
        const counts = await statusCounts();
        return counts.dead === 2 && counts.sent === 206;
      },
      {
        timeoutMs: 30_000,
        what: 'good keys sent, both poisoned heads dead',
      },
    );
    // Sent means confirmed by the broker; the test's consumer may still be fetching the last ones.
    await waitFor(() => good.every((key) => seqs(received, key).length >= 10), {
      what: 'every good key consumed',
    });
    for (const key of good) expect(seqs(received, key), key).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    await waitFor(() => seqs(received, 'skip-me').length === 3 && seqs(received, 'fix-me').length === 3);
    expect(seqs(received, 'skip-me')).toEqual([0, 1, 2]);
    expect(seqs(received, 'fix-me')).toEqual([0, 1, 2]);

    const parked = await listParkedKeys(database.db);
    expect(parked.map((p) => [p.partitionKey, p.waiting]).sort()).toEqual([
      ['fix-me', 6],
      ['skip-me', 6],
    ]);
    for (const key of parked) expect(key.lastError).toMatch(/MESSAGE_TOO_LARGE|RECORD_LIST_TOO_LARGE/);
    // the rows behind a parked head wait out of the due range; the relay goes idle instead of spinning
    await waitFor(() => relay.idle, { what: 'the relay to go idle' });

    // operator skip: the key drains, in order, without the refused message
    const skipHead = parked.find((p) => p.partitionKey === 'skip-me')!;
    await skipRow(database.db, { id: skipHead.id, actor: 'test', reason: 'too large for the topic' });
    relay.wake();
    await waitFor(() => seqs(received, 'skip-me').length === 9, { what: 'skip-me drained' });
    expect(seqs(received, 'skip-me')).toEqual([0, 1, 2, 4, 5, 6, 7, 8, 9]);

    // fix: raise the topic's limit, re-queue the dead head: it goes first, then the rest of its key
    const admin = kafka.kafka.admin();
    await admin.connect();
    try {
      await admin.alterConfigs({
        validateOnly: false,
        resources: [
          {
            type: 2,
            name: topic,
            configEntries: [{ name: 'max.message.bytes', value: String(1024 * 1024) }],
          },
        ],
      });
    } finally {
      await admin.disconnect();
    }
    const fixHead = parked.find((p) => p.partitionKey === 'fix-me')!;
    expect(await requeueRow(database.db, { id: fixHead.id, actor: 'test' })).toBe(true);
    relay.wake();
    await waitFor(() => seqs(received, 'fix-me').length === 10, {
      timeoutMs: 20_000,
      what: 'fix-me drained',
    });
    expect(seqs(received, 'fix-me')).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // consumed can precede the relay's mark of the last row by a moment
    await waitFor(async () => (await statusCounts()).sent === 219, { what: 'the last mark' });
    expect(await statusCounts()).toEqual({ sent: 219, skipped: 1 });
    expect(await listParkedKeys(database.db)).toEqual([]);
  });
});
