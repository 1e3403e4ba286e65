/**
 * In-process publish (ADR 0024): a process publishes the outbox rows it commits right after the commit,
 * the relays being the fallback. Every outbox invariant must hold across both paths: nothing of a
 * rolled-back transaction or savepoint is published; ordered rows wait for a relay's claim; a process
 * SIGKILLed between commit and publish leaves its row to a relay, which delivers it once; a broker away at
 * commit delays rows without losing them; both paths racing on one row give one message id at the consumer.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AmqpSink } from '../../src/adapters/amqp/amqp-sink.js';
import { createDatabase } from '../../src/adapters/postgres/database.js';
import { appendEvents } from '../../src/adapters/postgres/event-queries.js';
import { toOutboxRows, writeOutbox } from '../../src/outbox/outbox-writer.js';
import { OutboxRelay, type OutboxRelayHooks } from '../../src/outbox/relay.js';
import type { Database, SqlClient } from '../../src/ports/database.js';
import { waitFor } from '../../src/testing/wait.js';
import { createTestDatabase, requireEnv, type TestDatabase, uniqueName } from '../support/services.js';
import { BrokerFixture, seedOutbox } from './support/fixtures.js';
import { RelayHarness } from './support/relay-harness.js';

const CHILD = join(dirname(fileURLToPath(import.meta.url)), 'support', 'inline-crash-child.ts');

let database: TestDatabase;
let broker: BrokerFixture;
let relays: RelayHarness;
const closing: (() => Promise<void>)[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  broker = await BrokerFixture.open();
  relays = new RelayHarness(database);
});

afterAll(async () => {
  for (const close of closing.reverse()) await close();
  await relays?.close();
  await broker?.close();
  await database?.drop();
});

/** A second Database on the test database whose transactions publish their own rows. */
function inlineDatabase(
  env: Record<string, string> = {},
  options: { amqpUrl?: string; hooks?: OutboxRelayHooks } = {},
): { db: Database; publisher: OutboxRelay } {
  const config = database.config({ HERALD_RELAY_LOCK_SECONDS: '1', ...env });
  const db = createDatabase({ url: database.url, schema: database.schema, poolSize: 4 });
  const sink = new AmqpSink({
    url: options.amqpUrl ?? requireEnv('AMQP_URL'),
    inFlight: config.relay.inFlight,
    name: 'herald-inline-test',
  });
  const publisher = new OutboxRelay({
    db,
    sinks: { amqp: sink },
    settings: config.relay,
    owner: uniqueName('inline'),
    ...(options.hooks ? { hooks: options.hooks } : {}),
  });
  db.publishOutboxInline?.(publisher.inlinePublisher());
  closing.push(async () => {
    await publisher.stop();
    await sink.close();
    await db.close();
  });
  return { db, publisher };
}

/** Writes one outbox row per destination spec inside `tx` (one event causes them). */
async function writeRows(
  tx: SqlClient,
  specs: { destination: string; ordered?: boolean; partitionKey?: string; payload: unknown }[],
): Promise<string[]> {
  const streamId = uniqueName('stream');
  const [event] = await appendEvents(tx, [
    { streamType: 'test', streamId, version: 1, type: 'TestHappened', data: {}, meta: {} },
  ]);
  const rows = toOutboxRows(
    { eventPosition: event!.position, eventType: 'TestHappened', streamType: 'test', streamId, meta: {} },
    specs,
  );
  await writeOutbox(tx, rows);
  return rows.map((row) => row.messageId);
}

const rowsOf = async (ids: readonly string[]) =>
  (
    await database.db.query<{
      message_id: string;
      status: string;
      attempts: number;
      locked_by: string | null;
    }>(
      `select message_id::text, status, attempts, locked_by from outbox where message_id = any($1::uuid[]) order by id`,
      [ids],
    )
  ).rows;

describe('in-process publish after commit (ADR 0024)', () => {
  it('publishes a committed transaction’s rows without any relay claim, and marks them sent', async () => {
    const queue = await broker.queue('inline');
    const received = await broker.consume(queue);
    const { db, publisher } = inlineDatabase();
    const { messageIds } = await seedOutbox(db, { count: 3, destination: queue });
    await waitFor(async () => (await rowsOf(messageIds)).every((r) => r.status === 'sent'), {
      what: 'the rows marked sent by their own process',
    });
    expect((await rowsOf(messageIds)).map((r) => [r.status, r.attempts, r.locked_by])).toEqual([
      ['sent', 1, null],
      ['sent', 1, null],
      ['sent', 1, null],
    ]);
    expect(received.map((d) => d.messageId).sort()).toEqual([...messageIds].sort());
    expect(publisher.counters).toMatchObject({ claimed: 3, published: 3, failed: 0 });
  });

  it('never publishes a row of a rolled-back transaction, savepoint, or a COMMIT that rolled back', async () => {
    const queue = await broker.queue('inline_rollback');
    const received = await broker.consume(queue);
    const { db } = inlineDatabase();
    const kept: string[] = [];
    const gone: string[] = [];
    await db.transaction(async (tx) => {
      kept.push(...(await writeRows(tx, [{ destination: queue, payload: { n: 'before' } }])));
      await tx.query('savepoint inner_work');
      gone.push(...(await writeRows(tx, [{ destination: queue, payload: { n: 'rolled back' } }])));
      await tx.query('rollback to savepoint inner_work');
      kept.push(...(await writeRows(tx, [{ destination: queue, payload: { n: 'after' } }])));
      await tx.query('release savepoint inner_work');
    });
    await expect(
      db.transaction(async (tx) => {
        gone.push(...(await writeRows(tx, [{ destination: queue, payload: { n: 'thrown' } }])));
        throw new Error('the work failed');
      }),
    ).rejects.toThrow('the work failed');
    // An error caught inside the work leaves the transaction aborted: its COMMIT answers ROLLBACK.
    await db.transaction(async (tx) => {
      gone.push(...(await writeRows(tx, [{ destination: queue, payload: { n: 'aborted' } }])));
      await tx.query('select 1/0').catch(() => {});
    });
    // A last row proves the publisher ran after all of them.
    const last = await db.transaction((tx) =>
      writeRows(tx, [{ destination: queue, payload: { n: 'last' } }]),
    );
    await waitFor(() => received.some((d) => d.messageId === last[0]), { what: 'the last row published' });
    expect(received.map((d) => JSON.parse(d.body).n).sort()).toEqual(['after', 'before', 'last']);
    expect(await rowsOf(gone)).toEqual([]);
    // Marked after the broker's confirm, which may come after the consumer already has the message.
    await waitFor(async () => (await rowsOf(kept)).every((r) => r.status === 'sent'), {
      what: 'the kept rows marked sent',
    });
    expect(await rowsOf(kept)).toHaveLength(2);
  });

  it('leaves ordered rows to a relay, which publishes them in key order', async () => {
    const queue = await broker.queue('inline_ordered');
    const received = await broker.consume(queue);
    const { db } = inlineDatabase();
    const ids = await db.transaction((tx) =>
      writeRows(tx, [
        { destination: queue, ordered: true, partitionKey: 'k', payload: { n: 1 } },
        { destination: queue, ordered: true, partitionKey: 'k', payload: { n: 2 } },
      ]),
    );
    expect((await rowsOf(ids)).map((r) => [r.status, r.attempts, r.locked_by])).toEqual([
      ['pending', 0, null],
      ['pending', 0, null],
    ]);
    const { relay } = relays.make();
    await waitFor(
      async () => {
        await relay.drainOnce();
        return received.length === 2;
      },
      { what: 'the relay published both ordered rows' },
    );
    expect(received.map((d) => JSON.parse(d.body).n)).toEqual([1, 2]);
  });

  it('SIGKILL between commit and publish: the row stays leased, then a relay delivers it once', async () => {
    const queue = await broker.queue('inline_crash');
    const received = await broker.consume(queue);
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
      env: {
        ...process.env,
        DATABASE_URL: database.url,
        HERALD_SCHEMA: database.schema,
        AMQP_URL: requireEnv('AMQP_URL'),
        HERALD_RELAY_LOCK_SECONDS: '1',
        HERALD_LOG_LEVEL: 'silent',
        TEST_QUEUE: queue,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = once(child, 'exit');
    let committed: string[] = [];
    for await (const line of createInterface({ input: child.stdout! })) {
      if (line.startsWith('{')) committed = (JSON.parse(line) as { committed: string[] }).committed;
    }
    const [, signal] = await exited;
    expect(signal).toBe('SIGKILL');
    expect(committed).toHaveLength(1);
    expect(await rowsOf(committed)).toEqual([
      { message_id: committed[0], status: 'pending', attempts: 1, locked_by: 'inline-crash-child' },
    ]);
    const { relay } = relays.make();
    await waitFor(
      async () => {
        await relay.drainOnce();
        return received.length > 0;
      },
      { what: 'a relay took the dead process’s row after its lease', intervalMs: 100 },
    );
    expect(received.map((d) => d.messageId)).toEqual(committed);
    expect((await rowsOf(committed))[0]).toMatchObject({ status: 'sent', attempts: 2 });
  });

  it('the broker away at commit: the row is rescheduled, later rows go to the relays, all delivered once', async () => {
    const queue = await broker.queue('inline_outage');
    const received = await broker.consume(queue);
    // Nothing listens on port 9: every publish of this process fails as `unavailable`.
    const { db, publisher } = inlineDatabase(
      { HERALD_RELAY_BACKOFF_BASE_MS: '100', HERALD_RELAY_BACKOFF_MAX_MS: '200' },
      { amqpUrl: 'amqp://127.0.0.1:9' },
    );
    const first = await db.transaction((tx) => writeRows(tx, [{ destination: queue, payload: { n: 1 } }]));
    await waitFor(() => publisher.counters.failed === 1, { what: 'the in-process publish failed' });
    expect((await rowsOf(first))[0]).toMatchObject({ status: 'pending', attempts: 1, locked_by: null });
    // While it probes the broker, this process leases nothing: the next row is the relays' at once.
    const second = await db.transaction((tx) => writeRows(tx, [{ destination: queue, payload: { n: 2 } }]));
    expect((await rowsOf(second))[0]).toMatchObject({ status: 'pending', attempts: 0, locked_by: null });
    const { relay } = relays.make();
    await waitFor(
      async () => {
        await relay.drainOnce();
        return received.length === 2;
      },
      { what: 'a relay published both', intervalMs: 100 },
    );
    expect(received.map((d) => d.messageId).sort()).toEqual([...first, ...second].sort());
  });

  it('both paths racing on one row: two publishes of one message id, one effect at the consumer', async () => {
    const queue = await broker.queue('inline_race');
    let effects = 0;
    const received = await broker.consume(queue, async (delivery) => {
      const { rowCount } = await database.db.query(
        `insert into inbox (consumer, message_id) values ('inline-race', $1) on conflict do nothing`,
        [delivery.messageId],
      );
      effects += rowCount;
    });
    const { relay } = relays.make();
    // The in-process publish is confirmed, then stalls past its lease; a relay claims the row meanwhile.
    const { db, publisher } = inlineDatabase(
      {},
      {
        hooks: {
          beforeMark: async () => {
            await waitFor(
              async () => {
                await relay.drainOnce();
                return received.length === 2;
              },
              { what: 'the relay re-published the row after the lease', intervalMs: 100 },
            );
          },
        },
      },
    );
    const ids = await db.transaction((tx) => writeRows(tx, [{ destination: queue, payload: { n: 1 } }]));
    await waitFor(() => publisher.counters.batches === 1 && received.length === 2, {
      what: 'both publishes',
    });
    await waitFor(() => effects === 1, { what: 'the effect' });
    await publisher.stop();
    expect(received.map((d) => d.messageId)).toEqual([ids[0], ids[0]]);
    expect(effects).toBe(1);
    // The stalled mark matched nothing (attempt 1's lease was gone); the relay's attempt 2 is the mark.
    expect(publisher.counters.published).toBe(0);
    expect((await rowsOf(ids))[0]).toMatchObject({ status: 'sent', attempts: 2 });
  });
});
