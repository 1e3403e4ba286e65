/**
 * Stale recovery of campaign claims (src/scanner/sweeper.ts, src/aggregates/campaign/sweepers.ts):
 * the SQL and the decider agree on "stale" to the microsecond, a claim's liveness rests on its
 * message (pending or published-but-unsettled keeps it alive; a dead-lettered or lost one does not),
 * and reclaims are bounded per pass.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findStaleClaims, loadCampaign } from '../../src/adapters/postgres/campaign-queries.js';
import { claimMessageId } from '../../src/aggregates/campaign/descriptor.js';
import { campaignSweeper } from '../../src/aggregates/campaign/sweepers.js';
import { campaignDecider } from '../../src/domain/campaign.js';
import { CommandHandler, databaseNow } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import { waitFor } from '../../src/testing/wait.js';
import { campaignService, deadLetterClaimMessage, lineCampaign } from '../support/campaigns.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeEach(async () => {
  t = await createTestDatabase();
});
afterEach(async () => t?.drop());

const STALE_MS = 20_000;

async function dispatching(count: number): Promise<string[]> {
  const service = campaignService(t.db);
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const c = await service.create(lineCampaign({ name: `claim ${i}` }));
    await service.activate(c.campaignId);
    await service.sendNow(c.campaignId);
    ids.push(c.campaignId);
  }
  return ids;
}

function sweeper(
  options: { staleClaimMs?: number; messageLostAfterMs?: number; maxReclaimsPerPass?: number } = {},
) {
  return campaignSweeper({
    db: t.db,
    handler: new CommandHandler({ db: t.db }),
    logger: silentLogger,
    staleClaimMs: 150,
    ...options,
  });
}

const staleFor = async (ids: string[], ms: number) =>
  waitFor(
    async () => {
      const { rows } = await t.db.query<{ n: number }>(
        `select count(*)::int as n from campaign where id = any($1) and claimed_at < now() - make_interval(secs => $2 / 1000.0)`,
        [ids, ms],
      );
      return rows[0]!.n === ids.length;
    },
    { what: `claims older than ${ms} ms` },
  );

describe('campaign stale recovery', () => {
  it('the reaper query and the decider agree at the threshold, to the microsecond', async () => {
    // Claim times around now - 20 s, in microseconds: the query must select exactly the claims the
    // decider's ReclaimCampaign accepts (both read the same now(): one transaction).
    const offsetsUs = [-2000, -1001, -1000, -999, -501, -1, 0, 1, 499, 999, 1000, 1001, 2500];
    const ids = await dispatching(offsetsUs.length);
    await t.db.transaction(async (tx) => {
      for (const [index, offset] of offsetsUs.entries()) {
        await tx.query(
          `update campaign set claimed_at = date_trunc('milliseconds', now()) - make_interval(secs => $2 / 1000.0)
                                             + make_interval(secs => $3 / 1000000.0)
            where id = $1`,
          [ids[index], STALE_MS, offset],
        );
      }
      const found = new Set((await findStaleClaims(tx, STALE_MS, 100)).map((c) => c.state.campaignId));
      const now = await databaseNow(tx);
      const accepted = new Set<string>();
      for (const id of ids) {
        const loaded = await loadCampaign(tx, id);
        try {
          campaignDecider.decide(
            { type: 'ReclaimCampaign', campaignId: id, now, staleAfterMs: STALE_MS },
            loaded!.state,
          );
          accepted.add(id);
        } catch {
          // not stale for the decider
        }
      }
      expect([...found].sort()).toEqual([...accepted].sort());
      // Sanity: the boundary really is crossed inside the sample (some stale, some not).
      expect(found.size).toBeGreaterThan(0);
      expect(found.size).toBeLessThan(ids.length);
    });
  });

  it('a claim whose message is pending in the outbox, or published and unsettled, is never presumed dead', async () => {
    const [pending, published, deadLettered, lost] = await dispatching(4);
    // published: the relay marked it sent just now; no consumer settled it yet (it waits in a queue)
    await t.db.query(`update outbox set status = 'sent', sent_at = now() where message_id = $1`, [
      claimMessageId(published!, 1),
    ]);
    await deadLetterClaimMessage(t.db, deadLettered!);
    // lost: published long ago (past the lost-message horizon) and never settled
    await t.db.query(
      `update outbox set status = 'sent', sent_at = now() - interval '2 hours' where message_id = $1`,
      [claimMessageId(lost!, 1)],
    );
    await staleFor([pending!, published!, deadLettered!, lost!], 300);
    const s = sweeper({ messageLostAfterMs: 3_600_000 });
    expect(await s.recover.sweep()).toEqual({ processed: 2, more: false });
    const service = campaignService(t.db);
    expect((await service.get(pending!)).status).toBe('DISPATCHING');
    expect((await service.get(published!)).status).toBe('DISPATCHING');
    expect((await service.get(deadLettered!)).status).toBe('QUEUED');
    expect((await service.get(lost!)).status).toBe('QUEUED');
    expect(s.recover.stats).toMatchObject({ reclaimed: 2, inFlight: 2 });
    // The live ones stay alive however long they wait.
    for (let i = 0; i < 3; i++) expect((await s.recover.sweep()).processed).toBe(0);
  });

  it('reclaims at most maxReclaimsPerPass per scanner pass', async () => {
    const ids = await dispatching(7);
    for (const id of ids) await deadLetterClaimMessage(t.db, id);
    await staleFor(ids, 300);
    const s = sweeper({ maxReclaimsPerPass: 3 });
    s.beginPass!();
    let reclaimed = 0;
    for (let i = 0; i < 5; i++) reclaimed += (await s.recover.sweep()).processed;
    expect(reclaimed).toBe(3);
    s.beginPass!();
    for (let i = 0; i < 5; i++) reclaimed += (await s.recover.sweep()).processed;
    expect(reclaimed).toBe(6);
  });
});
