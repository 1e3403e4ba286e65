/**
 * `herald projections rebuild`: the projection rebuilt into a shadow table equals the live one, and a
 * rebuild that runs while writers and the live projector keep going swaps in a table that still
 * equals a direct count afterwards.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  countDispatchStatsDirectly,
  readDispatchStats,
} from '../../src/adapters/postgres/dispatch-stats-queries.js';
import { acquireLease, releaseLease } from '../../src/adapters/postgres/lease-queries.js';
import { dispatchStatsProjection } from '../../src/aggregates/campaign/dispatch-stats.js';
import { Projector, rebuildProjection } from '../../src/projections/projector.js';
import { waitFor } from '../../src/testing/wait.js';
import { runDispatchLoad } from '../support/dispatch-load.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const live = () =>
  new Projector({ db: t.db, projection: dispatchStatsProjection, batchSize: 50, pollMs: 10, leaseMs: 5_000 });

async function indexes() {
  const { rows } = await t.db.query<{ indexname: string }>(
    "select indexname from pg_indexes where schemaname = 'herald' and tablename like 'dispatch_stats%' order by 1",
  );
  return rows.map((r) => r.indexname);
}

const matchesDirectCount = async () =>
  JSON.stringify(await readDispatchStats(t.db)) === JSON.stringify(await countDispatchStatsDirectly(t.db));

describe('projection rebuild', () => {
  it('rebuilds into a shadow table equal to the live projection and swaps it in', async () => {
    await runDispatchLoad(t.db, { writers: 4, holders: 1, campaignsPerWriter: 8 });
    const projector = live();
    // Gap-safe: a transaction another test file holds open keeps the newest events out of reach for a
    // moment; once they are all projected, every later read (the rebuild's too) sees them.
    await waitFor(
      async () => {
        await projector.catchUp();
        return matchesDirectCount();
      },
      { what: 'the live projection caught up with the load', timeoutMs: 60_000 },
    );
    const before = await readDispatchStats(t.db);
    expect(before.length).toBeGreaterThan(0);
    const indexesBefore = await indexes();

    const result = await rebuildProjection(t.db, dispatchStatsProjection, { batchSize: 40 });
    expect(result.events).toBeGreaterThan(0);
    expect(result.receipts).toBeGreaterThan(0);
    expect(await readDispatchStats(t.db)).toEqual(before);
    expect(await indexes()).toEqual(indexesBefore);
    expect(await projector.catchUp()).toEqual({ events: 0, receipts: 0 });

    // A second rebuild finds no leftovers (shadow table, index names, checkpoints) in its way.
    await rebuildProjection(t.db, dispatchStatsProjection, { batchSize: 1_000 });
    expect(await readDispatchStats(t.db)).toEqual(before);
    const { rows } = await t.db.query<{ name: string }>(
      'select name from projection_checkpoint order by name',
    );
    expect(rows.map((r) => r.name)).toEqual(['dispatch_stats', 'dispatch_stats/receipts']);
  });

  it('rebuilds while writers and the live projector keep going; the swapped table stays exact', async () => {
    const projector = live();
    projector.start();
    const load = runDispatchLoad(t.db, { writers: 6, holders: 2, campaignsPerWriter: 8 });
    await waitFor(() => projector.stats.events > 50, { what: 'live projector progress', timeoutMs: 60_000 });
    const result = await rebuildProjection(t.db, dispatchStatsProjection, { batchSize: 30 });
    expect(result.events).toBeGreaterThan(0);
    await load;
    await waitFor(matchesDirectCount, { what: 'live table equals a direct count', timeoutMs: 60_000 });
    await projector.stop();
  });

  it('refuses a second rebuild of the same projection while one runs', async () => {
    const held = await acquireLease(t.db, 'rebuild:dispatch_stats', 'someone-else', 60_000);
    expect(held).not.toBeNull();
    await expect(rebuildProjection(t.db, dispatchStatsProjection)).rejects.toThrow(/already running/);
    await releaseLease(t.db, held!);
  });
});
