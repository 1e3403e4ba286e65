/**
 * Kafka outage: this file STOPS AND STARTS THE SHARED Kafka broker (scripts/services stop/start kafka),
 * so it runs in the serial project, alone. One stop/start cycle: rows written before and during the
 * outage stay pending (attempts and next_attempt_at grow, never dead: an outage says nothing about the
 * message), and once the broker is back every row is delivered, each ordered key in outbox order.
 */
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../src/testing/wait.js';
import { keyNames, seedOrdered } from '../outbox/support/ordered-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { firstDeliveriesByKey, KafkaFixture } from './support/kafka-fixture.js';
import { KafkaRelayHarness } from './support/kafka-relay-harness.js';

const run = promisify(execFile);
const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const services = (command: 'stop' | 'start') =>
  run('bash', ['scripts/services', command, 'kafka'], { cwd: REPO, timeout: 180_000 });

let database: TestDatabase;
let relays: KafkaRelayHarness;
let brokerDown = false;
const fixtures: KafkaFixture[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  relays = new KafkaRelayHarness(database);
});

afterAll(async () => {
  if (brokerDown) await services('start');
  await relays?.close();
  for (const fixture of fixtures) await fixture.close();
  await database?.drop();
}, 240_000);

describe('Kafka outage (invariant 2: delayed, never lost; ADR 0007: order kept)', () => {
  it('rows stay pending while the broker is down, then all are delivered, each key in order', async () => {
    const before = await KafkaFixture.open();
    fixtures.push(before);
    const topic = await before.topic('outage', { partitions: 4 });
    const keys = keyNames(20, 'outage');
    // Before the outage: two keys' first rows. While the broker is down the relay probes with one due
    // row at a time, so with few rows one of them passes max attempts quickly.
    const early = await seedOrdered(database.db, {
      sink: 'kafka',
      destination: topic,
      keys: keys.slice(0, 2),
      perKey: 2,
    });

    brokerDown = true;
    await services('stop');
    const { relay } = relays.make({
      HERALD_RELAY_MAX_ATTEMPTS: '2',
      HERALD_RELAY_BACKOFF_BASE_MS: '20',
      HERALD_RELAY_BACKOFF_MAX_MS: '400',
      HERALD_RELAY_IDLE_POLL_MS: '200',
    });
    await relay.start();
    await waitFor(
      async () => {
        const { rows } = await database.db.query<{ attempts: number }>(
          'select max(attempts)::int as attempts from outbox',
        );
        return rows[0]!.attempts >= 3;
      },
      { timeoutMs: 30_000, what: 'a row retried past max attempts while the broker is down' },
    );
    // more work arrives during the outage: the rest of those two keys, 18 more keys, unordered rows
    const late = [
      await seedOrdered(database.db, {
        sink: 'kafka',
        destination: topic,
        keys: keys.slice(0, 2),
        perKey: 18,
        firstSeq: 2,
      }),
      await seedOrdered(database.db, { sink: 'kafka', destination: topic, keys: keys.slice(2), perKey: 20 }),
      await seedOrdered(database.db, {
        sink: 'kafka',
        destination: topic,
        keys: keyNames(25, 'free'),
        perKey: 2,
        ordered: false,
      }),
    ].flatMap((seeded) => seeded.messageIds);

    const { rows: during } = await database.db.query<{ status: string; errors: string[] }>(
      `select status, array_agg(distinct last_error) filter (where last_error is not null) as errors
         from outbox group by status`,
    );
    expect(during.map((r) => r.status)).toEqual(['pending']);
    for (const error of during[0]!.errors) expect(error).toMatch(/^broker unavailable/);
    expect(relay.counters).toMatchObject({ published: 0, dead: 0 });

    await services('start');
    brokerDown = false;
    const after = await KafkaFixture.open();
    fixtures.push(after);
    const received = await after.consume(topic);
    const all = [...early.messageIds, ...late];
    await waitFor(
      async () => {
        const { rows } = await database.db.query<{ sent: number }>(
          `select count(*)::int as sent from outbox where status = 'sent'`,
        );
        return rows[0]!.sent === all.length;
      },
      { timeoutMs: 60_000, what: 'every row sent after the restart' },
    );
    await waitFor(() => new Set(received.map((d) => d.messageId)).size >= all.length, {
      what: 'every message read back',
    });

    const expected = Array.from({ length: 20 }, (_, i) => i);
    const byKey = firstDeliveriesByKey(received);
    for (const key of keys) {
      expect(
        (byKey.get(key) ?? []).map((d) => (JSON.parse(d.body) as { seq: number }).seq),
        key,
      ).toEqual(expected);
    }
    expect(new Set(received.map((d) => d.messageId))).toEqual(new Set(all));
    expect(relay.counters.dead).toBe(0);
  });
});
