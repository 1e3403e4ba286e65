/**
 * The leased sweeper on real PostgreSQL (database clock): of two replicas only the lease holder
 * sweeps; the holder's timer is armed to renew it every third of the TTL; a holder that stops
 * renewing loses it once it expires and the other takes over with a new term; a graceful stop
 * releases it at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findLease } from '../../src/adapters/postgres/lease-queries.js';
import { leasedSweeper } from '../../src/scanner/leased-sweeper.js';
import type { Sweeper } from '../../src/scanner/scanner.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

function counting(): Sweeper & { swept: number } {
  return {
    name: 'counting',
    swept: 0,
    async sweep() {
      this.swept++;
      return { processed: 1, more: false };
    },
    nextDueInMs: () => Promise.resolve(null),
  };
}

describe('leasedSweeper', () => {
  it('only the holder sweeps; an expired lease is taken over with a new term; stop releases it', async () => {
    const ttlMs = 3_000;
    const innerA = counting();
    const innerB = counting();
    const a = leasedSweeper(innerA, { db: t.db, lease: 'test:lease', owner: 'a', ttlMs });
    const b = leasedSweeper(innerB, { db: t.db, lease: 'test:lease', owner: 'b', ttlMs });

    expect(await a.sweep()).toEqual({ processed: 1, more: false });
    expect(await b.sweep()).toEqual({ processed: 0, more: false });
    expect([innerA.swept, innerB.swept]).toEqual([1, 0]);
    expect([a.holding, b.holding]).toEqual([true, false]);
    // The holder wakes to renew within a third of the TTL; the other retries as often.
    expect(await a.nextDueInMs()).toBeLessThanOrEqual(1_000);
    expect(await b.nextDueInMs()).toBeLessThanOrEqual(1_000);
    const first = (await findLease(t.db, 'test:lease'))!;
    expect(first).toMatchObject({ owner: 'a', term: 1 });

    // `a` stops renewing (a paused process): once the lease expires by the database clock, `b` takes it.
    await t.db.query(
      `update lease set expires_at = now() - interval '1 millisecond' where name = 'test:lease'`,
    );
    // (b paces its attempts by a third of the TTL: a fresh wrapper for the same owner tries at once.)
    const b2 = leasedSweeper(innerB, { db: t.db, lease: 'test:lease', owner: 'b', ttlMs });
    expect((await b2.sweep()).processed).toBe(1);
    expect(await findLease(t.db, 'test:lease')).toMatchObject({ owner: 'b', term: 2 });

    // A graceful stop ends the lease now: another replica takes it at once.
    await b2.stop!();
    const c = leasedSweeper(counting(), { db: t.db, lease: 'test:lease', owner: 'c', ttlMs });
    expect((await c.sweep()).processed).toBe(1);
    expect(await findLease(t.db, 'test:lease')).toMatchObject({ owner: 'c', term: 3 });
    await c.release();
  });
});
