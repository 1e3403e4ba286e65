/**
 * The per-minute tick is a wake-up: a tick written by the tick (event + outbox row), published by the
 * relay to process_campaign and consumed by a running scanner ends the scanner's sleep, so a campaign
 * that became due without any NOTIFY is claimed at once rather than at the next poll. Fixed seed queue
 * name (process_campaign): serial project.
 */
import { Writable } from 'node:stream';
import amqp from 'amqplib';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { campaignAggregate } from '../../src/aggregates/campaign/descriptor.js';
import { CampaignTick } from '../../src/aggregates/campaign/tick.js';
import { PROCESS_CAMPAIGN_QUEUE } from '../../src/aggregates/campaign/topology.js';
import { CommandHandler, databaseNow } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import { waitFor } from '../../src/testing/wait.js';
import { campaignService, lineCampaign } from '../support/campaigns.js';
import { TEST_LINE_CONTENT } from '../support/line.js';
import { runTestRole } from '../support/roles.js';
import { createTestDatabase, requireEnv, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
let connection: amqp.ChannelModel;
const controller = { current: new AbortController() };
let running: Promise<void>[] = [];

beforeAll(async () => {
  connection = await amqp.connect(requireEnv('AMQP_URL'));
  connection.on('error', () => {});
});
afterAll(async () => connection?.close());
beforeEach(async () => {
  t = await createTestDatabase();
  const channel = await connection.createChannel();
  await channel.assertQueue(PROCESS_CAMPAIGN_QUEUE, {
    durable: true,
    arguments: { 'x-queue-type': 'quorum' },
  });
  await channel.purgeQueue(PROCESS_CAMPAIGN_QUEUE); // ticks of earlier runs belong to other databases
  await channel.close();
  controller.current = new AbortController();
  running = [];
});
afterEach(async () => {
  controller.current.abort();
  await Promise.all(running);
  await t?.drop();
});

describe('tick → process_campaign → scanner', () => {
  it('a tick through the broker wakes a sleeping scanner, which claims a campaign no NOTIFY announced', async () => {
    // The scanner's leased SMS pollers wake it to renew their leases every third of the TTL: a long TTL
    // keeps those renewals out of the minute this test needs the scanner to sleep.
    const config = t.config({
      HERALD_SCANNER_POLL_MS: '60000',
      HERALD_RELAY_IDLE_POLL_MS: '200',
      HERALD_SMS_LEASE_TTL_SECONDS: '600',
    });
    // Commands without wake-ups: nothing but the tick can end the scanner's minute-long sleep.
    const quiet = new CommandHandler({ db: t.db }).for(campaignAggregate);
    const service = campaignService(t.db);
    const queued = async (name: string) => {
      const c = await service.create(lineCampaign({ name, ...TEST_LINE_CONTENT }));
      await quiet.handle(c.campaignId, (now) => ({
        type: 'ActivateCampaign',
        campaignId: c.campaignId,
        now,
      }));
      return c.campaignId;
    };
    // The scanner's debug lines, to know when it went to sleep for the poll after its first pass.
    const sleeps: number[] = [];
    const lines = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) {
          const entry = JSON.parse(line) as { sleepMs?: number };
          if (entry.sleepMs !== undefined) sleeps.push(entry.sleepMs);
        }
        done();
      },
    });
    const first = await queued('claimed by the first pass');
    running.push(
      runTestRole('scanner', config, controller.current.signal, { logger: pino({ level: 'debug' }, lines) }),
    );
    running.push(runTestRole('relay', config, controller.current.signal));
    await waitFor(async () => (await service.get(first)).status === 'DISPATCHING', {
      what: 'the first pass',
    });
    // Asleep for the 60 s poll: a campaign queued from now on is seen only when something wakes it.
    await waitFor(() => sleeps.some((ms) => ms > 30_000), { what: 'the scanner asleep for its poll' });

    const second = await queued('claimed after the tick');
    const tick = new CampaignTick({ db: t.db, lock: null, logger: silentLogger, periodMs: 1_000 });
    const sentAt = Date.now();
    expect(await tick.tickOnce(await databaseNow(t.db))).toBe('published');
    await waitFor(async () => (await service.get(second)).status === 'DISPATCHING', {
      what: 'the claim woken by the tick',
      timeoutMs: 15_000,
    });
    expect(Date.now() - sentAt).toBeLessThan(15_000); // far below the 60 s poll
    const { rows } = await t.db.query<{ status: string }>(
      `select i.status from inbox i where i.consumer = 'scanner-tick'`,
    );
    expect(rows).toEqual([{ status: 'processed' }]);
  });
});
