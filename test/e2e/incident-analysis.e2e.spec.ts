/**
 * Incident analysis end to end on real PostgreSQL and RabbitMQ, with the seed's fixed queue names
 * (serial project): campaigns dispatched by the real scanner, relay and LINE delivery worker while the
 * projector role runs. The dispatch statistics equal a direct count, each claim's causal chain reaches
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
import { HERALD_QUEUES, LINE_QUEUES } from '../../src/aggregates/campaign/topology.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { replayStream } from '../../src/projections/replay.js';
import { waitFor } from '../../src/testing/wait.js';
import { campaignService, dbTimePlus, lineCampaign } from '../support/campaigns.js';
import { herald } from '../support/cli.js';
import { type RunningRoles, startRoles } from '../support/roles.js';
import { createTestDatabase, requireEnv, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
let connection: amqp.ChannelModel;
let roles: RunningRoles | undefined;

beforeAll(async () => {
  connection = await amqp.connect(requireEnv('AMQP_URL'));
  connection.on('error', () => {});
  const channel = await connection.createChannel();
  await declareQueues(channel, HERALD_QUEUES, 'quorum');
  for (const queue of LINE_QUEUES) await channel.purgeQueue(queue);
  await channel.close();
});
afterAll(async () => {
  await connection?.close();
});
beforeEach(async () => {
  t = await createTestDatabase();
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
      }),
      { relay: true, scanner: true, worker: true, projector: true },
    );
    const ids: string[] = [];
    for (const castType of ['broadcast', 'multicast', 'multicast'] as const) {
      const c = await service.create(lineCampaign({ castType, organizationId: `org-${castType}` }));
      // Taken per campaign: on a loaded machine one start time can pass before the next schedule.
      await service.schedule(c.campaignId, await dbTimePlus(t.db, 500));
      ids.push(c.campaignId);
    }
    const now = await service.create(lineCampaign({ castType: 'broadcast', organizationId: 'org-now' }));
    // Straight from DRAFT: an activated (QUEUED) campaign may be claimed by the scanner before SendNow.
    await service.sendNow(now.campaignId, { actor: 'ops', correlationId: 'incident-send-now' });
    ids.push(now.campaignId);
    await waitFor(
      async () =>
        (await Promise.all(ids.map((id) => service.get(id)))).every((c) => c.status === 'COMPLETED'),
      { what: 'all campaigns COMPLETED', timeoutMs: 60_000 },
    );

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
    expect(verify.stdout).toMatch(/verify campaign(, \w+)*: 4 streams, 16 events .*no drift/);

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
        effects: [{ type: 'CampaignCompleted', version: 4 }],
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
