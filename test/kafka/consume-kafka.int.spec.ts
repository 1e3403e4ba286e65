/**
 * The consumer toolkit over Kafka against real PostgreSQL and Kafka: inbox de-duplication in the
 * handler's transaction (invariant 4), offsets committed only after that transaction, permanent vs
 * transient failures through `<topic>.retry` and `<topic>.dead`, poison messages, discards, restarts.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { findInboxEntry } from '../../src/adapters/postgres/inbox-queries.js';
import { PermanentError, TransientError } from '../../src/errors.js';
import { silentLogger } from '../../src/logger.js';
import type { SqlClient } from '../../src/ports/database.js';
import { waitFor } from '../../src/testing/wait.js';
import type { Consumer, Handler } from '../../src/worker/consume.js';
import {
  consumeKafka,
  deadTopicName,
  type KafkaConsumeOptions,
  retryTopicName,
} from '../../src/worker/consume-kafka.js';
import { createTestDatabase, requireEnv, type TestDatabase, uniqueName } from '../support/services.js';
import { KafkaFixture } from './support/kafka-fixture.js';

let testDb: TestDatabase;
let kafka: KafkaFixture;
const consumers: Consumer[] = [];

beforeAll(async () => {
  testDb = await createTestDatabase();
  await testDb.db.query('create table effect (consumer text not null, message_id text not null, note text)');
  kafka = await KafkaFixture.open();
});

afterAll(async () => {
  await kafka?.close();
  await testDb?.drop();
});

afterEach(async () => {
  await Promise.all(consumers.splice(0).map((consumer) => consumer.stop({ timeoutMs: 5_000 })));
});

async function newTopic(): Promise<string> {
  const topic = await kafka.topic('consume', { partitions: 2 });
  kafka.adopt(retryTopicName(topic), deadTopicName(topic));
  return topic;
}

async function start<T>(
  topic: string,
  handler: Handler<T>,
  options: Partial<KafkaConsumeOptions<T>> & { consumer: string },
): Promise<Consumer> {
  const consumer = await consumeKafka<T>(
    { db: testDb.db, brokers: requireEnv('KAFKA_BROKERS').split(','), logger: silentLogger },
    topic,
    handler,
    { retryDelayMs: 200, ...options },
  );
  consumers.push(consumer);
  return consumer;
}

const message = (body: unknown, messageId: string | null = randomUUID(), key = 'k') => ({
  key,
  value: typeof body === 'string' ? body : JSON.stringify(body),
  headers: (messageId
    ? { 'x-herald-message-id': messageId, 'x-correlation-id': `c-${messageId}` }
    : {}) as Record<string, string>,
});

const effects = async (consumer: string) =>
  (
    await testDb.db.query<{ message_id: string; note: string | null }>(
      'select message_id, note from effect where consumer = $1 order by message_id',
      [consumer],
    )
  ).rows;

const recordEffect = (consumer: string) => async (m: { messageId: string }, tx: SqlClient) => {
  await tx.query('insert into effect (consumer, message_id) values ($1, $2)', [consumer, m.messageId]);
};

describe('consumeKafka', () => {
  it('runs the handler once per message id (duplicates acknowledged), in key order, with headers', async () => {
    const topic = await newTopic();
    const name = uniqueName('dedupe');
    const seen: { id: string; n: number; correlationId: string | undefined }[] = [];
    const consumer = await start<{ n: number }>(
      topic,
      async (m, tx) => {
        seen.push({ id: m.messageId, n: m.payload.n, correlationId: m.correlationId });
        await recordEffect(name)(m, tx);
      },
      { consumer: name },
    );
    const ids = Array.from({ length: 5 }, () => randomUUID());
    // each id three times (a relay re-publish), one key, so offsets keep them in order
    await kafka.produce(
      topic,
      [0, 1, 2].flatMap(() => ids.map((id, n) => message({ n }, id))),
    );
    await waitFor(() => consumer.stats.processed + consumer.stats.duplicates === 15, {
      what: 'all 15 deliveries handled',
    });
    expect(consumer.stats).toMatchObject({ processed: 5, duplicates: 10, rejected: 0, retried: 0 });
    expect(seen.map((s) => s.n)).toEqual([0, 1, 2, 3, 4]);
    expect(seen[0]!.correlationId).toBe(`c-${ids[0]}`);
    expect((await effects(name)).map((e) => e.message_id).sort()).toEqual([...ids].sort());
  });

  it('commits an offset only after the handler transaction; a restarted group member does not handle again', async () => {
    const topic = await newTopic();
    const name = uniqueName('offsets');
    const group = uniqueName('group');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let blocked = false;
    const handler: Handler<{ n: number }> = async (m, tx) => {
      await recordEffect(name)(m, tx);
      if (m.payload.n === 2) {
        blocked = true;
        await gate;
      }
    };
    const first = await start(topic, handler, { consumer: name, groupId: group, concurrency: 1 });
    await kafka.produce(
      topic,
      [0, 1, 2, 3].map((n) => message({ n })),
    );
    await waitFor(() => blocked, { what: 'the handler to block on message 2' });
    const committed = async () => Math.max(-1, ...(await kafka.committedOffsets(group, topic)));
    // message 2 sits at offset 2 of the key's partition: nothing at or past it is committed yet
    expect(await committed()).toBeLessThanOrEqual(2);
    release();
    await waitFor(async () => (await committed()) === 4, { what: 'offsets committed after the handlers' });
    await first.stop();

    const second = await start(topic, handler, { consumer: name, groupId: group });
    await kafka.produce(topic, [message({ n: 4 })]);
    await waitFor(() => second.stats.processed === 1, { what: 'the new message' });
    expect(second.stats).toMatchObject({ received: 1, duplicates: 0 });
    expect(await effects(name)).toHaveLength(5);
  });

  it('rejects a PermanentError (effect rolled back, inbox rejected), never retried', async () => {
    const topic = await newTopic();
    const name = uniqueName('permanent');
    let calls = 0;
    const consumer = await start(
      topic,
      async (m, tx) => {
        calls++;
        await recordEffect(name)(m, tx);
        throw new PermanentError('campaign no longer exists');
      },
      { consumer: name },
    );
    const id = randomUUID();
    await kafka.produce(topic, [message({ x: 1 }, id)]);
    await waitFor(() => consumer.stats.rejected === 1, { what: 'the rejection' });
    expect(calls).toBe(1);
    expect(await effects(name)).toEqual([]);
    expect(await findInboxEntry(testDb.db, { consumer: name, messageId: id })).toMatchObject({
      status: 'rejected',
      error: expect.stringMatching(/campaign no longer exists/),
    });
    expect(consumer.stats.retried).toBe(0);
  });

  it('retries a transient failure through <topic>.retry after the delay, then dead-letters after maxAttempts', async () => {
    const topic = await newTopic();
    const name = uniqueName('transient');
    const attempts = new Map<string, { attempt: number; at: number }[]>();
    const recovering = randomUUID(); // fails once
    const hopeless = randomUUID(); // always fails
    const consumer = await start(
      topic,
      async (m, tx) => {
        attempts.set(m.messageId, [
          ...(attempts.get(m.messageId) ?? []),
          { attempt: m.attempt, at: Date.now() },
        ]);
        await recordEffect(name)(m, tx);
        if (m.messageId === hopeless || m.attempt === 1) throw new TransientError('downstream timeout');
      },
      { consumer: name, maxAttempts: 3, retryDelayMs: 300 },
    );
    const dead = await kafka.consume(deadTopicName(topic));
    await kafka.produce(topic, [message({ r: 1 }, recovering), message({ h: 1 }, hopeless)]);

    await waitFor(() => consumer.stats.deadLettered === 1 && consumer.stats.processed === 1, {
      what: 'one processed on its retry, one dead-lettered',
    });
    const tries = attempts.get(recovering)!;
    expect(tries.map((t) => t.attempt)).toEqual([1, 2]);
    expect(tries[1]!.at - tries[0]!.at).toBeGreaterThanOrEqual(250); // waited for the retry delay
    expect(attempts.get(hopeless)!.map((t) => t.attempt)).toEqual([1, 2, 3]);
    expect((await effects(name)).map((e) => e.message_id)).toEqual([recovering]);
    expect(await findInboxEntry(testDb.db, { consumer: name, messageId: hopeless })).toMatchObject({
      status: 'dead',
      attempts: 3,
    });
    await waitFor(() => dead.length === 1, { what: 'the dead-letter copy' });
    expect(dead[0]).toMatchObject({
      key: 'k',
      messageId: hopeless,
      headers: {
        'x-herald-attempt': '3',
        'x-herald-error': expect.stringMatching(/TransientError: downstream timeout/),
        'x-herald-consumer': name,
        'x-herald-queue': topic,
        'x-correlation-id': `c-${hopeless}`,
      },
    });
    expect(consumer.stats).toMatchObject({ retried: 3, deadLettered: 1 });
  });

  it('rejects invalid JSON and a parse failure, dead-letters a message without id, and discards with a reason', async () => {
    const topic = await newTopic();
    const name = uniqueName('poison');
    const consumer = await start<{ ok: boolean }>(
      topic,
      async (m) => (m.payload.ok ? { discard: 'stale epoch' } : undefined),
      {
        consumer: name,
        parse: (payload) => {
          if (typeof (payload as { ok?: unknown }).ok !== 'boolean') throw new Error('ok must be a boolean');
          return payload as { ok: boolean };
        },
      },
    );
    const dead = await kafka.consume(deadTopicName(topic));
    const [badJson, badShape, discarded] = [randomUUID(), randomUUID(), randomUUID()];
    await kafka.produce(topic, [
      message('{not json', badJson),
      message({ ok: 'yes' }, badShape),
      message({ ok: true }, null),
      message({ ok: true }, discarded),
    ]);
    await waitFor(() => consumer.stats.discarded === 1 && consumer.stats.rejected === 2, {
      what: 'all four',
    });
    await waitFor(() => dead.length === 1, { what: 'the id-less message in .dead' });
    expect(consumer.stats).toMatchObject({ rejected: 2, deadLettered: 1, discarded: 1, retried: 0 });
    expect(await findInboxEntry(testDb.db, { consumer: name, messageId: badJson })).toMatchObject({
      status: 'rejected',
      error: expect.stringMatching(/not valid JSON/),
    });
    expect(await findInboxEntry(testDb.db, { consumer: name, messageId: discarded })).toMatchObject({
      status: 'discarded',
      error: 'stale epoch',
    });
    expect(dead[0]!.headers['x-herald-error']).toMatch(/no message id/);
  });
});
