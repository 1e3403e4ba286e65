import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDatabase } from '../../src/adapters/postgres/database.js';
import { CoalescingNotifier, PgWakeupListener } from '../../src/adapters/postgres/notifications.js';
import type { Database } from '../../src/ports/database.js';
import { channels } from '../../src/ports/wakeups.js';
import { waitFor } from '../../src/testing/wait.js';
import { maintenanceService } from '../support/maintenance.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/services.js';
import { BrokerFixture, deliveryStats, outboxCounts, seedOutbox } from './support/fixtures.js';
import { RelayHarness } from './support/relay-harness.js';

let database: TestDatabase;
let broker: BrokerFixture;

beforeAll(async () => {
  database = await createTestDatabase();
  broker = await BrokerFixture.open();
});

afterAll(async () => {
  await broker?.close();
  await database?.drop();
});

let relays: RelayHarness;
beforeEach(async () => {
  relays = new RelayHarness(database);
  await database.db.query('truncate outbox');
});
afterEach(async () => {
  await relays.close();
});

interface OutboxRow {
  id: number;
  message_id: string;
  status: string;
  attempts: number;
  sent_at: Date | null;
  locked_until: Date | null;
  last_error: string | null;
  recovery_count: number;
  next_attempt_at: Date;
}

const selectRows = (db: Database) =>
  db
    .query<OutboxRow>(
      `select id, message_id, status, attempts, sent_at, locked_until, last_error, recovery_count, next_attempt_at
         from outbox order by id`,
    )
    .then((result) => result.rows);

describe('OutboxRelay', () => {
  it('publishes every row exactly once and marks it sent after the confirm', async () => {
    const queue = await broker.queue('happy');
    const received = await broker.consume(queue);
    const seeded = await seedOutbox(database.db, { count: 1_200, destination: queue });
    const { relay } = relays.make({ HERALD_RELAY_BATCH_SIZE: '100', HERALD_RELAY_IN_FLIGHT: '300' });

    await relay.start();
    await waitFor(async () => (await outboxCounts(database.db)).sent === 1_200, { what: 'all rows sent' });
    await waitFor(() => received.length >= 1_200, { what: 'all deliveries' });

    expect(deliveryStats(broker.deliveries, seeded.messageIds)).toEqual({
      distinct: 1_200,
      total: 1_200,
      maxPerId: 1,
    });
    const rows = await selectRows(database.db);
    for (const row of rows) {
      expect(row).toMatchObject({ status: 'sent', attempts: 1, locked_until: null, last_error: null });
      expect(row.sent_at).toBeInstanceOf(Date);
    }
    expect(relay.counters).toMatchObject({ published: 1_200, failed: 0, dead: 0, claimed: 1_200 });
    // the standard headers travel with the message (consumers log by them)
    const delivery = received[0]!;
    expect(delivery.headers).toMatchObject({
      'x-correlation-id': seeded.correlationId,
      'x-herald-stream-id': seeded.streamId,
    });
  });

  it('claims in priority order: priority 1 rows are published before earlier priority 5 rows', async () => {
    const queue = await broker.queue('prio');
    const received = await broker.consume(queue);
    const low = await seedOutbox(database.db, { count: 40, destination: queue, priority: 5 });
    const high = await seedOutbox(database.db, { count: 40, destination: queue, priority: 1 });
    const { relay } = relays.make({ HERALD_RELAY_BATCH_SIZE: '10', HERALD_RELAY_IN_FLIGHT: '30' });

    await relay.drainOnce();
    await waitFor(() => received.length >= 80, { what: 'all deliveries' });
    const order = received.map((d) => d.messageId);
    const lastHigh = Math.max(...high.messageIds.map((id) => order.indexOf(id)));
    const firstLow = Math.min(...low.messageIds.map((id) => order.indexOf(id)));
    expect(lastHigh).toBe(39);
    expect(firstLow).toBe(40);
    // and within a priority, in insertion order
    expect(order.slice(0, 40)).toEqual(high.messageIds);
  });

  it('retries an unroutable row with backoff until dead, recovers it after the cooldown up to max rounds', async () => {
    const missing = uniqueName('herald_test_no_such_queue');
    await seedOutbox(database.db, { count: 1, destination: missing });
    const { relay, config } = relays.make({
      HERALD_RELAY_MAX_ATTEMPTS: '3',
      HERALD_RELAY_BACKOFF_BASE_MS: '5',
      HERALD_RELAY_BACKOFF_MAX_MS: '50',
      HERALD_RELAY_RECOVERY_COOLDOWN_SECONDS: '0',
      HERALD_RELAY_RECOVERY_MAX_ROUNDS: '2',
      HERALD_RELAY_IDLE_POLL_MS: '200',
    });
    await relay.start();

    const seenAttempts = new Set<number>();
    const deadRow = async (recoveryCount: number) =>
      waitFor(
        async () => {
          const [row] = await selectRows(database.db);
          seenAttempts.add(row!.attempts);
          return row!.status === 'dead' && row!.recovery_count === recoveryCount ? row : undefined;
        },
        { what: `dead row (round ${recoveryCount})`, intervalMs: 2 },
      );

    const dead = await deadRow(0);
    expect(dead).toMatchObject({ attempts: 3, locked_until: null });
    expect(dead.last_error).toMatch(/^unroutable: /);
    // The counters follow the commit that made the row dead.
    await waitFor(() => relay.counters.dead === 1, { what: 'the relay counting the dead row' });
    expect(relay.counters).toMatchObject({ published: 0, failed: 3, dead: 1 });
    expect(Math.max(...seenAttempts)).toBe(3);

    const recovery = maintenanceService(config, database.db, 'outbox-recovery');
    expect(await recovery.runOnce()).toBe(1);
    expect(await deadRow(1)).toMatchObject({ attempts: 3 });
    expect(await recovery.runOnce()).toBe(1);
    expect(await deadRow(2)).toMatchObject({ attempts: 3 });

    // max rounds reached: it stays dead, with its error, for an operator to look at
    expect(await recovery.runOnce()).toBe(0);
    const [final] = await selectRows(database.db);
    expect(final).toMatchObject({ status: 'dead', recovery_count: 2 });
    expect(relay.counters.dead).toBe(3);
  });

  it('stop() during a big in-flight batch resolves with every row sent or pending and unclaimed', async () => {
    const queue = await broker.queue('stop');
    await broker.consume(queue);
    const seeded = await seedOutbox(database.db, { count: 6_000, destination: queue });
    const { relay } = relays.make({ HERALD_RELAY_BATCH_SIZE: '1000', HERALD_RELAY_IN_FLIGHT: '2000' });

    await relay.start();
    await waitFor(() => relay.counters.batches >= 2, { what: 'batches in flight', intervalMs: 1 });
    await relay.stop();

    const counts = await outboxCounts(database.db);
    const rows = await selectRows(database.db);
    const claimed = rows.filter((row) => row.status === 'pending' && row.locked_until !== null);
    expect(claimed).toEqual([]);
    expect(counts.sent).toBe(relay.counters.published);
    expect(counts.sent).toBeGreaterThanOrEqual(1_000);
    expect(counts.sent + counts.pending).toBe(6_000);
    // a pending row left behind was never published: its attempt is not counted
    for (const row of rows.filter((r) => r.status === 'pending')) expect(row.attempts).toBe(0);
    // everything marked sent reached the broker
    const sentIds = rows.filter((r) => r.status === 'sent').map((r) => r.message_id);
    await waitFor(() => deliveryStats(broker.deliveries, sentIds).distinct === sentIds.length, {
      what: 'sent rows delivered',
    });
    expect(seeded.messageIds).toHaveLength(6_000);
  });

  it('stop() while a claim is running releases the claimed rows unpublished', async () => {
    const queue = await broker.queue('release');
    const received = await broker.consume(queue);
    await seedOutbox(database.db, { count: 50, destination: queue });
    const { relay } = relays.make({ HERALD_RELAY_BATCH_SIZE: '50' });

    const started = relay.start(); // the first claim is on its way to the database now
    await relay.stop();
    await started;

    expect(relay.counters).toMatchObject({ claimed: 50, released: 50, published: 0 });
    const rows = await selectRows(database.db);
    for (const row of rows) expect(row).toMatchObject({ status: 'pending', attempts: 0, locked_until: null });
    expect(received).toHaveLength(0);
  });

  it('wakes on NOTIFY: an idle relay (60 s idle poll) publishes a new row at once', async () => {
    const queue = await broker.queue('wake');
    const received = await broker.consume(queue);
    const listener = new PgWakeupListener({ url: database.url, schema: database.schema });
    const notifier = new CoalescingNotifier(database.db, 20);
    try {
      const { relay } = relays.make({ HERALD_RELAY_IDLE_POLL_MS: '60000' }, { listener });
      await relay.start();
      await waitFor(() => relay.idle, { what: 'relay idle' });

      const seeded = await seedOutbox(database.db, { count: 1, destination: queue });
      notifier.signal(channels.outbox(database.schema));
      const [delivery] = await waitFor(() => (received.length > 0 ? received : undefined), {
        timeoutMs: 5_000,
        what: 'the notified row',
      });
      expect(delivery!.messageId).toBe(seeded.messageIds[0]);
    } finally {
      notifier.close();
      await relays.close();
      await listener.close();
    }
  });

  it('follows the next due time: a row due in a moment is published then, without a NOTIFY', async () => {
    const queue = await broker.queue('due');
    const received = await broker.consume(queue);
    const seeded = await seedOutbox(database.db, { count: 1, destination: queue });
    await database.db.query(`update outbox set next_attempt_at = now() + interval '300 milliseconds'`);
    const { relay } = relays.make({ HERALD_RELAY_IDLE_POLL_MS: '60000' });
    await relay.start();
    const [delivery] = await waitFor(() => (received.length > 0 ? received : undefined), {
      timeoutMs: 5_000,
      what: 'the due row',
    });
    expect(delivery!.messageId).toBe(seeded.messageIds[0]);
  });

  it('prunes sent rows older than the retention, and only those', async () => {
    const queue = await broker.queue('prune');
    await broker.consume(queue);
    await seedOutbox(database.db, { count: 30, destination: queue });
    const { relay, config } = relays.make({ HERALD_RELAY_RETENTION_HOURS: '1' });
    await relay.drainOnce();
    await seedOutbox(database.db, { count: 5, destination: uniqueName('herald_test_not_published') }); // stays pending
    await database.db.query(
      `update outbox set sent_at = now() - interval '2 hours' where id in (select id from outbox where status = 'sent' order by id limit 20)`,
    );

    expect(await maintenanceService(config, database.db, 'outbox-sent-pruning').runOnce()).toBe(20);
    expect(await outboxCounts(database.db)).toEqual({ sent: 10, pending: 5, dead: 0 });

    const noRetention = database.config({ HERALD_RELAY_RETENTION_HOURS: '0' });
    expect(await maintenanceService(noRetention, database.db, 'outbox-sent-pruning').runOnce()).toBe(10);
    expect(await outboxCounts(database.db)).toEqual({ sent: 0, pending: 5, dead: 0 });
  });

  it('survives losing its database connections mid-drain: no row skipped', async () => {
    const queue = await broker.queue('dbloss');
    await broker.consume(queue);
    const seeded = await seedOutbox(database.db, { count: 4_000, destination: queue });
    const relayDb = createDatabase({
      url: database.url,
      schema: database.schema,
      applicationName: 'herald-relay-dbloss',
    });
    try {
      const { relay } = relays.make(
        { HERALD_RELAY_BATCH_SIZE: '200', HERALD_RELAY_IN_FLIGHT: '400' },
        { db: relayDb },
      );
      await relay.start();
      for (let round = 0; round < 5; round++) {
        await waitFor(() => relay.counters.published >= (round + 1) * 400, {
          what: `progress ${round}`,
          intervalMs: 2,
        });
        await database.db.query(
          `select pg_terminate_backend(pid) from pg_stat_activity
            where datname = current_database() and application_name = 'herald-relay-dbloss'`,
        );
      }
      await waitFor(async () => (await outboxCounts(database.db)).sent === 4_000, { what: 'all rows sent' });
      const stats = deliveryStats(broker.deliveries, seeded.messageIds);
      expect(stats.distinct).toBe(4_000);
      // A mark lost with its connection is retried; a re-publish would carry the same id (counted here).
      expect(stats.total - stats.distinct).toBeLessThanOrEqual(400);
    } finally {
      await relays.close();
      await relayDb.close();
    }
  });
});
