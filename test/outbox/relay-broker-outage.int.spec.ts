/**
 * Broker outage: this file STOPS AND STARTS THE SHARED RabbitMQ (scripts/services stop/start
 * rabbitmq). It must run alone, never alongside other files that use the broker; everything that
 * needs an outage lives here, in one stop/start cycle, to keep it short.
 */
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AmqpSink } from '../../src/adapters/amqp/amqp-sink.js';
import type { PublishOutcome } from '../../src/ports/message-sink.js';
import { outbound } from '../../src/testing/sink-contract.js';
import { waitFor } from '../../src/testing/wait.js';
import { createTestDatabase, requireEnv, type TestDatabase } from '../support/services.js';
import { BrokerFixture, deliveryStats, outboxCounts, seedOutbox } from './support/fixtures.js';
import { RelayHarness } from './support/relay-harness.js';

const run = promisify(execFile);
const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const services = (command: 'stop' | 'start') =>
  run('bash', ['scripts/services', command, 'rabbitmq'], { cwd: REPO, timeout: 180_000 });

let database: TestDatabase;
let relays: RelayHarness;
let brokerDown = false;
const fixtures: BrokerFixture[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  relays = new RelayHarness(database);
});

afterAll(async () => {
  if (brokerDown) await services('start');
  await relays?.close();
  for (const fixture of fixtures) await fixture.close();
  await database?.drop();
}, 240_000);

interface Observation {
  attempts: number;
  nextAttemptAt: number;
  status: string;
}

describe('broker outage (invariant 2: delayed, never lost or duplicated)', () => {
  it('sink fails in-flight messages as unavailable; relay keeps rows pending with growing backoff; all published once after restart', async () => {
    const before = await BrokerFixture.open();
    fixtures.push(before);
    const streamQueue = await before.queue('outage_stream');
    const relayQueue = await before.queue('outage_relay');
    // `before` stays open: its connection dies with the broker (errors swallowed); `after` deletes the queues.

    // 1. A sink publishing continuously while the broker shuts down.
    const sink = new AmqpSink({ url: requireEnv('AMQP_URL'), inFlight: 200, connectTimeoutMs: 2_000 });
    const confirmed: string[] = [];
    const failures: PublishOutcome[] = [];
    let slowestFailingPublishMs = 0;
    const stream = (async () => {
      for (;;) {
        const batch = Array.from({ length: 100 }, () =>
          outbound({ destination: streamQueue, routingKey: null }),
        );
        const started = performance.now();
        const outcomes = await sink.publish(batch);
        const byId = new Map(batch.map((m) => [m.id, m.messageId]));
        for (const outcome of outcomes) {
          if (outcome.ok) confirmed.push(byId.get(outcome.id)!);
          else failures.push(outcome);
        }
        if (outcomes.some((o) => !o.ok)) {
          slowestFailingPublishMs = performance.now() - started;
          return;
        }
      }
    })();
    await waitFor(() => confirmed.length >= 500, { what: 'the stream to get going' });

    brokerDown = true;
    await services('stop');
    await stream;
    expect(confirmed.length).toBeGreaterThan(0);
    expect(failures.length).toBeGreaterThan(0);
    for (const failure of failures) {
      expect(failure).toMatchObject({ ok: false, failure: 'unavailable' });
      expect(failure.ok === false && failure.error).toMatch(/broker unavailable/);
    }
    expect(slowestFailingPublishMs).toBeLessThan(20_000); // the failing publish returned; it did not hang
    const whileDown = performance.now();
    const [down] = await sink.publish([outbound({ destination: streamQueue, routingKey: null })]);
    expect(down).toMatchObject({ ok: false, failure: 'unavailable' });
    expect(performance.now() - whileDown).toBeLessThan(3_000); // fails fast while down
    await sink.close();

    // 2. The relay while the broker is down: rows wait, attempts and next_attempt_at grow, and an
    //    outage never makes a row dead (max attempts is 2 here).
    const early = await seedOutbox(database.db, { count: 5, destination: relayQueue });
    const { relay } = relays.make({
      HERALD_RELAY_MAX_ATTEMPTS: '2',
      HERALD_RELAY_BACKOFF_BASE_MS: '20',
      HERALD_RELAY_BACKOFF_MAX_MS: '400',
      HERALD_RELAY_BATCH_SIZE: '100',
      HERALD_RELAY_IN_FLIGHT: '200',
      HERALD_RELAY_IDLE_POLL_MS: '200',
    });
    await relay.start();
    const history = new Map<number, Observation[]>();
    await waitFor(
      async () => {
        const { rows } = await database.db.query<{
          id: number;
          attempts: number;
          next_attempt_at: Date;
          status: string;
        }>('select id, attempts, next_attempt_at, status from outbox');
        for (const row of rows) {
          const seen = history.get(row.id) ?? [];
          seen.push({
            attempts: row.attempts,
            nextAttemptAt: row.next_attempt_at.getTime(),
            status: row.status,
          });
          history.set(row.id, seen);
        }
        return rows.some((row) => row.attempts >= 3);
      },
      { timeoutMs: 30_000, intervalMs: 20, what: 'a row retried past max attempts while the broker is down' },
    );
    const observations = [...history.values()].flat();
    expect(observations.every((o) => o.status === 'pending')).toBe(true);
    const grew = [...history.values()].some((seen) =>
      seen.some((a) => seen.some((b) => b.attempts > a.attempts && b.nextAttemptAt > a.nextAttemptAt)),
    );
    expect(grew).toBe(true);
    const { rows: errors } = await database.db.query<{ last_error: string | null }>(
      'select last_error from outbox where attempts > 0',
    );
    for (const { last_error } of errors) expect(last_error).toMatch(/^broker unavailable/);
    expect(relay.counters).toMatchObject({ published: 0, dead: 0 });

    // More work arrives during the outage.
    const late = await seedOutbox(database.db, { count: 300, destination: relayQueue });

    // 3. The broker returns: every row goes out exactly once, and every message the sink reported
    //    as confirmed before the outage survived it (persistent, quorum queue).
    await services('start');
    brokerDown = false;
    const after = await BrokerFixture.open();
    fixtures.push(after);
    after.adopt(streamQueue);
    after.adopt(relayQueue);
    const relayed = await after.consume(relayQueue);
    await waitFor(async () => (await outboxCounts(database.db)).sent === 305, {
      timeoutMs: 30_000,
      what: 'all rows sent after the restart',
    });
    const ids = [...early.messageIds, ...late.messageIds];
    await waitFor(() => relayed.length >= 305, { what: 'all relayed deliveries' });
    expect(deliveryStats(after.deliveries, ids)).toEqual({ distinct: 305, total: 305, maxPerId: 1 });
    expect(relay.counters.dead).toBe(0);

    const streamed = await after.consume(streamQueue);
    await waitFor(() => streamed.length >= confirmed.length, {
      timeoutMs: 30_000,
      what: 'confirmed messages',
    });
    const survived = new Set(streamed.map((d) => d.messageId));
    expect(confirmed.filter((id) => !survived.has(id))).toEqual([]);
  });
});
