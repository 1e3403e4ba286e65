/**
 * An sms campaign without an SMS definition (a bare draft the generic CampaignService can create; SMS
 * campaigns with recipients come from SmsCampaignService, test/sms/): it may be a draft, but activating,
 * scheduling or sending it is refused with a ValidationError naming the channel (it has no recipients
 * to dispatch), and one already cancelling (written before this rule) is settled by the sweeper — it was
 * never charged — instead of waiting for ever.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readStream } from '../../src/adapters/postgres/event-queries.js';
import { campaignAggregate } from '../../src/aggregates/campaign/descriptor.js';
import { campaignSweeper } from '../../src/aggregates/campaign/sweepers.js';
import { campaignDecider } from '../../src/domain/campaign.js';
import { ValidationError } from '../../src/errors.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import { campaignService, dbTimePlus } from '../support/campaigns.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const sms = { mode: 'draft' as const, organizationId: 'org-1', channel: 'sms' as const, name: 'sms promo' };

describe('sms campaigns without an SMS definition (no dispatch plan)', () => {
  it('activate, schedule and send now are refused naming the channel; nothing is written', async () => {
    const service = campaignService(t.db);
    const c = await service.create(sms);
    const attempts: [string, () => Promise<unknown>][] = [
      ['activated', () => service.activate(c.campaignId)],
      ['scheduled', async () => service.schedule(c.campaignId, await dbTimePlus(t.db, 60_000))],
      ['sent', () => service.sendNow(c.campaignId)],
    ];
    for (const [verb, attempt] of attempts) {
      const error = await attempt().then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).message).toMatch(
        new RegExp(`cannot be ${verb}: channel 'sms' has no dispatch plan`),
      );
      expect((error as ValidationError).details).toMatchObject({ field: 'channel', channel: 'sms' });
    }
    expect((await service.get(c.campaignId)).status).toBe('DRAFT');
    expect((await readStream(t.db, 'campaign', c.campaignId)).map((e) => e.type)).toEqual([
      'CampaignCreated',
    ]);
  });

  it('an sms campaign left in CANCELLING is settled by the sweeper (nothing to refund yet)', async () => {
    // Written as an older Herald could (the pure decider allows an sms campaign to be scheduled).
    const legacy = new CommandHandler({ db: t.db }).for({ ...campaignAggregate, decider: campaignDecider });
    const id = crypto.randomUUID();
    await legacy.handle(id, (now) => ({ type: 'CreateCampaign', campaignId: id, now, ...sms }));
    await legacy.handle(id, (now) => ({ type: 'ActivateCampaign', campaignId: id, now }));
    await legacy.handle(id, (now) => ({
      type: 'CancelCampaign',
      campaignId: id,
      now,
      reason: 'changed our mind',
    }));
    const service = campaignService(t.db);
    expect((await service.get(id)).status).toBe('CANCELLING');

    const sweeper = campaignSweeper({
      db: t.db,
      handler: new CommandHandler({ db: t.db }),
      logger: silentLogger,
    });
    expect(await sweeper.sweep()).toEqual({ processed: 1, more: true });
    expect((await service.get(id)).status).toBe('CANCELLED');
    expect(sweeper.stats).toMatchObject({ cancelled: 1 });
    expect(await sweeper.sweep()).toEqual({ processed: 0, more: false });
  });
});
