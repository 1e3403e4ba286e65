/**
 * The fire handler's batch form on real PostgreSQL (the consumer toolkit hands it several
 * `scheduled_action_fire` deliveries in one transaction): each message gets its own outcome —
 * executed, cancelled because its conditions no longer hold, or discarded at the re-check (a stale
 * epoch) — exactly as the single form decides them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ActionFirePayload } from '../../src/aggregates/scheduled-action/descriptor.js';
import { actionFireHandler } from '../../src/aggregates/scheduled-action/fire.js';
import type { BatchingHandler, ConsumedMessage } from '../../src/worker/delivery-policy.js';
import { actionsHarness, eventTypes, normalAction } from '../support/actions.js';
import { testLogger } from '../support/roles.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const message = (messageId: string, payload: ActionFirePayload): ConsumedMessage<ActionFirePayload> => ({
  messageId,
  payload,
  headers: {},
  attempt: 1,
  queue: 'scheduled_action_fire',
  redelivered: false,
  afterCommit: () => {},
});

describe('fire handler, batch form', () => {
  it('decides each message of a batch on its own: executed, cancelled by conditions, discarded', async () => {
    const h = actionsHarness(t, { dispatch: 'queue' });
    await h.service.upsertSubject('org-1', 'erin', { tier: 'silver' });
    const conditions = { conditions: { '==': [{ var: 'subject.tier' }, 'gold'] } };
    const ids = [
      (await h.service.schedule(normalAction())).actionId,
      (await h.service.schedule(normalAction())).actionId,
      (await h.service.schedule(normalAction({ subjectId: 'erin', sourceConfig: conditions }))).actionId,
      (await h.service.schedule(normalAction())).actionId,
    ];
    // delaySeconds 0 with queue dispatch: claimed in the scheduling transaction, fire message in the outbox.
    const { rows } = await t.db.query<{ message_id: string; payload: ActionFirePayload }>(
      `select message_id::text, payload from outbox where destination = 'scheduled_action_fire' order by id`,
    );
    expect(rows.map((r) => r.payload.actionId)).toEqual(ids);
    // The fourth action's message, but from a claim that is not the live one.
    const stale = message('00000000-0000-4000-8000-0000000000aa', { ...rows[3]!.payload, epoch: 7 });

    const handler = actionFireHandler({
      handler: h.handler,
      logger: testLogger(),
      settings: h.config.actions,
    }) as BatchingHandler<ActionFirePayload>;
    expect(typeof handler.batch).toBe('function');
    const outcomes = await t.db.transaction((tx) =>
      handler.batch([...rows.slice(0, 3).map((r) => message(r.message_id, r.payload)), stale], tx),
    );
    expect(outcomes).toEqual([
      'processed',
      'processed',
      'processed',
      { discard: 'stale epoch 7: the live claim is epoch 1' },
    ]);
    expect(await h.service.get(ids[0]!)).toMatchObject({ status: 'done', outcome: 'executed' });
    expect(await h.service.get(ids[1]!)).toMatchObject({ status: 'done', outcome: 'executed' });
    expect(await h.service.get(ids[2]!)).toMatchObject({
      status: 'cancelled',
      cancelReason: expect.stringMatching(/conditions no longer hold/),
    });
    expect(await eventTypes(t, ids[2]!)).toEqual(['ActionScheduled', 'ActionClaimed', 'ActionCancelled']);
    const { rows: discards } = await t.db.query<{ type: string }>(
      `select type from event where stream_type = 'action_fire'`,
    );
    expect(discards).toEqual([{ type: 'ActionFireDiscarded' }]);
    expect((await h.service.get(ids[3]!)).status).toBe('processing');
  });
});
