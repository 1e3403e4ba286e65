/**
 * `herald verify` (invariant 8) on real PostgreSQL: green while writers work (one snapshot for events
 * and rows), and every kind of hand-made corruption reported with the stream, the field and the first
 * event after which row and replay differ. The CLI's exit codes are checked for real.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { verifyStates } from '../../src/projections/verify.js';
import { campaignService, dbTimePlus, lineCampaign, lineDeliveryCompletion } from '../support/campaigns.js';
import { herald } from '../support/cli.js';
import { runDispatchLoad } from '../support/dispatch-load.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

async function completedCampaign() {
  const service = campaignService(t.db);
  const c = await service.create(lineCampaign());
  await service.activate(c.campaignId);
  await service.sendNow(c.campaignId);
  for (const command of lineDeliveryCompletion(c.campaignId, 1)) await service.execute(c.campaignId, command);
  return c.campaignId;
}

describe('verify', () => {
  it('is green on a live run: verified again and again while 8 writers commit', async () => {
    const service = campaignService(t.db);
    const paused = await service.create(lineCampaign({ name: 'paused' }));
    await service.schedule(paused.campaignId, await dbTimePlus(t.db, 3_600_000));
    await service.pause(paused.campaignId);
    await service.delete(paused.campaignId);

    let done = false;
    const load = runDispatchLoad(t.db, { writers: 8, holders: 2, campaignsPerWriter: 8 }).finally(() => {
      done = true;
    });
    let runs = 0;
    while (!done || runs < 2) {
      const report = await verifyStates(t.db, heraldRegistry, { batchSize: 13, compareEvery: 5 });
      expect(report.drifts).toEqual([]);
      expect(report.driftedStreams).toBe(0);
      runs++;
    }
    await load;
    const final = await verifyStates(t.db, heraldRegistry);
    expect(final).toMatchObject({
      streamTypes: [...heraldRegistry.stateModels.keys()],
      streams: 65,
      driftedStreams: 0,
    });
    const { rows } = await t.db.query<{ n: number }>(
      "select count(*)::int as n from event where stream_type = 'campaign'",
    );
    expect(final.events).toBe(rows[0]!.n);

    const cli = await herald(t, ['verify']);
    expect(cli.code).toBe(0);
    expect(cli.stdout).toMatch(/verify campaign(, \w+)*: 65 streams, \d+ events in [\d.]+ m?s .*: no drift/);
  });

  it('reports hand-corrupted rows naming the stream, the field and the first differing event; exits 1', async () => {
    const stuck = await completedCampaign();
    const renamed = await completedCampaign();
    const behind = await completedCampaign();
    const deleted = await completedCampaign();
    await t.db.query("update campaign set status = 'QUEUED', claimed_at = null where id = $1", [stuck]);
    await t.db.query("update campaign set name = 'not what the events say' where id = $1", [renamed]);
    await t.db.query('update campaign set version = 3 where id = $1', [behind]);
    await t.db.query('delete from campaign where id = $1', [deleted]);
    const orphan = randomUUID();
    await t.db.query(
      'insert into campaign select $1::uuid, organization_id, channel, cast_type, audience_id, line_oa_id, name, null, status, start_at, dispatch_deadline, claim_epoch, claimed_at, paused_from, deleted_at, resend_attempt, failure_reason, created_at, status_changed_at, version from campaign where id = $2',
      [orphan, renamed],
    );

    const report = await verifyStates(t.db, heraldRegistry, { batchSize: 7, compareEvery: 3 });
    expect(report.driftedStreams).toBe(5);
    const drift = (id: string) => report.drifts.filter((d) => d.streamId === id);
    expect(drift(stuck)).toEqual([
      expect.objectContaining({
        kind: 'field',
        streamType: 'campaign',
        field: 'status',
        row: 'QUEUED',
        replay: 'COMPLETED',
        // The row still says what the state was after v2 (activated): it missed the claim.
        firstDifferingEvent: expect.objectContaining({ version: 3, type: 'CampaignClaimed' }),
      }),
    ]);
    expect(drift(renamed)).toEqual([
      expect.objectContaining({
        field: 'name',
        row: 'not what the events say',
        replay: 'test campaign',
        firstDifferingEvent: expect.objectContaining({ version: 1, type: 'CampaignCreated' }),
      }),
    ]);
    expect(drift(behind)).toEqual([
      expect.objectContaining({
        field: 'version',
        row: 3,
        replay: 6,
        firstDifferingEvent: expect.objectContaining({ version: 4, type: 'LineDeliveryPlanned' }),
      }),
    ]);
    expect(drift(deleted)).toEqual([expect.objectContaining({ kind: 'missing-row', field: null })]);
    expect(drift(orphan)).toEqual([expect.objectContaining({ kind: 'row-without-events' })]);

    const cli = await herald(t, ['verify']);
    expect(cli.code).toBe(1);
    expect(cli.stdout).toContain(
      `DRIFT campaign/${stuck} field status: row "QUEUED", replay "COMPLETED"; first differing event v3 CampaignClaimed`,
    );
    expect(cli.stdout).toContain(`DRIFT campaign/${renamed} field name`);
    expect(cli.stdout).toMatch(/5 drifted stream\(s\)/);

    const json = await herald(t, ['verify', '--json']);
    expect(json.code).toBe(1);
    const printed = JSON.parse(json.stdout);
    expect(printed.driftedStreams).toBe(5);
    expect(printed.drifts).toContainEqual(
      expect.objectContaining({ streamId: stuck, field: 'status', row: 'QUEUED', replay: 'COMPLETED' }),
    );
    expect((await herald(t, ['verify', '--bogus'])).code).toBe(2);
  });
});
