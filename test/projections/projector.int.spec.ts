/**
 * The asynchronous projector against real PostgreSQL: gap safety under load (writers holding
 * transactions open while others commit), exactly-once application across restarts, a crash inside a
 * batch and competing replicas, checked against a direct count of the event log and receipts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  countDispatchStatsDirectly,
  readDispatchStats,
} from '../../src/adapters/postgres/dispatch-stats-queries.js';
import { findLease } from '../../src/adapters/postgres/lease-queries.js';
import { listCheckpoints } from '../../src/adapters/postgres/projection-queries.js';
import { dispatchStatsProjection } from '../../src/aggregates/campaign/dispatch-stats.js';
import { Projector } from '../../src/projections/projector.js';
import { waitFor } from '../../src/testing/wait.js';
import { runDispatchLoad } from '../support/dispatch-load.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

async function totals() {
  const { rows } = await t.db.query<{ events: number; receipts: number }>(
    'select (select count(*) from event)::int as events, (select count(*) from publish_receipt)::int as receipts',
  );
  return rows[0]!;
}

const projector = (overrides: Partial<ConstructorParameters<typeof Projector>[0]> = {}) =>
  new Projector({
    db: t.db,
    projection: dispatchStatsProjection,
    batchSize: 25,
    pollMs: 10,
    leaseMs: 2_000,
    ...overrides,
  });

/** True when the projectors together applied exactly what was added to the log since `baseline`. */
async function caughtUp(projectors: Projector[], baseline = { events: 0, receipts: 0 }) {
  const want = await totals();
  const events = projectors.reduce((sum, p) => sum + p.stats.events, 0);
  const receipts = projectors.reduce((sum, p) => sum + p.stats.receipts, 0);
  return events === want.events - baseline.events && receipts === want.receipts - baseline.receipts;
}

describe('projector: dispatch_stats', () => {
  it('under 8 concurrent writers (some holding transactions open), across a restart and a crashed batch, applies every event and receipt exactly once', async () => {
    const first = projector({ owner: 'first' });
    first.start();
    const load = runDispatchLoad(t.db, { writers: 8, holders: 3, campaignsPerWriter: 12 });

    // Restart mid-load: stop the first replica once it applied something, start a second one.
    await waitFor(() => first.stats.events > 100, { what: 'first projector progress', timeoutMs: 60_000 });
    await first.stop();
    let crashes = 0;
    const second = projector({
      owner: 'second',
      hooks: {
        // A batch whose transaction dies after the projection's writes: nothing of it may remain.
        afterApply: () => {
          if (crashes < 2 && second.stats.batches % 3 === 1) {
            crashes++;
            throw new Error('simulated crash between the writes and the checkpoint');
          }
        },
      },
    });
    second.start();
    const { heldCommits } = await load;
    expect(heldCommits).toBeGreaterThan(0);

    await waitFor(() => caughtUp([first, second]), { what: 'projector caught up', timeoutMs: 60_000 });
    await second.stop();
    expect(crashes).toBe(2);
    expect(second.stats.errors).toBe(2);

    const direct = await countDispatchStatsDirectly(t.db);
    expect(await readDispatchStats(t.db)).toEqual(direct);
    const sum = (key: 'claimed' | 'published' | 'delivered' | 'discarded' | 'failed' | 'dead') =>
      direct.reduce((n, row) => n + row[key], 0);
    expect(sum('claimed')).toBe(96);
    expect(sum('published') + sum('dead')).toBe(96);
    expect(sum('dead')).toBeGreaterThan(0);
    expect(sum('delivered')).toBe(48);
    expect(sum('failed')).toBe(24);
    expect(sum('discarded')).toBe(32);
    // Three organizations, two destinations.
    expect(new Set(direct.map((r) => `${r.organizationId}/${r.destination}`)).size).toBe(6);

    // The checkpoints sit on the last event and receipt of the log.
    const checkpoints = new Map((await listCheckpoints(t.db)).map((c) => [c.name, c.cursor]));
    const { rows: last } = await t.db.query<{ tx: string; position: number; rtx: string; rid: number }>(
      `select (select tx::text from event order by tx desc, position desc limit 1) as tx,
              (select position from event order by tx desc, position desc limit 1) as position,
              (select tx::text from publish_receipt order by tx desc, id desc limit 1) as rtx,
              (select id from publish_receipt order by tx desc, id desc limit 1) as rid`,
    );
    expect(checkpoints.get('dispatch_stats')).toEqual({ tx: last[0]!.tx, position: last[0]!.position });
    expect(checkpoints.get('dispatch_stats/receipts')).toEqual({ tx: last[0]!.rtx, position: last[0]!.rid });

    // A projector started again finds nothing left to apply.
    const again = projector({ owner: 'again' });
    expect(await again.catchUp()).toEqual({ events: 0, receipts: 0 });
  });

  it('several replicas: one active at a time through the lease; the next takes over when it stops', async () => {
    const baseline = await totals();
    const a = projector({ owner: 'replica-a', leaseMs: 1_000 });
    const b = projector({ owner: 'replica-b', leaseMs: 1_000 });
    a.start();
    await waitFor(() => a.active, { what: 'a active' });
    b.start();
    const load = runDispatchLoad(t.db, { writers: 4, holders: 1, campaignsPerWriter: 4 });
    await waitFor(async () => (await findLease(t.db, 'projector:dispatch_stats'))?.owner === 'replica-a', {
      what: 'lease held by a',
    });
    await load;
    await waitFor(() => caughtUp([a, b], baseline), { what: 'a caught up', timeoutMs: 60_000 });
    expect(b.active).toBe(false);
    expect(b.stats.events).toBe(0);
    const termA = (await findLease(t.db, 'projector:dispatch_stats'))!.term;

    await a.stop(); // releases the lease: b takes over without waiting for expiry
    await waitFor(() => b.active, { what: 'b takes over' });
    const lease = await findLease(t.db, 'projector:dispatch_stats');
    expect(lease).toMatchObject({ owner: 'replica-b', term: termA + 1 });
    await runDispatchLoad(t.db, { writers: 2, holders: 0, campaignsPerWriter: 3 });
    await waitFor(() => caughtUp([a, b], baseline), { what: 'b caught up', timeoutMs: 60_000 });
    await b.stop();
    expect(await readDispatchStats(t.db)).toEqual(await countDispatchStatsDirectly(t.db));
  });
});
