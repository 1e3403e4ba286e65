/**
 * The fenced handler's contract (invariant 5), one suite for every claimed aggregate: run against the
 * aggregate's own production definition (its consumer's `FencedHandlerDefinition`) on real
 * PostgreSQL, it checks what the claim declared on the descriptor promises. The live claim's message
 * is accepted once (a redelivery after the completion is discarded); a message of a stream that does
 * not exist, of another epoch, or of a stream no longer in its claimed state is a quiet discard,
 * recorded once on the declared side stream with the derived fields and leaving the stream as it was;
 * and a claim revoked while the effect runs leaves neither the effect's completion nor the effect.
 *
 * A fixture says only what differs per aggregate: how a live claim is made (and its message payload
 * read back), and how a claim is ended without its message (a pause, a cancel, a reclaim).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommandHandler } from '../eventstore/command-handler.js';
import { silentLogger } from '../logger.js';
import type { Database, SqlClient } from '../ports/database.js';
import type { ConsumedMessage, HandlerOutcome } from '../worker/delivery-policy.js';
import { claimOf, type FencedHandlerDefinition, fencedHandler } from '../worker/fenced-handler.js';

/** A message payload of the aggregate's claim (its stream id field and `epoch`). */
export type ClaimPayload = Record<string, unknown> & { epoch: number };

export interface FencedHandlerFixture {
  /** A database with Herald's migrations applied, its own for the suite. */
  database(): Promise<{ db: Database; close(): Promise<void> }>;
  /** The aggregate's production definition (the one its registered consumer runs). */
  // biome-ignore lint/suspicious/noExplicitAny: any claimed aggregate's definition.
  definition(handler: CommandHandler): FencedHandlerDefinition<any, any, any, any, any>;
  /** Makes a stream with a live claim; resolves the payload of that claim's message. */
  claim(db: Database, handler: CommandHandler): Promise<ClaimPayload>;
  /** Ends the live claim of `payload` without its message (an operator's pause or cancel, a reclaim). */
  release(db: Database, handler: CommandHandler, payload: ClaimPayload): Promise<void>;
  /** How many effects the claim of `payload` left (rows its effect writes), when they are observable. */
  effects?(db: Database, payload: ClaimPayload): Promise<number>;
}

const message = (payload: ClaimPayload, messageId = randomUUID()): ConsumedMessage<ClaimPayload> => ({
  messageId,
  payload,
  headers: {},
  attempt: 1,
  queue: 'fenced-handler-contract',
  redelivered: false,
  afterCommit: () => {},
});

export function describeFencedHandlerContract(name: string, fixture: FencedHandlerFixture): void {
  describe(`fenced handler contract: ${name}`, () => {
    let db: Database;
    let close: () => Promise<void>;
    let handler: CommandHandler;
    // biome-ignore lint/suspicious/noExplicitAny: any claimed aggregate's definition.
    let definition: FencedHandlerDefinition<any, any, any, any, any>;

    beforeAll(async () => {
      ({ db, close } = await fixture.database());
      handler = new CommandHandler({ db });
      definition = fixture.definition(handler);
    });
    afterAll(async () => close?.());

    const handle = async (
      d: typeof definition,
      m: ConsumedMessage<ClaimPayload>,
    ): Promise<HandlerOutcome> => {
      const fenced = fencedHandler(d, { handler, logger: silentLogger });
      return (await db.transaction((tx) => fenced(m, tx))) ?? 'processed';
    };
    const version = async (streamId: string): Promise<number> =>
      (await definition.aggregate.store.load(db, streamId))?.version ?? 0;
    const discards = async (sql: SqlClient, messageId: string) => {
      const { rows } = await sql.query<{ type: string; data: Record<string, unknown> }>(
        'select type, data from event where stream_type = $1 and stream_id = $2 order by version',
        [definition.aggregate.claim.discard.streamType, messageId],
      );
      return rows;
    };
    const claimed = () => definition.aggregate.claim;

    it('accepts the live claim once; a redelivery after its completion is discarded, not done twice', async () => {
      const payload = await fixture.claim(db, handler);
      const { streamId } = claimOf(claimed(), payload);
      const before = await version(streamId);
      const m = message(payload);
      expect(await handle(definition, m)).toBe('processed');
      expect(await version(streamId)).toBeGreaterThan(before);
      expect(await discards(db, m.messageId)).toEqual([]);
      if (fixture.effects) expect(await fixture.effects(db, payload)).toBe(1);

      const completed = await version(streamId);
      const again = await handle(definition, { ...m, redelivered: true, attempt: 2 });
      expect(again).toEqual({
        discard: expect.stringMatching(new RegExp(`^${claimed().noun} is \\w+, not `)),
      });
      expect(await version(streamId)).toBe(completed);
      if (fixture.effects) expect(await fixture.effects(db, payload)).toBe(1);
    });

    it('discards a message of a stream that does not exist, recording why with the derived fields', async () => {
      const payload = await fixture.claim(db, handler);
      const missing = { ...payload, [claimed().idField]: randomUUID() };
      const m = message(missing);
      expect(await handle(definition, m)).toEqual({ discard: `${claimed().noun} not found` });
      const recorded = await discards(db, m.messageId);
      expect(recorded).toHaveLength(1);
      expect(recorded[0]!.type).toBe(claimed().discard.eventType);
      expect(recorded[0]!.data).toMatchObject({
        [claimed().idField]: missing[claimed().idField],
        epoch: payload.epoch,
        reason: `${claimed().noun} not found`,
        [`${claimed().noun}Status`]: null,
        [`${claimed().noun}Epoch`]: null,
      });
    });

    it('discards a message of another epoch and leaves the stream as it was', async () => {
      const payload = await fixture.claim(db, handler);
      const { streamId } = claimOf(claimed(), payload);
      const before = await version(streamId);
      const m = message({ ...payload, epoch: payload.epoch + 1 });
      const reason = `stale epoch ${payload.epoch + 1}: the live claim is epoch ${payload.epoch}`;
      expect(await handle(definition, m)).toEqual({ discard: reason });
      expect(await version(streamId)).toBe(before);
      expect((await discards(db, m.messageId))[0]!.data).toMatchObject({
        reason,
        epoch: payload.epoch + 1,
        [`${claimed().noun}Epoch`]: payload.epoch,
      });
    });

    it('discards the message of a claim that was ended (the stream left its claimed state)', async () => {
      const payload = await fixture.claim(db, handler);
      const { streamId } = claimOf(claimed(), payload);
      await fixture.release(db, handler, payload);
      const before = await version(streamId);
      const m = message(payload);
      const outcome = await handle(definition, m);
      expect(outcome).toMatchObject({ discard: expect.stringMatching(/^(\w+ is \w+, not |stale epoch )/) });
      expect(await version(streamId)).toBe(before);
      expect(await discards(db, m.messageId)).toHaveLength(1);
    });

    it('a claim revoked while its effect runs leaves neither the effect nor its completion', async () => {
      const payload = await fixture.claim(db, handler);
      const { streamId } = claimOf(claimed(), payload);
      const revoking: typeof definition = {
        ...definition,
        effectMany: undefined,
        effect: async (context) => {
          // Another transaction ends the claim while this one holds the inbox transaction open.
          await fixture.release(db, handler, payload);
          return definition.effect(context);
        },
      };
      const m = message(payload);
      const outcome = await handle(revoking, m);
      expect(outcome).toMatchObject({ discard: expect.any(String) });
      const afterRelease = await version(streamId);
      const { rows } = await db.query<{ type: string }>(
        'select type from event where stream_type = $1 and stream_id = $2 and version = $3',
        [definition.aggregate.streamType, streamId, afterRelease],
      );
      // The stream's last event is the release's, not a completion by the fenced-off holder.
      expect(rows).toHaveLength(1);
      expect(await discards(db, m.messageId)).toHaveLength(1);
      if (fixture.effects) expect(await fixture.effects(db, payload)).toBe(0);
    });
  });
}
