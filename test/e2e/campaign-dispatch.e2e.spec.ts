/**
 * Seed 000 end to end on real PostgreSQL and RabbitMQ: scanner → outbox → relay → LINE queue →
 * delivery worker → LINE (the LINE test server over HTTP, through the production SDK adapter; it checks
 * every request against LINE's OpenAPI document and counts every recipient). "Delivered exactly once"
 * is counted where it matters, at LINE: each of the campaign's planned retry keys accepted once, nobody
 * received twice. These tests use the seed's fixed queue names, so they run in the serial project
 * (never beside another file consuming those queues).
 */
import amqp from 'amqplib';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { declareQueues } from '../../src/adapters/amqp/amqp-connection.js';
import { lineMessagingApi } from '../../src/adapters/line/messaging-api.js';
import { lineDeliveryHandler, lineDispatchPayload } from '../../src/aggregates/campaign/line/delivery.js';
import { LineRateLimiter } from '../../src/aggregates/campaign/line/rate-limit.js';
import type { LineSimulator } from '../../src/aggregates/campaign/line/simulator/server.js';
import { campaignSweeper } from '../../src/aggregates/campaign/sweepers.js';
import {
  HERALD_QUEUES,
  LINE_DELIVERY_CONSUMER,
  LINE_QUEUES,
} from '../../src/aggregates/campaign/topology.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import { Scanner } from '../../src/scanner/scanner.js';
import { waitFor } from '../../src/testing/wait.js';
import { type Consumer, consume } from '../../src/worker/consume.js';
import { campaignService, dbTimePlus, lineCampaign } from '../support/campaigns.js';
import {
  type LineWorld,
  lineAcceptancesPerChunk,
  lineEnv,
  lineWorld,
  plannedLineKeys,
  startTestLineSimulator,
  TEST_LINE_CONTENT,
  testLineSettings,
} from '../support/line.js';
import { type RunningRoles, startRoles } from '../support/roles.js';
import { createTestDatabase, requireEnv, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
let connection: amqp.ChannelModel;
let channel: amqp.Channel;
let simulator: LineSimulator;
let world: LineWorld;
const stoppers: (() => Promise<void>)[] = [];

/** Sealed audiences of oa-1 (disjoint user ids, so nobody is a member of two). */
const AUDIENCES = { 'aud-1': 700, 'aud-2': { members: 300, from: 10_000 } };

beforeAll(async () => {
  connection = await amqp.connect(requireEnv('AMQP_URL'));
  connection.on('error', () => {});
  channel = await connection.createChannel();
  channel.on('error', () => {});
  await declareQueues(channel, HERALD_QUEUES, 'quorum');
  simulator = await startTestLineSimulator();
});
afterAll(async () => {
  await connection?.close();
  await simulator?.close();
});
beforeEach(async () => {
  t = await createTestDatabase();
  // Start from empty seed queues: messages of an earlier run belong to a database that is gone.
  for (const queue of LINE_QUEUES) await channel.purgeQueue(queue);
  simulator.reset();
  world = await lineWorld(t.db, simulator, testLineSettings(simulator), { audiences: AUDIENCES });
});
afterEach(async () => {
  simulator.beforeRespond(null);
  while (stoppers.length) await stoppers.pop()!();
  await t?.drop();
});

const fast = {
  HERALD_RELAY_IDLE_POLL_MS: '200',
  HERALD_CONSUMER_RETRY_DELAY_MS: '200',
  HERALD_SCANNER_POLL_MS: '200',
};

function track(roles: RunningRoles): RunningRoles {
  stoppers.push(() => roles.stop());
  return roles;
}

/** The LINE delivery consumer on both LINE queues, wired as the worker role wires it (src/aggregates/campaign/index.ts). */
async function startWorker(options: { heartbeatMs?: number; lineTimeoutMs?: number } = {}) {
  const settings = testLineSettings(simulator);
  const handle = lineDeliveryHandler({
    handler: new CommandHandler({ db: t.db }),
    logger: silentLogger,
    messaging: lineMessagingApi({
      baseUrl: simulator.url,
      timeoutMs: options.lineTimeoutMs ?? settings.requestTimeoutMs,
    }),
    directory: world.directory,
    rateLimiter: new LineRateLimiter({ limits: settings.rateLimits }),
    settings,
    ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
  });
  const consumers: Consumer[] = await Promise.all(
    LINE_QUEUES.map((queue) =>
      consume({ db: t.db, amqp: requireEnv('AMQP_URL'), logger: silentLogger }, queue, handle, {
        consumer: LINE_DELIVERY_CONSUMER,
        parse: (payload) => lineDispatchPayload.parse(payload),
        prefetch: settings.deliveryConcurrency,
        retryDelayMs: 200,
      }),
    ),
  );
  stoppers.push(async () => {
    await Promise.all(consumers.map((c) => c.stop({ timeoutMs: 5_000 })));
  });
  return consumers;
}

/** How often LINE accepted each of the campaign's planned chunks ([1, 1, …]: delivered exactly once). */
async function acceptances(id: string): Promise<number[]> {
  const campaign = await campaignService(t.db).get(id);
  return lineAcceptancesPerChunk(simulator.stats(world.channelId).requests, campaign);
}

const once = (chunks: number) => Array.from({ length: chunks }, () => 1);

async function outboxRows(id: string) {
  const { rows } = await t.db.query<{ message_id: string; status: string; payload: { epoch: number } }>(
    `select o.message_id, o.status, o.payload from outbox o join event e on e.position = o.event_position
      where e.stream_id = $1 order by o.id`,
    [id],
  );
  return rows;
}

describe('campaign dispatch end to end', () => {
  it('scheduled campaigns are claimed at their time, relayed and delivered exactly once', async () => {
    const service = campaignService(t.db);
    track(
      startRoles(t.config({ ...fast, ...lineEnv(simulator) }), { relay: true, scanner: true, worker: true }),
    );
    const ids: string[] = [];
    for (const castType of ['broadcast', 'multicast'] as const) {
      const c = await service.create(lineCampaign({ castType, ...TEST_LINE_CONTENT }));
      // Taken per campaign: on a loaded machine one start time can pass before the next schedule.
      await service.schedule(c.campaignId, await dbTimePlus(t.db, 500));
      ids.push(c.campaignId);
    }
    const now = await service.create(
      lineCampaign({ name: 'send now', audienceId: 'aud-2', ...TEST_LINE_CONTENT }),
    );
    await service.sendNow(now.campaignId); // straight from DRAFT: the running scanner cannot race it
    ids.push(now.campaignId);

    await waitFor(
      async () =>
        (await Promise.all(ids.map((id) => service.get(id)))).every((c) => c.status === 'COMPLETED'),
      {
        what: 'all campaigns COMPLETED',
      },
    );
    // At LINE: a broadcast (one call), 700 members in two chunks, 300 in one; each chunk accepted once.
    expect(await Promise.all(ids.map(acceptances))).toEqual([once(1), once(2), once(1)]);
    const stats = simulator.stats(world.channelId);
    expect(stats.requests.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(stats.distinctRecipients).toBe(1_000);
    expect(stats.usersReceivedMoreThanOnce).toBe(0);
    expect(simulator.violationCount).toBe(0);
    const history = (await service.history(ids[0]!)).map((e) => e.type);
    expect(history).toEqual([
      'CampaignCreated',
      'CampaignScheduled',
      'CampaignClaimed',
      'LineDeliveryPlanned',
      'LineChunkAccepted',
      'CampaignCompleted',
    ]);
  });

  it('reaper: a late message carrying the old epoch is discarded; the recipient gets exactly one delivery', async () => {
    const service = campaignService(t.db);
    const relay = track(startRoles(t.config(fast), { relay: true }));
    const c = await service.create(lineCampaign(TEST_LINE_CONTENT));
    await service.activate(c.campaignId);
    await service.sendNow(c.campaignId); // epoch 1; no worker takes it (the message is presumed lost)
    await waitFor(async () => (await outboxRows(c.campaignId))[0]?.status === 'sent', {
      what: 'epoch 1 message sent',
    });

    const sweeper = campaignSweeper({
      db: t.db,
      handler: new CommandHandler({ db: t.db }),
      logger: silentLogger,
      staleClaimMs: 300,
      messageLostAfterMs: 300, // published, and no consumer settled it for this long
    });
    await waitFor(async () => (await sweeper.recover.sweep()).processed === 1, { what: 'reclaim' });
    await sweeper.claim.sweep(); // new claim, new epoch, second message
    const reclaimed = await service.get(c.campaignId);
    expect(reclaimed.status).toBe('DISPATCHING');
    expect(reclaimed.claimEpoch).toBe(3);
    await waitFor(async () => (await outboxRows(c.campaignId)).every((r) => r.status === 'sent'), {
      what: 'both messages sent',
    });
    await relay.stop();
    stoppers.pop();

    await startWorker(); // both messages are waiting in the queue: epoch 1 first, then epoch 3
    await waitFor(async () => (await service.get(c.campaignId)).status === 'COMPLETED', {
      what: 'COMPLETED',
    });
    const [late, live] = await outboxRows(c.campaignId);
    await waitFor(
      async () => {
        const { rows } = await t.db.query<{ n: number }>('select count(*)::int as n from inbox');
        return rows[0]!.n === 2;
      },
      { what: 'both messages recorded in the inbox' },
    );
    const { rows: inbox } = await t.db.query<{ message_id: string; status: string; error: string | null }>(
      'select message_id, status, error from inbox',
    );
    // The worker may take the two at once: the late one is refused either for its stale epoch (it came
    // first) or because the live one already completed the campaign — never delivered.
    expect(inbox).toEqual(
      expect.arrayContaining([
        {
          message_id: late!.message_id,
          status: 'discarded',
          error: expect.stringMatching(/stale epoch 1|campaign is COMPLETED, not DISPATCHING/),
        },
        { message_id: live!.message_id, status: 'processed', error: null },
      ]),
    );
    // LINE saw the delivery planned under the live epoch only, each chunk accepted once.
    const done = await service.get(c.campaignId);
    expect(done.line?.plan?.epoch).toBe(3);
    expect(await acceptances(c.campaignId)).toEqual(once(2));
    const stats = simulator.stats(world.channelId);
    expect(stats.requests.map((r) => r.retryKey)).toEqual(plannedLineKeys(done));
    expect(stats.distinctRecipients).toBe(700);
    expect(stats.usersReceivedMoreThanOnce).toBe(0);
    expect(simulator.violationCount).toBe(0);
    const { rows: discards } = await t.db.query<{ type: string; data: { reason: string } }>(
      "select type, data from event where stream_type = 'line_delivery'",
    );
    expect(discards).toEqual([
      { type: 'LineDeliveryDiscarded', data: expect.objectContaining({ epoch: 1 }) },
    ]);
  });

  it('a redelivered message is delivered once; a COMPLETED campaign message arriving again is discarded quietly', async () => {
    const service = campaignService(t.db);
    track(startRoles(t.config({ ...fast, ...lineEnv(simulator) }), { relay: true, worker: true }));
    const c = await service.create(lineCampaign({ castType: 'broadcast', ...TEST_LINE_CONTENT }));
    await service.activate(c.campaignId);
    await service.sendNow(c.campaignId);
    await waitFor(async () => (await service.get(c.campaignId)).status === 'COMPLETED', {
      what: 'COMPLETED',
    });
    const [row] = await outboxRows(c.campaignId);

    // The broker redelivers the same message id (e.g. a relay that crashed before marking sent).
    const body = Buffer.from(JSON.stringify(row!.payload));
    channel.sendToQueue('line_broadcast_rich_message', body, {
      messageId: row!.message_id,
      persistent: true,
    });
    // And a copy under another id (a message published twice by a buggy upstream).
    channel.sendToQueue('line_broadcast_rich_message', body, {
      messageId: crypto.randomUUID(),
      persistent: true,
    });
    await waitFor(
      async () => {
        const { rows } = await t.db.query<{ n: number }>(
          "select count(*)::int as n from inbox where status = 'discarded'",
        );
        return rows[0]!.n === 1;
      },
      { what: 'the copy to be discarded' },
    );
    const after = await service.get(c.campaignId);
    expect(after.status).toBe('COMPLETED');
    expect(await acceptances(c.campaignId)).toEqual(once(1));
    expect(simulator.stats(world.channelId).requestCount).toBe(1); // neither copy reached LINE
    expect(simulator.violationCount).toBe(0);
    const { rows } = await t.db.query<{ error: string }>(
      "select error from inbox where status = 'discarded'",
    );
    expect(rows[0]!.error).toMatch(/COMPLETED, not DISPATCHING/);
  });

  it('a heartbeat keeps a long send from being reaped', async () => {
    const service = campaignService(t.db);
    track(startRoles(t.config(fast), { relay: true }));
    let release!: () => void;
    const sendMayFinish = new Promise<void>((resolve) => {
      release = resolve;
    });
    let sending = false;
    // LINE accepted the call and takes its time to answer: the delivery waits on it (its timeout far off).
    simulator.beforeRespond(async () => {
      sending = true;
      await sendMayFinish;
    });
    await startWorker({ heartbeatMs: 100, lineTimeoutMs: 60_000 });
    const scanner = new Scanner({
      sweepers: [
        campaignSweeper({
          db: t.db,
          handler: new CommandHandler({ db: t.db }),
          logger: silentLogger,
          staleClaimMs: 500,
        }),
      ],
      pollIntervalMs: 100,
      logger: silentLogger,
    });
    scanner.start();
    stoppers.push(() => scanner.stop());

    const c = await service.create(lineCampaign({ audienceId: 'aud-2', ...TEST_LINE_CONTENT }));
    await service.activate(c.campaignId);
    // QUEUED: the running scanner claims it.
    await waitFor(() => sending, { what: 'the send to start' });
    // Let the send outlive the stale threshold several times over, measured in heartbeats.
    await waitFor(
      async () =>
        (await service.history(c.campaignId)).filter((e) => e.type === 'CampaignHeartbeat').length >= 12,
      { what: 'heartbeats spanning > 1 s', timeoutMs: 30_000 },
    );
    release();
    await waitFor(async () => (await service.get(c.campaignId)).status === 'COMPLETED', {
      what: 'COMPLETED',
    });
    const types = (await service.history(c.campaignId)).map((e) => e.type);
    expect(types).not.toContain('CampaignReclaimed');
    expect((await service.get(c.campaignId)).claimEpoch).toBe(1);
    expect(await acceptances(c.campaignId)).toEqual(once(1));
    expect(simulator.stats(world.channelId).requestCount).toBe(1);
    expect(simulator.violationCount).toBe(0);
  });
});
