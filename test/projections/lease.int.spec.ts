/** Lease queries on the database clock: acquire if free, expired or ours; renew/release guarded by owner and term. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  acquireLease,
  findLease,
  holdsLease,
  releaseLease,
  renewLease,
} from '../../src/adapters/postgres/lease-queries.js';
import { waitFor } from '../../src/testing/wait.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

describe('lease queries', () => {
  it('one holder at a time; a takeover after expiry bumps the term and fences the old holder out', async () => {
    const a = await acquireLease(t.db, 'l1', 'a', 300);
    expect(a).toMatchObject({ owner: 'a', term: 1 });
    expect(await acquireLease(t.db, 'l1', 'b', 300)).toBeNull();
    // Re-acquiring our own live lease keeps the term (a restart of the same owner).
    expect(await acquireLease(t.db, 'l1', 'a', 300)).toMatchObject({ term: 1 });

    const b = await waitFor(() => acquireLease(t.db, 'l1', 'b', 60_000), { what: 'a to expire' });
    expect(b).toMatchObject({ owner: 'b', term: 2 });
    expect(await holdsLease(t.db, a!)).toBe(false);
    expect(await renewLease(t.db, a!, 60_000)).toBe(false);
    await releaseLease(t.db, a!); // a no-op: not a's any more
    expect(await findLease(t.db, 'l1')).toMatchObject({ owner: 'b', term: 2 });
    expect(await holdsLease(t.db, b!)).toBe(true);

    expect(await renewLease(t.db, b!, 60_000)).toBe(true);
    await releaseLease(t.db, b!);
    expect(await holdsLease(t.db, b!)).toBe(false);
    expect(await acquireLease(t.db, 'l1', 'c', 1_000)).toMatchObject({ owner: 'c', term: 3 });
  });

  it('concurrent acquires of a new lease: exactly one wins', async () => {
    const grants = await Promise.all(
      Array.from({ length: 8 }, (_, i) => acquireLease(t.db, 'l2', `owner-${i}`, 60_000)),
    );
    expect(grants.filter((g) => g !== null)).toHaveLength(1);
  });
});
