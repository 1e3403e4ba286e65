import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  claimOutboxForPublish,
  markSent,
  nextDueInMs,
  releaseClaims,
  scheduleRetry,
} from '../../src/adapters/postgres/outbox-queries.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { seedOutbox } from './support/fixtures.js';

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});
beforeEach(async () => {
  await database.db.query('truncate outbox');
});

const claim = (limit = 100, owner = 'a', sinks: ('amqp' | 'kafka')[] = ['amqp']) =>
  claimOutboxForPublish(database.db, { limit, lockSeconds: 30, owner, sinks });

const row = async (id: number) =>
  (
    await database.db.query<{
      status: string;
      attempts: number;
      locked_by: string | null;
      due_in_ms: number;
    }>(
      `select status, attempts, locked_by,
              (extract(epoch from next_attempt_at - now()) * 1000)::float8 as due_in_ms
         from outbox where id = $1`,
      [id],
    )
  ).rows[0]!;

describe('outbox relay queries (guarded by the claim attempt)', () => {
  it('claims with a lease: JSON text payload, priority order, no second claim while leased', async () => {
    await seedOutbox(database.db, {
      count: 3,
      destination: 'q',
      priority: 5,
      payload: (i) => ({ i, text: 'ü "x"' }),
    });
    await seedOutbox(database.db, { count: 2, destination: 'q', priority: 1 });
    const claimed = await claim();
    expect(claimed.map((c) => c.priority)).toEqual([1, 1, 5, 5, 5]);
    expect(JSON.parse(claimed[2]!.payloadText)).toEqual({ i: 0, text: 'ü "x"' });
    expect(claimed[0]!.headers).toMatchObject({ 'x-herald-stream-type': 'test' });
    expect(claimed.every((c) => c.attempts === 1)).toBe(true);
    expect(await claim(100, 'b')).toEqual([]);
    const leased = await row(claimed[0]!.id);
    expect(leased).toMatchObject({ status: 'pending', attempts: 1, locked_by: 'a' });
    expect(leased.due_in_ms).toBeGreaterThan(25_000); // the lease moved it out of the due range
  });

  it('claims only the sinks it is given', async () => {
    await seedOutbox(database.db, { count: 2, destination: 'q' });
    await database.db.query(`update outbox set sink = 'kafka' where id = (select min(id) from outbox)`);
    expect(await claim(100, 'a', ['amqp'])).toHaveLength(1);
    expect(await claim(100, 'a', ['kafka'])).toHaveLength(1);
  });

  it('mark, retry and release touch a row only with the attempt number of the current claim', async () => {
    await seedOutbox(database.db, { count: 1, destination: 'q' });
    const [first] = await claim();
    // the lease expires and another relay claims it: attempt 2
    await database.db.query('update outbox set next_attempt_at = now(), locked_until = now()');
    const [second] = await claim(100, 'b');
    expect(second!.attempts).toBe(2);

    const stale = { id: first!.id, attempts: first!.attempts };
    expect(await markSent(database.db, [{ ...stale, brokerRef: null }])).toBe(0);
    expect(await scheduleRetry(database.db, [{ ...stale, error: 'late', delayMs: 10 }], 5)).toEqual([]);
    await releaseClaims(database.db, [stale]);
    expect(await row(first!.id)).toMatchObject({ status: 'pending', attempts: 2, locked_by: 'b' });

    expect(await markSent(database.db, [{ id: second!.id, attempts: 2, brokerRef: null }])).toBe(1);
    expect(await row(first!.id)).toMatchObject({ status: 'sent', attempts: 2, locked_by: null });
  });

  it('schedules a retry after the delay, and makes the row dead at max attempts', async () => {
    await seedOutbox(database.db, { count: 1, destination: 'q' });
    const [claimed] = await claim();
    const retry = { id: claimed!.id, attempts: 1, error: 'nacked', delayMs: 60_000 };
    expect(await scheduleRetry(database.db, [retry], 2)).toEqual([{ id: claimed!.id, status: 'pending' }]);
    const waiting = await row(claimed!.id);
    expect(waiting.due_in_ms).toBeGreaterThan(55_000);
    expect(waiting.due_in_ms).toBeLessThanOrEqual(60_000);

    await database.db.query('update outbox set next_attempt_at = now()');
    const [again] = await claim();
    expect(await scheduleRetry(database.db, [{ ...retry, attempts: again!.attempts }], 2)).toEqual([
      { id: claimed!.id, status: 'dead' },
    ]);
  });

  it('release hands a claim back due now, without counting the attempt', async () => {
    await seedOutbox(database.db, { count: 1, destination: 'q' });
    const [claimed] = await claim();
    await releaseClaims(database.db, [{ id: claimed!.id, attempts: claimed!.attempts }]);
    const released = await row(claimed!.id);
    expect(released).toMatchObject({ status: 'pending', attempts: 0, locked_by: null });
    expect(released.due_in_ms).toBeLessThanOrEqual(0);
  });

  it('nextDueInMs: null when nothing is pending, 0 when due, the delay (by the database clock) otherwise', async () => {
    expect(await nextDueInMs(database.db, ['amqp'])).toBeNull();
    await seedOutbox(database.db, { count: 1, destination: 'q' });
    expect(await nextDueInMs(database.db, ['amqp'])).toBe(0);
    expect(await nextDueInMs(database.db, ['kafka'])).toBeNull();
    await database.db.query(`update outbox set next_attempt_at = now() + interval '90 seconds'`);
    const dueIn = await nextDueInMs(database.db, ['amqp']);
    expect(dueIn).toBeGreaterThan(85_000);
    expect(dueIn).toBeLessThanOrEqual(90_000);
  });
});
