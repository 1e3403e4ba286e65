/**
 * The LINE delivery worker's batch form (the fenced handler over a set-based effect): in one
 * transaction it re-checks every message's claim against its locked campaign, discards the stale ones
 * on their side stream, records the deliveries together and completes the rest — each completion
 * caused by its own message — with the same outcomes the one-at-a-time path gives.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimInboxMany } from '../../src/adapters/postgres/inbox-queries.js';
import { countLineDeliveries } from '../../src/adapters/postgres/line-delivery-queries.js';
import type { LineDispatchPayload } from '../../src/aggregates/campaign/descriptor.js';
import { claimMessageId } from '../../src/aggregates/campaign/descriptor.js';
import { LineDeliveryWorker } from '../../src/aggregates/campaign/line-delivery.js';
import { LINE_DELIVERY_CONSUMER } from '../../src/aggregates/campaign/topology.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import type { BatchingHandler, ConsumedMessage } from '../../src/worker/delivery-policy.js';
import { campaignService, lineCampaign } from '../support/campaigns.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const message = (
  campaignId: string,
  epoch: number,
  messageId = claimMessageId(campaignId, epoch),
): ConsumedMessage<LineDispatchPayload> => ({
  messageId,
  payload: {
    campaignId,
    epoch,
    castType: 'multicast',
    audienceId: 'aud-1',
    organizationId: 'org-1',
    lineOaId: 'oa-1',
  },
  headers: {},
  attempt: 1,
  queue: 'line_multicast_rich_message',
  redelivered: false,
  correlationId: `corr-${messageId}`,
  afterCommit: () => {},
});

describe('LINE delivery, batch form', () => {
  it('re-checks, discards, delivers and completes several messages in one transaction', async () => {
    const service = campaignService(t.db);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const c = await service.create(lineCampaign({ name: `batch ${i}` }));
      await service.activate(c.campaignId);
      await service.sendNow(c.campaignId);
      ids.push(c.campaignId);
    }
    await service.pause(ids[3]!); // its claim is revoked: the message must be discarded
    const worker = new LineDeliveryWorker({
      handler: new CommandHandler({ db: t.db }),
      logger: silentLogger,
    });
    const batch = (worker.handle as BatchingHandler<LineDispatchPayload>).batch;
    expect(batch).toBeTypeOf('function');
    const messages = [message(ids[0]!, 1), message(ids[1]!, 2), message(ids[2]!, 1), message(ids[3]!, 1)];

    const outcomes = await t.db.transaction(async (tx) => {
      await claimInboxMany(
        tx,
        LINE_DELIVERY_CONSUMER,
        messages.map((m) => ({ messageId: m.messageId, attempt: 1 })),
      );
      return batch(messages, tx);
    });
    expect(outcomes).toEqual([
      'processed',
      { discard: 'stale epoch 2: the live claim is epoch 1' },
      'processed',
      { discard: 'campaign is PAUSED, not DISPATCHING' },
    ]);
    const statuses = await Promise.all(ids.map(async (id) => (await service.get(id)).status));
    expect(statuses).toEqual(['COMPLETED', 'DISPATCHING', 'COMPLETED', 'PAUSED']);
    const deliveries = await countLineDeliveries(t.db, ids);
    expect(ids.map((id) => deliveries.get(id) ?? 0)).toEqual([1, 0, 1, 0]);
    const { rows } = await t.db.query<{ stream_id: string; type: string; meta: Record<string, string> }>(
      `select stream_id, type, meta from event where type in ('CampaignCompleted', 'LineDeliveryDiscarded') order by position`,
    );
    expect(rows.map((r) => [r.type, r.meta.causationId, r.meta.correlationId, r.meta.actor])).toEqual(
      expect.arrayContaining([
        [
          'CampaignCompleted',
          messages[0]!.messageId,
          `corr-${messages[0]!.messageId}`,
          LINE_DELIVERY_CONSUMER,
        ],
        [
          'CampaignCompleted',
          messages[2]!.messageId,
          `corr-${messages[2]!.messageId}`,
          LINE_DELIVERY_CONSUMER,
        ],
        [
          'LineDeliveryDiscarded',
          messages[1]!.messageId,
          `corr-${messages[1]!.messageId}`,
          LINE_DELIVERY_CONSUMER,
        ],
        [
          'LineDeliveryDiscarded',
          messages[3]!.messageId,
          `corr-${messages[3]!.messageId}`,
          LINE_DELIVERY_CONSUMER,
        ],
      ]),
    );
    expect(rows).toHaveLength(4);
  });

  it('declines a batch with two messages for one campaign (the second must see the first)', async () => {
    const service = campaignService(t.db);
    const c = await service.create(lineCampaign());
    await service.activate(c.campaignId);
    await service.sendNow(c.campaignId);
    const worker = new LineDeliveryWorker({
      handler: new CommandHandler({ db: t.db }),
      logger: silentLogger,
    });
    const batch = (worker.handle as BatchingHandler<LineDispatchPayload>).batch;
    const declined = await t.db.transaction((tx) =>
      batch([message(c.campaignId, 1), message(c.campaignId, 1, crypto.randomUUID())], tx),
    );
    expect(declined).toBeNull();
    expect((await service.get(c.campaignId)).status).toBe('DISPATCHING');
  });
});
