/**
 * Per-key ordering at the query level (ADR 0007), on real PostgreSQL: the claim takes only a key's
 * head and defers the rest; a failing or dead head holds back only its key; the xmin gate keeps a
 * row whose earlier neighbour may still commit; a deferral never proceeds while the earlier row is
 * being marked; waking, the liveness sweep, parking, skip and requeue. Serial project: claims are
 * gated on the cluster-wide snapshot xmin, so a transaction open in another test file would delay them.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  listParkedKeys,
  skipDead,
  wakeKeyHeads,
  wakeWaitingHeads,
} from '../../src/adapters/postgres/outbox-order-queries.js';
import {
  claimOutboxBatch,
  markSent,
  requeueDead,
  scheduleRetry,
} from '../../src/adapters/postgres/outbox-queries.js';
import type { SqlClient } from '../../src/ports/database.js';
import type { ClaimedForPublish } from '../../src/ports/outbox.js';
import { waitFor } from '../../src/testing/wait.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { keyNames, seedOrdered, writeOrdered } from './support/ordered-fixtures.js';

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

const claim = (limit = 100, owner = 'a') =>
  claimOutboxBatch(database.db, { limit, lockSeconds: 30, owner, sinks: ['amqp', 'kafka'] });

const seqOf = (row: ClaimedForPublish) => (JSON.parse(row.payloadText) as { seq: number }).seq;

async function sendAndWake(rows: readonly ClaimedForPublish[]): Promise<void> {
  await markSent(
    database.db,
    rows.map((r) => ({ id: r.id, attempts: r.attempts, brokerRef: null })),
  );
  await wakeKeyHeads(
    database.db,
    rows
      .filter((r) => r.ordered)
      .map((r) => ({ sink: r.sink, destination: r.destination, partitionKey: r.partitionKey! })),
  );
}

/** Runs `work` inside a transaction that stays open until the returned `finish` is called. */
async function openTransaction(work: (tx: SqlClient) => Promise<void>) {
  let finish!: () => void;
  const held = new Promise<void>((resolve) => {
    finish = resolve;
  });
  let ready!: () => void;
  const started = new Promise<void>((resolve) => {
    ready = resolve;
  });
  const done = database.db.transaction(async (tx) => {
    await work(tx);
    ready();
    await held;
  });
  await started;
  return {
    commit: async () => {
      finish();
      await done;
    },
  };
}

const waitingCount = async () =>
  (
    await database.db.query<{ n: number }>(
      `select count(*)::int as n from outbox where status = 'pending' and next_attempt_at = 'infinity'`,
    )
  ).rows[0]!.n;

describe('ordered claims (ADR 0007)', () => {
  it('claims one head per key, defers the rest, and leaves unordered rows alone', async () => {
    await seedOrdered(database.db, { destination: 'q', keys: keyNames(3), perKey: 4 });
    await seedOrdered(database.db, {
      destination: 'q',
      keys: keyNames(2, 'free'),
      perKey: 3,
      ordered: false,
    });

    const first = await claim();
    const ordered = first.rows.filter((r) => r.ordered);
    expect(ordered.map((r) => [r.partitionKey, seqOf(r)]).sort()).toEqual([
      ['key-0', 0],
      ['key-1', 0],
      ['key-2', 0],
    ]);
    expect(first.rows.filter((r) => !r.ordered)).toHaveLength(6); // unordered: all of them
    expect(first.deferred).toBe(9);
    expect(await waitingCount()).toBe(9);

    // nothing more while the heads are in flight
    expect(await claim()).toEqual({ rows: [], deferred: 0 });

    // each round: mark the heads sent, wake, claim the next heads; per key in seq order
    const seen = new Map<string, number[]>();
    let round = ordered;
    for (let i = 0; i < 4; i++) {
      for (const r of round) seen.set(r.partitionKey!, [...(seen.get(r.partitionKey!) ?? []), seqOf(r)]);
      await sendAndWake(round);
      round = (await claim()).rows;
    }
    expect(round).toEqual([]);
    expect(Object.fromEntries(seen)).toEqual({
      'key-0': [0, 1, 2, 3],
      'key-1': [0, 1, 2, 3],
      'key-2': [0, 1, 2, 3],
    });
  });

  it('a failing head holds back only its key; a dead head parks it until skipped, then the key drains', async () => {
    await seedOrdered(database.db, { destination: 'q', keys: ['bad', 'good'], perKey: 3 });
    const heads = (await claim()).rows;
    const bad = heads.find((r) => r.partitionKey === 'bad')!;
    const good = heads.find((r) => r.partitionKey === 'good')!;

    // bad's head fails (retry due at once): its later rows stay waiting; good's key moves on
    await scheduleRetry(
      database.db,
      [{ id: bad.id, attempts: bad.attempts, error: 'too large', delayMs: 0 }],
      2,
    );
    await sendAndWake([good]);
    const second = (await claim()).rows;
    expect(second.map((r) => [r.partitionKey, seqOf(r)]).sort()).toEqual([
      ['bad', 0],
      ['good', 1],
    ]);

    // bad's head fails for the last time: dead, and its key is parked (visible), good finishes
    const retried = second.find((r) => r.partitionKey === 'bad')!;
    await scheduleRetry(
      database.db,
      [{ id: retried.id, attempts: retried.attempts, error: 'too large', delayMs: 0 }],
      2,
    );
    await sendAndWake(second.filter((r) => r.partitionKey === 'good'));
    const third = (await claim()).rows;
    expect(third.map((r) => [r.partitionKey, seqOf(r)])).toEqual([['good', 2]]);
    await sendAndWake(third);
    expect((await claim()).rows).toEqual([]);

    const parked = await listParkedKeys(database.db);
    expect(parked).toHaveLength(1);
    expect(parked[0]).toMatchObject({
      id: bad.id,
      sink: 'amqp',
      destination: 'q',
      partitionKey: 'bad',
      attempts: 2,
      lastError: 'too large',
      waiting: 2,
    });

    // skip: only a dead row; recorded in last_error; the next row of the key becomes its head
    expect(await skipDead(database.db, { ids: [good.id], actor: 'ops', reason: 'no' })).toEqual([]);
    const skipped = await skipDead(database.db, {
      ids: [good.id, bad.id],
      actor: 'ops@test',
      reason: 'payload too big for the topic',
    });
    expect(skipped).toEqual([expect.objectContaining({ id: bad.id, partitionKey: 'bad', ordered: true })]);
    const { rows } = await database.db.query<{ status: string; last_error: string }>(
      'select status, last_error from outbox where id = $1',
      [bad.id],
    );
    expect(rows[0]).toEqual({
      status: 'skipped',
      last_error: 'skipped by ops@test: payload too big for the topic; last error: too large',
    });
    await wakeKeyHeads(database.db, [{ sink: 'amqp', destination: 'q', partitionKey: 'bad' }]);
    expect(await listParkedKeys(database.db)).toEqual([]);
    const drained: number[] = [];
    for (let round = (await claim()).rows; round.length > 0; round = (await claim()).rows) {
      drained.push(...round.map(seqOf));
      await sendAndWake(round);
    }
    expect(drained).toEqual([1, 2]);
  });

  it('a re-queued dead head goes first again; its key stays parked until then', async () => {
    await seedOrdered(database.db, { destination: 'q', keys: ['k'], perKey: 2 });
    const [head] = (await claim()).rows;
    await scheduleRetry(
      database.db,
      [{ id: head!.id, attempts: head!.attempts, error: 'refused', delayMs: 0 }],
      1,
    );
    expect((await claim()).rows).toEqual([]);
    expect(await requeueDead(database.db, [head!.id])).toEqual([head!.id]);
    const again = (await claim()).rows;
    expect(again.map((r) => [r.id, seqOf(r)])).toEqual([[head!.id, 0]]);
    await sendAndWake(again);
    expect((await claim()).rows.map(seqOf)).toEqual([1]);
  });

  it('waits for older transactions: a row is not claimed while an earlier row of its key may still commit', async () => {
    // T1 writes key k's first row and stays open; T2 (younger) writes k's second row and commits.
    const t1 = await openTransaction(async (tx) => {
      await writeOrdered(tx, { destination: 'q', keys: ['k'], perKey: 1, firstSeq: 0 });
    });
    await seedOrdered(database.db, { destination: 'q', keys: ['k'], perKey: 1, firstSeq: 1 });
    // also an unrelated ordered key written after T1 began: held back by the same horizon
    await seedOrdered(database.db, { destination: 'q', keys: ['other'], perKey: 1 });
    expect((await claim()).rows).toEqual([]);

    await t1.commit();
    // T1's row is claimable at once and k's second row waits behind it (or is still postponed)
    const rows = (await claim()).rows.filter((r) => r.partitionKey === 'k');
    expect(rows.map((r) => [r.partitionKey, seqOf(r)])).toEqual([['k', 0]]);
    await sendAndWake(rows);
    const next = await waitFor(
      async () => {
        const found = (await claim()).rows.filter((r) => r.partitionKey === 'k');
        return found.length > 0 ? found : undefined;
      },
      { what: "k's second row" },
    );
    expect(next.map(seqOf)).toEqual([1]);
  });

  it('never defers behind a row that is being marked: the candidate stays due and is judged again', async () => {
    await seedOrdered(database.db, { destination: 'q', keys: ['k'], perKey: 1 });
    const [head] = (await claim()).rows;
    await seedOrdered(database.db, { destination: 'q', keys: ['k'], perKey: 1, firstSeq: 1 });
    // a "mark" in progress: another transaction holds the head's row lock
    const marking = await openTransaction(async (tx) => {
      await tx.query(`update outbox set status = 'sent', sent_at = now() where id = $1`, [head!.id]);
    });
    expect(await claim()).toEqual({ rows: [], deferred: 0 }); // neither deferred nor claimed
    expect(await waitingCount()).toBe(0);
    await marking.commit();
    // the head is sent now: the second row is the head and is claimed (no wake-up needed)
    expect((await claim()).rows.map(seqOf)).toEqual([1]);
  });

  it('the maintenance sweep wakes a head a crash left waiting (mark committed, wake-up lost)', async () => {
    await seedOrdered(database.db, { destination: 'q', keys: keyNames(3), perKey: 2 });
    const heads = (await claim()).rows;
    await markSent(
      database.db,
      heads.map((r) => ({ id: r.id, attempts: r.attempts, brokerRef: null })),
    ); // … and the relay dies before wakeKeyHeads
    expect((await claim()).rows).toEqual([]);
    expect(await waitingCount()).toBe(3);
    expect(await wakeWaitingHeads(database.db)).toHaveLength(3);
    expect((await claim()).rows.map(seqOf)).toEqual([1, 1, 1]);
  });

  it('keys are per sink and destination: the same partition key elsewhere is another key', async () => {
    await seedOrdered(database.db, { destination: 'a', keys: ['k'], perKey: 2 });
    await seedOrdered(database.db, { destination: 'b', keys: ['k'], perKey: 2 });
    await seedOrdered(database.db, { sink: 'kafka', destination: 'a', keys: ['k'], perKey: 2 });
    const rows = (await claim()).rows;
    expect(rows.map((r) => `${r.sink}:${r.destination}:${seqOf(r)}`).sort()).toEqual([
      'amqp:a:0',
      'amqp:b:0',
      'kafka:a:0',
    ]);
  });
});
