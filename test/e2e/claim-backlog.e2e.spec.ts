/**
 * Stale recovery cannot amplify a backlog: with no worker running, claims age far past the stale
 * window (ten times over) while their messages wait in the queue; because a published message that no
 * consumer has settled keeps its claim alive, nothing is reclaimed, and when the workers come back
 * every campaign is delivered exactly once with one message each — counted at LINE (the LINE test
 * server: each campaign's planned chunk accepted once, nobody received twice, every request valid).
 * (Under the old rule — claim age alone — every claim was reclaimed and re-published, again and again,
 * and nothing completed.) Seed queue names: serial project.
 */
import amqp from 'amqplib';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { declareQueues } from '../../src/adapters/amqp/amqp-connection.js';
import type { LineSimulator } from '../../src/aggregates/campaign/line/simulator/server.js';
import { HERALD_QUEUES, LINE_QUEUES } from '../../src/aggregates/campaign/topology.js';
import { waitFor } from '../../src/testing/wait.js';
import { campaignService, lineCampaign } from '../support/campaigns.js';
import {
  addSealedAudience,
  type LineWorld,
  lineAcceptancesPerChunk,
  lineEnv,
  lineWorld,
  startTestLineSimulator,
  TEST_LINE_CONTENT,
  testLineSettings,
} from '../support/line.js';
import { type RunningRoles, startRoles } from '../support/roles.js';
import { createTestDatabase, requireEnv, type TestDatabase } from '../support/services.js';

const CAMPAIGNS = 300;
const STALE_SECONDS = 2;
/** Members of each multicast's own audience (users of different campaigns never overlap). */
const MEMBERS = 3;

let t: TestDatabase;
let connection: amqp.ChannelModel;
const running: RunningRoles[] = [];
let simulator: LineSimulator;
let world: LineWorld;

beforeAll(async () => {
  simulator = await startTestLineSimulator();
  connection = await amqp.connect(requireEnv('AMQP_URL'));
  connection.on('error', () => {});
  const channel = await connection.createChannel();
  await declareQueues(channel, HERALD_QUEUES, 'quorum');
  await channel.close();
});
afterAll(async () => {
  await connection?.close();
  await simulator?.close();
});
beforeEach(async () => {
  t = await createTestDatabase();
  simulator.reset();
  world = await lineWorld(t.db, simulator, testLineSettings(simulator));
  const channel = await connection.createChannel();
  for (const queue of LINE_QUEUES) await channel.purgeQueue(queue);
  await channel.close();
});
afterEach(async () => {
  while (running.length) await running.pop()!.stop();
  await t?.drop();
});

describe('a queue backlog longer than the stale window', () => {
  it('drains with every campaign delivered once, nothing reclaimed, one message per campaign', async () => {
    const config = t.config({
      HERALD_CAMPAIGN_STALE_CLAIM_SECONDS: String(STALE_SECONDS),
      HERALD_RELAY_LOCK_SECONDS: '1',
      HERALD_DELIVERY_HEARTBEAT_SECONDS: '1',
      HERALD_SCANNER_POLL_MS: '200',
      HERALD_RELAY_IDLE_POLL_MS: '200',
      HERALD_CONSUMER_RETRY_DELAY_MS: '200',
      // One channel takes every campaign: LINE's per-hour broadcast limit would spread 150 over hours.
      ...lineEnv(simulator, {
        HERALD_LINE_BROADCAST_PER_HOUR: '1000000',
        HERALD_LINE_MULTICAST_PER_SECOND: '1000',
      }),
    });
    running.push(startRoles(config, { relay: true, scanner: true })); // workers are "paused"
    const service = campaignService(t.db);
    const ids: string[] = [];
    for (let i = 0; i < CAMPAIGNS; i++) {
      const multicast = i % 2 === 0;
      if (multicast) {
        await addSealedAudience(world.directory, {
          audienceId: `aud-${i}`,
          organizationId: world.organizationId,
          members: MEMBERS,
          from: i * MEMBERS,
        });
      }
      const c = await service.create(
        lineCampaign({
          name: `backlog ${i}`,
          castType: multicast ? 'multicast' : 'broadcast',
          audienceId: multicast ? `aud-${i}` : null,
          ...TEST_LINE_CONTENT,
        }),
      );
      await service.activate(c.campaignId);
      ids.push(c.campaignId);
    }
    await waitFor(
      async () =>
        (await t.db.query<{ n: number }>("select count(*)::int as n from outbox where status = 'sent'"))
          .rows[0]!.n === CAMPAIGNS,
      { what: 'every claim published', timeoutMs: 60_000 },
    );
    // Ten stale windows pass (by the database clock) while the scanner keeps sweeping.
    await waitFor(
      async () =>
        (
          await t.db.query<{ ok: boolean }>(
            `select min(now() - claimed_at) > make_interval(secs => $1) as ok from campaign where status = 'DISPATCHING'`,
            [STALE_SECONDS * 10],
          )
        ).rows[0]!.ok,
      { what: 'ten stale windows', timeoutMs: 60_000, intervalMs: 250 },
    );
    const reclaimsDuringBacklog = (
      await t.db.query<{ n: number }>("select count(*)::int as n from event where type = 'CampaignReclaimed'")
    ).rows[0]!.n;
    expect(reclaimsDuringBacklog).toBe(0);

    running.push(startRoles(config, { worker: true })); // workers resume
    await waitFor(
      async () =>
        (
          await t.db.query<{ n: number }>(
            "select count(*)::int as n from campaign where status = 'COMPLETED'",
          )
        ).rows[0]!.n === CAMPAIGNS,
      { what: 'every campaign COMPLETED', timeoutMs: 90_000 },
    );
    // At LINE: every campaign's one planned chunk accepted exactly once, and no other call accepted.
    const requests = simulator.stats(world.channelId).requests;
    const notOnce: string[] = [];
    for (const id of ids) {
      const accepted = lineAcceptancesPerChunk(requests, await service.get(id));
      if (JSON.stringify(accepted) !== '[1]') notOnce.push(`${id}: ${JSON.stringify(accepted)}`);
    }
    expect(notOnce).toEqual([]);
    expect(simulator.stats(world.channelId).accepted).toBe(CAMPAIGNS);
    expect(simulator.distinctRecipients(world.channelId)).toBe((CAMPAIGNS / 2) * MEMBERS);
    expect(simulator.usersReceivedMoreThanOnce(world.channelId)).toEqual([]);
    expect(simulator.violationCount).toBe(0);
    const { rows } = await t.db.query<{ messages: number; reclaims: number; discarded: number }>(
      `select (select count(*)::int from outbox) as messages,
              (select count(*)::int from event where type = 'CampaignReclaimed') as reclaims,
              (select count(*)::int from event where type = 'LineDeliveryDiscarded') as discarded`,
    );
    expect(rows[0]!.reclaims).toBe(0);
    expect(rows[0]!.messages).toBeLessThanOrEqual(Math.ceil(CAMPAIGNS * 1.03)); // at most a few percent above
    expect(rows[0]!.discarded).toBe(0);
  });
});
