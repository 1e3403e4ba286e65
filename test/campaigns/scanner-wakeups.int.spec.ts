/**
 * The scanner's wake-ups (they cut latency only, invariant 7): a campaign scheduled while the scanner
 * sleeps on a long poll is claimed at its due time because the service's NOTIFY (after commit) wakes
 * the scanner, which re-arms its timer at the new earliest due time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoalescingNotifier, PgWakeupListener } from '../../src/adapters/postgres/notifications.js';
import { CampaignService } from '../../src/aggregates/campaign/service.js';
import { campaignSweeper } from '../../src/aggregates/campaign/sweepers.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import { channels } from '../../src/ports/wakeups.js';
import { Scanner } from '../../src/scanner/scanner.js';
import { waitFor } from '../../src/testing/wait.js';
import { dbTimePlus, lineCampaign } from '../support/campaigns.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

describe('scanner wake-ups', () => {
  it('a campaign scheduled during a long poll is claimed at its due time, woken by NOTIFY', async () => {
    const notifier = new CoalescingNotifier(t.db, 20);
    const listener = new PgWakeupListener({ url: t.url, schema: t.schema });
    const handler = new CommandHandler({ db: t.db, wakeups: notifier, wakeHorizonMs: 60_000 });
    const service = new CampaignService({ db: t.db, handler });
    const scanner = new Scanner({
      sweepers: [campaignSweeper({ db: t.db, handler, logger: silentLogger })],
      pollIntervalMs: 600_000, // the fallback poll never fires during this test
      logger: silentLogger,
    });
    try {
      await listener.subscribe(channels.due(t.schema), () => scanner.wake());
      scanner.start();
      await waitFor(() => scanner.stats.sleeps > 0, { what: 'the scanner to fall asleep' });
      const passesBefore = scanner.stats.passes;
      expect(scanner.stats.sleeps).toBe(1);

      const c = await service.create(lineCampaign({ name: 'woken' }));
      const startAt = await dbTimePlus(t.db, 400);
      await service.schedule(c.campaignId, startAt);
      await waitFor(async () => (await service.get(c.campaignId)).status === 'DISPATCHING', {
        what: 'claim at the due time',
        timeoutMs: 10_000,
      });
      expect(scanner.stats.passes).toBeGreaterThan(passesBefore);
      const claimed = await service.get(c.campaignId);
      expect(Date.parse(claimed.claimedAt!)).toBeGreaterThanOrEqual(startAt.getTime());
    } finally {
      await scanner.stop();
      await listener.close();
      notifier.close();
    }
  });

  it('without a wake-up the same campaign waits for the poll (the test above is not passing by accident)', async () => {
    const handler = new CommandHandler({ db: t.db });
    const service = new CampaignService({ db: t.db, handler });
    const scanner = new Scanner({
      sweepers: [campaignSweeper({ db: t.db, handler, logger: silentLogger })],
      pollIntervalMs: 600_000,
      logger: silentLogger,
    });
    try {
      scanner.start();
      await waitFor(() => scanner.stats.sleeps > 0, { what: 'the scanner to fall asleep' });
      const c = await service.create(lineCampaign({ name: 'unwoken' }));
      const startAt = await dbTimePlus(t.db, 200);
      await service.schedule(c.campaignId, startAt);
      await waitFor(
        async () =>
          (
            await t.db.query<{ past: boolean }>(
              "select now() > $1::timestamptz + interval '1 second' as past",
              [startAt],
            )
          ).rows[0]!.past,
        { what: 'a second past the due time' },
      );
      expect((await service.get(c.campaignId)).status).toBe('SCHEDULED');
    } finally {
      await scanner.stop();
    }
  });
});
