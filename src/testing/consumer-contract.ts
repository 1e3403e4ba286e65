/**
 * The consumer toolkit's contract, one suite for every transport (src/ports/consumer-transport.ts):
 * the same cases and the same assertions run against RabbitMQ (test/worker/consumer-contract-amqp.int.spec.ts)
 * and Kafka (test/kafka/consumer-contract-kafka.int.spec.ts), on the real brokers and PostgreSQL.
 * A transport fixture hides only what differs: how a source (queue / topic) is made, how a raw message
 * is published to it, how the dead-letter destination is read, and how many messages are still
 * unsettled after a consumer stopped (ready in the queues / offsets not committed).
 *
 * Not a spec file itself: a spec calls `describeConsumerContract(name, fixture)` at its top level
 * (`herald/testing`: a transport of one's own can run it too).
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { findInboxEntry } from '../adapters/postgres/inbox-queries.js';
import { PermanentError, TransientError } from '../errors.js';
import { HEADER } from '../messaging/headers.js';
import type { Database, SqlClient } from '../ports/database.js';
import type { Consumer, Handler } from '../worker/delivery-policy.js';
import { waitFor } from './wait.js';

/** A message as published to a source, not through Herald. */
export interface RawMessage {
  body: string | Buffer;
  /** The message id (AMQP `messageId` property / Kafka `x-herald-message-id` header); none when absent. */
  messageId?: string;
  headers?: Record<string, string>;
  /** Kafka partition key (default: one key, so a test's messages keep their order); AMQP ignores it. */
  key?: string;
}

/** A message read from the dead-letter destination, header values as text. */
export interface DeadLetter {
  messageId: string | undefined;
  body: string;
  headers: Record<string, string>;
}

export interface ContractConsumerOptions<T> {
  consumer: string;
  maxAttempts?: number;
  retryDelayMs?: number;
  parse?: (payload: unknown) => T;
  /** One delivery at a time (AMQP prefetch 1; Kafka one partition at a time). */
  oneAtATime?: boolean;
}

/** A database of the suite's own with Herald's migrations applied, and how to drop it. */
export interface ContractDatabase {
  readonly db: Database;
  drop(): Promise<void>;
}

export interface TransportFixture {
  /** The suite's database (beforeAll); dropped after it (afterAll). */
  database(): Promise<ContractDatabase>;
  /** Connects the fixture's own broker clients (beforeAll). */
  open(): Promise<void>;
  /** Closes them and deletes what is left (afterAll). */
  close(): Promise<void>;
  /** A fresh, uniquely named queue or topic. */
  newSource(options?: { partitions?: number }): Promise<string>;
  /** Starts a consumer through the public factory (consume / consumeKafka). */
  start<T>(
    db: Database,
    source: string,
    handler: Handler<T>,
    options: ContractConsumerOptions<T>,
  ): Promise<Consumer>;
  /** Publishes raw messages to `source`, confirmed by the broker, in order. */
  publish(source: string, messages: RawMessage[]): Promise<void>;
  /** Every message that reached `<source>.dead` so far (read by the test, not by Herald). */
  deadLetters(source: string): Promise<DeadLetter[]>;
  /**
   * Messages of `source` (and its retry destination) not settled by consumer `consumer`: ready in the
   * queues (AMQP) / past the group's committed offsets (Kafka). Meaningful once the consumers stopped.
   */
  backlog(source: string, consumer: string): Promise<number>;
  /** Deletes the sources made since the last call (afterEach). */
  cleanup(): Promise<void>;
}

const json = (value: unknown) => JSON.stringify(value);

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((res) => {
    resolve = res;
  });
  return { promise, resolve };
}

/**
 * The real database, with each transaction's outcome recorded as soon as `transaction()` settled (commit
 * done / rolled back), keyed by the `tx` its work received: a callback can ask, synchronously, whether
 * the transaction it was registered in has committed yet.
 */
function trackTransactions(db: Database): {
  db: Database;
  outcome: (tx: SqlClient) => 'open' | 'committed' | 'rolled back' | undefined;
} {
  const outcomes = new WeakMap<SqlClient, 'open' | 'committed' | 'rolled back'>();
  const tracked: Database = {
    schema: db.schema,
    query: (text, values) => db.query(text, values),
    close: () => db.close(),
    async transaction(work, options) {
      let handle: SqlClient | undefined;
      try {
        const result = await db.transaction((tx) => {
          const current: SqlClient = { query: (text, values) => tx.query(text, values) };
          handle = current;
          outcomes.set(current, 'open');
          return work(current);
        }, options);
        if (handle) outcomes.set(handle, 'committed');
        return result;
      } catch (error) {
        if (handle) outcomes.set(handle, 'rolled back');
        throw error;
      }
    },
  };
  return { db: tracked, outcome: (tx) => outcomes.get(tx) };
}

/** A name no other test run uses (queues, topics, consumers). */
const uniqueName = (prefix: string) => `${prefix}_${randomBytes(5).toString('hex')}`;

export function describeConsumerContract(name: string, fixture: TransportFixture): void {
  describe(`consumer contract: ${name}`, () => {
    let testDb: ContractDatabase;
    const consumers: Consumer[] = [];

    beforeAll(async () => {
      testDb = await fixture.database();
      // No unique key on (consumer, message_id) on purpose: a handler run twice must show up as two
      // rows, not as a retried unique violation that the inbox would then absorb.
      await testDb.db.query(
        'create table effect (id bigserial primary key, consumer text not null, message_id text not null, note text)',
      );
      await fixture.open();
    });

    afterAll(async () => {
      await fixture.close();
      await testDb?.drop();
    });

    afterEach(async () => {
      await Promise.all(consumers.splice(0).map((consumer) => consumer.stop({ timeoutMs: 5_000 })));
      await fixture.cleanup();
    });

    async function start<T>(
      source: string,
      handler: Handler<T>,
      options: ContractConsumerOptions<T>,
      db: Database = testDb.db,
    ): Promise<Consumer> {
      const consumer = await fixture.start(db, source, handler, { retryDelayMs: 200, ...options });
      consumers.push(consumer);
      return consumer;
    }

    async function recordEffect(tx: SqlClient, consumer: string, messageId: string, note?: string) {
      await tx.query('insert into effect (consumer, message_id, note) values ($1, $2, $3)', [
        consumer,
        messageId,
        note ?? null,
      ]);
    }

    async function effects(consumer: string): Promise<{ message_id: string; note: string | null }[]> {
      const { rows } = await testDb.db.query<{ message_id: string; note: string | null }>(
        'select message_id, note from effect where consumer = $1 order by message_id, id',
        [consumer],
      );
      return rows;
    }

    async function inboxRows(consumer: string) {
      const { rows } = await testDb.db.query<{
        message_id: string;
        status: string;
        attempts: number;
        error: string | null;
      }>('select message_id, status, attempts, error from inbox where consumer = $1 order by message_id', [
        consumer,
      ]);
      return rows;
    }

    /** After the consumers stopped: every message of the source and its retry destination settled. */
    async function expectAllSettled(source: string, consumer: string): Promise<void> {
      await waitFor(async () => (await fixture.backlog(source, consumer)) === 0, {
        what: `every message of ${source} settled`,
        timeoutMs: 30_000,
      });
    }

    it('runs the handler once for a message id delivered three times and settles all three', async () => {
      const source = await fixture.newSource();
      const name = uniqueName('dup');
      let calls = 0;
      const consumer = await start(
        source,
        async (message, tx) => {
          calls++;
          await recordEffect(tx, name, message.messageId);
        },
        { consumer: name },
      );

      await fixture.publish(
        source,
        [0, 1, 2].map((n) => ({ body: json({ n }), messageId: 'same-id' })),
      );

      await waitFor(() => consumer.stats.processed + consumer.stats.duplicates === 3, {
        what: 'three deliveries handled',
      });
      expect(calls).toBe(1);
      expect(consumer.stats).toMatchObject({ received: 3, processed: 1, duplicates: 2, retried: 0 });
      expect(await effects(name)).toEqual([{ message_id: 'same-id', note: null }]);
      expect(await inboxRows(name)).toEqual([
        { message_id: 'same-id', status: 'processed', attempts: 1, error: null },
      ]);
      await consumer.stop();
      expect(consumer.stats.redeliveryPending).toBe(0);
      await expectAllSettled(source, name);
    });

    it('rolls back the effect of a PermanentError, records rejected, and never delivers it again', async () => {
      const source = await fixture.newSource();
      const name = uniqueName('perm');
      const calls: string[] = [];
      const consumer = await start(
        source,
        async (message, tx) => {
          calls.push(message.messageId);
          await recordEffect(tx, name, message.messageId);
          if (message.messageId === 'm-perm') throw new PermanentError('recipient does not exist');
        },
        { consumer: name },
      );

      await fixture.publish(source, [{ body: json({ to: 'nobody' }), messageId: 'm-perm' }]);
      await waitFor(() => consumer.stats.rejected === 1, { what: 'the rejection' });
      // A message behind it: once it is handled, a redelivery of the rejected one would have shown up.
      await fixture.publish(source, [{ body: json({ to: 'someone' }), messageId: 'm-after' }]);
      await waitFor(() => consumer.stats.processed === 1, { what: 'the message after it' });

      const entry = await findInboxEntry(testDb.db, { consumer: name, messageId: 'm-perm' });
      expect(entry).toMatchObject({ status: 'rejected', attempts: 1 });
      expect(entry!.error).toMatch(/PermanentError: recipient does not exist/);
      expect((await effects(name)).map((e) => e.message_id)).toEqual(['m-after']);
      await consumer.stop();
      expect(calls).toEqual(['m-perm', 'm-after']);
      expect(consumer.stats).toMatchObject({ rejected: 1, retried: 0, deadLettered: 0, duplicates: 0 });
      await expectAllSettled(source, name);
      expect(await fixture.deadLetters(source)).toEqual([]);
    });

    it('retries a TransientError through the retry destination after the delay and processes it once', async () => {
      const source = await fixture.newSource();
      const name = uniqueName('transient');
      const seen: { attempt: number; at: number; redelivered: boolean }[] = [];
      const consumer = await start(
        source,
        async (message, tx) => {
          seen.push({ attempt: message.attempt, at: Date.now(), redelivered: message.redelivered });
          await recordEffect(tx, name, message.messageId, `attempt ${message.attempt}`);
          if (message.attempt === 1) throw new TransientError('destination timed out');
        },
        { consumer: name, retryDelayMs: 200, maxAttempts: 5 },
      );

      await fixture.publish(source, [{ body: json({ hello: 'world' }), messageId: 'm-transient' }]);

      await waitFor(() => consumer.stats.processed === 1, { what: 'processed on the second attempt' });
      expect(seen.map((s) => s.attempt)).toEqual([1, 2]);
      // The copy waited out the retry delay (a requeue would come back at once).
      expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(190);
      expect(seen.every((s) => !s.redelivered)).toBe(true);
      expect(consumer.stats).toMatchObject({ retried: 1, processed: 1, deadLettered: 0 });
      expect(await effects(name)).toEqual([{ message_id: 'm-transient', note: 'attempt 2' }]);
      expect(await findInboxEntry(testDb.db, { consumer: name, messageId: 'm-transient' })).toMatchObject({
        status: 'processed',
        attempts: 2,
        error: null,
      });
      await consumer.stop();
      expect(seen).toHaveLength(2);
      await expectAllSettled(source, name);
    });

    it('dead-letters after maxAttempts with the error, consumer and source in headers, and records dead', async () => {
      const source = await fixture.newSource();
      const name = uniqueName('dead');
      const attempts: number[] = [];
      const consumer = await start(
        source,
        async (message, tx) => {
          attempts.push(message.attempt);
          await recordEffect(tx, name, message.messageId);
          throw new Error('smtp 451 try later');
        },
        { consumer: name, retryDelayMs: 100, maxAttempts: 3 },
      );

      await fixture.publish(source, [
        { body: json({ to: 'a@b.c' }), messageId: 'm-dead', headers: { 'x-correlation-id': 'corr-1' } },
      ]);

      await waitFor(() => consumer.stats.deadLettered === 1, { what: 'dead-lettered' });
      const [dead, ...more] = await waitFor(
        async () => {
          const letters = await fixture.deadLetters(source);
          return letters.length > 0 && letters;
        },
        { what: `the copy in ${source}.dead` },
      );
      expect(more).toEqual([]);
      expect(dead!.messageId).toBe('m-dead');
      expect(JSON.parse(dead!.body)).toEqual({ to: 'a@b.c' });
      expect(dead!.headers[HEADER.attempt]).toBe('3');
      expect(dead!.headers[HEADER.error]).toMatch(/Error: smtp 451 try later/);
      expect(dead!.headers[HEADER.consumer]).toBe(name);
      expect(dead!.headers[HEADER.queue]).toBe(source);
      expect(Number.isNaN(Date.parse(dead!.headers[HEADER.failedAt] ?? ''))).toBe(false);
      expect(dead!.headers['x-correlation-id']).toBe('corr-1');

      expect(attempts).toEqual([1, 2, 3]);
      const entry = await findInboxEntry(testDb.db, { consumer: name, messageId: 'm-dead' });
      expect(entry).toMatchObject({ status: 'dead', attempts: 3 });
      expect(entry!.error).toMatch(/smtp 451 try later/);
      expect(await effects(name)).toEqual([]);
      await consumer.stop();
      expect(attempts).toHaveLength(3);
      expect(consumer.stats).toMatchObject({ retried: 2, deadLettered: 1, processed: 0 });
      await expectAllSettled(source, name);
    });

    it('rejects invalid JSON and a parse failure, dead-letters a message without id, and keeps going', async () => {
      const source = await fixture.newSource();
      const name = uniqueName('poison');
      const schema = z.object({ campaignId: z.string(), epoch: z.number().int() });
      const calls: string[] = [];
      const consumer = await start(
        source,
        async (message, tx) => {
          calls.push(message.messageId);
          await recordEffect(tx, name, message.messageId);
        },
        { consumer: name, parse: (payload) => schema.parse(payload) },
      );
      const idless = json({ campaignId: 'c-1', epoch: 1 });

      await fixture.publish(source, [
        { body: '{"campaignId": "c-1", ', messageId: 'm-badjson' },
        { body: json({ campaignId: 42 }), messageId: 'm-badshape' },
        { body: idless },
        { body: json({ campaignId: 'c-2', epoch: 2 }), messageId: 'm-good' },
      ]);

      await waitFor(
        () =>
          consumer.stats.rejected === 2 &&
          consumer.stats.deadLettered === 1 &&
          consumer.stats.processed === 1,
        { what: 'two rejected, one dead-lettered, one processed' },
      );
      expect(calls).toEqual(['m-good']);
      expect(await effects(name)).toEqual([{ message_id: 'm-good', note: null }]);
      const missingId = `missing-id:${createHash('sha256').update(Buffer.from(idless)).digest('hex')}`;
      const inbox = await inboxRows(name);
      expect(inbox.map((row) => [row.message_id, row.status])).toEqual(
        [
          ['m-badjson', 'rejected'],
          ['m-badshape', 'rejected'],
          ['m-good', 'processed'],
          [missingId, 'dead'],
        ].sort((a, b) => (a[0]! < b[0]! ? -1 : 1)),
      );
      expect(inbox.find((row) => row.message_id === 'm-badjson')!.error).toMatch(/not valid JSON/);
      expect(inbox.find((row) => row.message_id === 'm-badshape')!.error).toMatch(/rejected by parse/);
      expect(inbox.find((row) => row.message_id === missingId)!.error).toMatch(/has no message ?id/i);

      const [dead, ...more] = await waitFor(
        async () => {
          const letters = await fixture.deadLetters(source);
          return letters.length > 0 && letters;
        },
        { what: 'the id-less message in .dead' },
      );
      expect(more).toEqual([]);
      expect(dead!.messageId).toBeUndefined();
      expect(dead!.body).toBe(idless);
      expect(dead!.headers[HEADER.error]).toMatch(/has no message ?id/i);
      expect(dead!.headers[HEADER.consumer]).toBe(name);

      await consumer.stop();
      expect(consumer.stats).toMatchObject({ retried: 0, duplicates: 0, received: 4 });
      await expectAllSettled(source, name);
    });

    it('commits the handler transaction of a discard with status discarded and the reason', async () => {
      const source = await fixture.newSource();
      const name = uniqueName('discard');
      let calls = 0;
      const consumer = await start(
        source,
        async (message, tx) => {
          calls++;
          await recordEffect(tx, name, message.messageId, 'audit: stale epoch seen');
          return { discard: 'stale epoch 3 (current 4)' };
        },
        { consumer: name },
      );

      await fixture.publish(source, [{ body: json({ epoch: 3 }), messageId: 'm-stale' }]);
      await waitFor(() => consumer.stats.discarded === 1, { what: 'the discard' });
      // A discard is final: the same id again is a duplicate.
      await fixture.publish(source, [{ body: json({ epoch: 3 }), messageId: 'm-stale' }]);
      await waitFor(() => consumer.stats.duplicates === 1, { what: 'the duplicate of the discarded id' });

      expect(await findInboxEntry(testDb.db, { consumer: name, messageId: 'm-stale' })).toMatchObject({
        status: 'discarded',
        error: 'stale epoch 3 (current 4)',
      });
      expect(await effects(name)).toEqual([{ message_id: 'm-stale', note: 'audit: stale epoch seen' }]);
      expect(calls).toBe(1);
      expect(consumer.stats).toMatchObject({ discarded: 1, processed: 0, rejected: 0, retried: 0 });
      await consumer.stop();
      await expectAllSettled(source, name);
    });

    it('treats a database error mid-handler as transient: no effect from that attempt, retried, processed once', async () => {
      const source = await fixture.newSource();
      const name = uniqueName('dberror');
      const attempts: number[] = [];
      const consumer = await start(
        source,
        async (message, tx) => {
          attempts.push(message.attempt);
          await recordEffect(tx, name, message.messageId, `attempt ${message.attempt}`);
          // A real failing statement (42P01), not a thrown stand-in; it aborts the transaction.
          if (message.attempt === 1) await tx.query('select * from no_such_table');
        },
        { consumer: name, retryDelayMs: 100 },
      );

      await fixture.publish(source, [{ body: json({ n: 1 }), messageId: 'm-dberror' }]);

      await waitFor(() => consumer.stats.processed === 1, { what: 'processed on attempt 2' });
      expect(attempts).toEqual([1, 2]);
      expect(consumer.stats).toMatchObject({ retried: 1, rejected: 0, deadLettered: 0 });
      expect(await effects(name)).toEqual([{ message_id: 'm-dberror', note: 'attempt 2' }]);
      expect(await findInboxEntry(testDb.db, { consumer: name, messageId: 'm-dberror' })).toMatchObject({
        status: 'processed',
        attempts: 2,
      });
      await consumer.stop();
      expect(attempts).toHaveLength(2);
      await expectAllSettled(source, name);
    });

    it('treats a database connection lost mid-handler as transient: no effect from that attempt, retried, processed once', async () => {
      const source = await fixture.newSource();
      const name = uniqueName('dbloss');
      const attempts: number[] = [];
      const consumer = await start(
        source,
        async (message, tx) => {
          attempts.push(message.attempt);
          await recordEffect(tx, name, message.messageId, `attempt ${message.attempt}`);
          if (message.attempt === 1) await tx.query('select pg_terminate_backend(pg_backend_pid())');
        },
        { consumer: name, retryDelayMs: 100 },
      );

      await fixture.publish(source, [{ body: json({ n: 1 }), messageId: 'm-dbloss' }]);

      await waitFor(() => consumer.stats.processed === 1, { what: 'processed on attempt 2' });
      expect(attempts).toEqual([1, 2]);
      expect(consumer.stats).toMatchObject({ retried: 1, rejected: 0, deadLettered: 0 });
      expect(await effects(name)).toEqual([{ message_id: 'm-dbloss', note: 'attempt 2' }]);
      expect(await findInboxEntry(testDb.db, { consumer: name, messageId: 'm-dbloss' })).toMatchObject({
        status: 'processed',
        attempts: 2,
      });
      await consumer.stop();
      expect(attempts).toHaveLength(2);
      await expectAllSettled(source, name);
    });

    it('lets two competing consumers process 300 messages with 30 duplicate ids exactly once per id', async () => {
      const source = await fixture.newSource({ partitions: 4 });
      const name = uniqueName('compete');
      const handler: Handler<{ i: number }> = async (message, tx) => {
        await recordEffect(tx, name, message.messageId, String(message.payload.i));
      };
      const a = await start(source, handler, { consumer: name });
      const b = await start(source, handler, { consumer: name });

      // 270 distinct ids; every ninth is sent twice, the copy right after the original.
      const messages: RawMessage[] = [];
      for (let i = 0; i < 270; i++) {
        const message = { body: json({ i }), messageId: `m-${i}`, key: `k-${i}` };
        messages.push(message);
        if (i % 9 === 0) messages.push({ ...message });
      }
      expect(messages).toHaveLength(300);
      await fixture.publish(source, messages);

      // At least 300 deliveries: a Kafka rebalance may hand a settled message whose offset was not yet
      // committed to the other member (at-least-once); the inbox must absorb it as a duplicate.
      const processed = () => a.stats.processed + b.stats.processed;
      const duplicates = () => a.stats.duplicates + b.stats.duplicates;
      const handled = () => processed() + duplicates();
      await waitFor(
        () => {
          if (processed() === 270 && handled() >= 300) return true;
          throw new Error(`${processed()} processed, ${duplicates()} duplicates so far`);
        },
        { what: '270 processed and 300 deliveries', timeoutMs: 30_000 },
      );
      const { rows } = await testDb.db.query<{ total: number; distinct_ids: number }>(
        'select count(*)::int as total, count(distinct message_id)::int as distinct_ids from effect where consumer = $1',
        [name],
      );
      expect(rows[0]).toEqual({ total: 270, distinct_ids: 270 });
      expect(processed()).toBe(270);
      expect(duplicates()).toBeGreaterThanOrEqual(30);
      expect(a.stats.processed).toBeGreaterThan(0);
      expect(b.stats.processed).toBeGreaterThan(0);
      const inbox = await testDb.db.query<{ n: number }>(
        "select count(*)::int as n from inbox where consumer = $1 and status = 'processed'",
        [name],
      );
      expect(inbox.rows[0]!.n).toBe(270);
      // One after the other: two Kafka members leaving at once can each have its final offset commit
      // refused by the rebalance the other's leaving starts (the messages would be delivered again, as
      // duplicates; "every message settled" below would not hold).
      await a.stop();
      await b.stop();
      expect(processed()).toBe(270);
      await expectAllSettled(source, name);
    });

    it('stop() lets the in-flight handler commit before it resolves; the next message waits for a later consumer', async () => {
      const source = await fixture.newSource();
      const name = uniqueName('stop');
      const started = deferred();
      const release = deferred();
      const order: string[] = [];
      const calls: string[] = [];
      const handler: Handler<unknown> = async (message, tx) => {
        calls.push(message.messageId);
        const slow = message.messageId === 'm-slow';
        if (slow) {
          started.resolve();
          await release.promise;
          // Work still to do once stop() was called: far longer than cancelling and closing take, so a
          // stop that did not wait for it would resolve first (the test never waits on this).
          await tx.query('select pg_sleep(0.2)');
        }
        await recordEffect(tx, name, message.messageId);
        if (slow) order.push('handler finished');
      };
      const first = await start(source, handler, { consumer: name, oneAtATime: true });

      await fixture.publish(source, [
        { body: json({ slow: true }), messageId: 'm-slow' },
        { body: json({ slow: false }), messageId: 'm-next' },
      ]);
      await started.promise;
      const stopped = first.stop().then(() => order.push('stop resolved'));
      await waitFor(() => first.stats.state === 'stopping', { what: 'the stopping state' });
      expect(order).toEqual([]);
      release.resolve();
      await stopped;

      expect(order).toEqual(['handler finished', 'stop resolved']);
      expect(first.stats).toMatchObject({
        state: 'stopped',
        received: 1,
        processed: 1,
        inFlight: 0,
        redeliveryPending: 0,
      });
      // Committed before stop() resolved.
      expect(await findInboxEntry(testDb.db, { consumer: name, messageId: 'm-slow' })).toMatchObject({
        status: 'processed',
      });
      expect(calls).toEqual(['m-slow']);

      // Nothing was lost: the message not yet handled goes to the next consumer of that name; the
      // in-flight one was settled, so it does not come back.
      const second = await start(source, handler, { consumer: name });
      await waitFor(() => second.stats.processed === 1, { what: 'the waiting message on the next consumer' });
      expect(second.stats).toMatchObject({ received: 1, processed: 1, duplicates: 0 });
      expect(calls).toEqual(['m-slow', 'm-next']);
      expect(await effects(name)).toEqual([
        { message_id: 'm-next', note: null },
        { message_id: 'm-slow', note: null },
      ]);
      await second.stop();
      await expectAllSettled(source, name);
    });

    it('runs afterCommit callbacks after the handler transaction committed, never when it rolled back', async () => {
      const source = await fixture.newSource();
      const name = uniqueName('aftercommit');
      const tracked = trackTransactions(testDb.db);
      const ran: {
        messageId: string;
        attempt: number;
        outcome: string | undefined;
        visible: Promise<number>;
      }[] = [];
      const consumer = await start<{ fail?: 'permanent' | 'transient' }>(
        source,
        async (message, tx) => {
          await recordEffect(tx, name, message.messageId, `attempt ${message.attempt}`);
          message.afterCommit(() => {
            // Read on another connection: only a committed effect is visible there.
            const visible = testDb.db
              .query<{ n: number }>(
                'select count(*)::int as n from effect where consumer = $1 and message_id = $2',
                [name, message.messageId],
              )
              .then(({ rows }) => rows[0]!.n);
            ran.push({
              messageId: message.messageId,
              attempt: message.attempt,
              outcome: tracked.outcome(tx),
              visible,
            });
          });
          if (message.payload.fail === 'permanent') throw new PermanentError('no such recipient');
          if (message.payload.fail === 'transient' && message.attempt === 1) {
            throw new TransientError('downstream busy');
          }
        },
        { consumer: name, retryDelayMs: 100 },
        tracked.db,
      );

      await fixture.publish(source, [
        { body: json({}), messageId: 'm-ok' },
        { body: json({ fail: 'permanent' }), messageId: 'm-permanent' },
        { body: json({ fail: 'transient' }), messageId: 'm-transient' },
        { body: json({}), messageId: 'm-ok' }, // a duplicate: no handler, no callback
      ]);

      await waitFor(
        () =>
          consumer.stats.processed === 2 && consumer.stats.rejected === 1 && consumer.stats.duplicates === 1,
        { what: 'two processed, one rejected, one duplicate' },
      );
      const callbacks = [...ran].sort((x, y) => (x.messageId < y.messageId ? -1 : 1));
      expect(callbacks.map(({ messageId, attempt, outcome }) => ({ messageId, attempt, outcome }))).toEqual([
        { messageId: 'm-ok', attempt: 1, outcome: 'committed' },
        { messageId: 'm-transient', attempt: 2, outcome: 'committed' },
      ]);
      expect(await Promise.all(callbacks.map((c) => c.visible))).toEqual([1, 1]);
      expect(await effects(name)).toEqual([
        { message_id: 'm-ok', note: 'attempt 1' },
        { message_id: 'm-transient', note: 'attempt 2' },
      ]);
      await consumer.stop();
      expect(ran).toHaveLength(2);
      await expectAllSettled(source, name);
    });
  });
}
