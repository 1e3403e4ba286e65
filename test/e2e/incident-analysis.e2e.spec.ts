/**
 * Incident analysis end to end on real PostgreSQL and RabbitMQ, with the seed's fixed queue names
 * (serial project): campaigns dispatched by the real scanner, relay and LINE delivery worker (to the LINE
 * test server, each planned chunk accepted once) while the projector role runs. The dispatch statistics equal a direct count, each claim's causal chain reaches
 * its publish receipt and its inbox record (also after the outbox rows were pruned), and `herald verify`
 * is green while the roles run.
 */
import amqp from 'amqplib';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { declareQueues } from '../../src/adapters/amqp/amqp-connection.js';
import {
  countDispatchStatsDirectly,
  readDispatchStats,
} from '../../src/adapters/postgres/dispatch-stats-queries.js';
import { pruneSent } from '../../src/adapters/postgres/outbox-queries.js';
import type { LineSimulator } from '../../src/aggregates/campaign/line/simulator/server.js';
import { HERALD_QUEUES, LINE_QUEUES } from '../../src/aggregates/campaign/topology.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { replayStream } from '../../src/projections/replay.js';
import { waitFor } from '../../src/testing/wait.js';
import { campaignService, dbTimePlus, lineCampaign } from '../support/campaigns.js';
import { herald } from '../support/cli.js';
import {
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

let t: TestDatabase;
let connection: amqp.ChannelModel;
let roles: RunningRoles | undefined;
let simulator: LineSimulator;
/** Each organization's LINE official account `oa-<organization>`. */
let worlds: LineWorld[];

beforeAll(async () => {
  simulator = await startTestLineSimulator();
  connection = await amqp.connect(requireEnv('AMQP_URL'));
  connection.on('error', () => {});
  const channel = await connection.createChannel();
  await declareQueues(channel, HERALD_QUEUES, 'quorum');
  for (const queue of LINE_QUEUES) await channel.purgeQueue(queue);
  await channel.close();
});
afterAll(async () => {
  await connection?.close();
  await simulator?.close();
});
beforeEach(async () => {
  t = await createTestDatabase();
  simulator.reset();
  const settings = testLineSettings(simulator);
  worlds = [
    await lineWorld(t.db, simulator, settings, { organizationId: 'org-broadcast', lineOaId: 'oa-broadcast' }),
    await lineWorld(t.db, simulator, settings, {
      organizationId: 'org-multicast',
      lineOaId: 'oa-multicast',
      audiences: { 'aud-m1': 20, 'aud-m2': { members: 30, from: 1_000 } },
    }),
    await lineWorld(t.db, simulator, settings, { organizationId: 'org-now', lineOaId: 'oa-now' }),
  ];
});
afterEach(async () => {
  await roles?.stop();
  roles = undefined;
  await t?.drop();
});

describe('incident analysis end to end', () => {
  it('stats equal a direct count; every claim reaches its receipt and inbox record; verify is green live', async () => {
    const service = campaignService(t.db);
    roles = startRoles(
      t.config({
        HERALD_RELAY_IDLE_POLL_MS: '200',
        HERALD_SCANNER_POLL_MS: '200',
        HERALD_PROJECTOR_POLL_MS: '50',
        HERALD_PROJECTOR_BATCH_SIZE: '7',
        ...lineEnv(simulator),
      }),
      { relay: true, scanner: true, worker: true, projector: true },
    );
    const ids: string[] = [];
    for (const [castType, audienceId] of [
      ['broadcast', null],
      ['multicast', 'aud-m1'],
      ['multicast', 'aud-m2'],
    ] as const) {
      const c = await service.create(
        lineCampaign({
          castType,
          audienceId,
          organizationId: `org-${castType}`,
          lineOaId: `oa-${castType}`,
          ...TEST_LINE_CONTENT,
        }),
      );
      // Taken per campaign: on a loaded machine one start time can pass before the next schedule.
      await service.schedule(c.campaignId, await dbTimePlus(t.db, 500));
      ids.push(c.campaignId);
    }
    const now = await service.create(
      lineCampaign({
        castType: 'broadcast',
        audienceId: null,
        organizationId: 'org-now',
        lineOaId: 'oa-now',
        ...TEST_LINE_CONTENT,
      }),
    );
    // Straight from DRAFT: an activated (QUEUED) campaign may be claimed by the scanner before SendNow.
    await service.sendNow(now.campaignId, { actor: 'ops', correlationId: 'incident-send-now' });
    ids.push(now.campaignId);
    await waitFor(
      async () =>
        (await Promise.all(ids.map((id) => service.get(id)))).every((c) => c.status === 'COMPLETED'),
      { what: 'all campaigns COMPLETED', timeoutMs: 60_000 },
    );
    // At LINE: each campaign's one planned chunk accepted once, nothing else sent, every request valid.
    const requests = worlds.flatMap((w) => simulator.stats(w.channelId).requests);
    for (const id of ids) expect(lineAcceptancesPerChunk(requests, await service.get(id))).toEqual([1]);
    expect(requests).toHaveLength(4);
    expect(simulator.distinctRecipients(worlds[1]!.channelId)).toBe(50);
    expect(simulator.usersReceivedMoreThanOnce(worlds[1]!.channelId)).toEqual([]);
    expect(simulator.violationCount).toBe(0);

    // The projector keeps up with the real relay's receipts and the worker's completions.
    await waitFor(
      async () => {
        const [projected, direct] = [await readDispatchStats(t.db), await countDispatchStatsDirectly(t.db)];
        return (
          JSON.stringify(projected) === JSON.stringify(direct) &&
          direct.reduce((n, r) => n + r.delivered, 0) === 4
        );
      },
      { what: 'dispatch_stats equal to a direct count', timeoutMs: 30_000 },
    );
    const stats = await readDispatchStats(t.db);
    expect(stats.map((r) => [r.organizationId, r.destination, r.claimed, r.published, r.delivered])).toEqual(
      expect.arrayContaining([
        ['org-broadcast', 'line_broadcast_rich_message', 1, 1, 1],
        ['org-multicast', 'line_multicast_rich_message', 2, 2, 2],
        ['org-now', 'line_broadcast_rich_message', 1, 1, 1],
      ]),
    );

    // verify while every role is still running.
    const verify = await herald(t, ['verify']);
    expect(verify.code).toBe(0);
    expect(verify.stdout).toMatch(/verify campaign(, \w+)*: 4 streams, 24 events .*no drift/);

    // The outbox forgets; the receipts do not.
    expect(await pruneSent(t.db, { retentionHours: 0, limit: 100 })).toBe(4);
    for (const id of ids) {
      const replay = await replayStream(t.db, heraldRegistry, { streamType: 'campaign', streamId: id });
      const claims = replay.commands.filter((c) => c.messages.length > 0);
      expect(claims).toHaveLength(1);
      const [message] = claims[0]!.messages;
      expect(message).toMatchObject({
        eventVersion: 3,
        outbox: null,
        receipts: [{ outcome: 'sent', sink: 'amqp' }],
        inbox: [{ consumer: 'line-delivery', status: 'processed' }],
        // The delivery's plan and its one chunk, recorded as LINE answered, then the completion.
        effects: [
          { type: 'LineDeliveryPlanned', version: 4 },
          { type: 'LineChunkAccepted', version: 5 },
          { type: 'CampaignCompleted', version: 6 },
        ],
      });
      expect(message!.receipts[0]!.confirmedAt).toBeInstanceOf(Date);
    }
    const cli = await herald(t, ['replay', `campaign/${now.campaignId}`, '--json']);
    expect(cli.code).toBe(0);
    const claim = JSON.parse(cli.stdout).commands.find(
      (c: { correlationId: string }) => c.correlationId === 'incident-send-now',
    );
    expect(claim).toMatchObject({
      actor: 'ops',
      versions: [2, 3], // from DRAFT: queued and claimed in one command
      messages: [
        {
          destination: 'line_broadcast_rich_message',
          receipts: [{ outcome: 'sent' }],
          inbox: [{ consumer: 'line-delivery', status: 'processed' }],
        },
      ],
    });
  });
});
