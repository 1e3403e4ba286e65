/**
 * Stale recovery cannot amplify a backlog: with no worker running, claims age far past the stale
 * window (ten times over) while their messages wait in the queue; because a published message that no
 * consumer has settled keeps its claim alive, nothing is reclaimed, and when the workers come back
 * every campaign is delivered exactly once with one message each. (Under the old rule — claim age
 * alone — every claim was reclaimed and re-published, again and again, and nothing completed.)
 * Seed queue names: serial project.
 */
import amqp from 'amqplib';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { declareQueues } from '../../src/adapters/amqp/amqp-connection.js';
import { countLineDeliveries } from '../../src/adapters/postgres/line-delivery-queries.js';
import { HERALD_QUEUES, LINE_QUEUES } from '../../src/aggregates/campaign/topology.js';
import { waitFor } from '../../src/testing/wait.js';
import { campaignService, lineCampaign } from '../support/campaigns.js';
import { type RunningRoles, startRoles } from '../support/roles.js';
import { createTestDatabase, requireEnv, type TestDatabase } from '../support/services.js';

const CAMPAIGNS = 300;
const STALE_SECONDS = 2;

let t: TestDatabase;
let connection: amqp.ChannelModel;
const running: RunningRoles[] = [];

beforeAll(async () => {
  connection = await amqp.connect(requireEnv('AMQP_URL'));
  connection.on('error', () => {});
  const channel = await connection.createChannel();
  await declareQueues(channel, HERALD_QUEUES, 'quorum');
  await channel.close();
});
afterAll(async () => connection?.close());
beforeEach(async () => {
  t = await createTestDatabase();
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
    });
    running.push(startRoles(config, { relay: true, scanner: true })); // workers are "paused"
    const service = campaignService(t.db);
    const ids: string[] = [];
    for (let i = 0; i < CAMPAIGNS; i++) {
      const c = await service.create(
        lineCampaign({ name: `backlog ${i}`, castType: i % 2 ? 'broadcast' : 'multicast' }),
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
    const deliveries = await countLineDeliveries(t.db, ids);
    expect(ids.filter((id) => deliveries.get(id) !== 1)).toEqual([]);
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
