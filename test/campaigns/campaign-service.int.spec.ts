/**
 * The campaign library API's typed errors for what a caller can get wrong: a repeated idempotency key
 * on create (sequential and concurrent) is a ConflictError naming the campaign that holds the key,
 * never a raw unique-violation; nothing else is written.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConflictError } from '../../src/errors.js';
import { campaignService, lineCampaign } from '../support/campaigns.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const eventCount = async () =>
  (await t.db.query<{ n: number }>('select count(*)::int as n from event')).rows[0]!.n;

describe('campaign service', () => {
  it('a repeated idempotency key on create is a ConflictError naming the existing campaign', async () => {
    const service = campaignService(t.db);
    const first = await service.create(lineCampaign({ idempotencyKey: 'order-42' }));
    const before = await eventCount();
    const error = await service.create(lineCampaign({ idempotencyKey: 'order-42', name: 'again' })).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConflictError);
    expect((error as ConflictError).details).toEqual({
      field: 'idempotencyKey',
      organizationId: 'org-1',
      idempotencyKey: 'order-42',
      existingCampaignId: first.campaignId,
    });
    expect(await eventCount()).toBe(before);
    // Another organization may use the same key.
    await expect(
      service.create(lineCampaign({ idempotencyKey: 'order-42', organizationId: 'org-2' })),
    ).resolves.toMatchObject({
      status: 'DRAFT',
    });
  });

  it('two concurrent creates with one key: one campaign, the other a ConflictError', async () => {
    const service = campaignService(t.db);
    const results = await Promise.allSettled(
      Array.from({ length: 5 }, (_, i) =>
        service.create(lineCampaign({ idempotencyKey: 'race-1', name: `racer ${i}` })),
      ),
    );
    const created = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(created).toHaveLength(1);
    expect(refused).toHaveLength(4);
    for (const r of refused) {
      expect(r.reason).toBeInstanceOf(ConflictError);
      expect(r.reason.details.existingCampaignId).toBe(
        (created[0] as PromiseFulfilledResult<{ campaignId: string }>).value.campaignId,
      );
    }
  });
});
