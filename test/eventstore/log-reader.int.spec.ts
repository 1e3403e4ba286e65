import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendEvents, readLogAfter } from '../../src/adapters/postgres/event-queries.js';
import { LOG_START, type LogCursor, type StoredEvent } from '../../src/ports/events.js';
import { waitFor } from '../../src/testing/wait.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const event = (streamId: string, version = 1) => ({
  streamType: 'gap',
  streamId,
  version,
  type: 'Happened',
  data: { streamId },
  meta: {},
});

/** A follower that keeps a cursor, as a projector does; polls are serialized like a projector's loop. */
function follower() {
  let cursor: LogCursor = LOG_START;
  const seen: StoredEvent[] = [];
  let running: Promise<StoredEvent[]> = Promise.resolve(seen);
  const pollOnce = async () => {
    for (;;) {
      const batch = await readLogAfter(t.db, cursor, 100, ['gap']);
      if (batch.length === 0) return seen;
      seen.push(...batch);
      const last = batch[batch.length - 1]!;
      cursor = { tx: last.tx, position: last.position };
    }
  };
  return {
    seen,
    poll() {
      running = running.then(pollOnce);
      return running;
    },
  };
}

describe('gap-safe log reader', () => {
  it('does not skip an event whose transaction took its position first but committed last', async () => {
    const reader = follower();
    let releaseEarly!: () => void;
    const early = new Promise<void>((resolve) => {
      releaseEarly = resolve;
    });
    let earlyAppended!: () => void;
    const earlyHasPosition = new Promise<void>((resolve) => {
      earlyAppended = resolve;
    });

    // Transaction A takes the lower position and stays open.
    const slow = t.db.transaction(async (tx) => {
      const [appended] = await appendEvents(tx, [event('early')]);
      earlyAppended();
      await early;
      return appended!.position;
    });
    await earlyHasPosition;
    // Transaction B takes a higher position and commits first.
    const [late] = await t.db.transaction((tx) => appendEvents(tx, [event('late')]));

    // While A runs, the follower sees neither: B is above the snapshot's xmin.
    await reader.poll();
    expect(reader.seen.map((e) => e.streamId)).toEqual([]);

    releaseEarly();
    const earlyPosition = await slow;
    expect(earlyPosition).toBeLessThan(late!.position);

    await waitFor(async () => (await reader.poll()).length === 2, { what: 'both events' });
    expect(reader.seen.map((e) => e.streamId)).toEqual(['early', 'late']);
  });

  it('a naive position cursor would have skipped it (the hazard the reader avoids)', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started!: () => void;
    const hasPosition = new Promise<void>((resolve) => {
      started = resolve;
    });
    const slow = t.db.transaction(async (tx) => {
      await appendEvents(tx, [event('naive-early')]);
      started();
      await gate;
    });
    await hasPosition;
    await t.db.transaction((tx) => appendEvents(tx, [event('naive-late')]));
    const { rows } = await t.db.query<{ stream_id: string; position: number }>(
      "select stream_id, position from event where stream_id like 'naive-%' order by position",
    );
    // A reader ordering by position alone sees only the late event now and would move its cursor past the early one.
    expect(rows.map((r) => r.stream_id)).toEqual(['naive-late']);
    release();
    await slow;
  });

  it('streams many concurrent writers without loss or duplicates', async () => {
    const reader = follower();
    const writers = Array.from({ length: 8 }, (_, w) =>
      (async () => {
        for (let i = 0; i < 25; i++) {
          await t.db.transaction((tx) => appendEvents(tx, [event(`w${w}-${i}`)]));
          if (i % 5 === 0) await reader.poll();
        }
      })(),
    );
    await Promise.all(writers);
    // Gap-safe: a transaction open anywhere on the server (another test file) holds the reader back
    // for a moment; it catches up once it ends.
    const seen = () => reader.seen.map((e) => e.streamId).filter((id) => id.startsWith('w'));
    await waitFor(
      async () => {
        await reader.poll();
        return seen().length >= 200;
      },
      { what: 'the reader caught up with the writers' },
    );
    const ids = seen();
    expect(ids).toHaveLength(200);
    expect(new Set(ids).size).toBe(200);
  });
});
