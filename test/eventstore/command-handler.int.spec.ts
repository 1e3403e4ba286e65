import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendEvents, readStream } from '../../src/adapters/postgres/event-queries.js';
import { fold } from '../../src/domain/decider.js';
import { ConcurrencyError, IllegalStateError } from '../../src/errors.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import {
  createLedgerTable,
  type LedgerEvent,
  ledgerAggregate,
  ledgerDecider,
} from '../support/ledger-aggregate.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
const ledger = ledgerAggregate('ledger_credits');

beforeAll(async () => {
  t = await createTestDatabase();
  await createLedgerTable(t.db);
});
afterAll(async () => t?.drop());

async function counts(streamId: string) {
  const { rows } = await t.db.query<{ events: number; outbox: number; states: number }>(
    `select (select count(*)::int from event where stream_id = $1) as events,
            (select count(*)::int from outbox o join event e on e.position = o.event_position where e.stream_id = $1) as outbox,
            (select count(*)::int from ledger where id = $1) as states`,
    [streamId],
  );
  return rows[0]!;
}

describe('command handler: one transaction per transition (invariant 1)', () => {
  it('appends events, updates the state row and writes outbox rows together, with database time', async () => {
    const handler = new CommandHandler({ db: t.db, pod: 'test' });
    const opened = await handler.for(ledger).handle('l-1', (now) => ({ type: 'Open', now }), {
      meta: { correlationId: 'corr-1', actor: 'tester' },
    });
    const credited = await handler.for(ledger).handle('l-1', (now) => ({ type: 'Credit', amount: 5, now }));
    expect(opened.version).toBe(1);
    expect(credited.version).toBe(2);
    expect(credited.outbox).toHaveLength(1);
    expect(await counts('l-1')).toEqual({ events: 2, outbox: 1, states: 1 });

    const events = await readStream(t.db, 'ledger', 'l-1');
    expect(events.map((e) => e.type)).toEqual(['Opened', 'Credited']);
    expect(events[0]!.meta).toMatchObject({ correlationId: 'corr-1', actor: 'tester', pod: 'test' });
    // Time came from the database: the event's `at` equals the transaction's now() = recorded_at.
    expect(new Date((events[0]!.data as { at: string }).at).getTime()).toBe(events[0]!.recordedAt.getTime());

    const { rows } = await t.db.query<{
      message_id: string;
      headers: Record<string, string>;
      payload: unknown;
    }>(
      'select message_id, headers, payload from outbox o join event e on e.position = o.event_position where e.stream_id = $1',
      ['l-1'],
    );
    expect(rows[0]!.message_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(rows[0]!.headers).toMatchObject({
      'x-herald-event-type': 'Credited',
      'x-herald-stream-id': 'l-1',
    });
    // Invariant 8 in miniature: folding the stream gives the state row.
    const folded = fold(
      ledgerDecider,
      events.map((e) => ({ type: e.type, data: e.data }) as LedgerEvent),
    );
    expect(folded).toEqual(credited.state);
  });

  it('a failure after the events were written rolls back events, state and outbox', async () => {
    const handler = new CommandHandler({ db: t.db });
    await handler.for(ledger).handle('l-2', (now) => ({ type: 'Open', now }));
    const before = await counts('l-2');
    const failingStore = {
      ...ledger.store,
      save: async () => {
        throw new Error('disk on fire');
      },
    };
    await expect(
      handler
        .for({ ...ledger, store: failingStore })
        .handle('l-2', (now) => ({ type: 'Credit', amount: 1, now })),
    ).rejects.toThrow('disk on fire');
    // Also a failure after the state row AND the outbox rows were written:
    const failingOutbox = {
      ...ledger,
      messagesFor: () => [{ destination: '', payload: {} }], // violates the outbox destination check
    };
    await expect(
      handler.for(failingOutbox).handle('l-2', (now) => ({ type: 'Credit', amount: 1, now })),
    ).rejects.toThrow();
    expect(await counts('l-2')).toEqual(before);
    const state = await ledger.store.load(t.db, 'l-2');
    expect(state).toEqual({ state: { status: 'open', balance: 0 }, version: 1 });
  });

  it('an illegal command changes nothing', async () => {
    const handler = new CommandHandler({ db: t.db });
    await expect(handler.for(ledger).handle('l-3', (now) => ({ type: 'Close', now }))).rejects.toBeInstanceOf(
      IllegalStateError,
    );
    expect(await counts('l-3')).toEqual({ events: 0, outbox: 0, states: 0 });
  });

  it('expected version 0 skips the look-up: a new stream is created; an existing one is a ConcurrencyError, nothing written', async () => {
    const handler = new CommandHandler({ db: t.db });
    await handler.for(ledger).handle('l-new', (now) => ({ type: 'Open', now }), { expectedVersion: 0 });
    expect(await counts('l-new')).toEqual({ events: 1, outbox: 0, states: 1 });
    await expect(
      handler.for(ledger).handle('l-new', (now) => ({ type: 'Open', now }), { expectedVersion: 0 }),
    ).rejects.toBeInstanceOf(ConcurrencyError);
    expect(await counts('l-new')).toEqual({ events: 1, outbox: 0, states: 1 });
  });

  it('two commands with the same expected version: exactly one wins, the other gets ConcurrencyError', async () => {
    const handler = new CommandHandler({ db: t.db });
    await handler.for(ledger).handle('l-4', (now) => ({ type: 'Open', now }));
    const attempts = await Promise.allSettled(
      Array.from({ length: 2 }, (_, i) =>
        handler
          .for(ledger)
          .handle('l-4', (now) => ({ type: 'Credit', amount: i + 1, now }), { expectedVersion: 1 }),
      ),
    );
    const fulfilled = attempts.filter((a) => a.status === 'fulfilled');
    const rejected = attempts.filter((a): a is PromiseRejectedResult => a.status === 'rejected');
    expect(fulfilled).toHaveLength(1);
    expect(rejected).toHaveLength(1);
    expect(rejected[0]!.reason).toBeInstanceOf(ConcurrencyError);
    expect(await counts('l-4')).toEqual({ events: 2, outbox: 1, states: 1 });
  });

  it('raw appends racing on one version: the unique constraint admits one (ConcurrencyError for the other)', async () => {
    const append = (amount: number) =>
      t.db.transaction(async (tx) => {
        await appendEvents(tx, [
          { streamType: 'raw', streamId: 'r-1', version: 1, type: 'Credited', data: { amount }, meta: {} },
        ]);
      });
    const results = await Promise.allSettled([append(1), append(2)]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(failure?.reason).toBeInstanceOf(ConcurrencyError);
  });

  it('without an expected version, a conflicting writer retries from a fresh load and both commands land', async () => {
    const handler = new CommandHandler({ db: t.db });
    await handler.for(ledger).handle('l-5', (now) => ({ type: 'Open', now }));
    await Promise.all(
      Array.from({ length: 8 }, () =>
        handler
          .for(ledger)
          .handle('l-5', (now) => ({ type: 'Credit', amount: 1, now }), { maxConflictRetries: 20 }),
      ),
    );
    const state = await ledger.store.load(t.db, 'l-5');
    expect(state).toEqual({ state: { status: 'open', balance: 8 }, version: 9 });
  });
  it('handleFrom decides on the state the caller holds without loading it; a row that moved on is loaded again', async () => {
    const handler = new CommandHandler({ db: t.db });
    const commands = handler.for(ledger);
    let loads = 0;
    const counting = handler.for({
      ...ledger,
      store: {
        ...ledger.store,
        load: (...args: Parameters<typeof ledger.store.load>) => {
          loads++;
          return ledger.store.load(...args);
        },
      },
    });
    const opened = await commands.handle('l-6', (now) => ({ type: 'Open', now }));
    const credited = await counting.handleFrom(
      { streamId: 'l-6', state: opened.state, version: opened.version },
      (now) => ({ type: 'Credit', amount: 2, now }),
    );
    expect(loads).toBe(0);
    expect(credited).toMatchObject({ version: 2, state: { status: 'open', balance: 2 } });
    expect(credited.outbox).toHaveLength(1);

    // Another writer meanwhile: the held version is stale, so the command runs from a fresh load.
    await commands.handle('l-6', (now) => ({ type: 'Credit', amount: 5, now }));
    const again = await counting.handleFrom(
      { streamId: 'l-6', state: credited.state, version: credited.version },
      (now) => ({ type: 'Credit', amount: 1, now }),
    );
    expect(loads).toBe(1);
    expect(again).toMatchObject({ version: 4, state: { status: 'open', balance: 8 } });
    expect(await counts('l-6')).toEqual({ events: 4, outbox: 3, states: 1 });

    // A held state that would accept what the current one refuses: the current one's refusal stands.
    await commands.handle('l-6', (now) => ({ type: 'Close', now }));
    await expect(
      counting.handleFrom({ streamId: 'l-6', state: again.state, version: again.version }, (now) => ({
        type: 'Credit',
        amount: 1,
        now,
      })),
    ).rejects.toBeInstanceOf(IllegalStateError);
    expect(await counts('l-6')).toEqual({ events: 5, outbox: 3, states: 1 });
    const events = await readStream(t.db, 'ledger', 'l-6');
    expect(
      fold(
        ledgerDecider,
        events.map((e) => ({ type: e.type, data: e.data }) as LedgerEvent),
      ),
    ).toEqual((await ledger.store.load(t.db, 'l-6'))!.state);
  });

  it('handleFrom racing a writer that holds the row lock waits for the row, then decides from a fresh load (no deadlock)', async () => {
    const commands = new CommandHandler({ db: t.db }).for(ledger);
    const opened = await commands.handle('l-7', (now) => ({ type: 'Open', now }));
    let release!: () => void;
    let locked!: () => void;
    const rowLocked = new Promise<void>((resolve) => {
      locked = resolve;
    });
    // Another writer in the common lock order: the row, then its event, then the row update; it commits late.
    const holding = t.db.transaction(async (tx) => {
      await ledger.store.load(tx, 'l-7', { forUpdate: true });
      await appendEvents(tx, [
        {
          streamType: 'ledger',
          streamId: 'l-7',
          version: 2,
          type: 'Credited',
          data: { amount: 10 },
          meta: {},
        },
      ]);
      await ledger.store.save(tx, 'l-7', { status: 'open', balance: 10 }, 2, 1);
      locked();
      await new Promise<void>((resolve) => {
        release = resolve;
      });
    });
    await rowLocked;
    const racing = commands.handleFrom(
      { streamId: 'l-7', state: opened.state, version: opened.version },
      (now) => ({
        type: 'Credit',
        amount: 1,
        now,
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    release();
    await holding;
    expect(await racing).toMatchObject({ version: 3, state: { status: 'open', balance: 11 } });
    expect(await counts('l-7')).toEqual({ events: 3, outbox: 1, states: 1 });
  });
});
