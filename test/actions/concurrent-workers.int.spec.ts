/**
 * Three workers over 3,000 due actions (seed 002's replicas claiming with FOR UPDATE SKIP LOCKED,
 * invariant 7): every action is executed exactly once — one ActionExecuted, one action_execute
 * message — however the claims interleave, and the work is shared.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { actionsHarness, executeMessages, normalAction } from '../support/actions.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const ACTIONS = 3_000;

describe('three workers', () => {
  it('execute each of 3,000 due actions exactly once', async () => {
    const h = actionsHarness(t, {
      // A stale window far beyond the test, so every claim below is a first claim: with the fast
      // harness's 2 s a loaded machine lets a heartbeat slip and a claim is (rightly) taken over.
      env: {
        HERALD_ACTIONS_BATCH_SIZE: '100',
        HERALD_ACTIONS_CONCURRENCY: '4',
        HERALD_ACTIONS_STALE_SECONDS: '600',
        HERALD_ACTIONS_HEARTBEAT_SECONDS: '60',
      },
    });
    const ids: string[] = [];
    for (let i = 0; i < ACTIONS; i += 100) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(100, ACTIONS - i) }, () =>
          h.service.schedule(normalAction({ delaySeconds: 0 })),
        ),
      );
      ids.push(...batch.map((a) => a.actionId));
    }
    const workers = [h.sweeper(), h.sweeper(), h.sweeper()];
    await Promise.all(workers.map((w) => h.drain(w)));

    const { rows } = await t.db.query<{ status: string; n: number }>(
      'select status, count(*)::int as n from scheduled_action group by status',
    );
    expect(rows).toEqual([{ status: 'done', n: ACTIONS }]);
    const executed = await t.db.query<{ stream_id: string; n: number }>(
      `select stream_id, count(*)::int as n from event where type = 'ActionExecuted' group by stream_id having count(*) <> 1`,
    );
    expect(executed.rows).toEqual([]);
    const total = await t.db.query<{ n: number }>(
      `select count(*)::int as n from event where type = 'ActionExecuted'`,
    );
    expect(total.rows[0]!.n).toBe(ACTIONS);
    const messages = await executeMessages(t);
    expect(messages.size).toBe(ACTIONS);
    expect([...messages.values()].every((n) => n === 1)).toBe(true);
    // Every action was claimed once (no double claim under SKIP LOCKED), and more than one worker took part.
    const claims = await t.db.query<{ n: number }>(
      `select count(*)::int as n from event where type = 'ActionClaimed'`,
    );
    expect(claims.rows[0]!.n).toBe(ACTIONS);
    const shares = workers.map((w) => w.claim.stats.claimed ?? 0);
    expect(shares.reduce((a, b) => a + b, 0)).toBe(ACTIONS);
    expect(shares.filter((n) => n > 0).length).toBeGreaterThan(1);
  });
});
