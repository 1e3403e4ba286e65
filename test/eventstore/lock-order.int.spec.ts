/**
 * One lock order for every writer of an existing stream: the state row (FOR UPDATE), then the
 * event's unique index entry, then the row update. The reaper locks rows first (FOR UPDATE SKIP
 * LOCKED) and then appends; a worker's completion (handleInTransaction) used to append first and
 * update the row after, so a reclaim and a completion of the same campaign could deadlock. This
 * test forces exactly that interleaving.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockStaleClaims } from '../../src/adapters/postgres/campaign-queries.js';
import { campaignAggregate } from '../../src/aggregates/campaign/descriptor.js';
import type { CampaignState } from '../../src/domain/campaign.js';
import { IllegalStateError } from '../../src/errors.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { waitFor } from '../../src/testing/wait.js';
import { campaignService, lineCampaign, lineDeliveryCompletion } from '../support/campaigns.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const deadlocks = async () =>
  (
    await t.db.query<{ deadlocks: number }>(
      'select deadlocks::int from pg_stat_database where datname = current_database()',
    )
  ).rows[0]!.deadlocks;

const waitingLocks = async () =>
  (
    await t.db.query<{ n: number }>(
      `select count(*)::int as n from pg_locks l join pg_stat_activity a on a.pid = l.pid
        where not l.granted and a.datname = current_database()`,
    )
  ).rows[0]!.n;

describe('lock order (reaper vs worker completion)', () => {
  it('a reclaim holding the row lock and a completion racing it never deadlock', async () => {
    const service = campaignService(t.db);
    const c = await service.create(lineCampaign());
    await service.activate(c.campaignId);
    const claimed = await service.sendNow(c.campaignId);
    const id = c.campaignId;
    // Its LINE delivery is done (plan and chunk recorded): only the reclaim can refuse the completion.
    const [plan, chunk] = lineDeliveryCompletion(id, claimed.claimEpoch);
    for (const step of [plan!, chunk!]) await service.execute(id, step);
    await waitFor(
      async () =>
        (
          await t.db.query<{ ok: boolean }>(
            "select now() - claimed_at > interval '50 ms' as ok from campaign where id = $1",
            [id],
          )
        ).rows[0]!.ok,
      { what: 'the claim to age' },
    );
    const { version } = (await campaignAggregate.store.load(t.db, id))!;
    const before = await deadlocks();
    const handler = new CommandHandler({ db: t.db });
    const campaigns = handler.for(campaignAggregate);

    let releaseReaper!: () => void;
    const reaperMayAppend = new Promise<void>((resolve) => (releaseReaper = resolve));
    let reaperLocked!: () => void;
    const locked = new Promise<void>((resolve) => (reaperLocked = resolve));
    // The reaper: lock the row, wait, then append the reclaim.
    const reaper = t.db.transaction(
      async (tx) => {
        const rows = await lockStaleClaims(tx, [{ streamId: id, version }], 10);
        expect(rows).toHaveLength(1);
        reaperLocked();
        await reaperMayAppend;
        return campaigns.handleBatchInTransaction(
          tx,
          rows.map((r) => ({ streamId: id, state: r.state as CampaignState, version: r.version })),
          (stream, now) => ({ type: 'ReclaimCampaign', campaignId: stream.streamId, now, staleAfterMs: 10 }),
        );
      },
      { retryOnConflict: false },
    );
    await locked;
    // The worker: completes the claim it was given, while the reaper holds the row.
    const worker = t.db.transaction(
      (tx) =>
        campaigns.handleInTransaction(tx, id, (now) => ({
          type: 'CompleteCampaign',
          campaignId: id,
          epoch: claimed.claimEpoch,
          now,
        })),
      { retryOnConflict: false },
    );
    const workerSettled = worker.then(
      () => 'completed',
      (error: unknown) => error,
    );
    await waitFor(async () => (await waitingLocks()) > 0, { what: 'the worker to wait for a lock' });
    releaseReaper();

    const reclaim = await reaper; // a deadlock would abort one of the two (40P01)
    expect(reclaim.results).toHaveLength(1);
    const outcome = await workerSettled;
    expect(outcome).toBeInstanceOf(IllegalStateError); // it saw the reclaim: its claim is gone
    expect((outcome as Error).message).toMatch(/status QUEUED/);
    expect(await deadlocks()).toBe(before);
    expect((await service.get(id)).status).toBe('QUEUED');
  });
});
