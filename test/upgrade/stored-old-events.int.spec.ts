/**
 * Old events, stored as the old release stored them, read by the new release through its upcaster
 * (ADR 0039). The fixture inserts the wallet's events with the previous release's own append statement
 * (from its SQL snapshot: it does not know `schema_version`, so the column's default marks them 1) and
 * the state rows that release wrote; then every reader of the log — verify, replay, the point-in-time
 * state, export, a projector, a service's history read — sees the current shape, and invariant 8 holds:
 * the old events fold to the stored rows. A newer release's event is refused by the old release's
 * readers without anything being changed.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnsupportedEventVersionError } from '../../src/domain/event-schemas.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { readCurrentStream } from '../../src/eventstore/read-stream.js';
import type { StoredEvent } from '../../src/ports/events.js';
import { exportJsonLines } from '../../src/projections/export.js';
import type { Projection } from '../../src/projections/projection.js';
import { projectBatchInTransaction } from '../../src/projections/projector.js';
import { replayStream, stateAt } from '../../src/projections/replay.js';
import { verifyStates } from '../../src/projections/verify.js';
import { AggregateRegistry } from '../../src/registry/registry.js';
import { waitFor } from '../../src/testing/wait.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/services.js';
import { type ReleaseSql, SNAPSHOT_DIR } from './release-sql.js';
import { createWalletTable, WALLET, walletAggregate, walletRegistration } from './wallet-releases.js';

const previous = JSON.parse(readFileSync(join(SNAPSHOT_DIR, '0.1.0.json'), 'utf8')) as ReleaseSql;
/** The previous release's single-event append, exactly as it issues it. */
const OLD_APPEND = previous.statements.find((s) => /^insert into event \(.*\)\s+values/s.test(s.sql))!.sql;

const queue = uniqueName('wallet');
const registries = {
  N: new AggregateRegistry([walletRegistration('N', queue)]),
  'N+1': new AggregateRegistry([walletRegistration('N+1', queue)]),
  'N+2': new AggregateRegistry([walletRegistration('N+2', queue)]),
};

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
  await createWalletTable(t.db);
  // Two wallets as release 0.1.0 (N) left them: version-1 events and their rows.
  const old = [
    ['w-1', 'Opened', { organizationId: 'org-1' }],
    ['w-1', 'Credited', { amount: 12.5 }],
    ['w-1', 'Credited', { amount: 0.75 }],
    ['w-2', 'Opened', { organizationId: 'org-1' }],
    ['w-2', 'Credited', { amount: 3 }],
  ] as const;
  const versions = new Map<string, number>();
  for (const [id, type, data] of old) {
    const version = (versions.get(id) ?? 0) + 1;
    versions.set(id, version);
    await t.db.query(OLD_APPEND, [
      WALLET,
      id,
      version,
      type,
      JSON.stringify(data),
      JSON.stringify({ actor: 'old' }),
    ]);
  }
  await t.db.query(
    `insert into wallet (id, status, balance_minor, credits, version)
     values ('w-1', 'open', 1325, 2, 3), ('w-2', 'open', 300, 1, 2)`,
  );
});
afterAll(async () => t?.drop());

describe('stored version-1 events read by the release that upcasts them', () => {
  it('the old release’s insert recorded them as version 1 (the column’s default)', async () => {
    const { rows } = await t.db.query<{ n: number }>(
      "select count(*)::int as n from event where stream_type = 'wallet' and schema_version = 1",
    );
    expect(rows[0]!.n).toBe(5);
  });

  it('verify folds them through the upcaster to the stored rows, in every release', async () => {
    for (const registry of Object.values(registries)) {
      const report = await verifyStates(t.db, registry, { streamTypes: [WALLET] });
      expect(report.drifts).toEqual([]);
      expect(report).toMatchObject({ streams: 2, events: 5 });
    }
  });

  it('replay, the state at a time, export and a history read show the current shape', async () => {
    const registry = registries['N+2'];
    const replay = await replayStream(t.db, registry, { streamType: WALLET, streamId: 'w-1' });
    expect(replay.events.map((e) => e.data)).toEqual([
      { organizationId: 'org-1' },
      { amountMinor: 1250, currency: 'EUR' },
      { amountMinor: 75, currency: 'EUR' },
    ]);
    expect(replay.state).toEqual({ status: 'open', balanceMinor: 1325, credits: 2 });

    const at = await stateAt(
      t.db,
      registry,
      { streamType: WALLET, streamId: 'w-2' },
      new Date(Date.now() + 60_000).toISOString(),
    );
    expect(at.state).toEqual({ status: 'open', balanceMinor: 300, credits: 1 });

    let lines = '';
    await exportJsonLines(
      t.db,
      {
        from: null,
        to: null,
        streamTypes: [WALLET],
        events: true,
        receipts: false,
        upcast: (e) => registry.upcast(e),
      },
      (chunk) => {
        lines += chunk;
      },
    );
    const credited = lines
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; data: unknown; schemaVersion: number })
      .filter((e) => e.type === 'Credited');
    expect(credited).toHaveLength(3);
    expect(credited.every((e) => e.schemaVersion === 2 && 'amountMinor' in (e.data as object))).toBe(true);

    const history = await readCurrentStream(t.db, walletAggregate('N+2', queue), 'w-2');
    expect(history.map((e) => [e.type, e.schemaVersion, e.data])).toEqual([
      ['Opened', 1, { organizationId: 'org-1' }],
      ['Credited', 2, { amountMinor: 300, currency: 'EUR' }],
    ]);
  });

  it('a projector hands its projection the current shape', async () => {
    const seen: StoredEvent[] = [];
    const projection: Projection = {
      name: uniqueName('wallet_credits'),
      tables: [],
      sources: ['events'],
      applyEvents: async (_tx, events) => {
        seen.push(...events.filter((e) => e.streamType === WALLET && e.type === 'Credited'));
      },
    };
    const registry = registries['N+1'];
    // Gap-safe reads wait for every older transaction on the server: poll with a deadline.
    await waitFor(
      async () => {
        await t.db.transaction((tx) =>
          projectBatchInTransaction(
            tx,
            projection,
            'events',
            { shadow: false },
            {
              batchSize: 100,
              upcast: (e) => registry.upcast(e),
            },
          ),
        );
        return seen.length >= 3;
      },
      { what: 'the projector past the old events' },
    );
    expect(seen.map((e) => e.data)).toEqual([
      { amountMinor: 1250, currency: 'EUR' },
      { amountMinor: 75, currency: 'EUR' },
      { amountMinor: 300, currency: 'EUR' },
    ]);
  });

  it('N+1 appends to an old stream in version 1; N+2 in version 2; each stream still verifies', async () => {
    const n1 = new CommandHandler({ db: t.db }).for(walletAggregate('N+1', queue));
    const n2 = new CommandHandler({ db: t.db }).for(walletAggregate('N+2', queue));
    await n1.handle('w-1', (now) => ({ type: 'Credit', amountMinor: 100, now }));
    await n2.handle('w-2', (now) => ({ type: 'Credit', amountMinor: 5, now }));
    const { rows } = await t.db.query<{ stream_id: string; data: unknown; schema_version: number }>(
      "select stream_id, data, schema_version from event where stream_type = 'wallet' and version = 4 or (stream_id = 'w-2' and version = 3) order by stream_id",
    );
    expect(rows).toEqual([
      { stream_id: 'w-1', data: { amount: 1 }, schema_version: 1 },
      { stream_id: 'w-2', data: { amountMinor: 5, currency: 'EUR' }, schema_version: 2 },
    ]);
    for (const release of ['N+1', 'N+2'] as const) {
      expect((await verifyStates(t.db, registries[release], { streamTypes: [WALLET] })).drifts).toEqual([]);
    }
  });

  it('release N refuses the version-2 event by name and changes nothing', async () => {
    const snapshot = () =>
      t.db.query(
        'select (select json_agg(w order by id) from wallet w) as rows, (select json_agg(e order by position) from event e) as events',
      );
    const before = (await snapshot()).rows[0];
    const report = await verifyStates(t.db, registries.N, { streamTypes: [WALLET] });
    expect(report.drifts).toEqual([
      expect.objectContaining({
        kind: 'unreplayable',
        streamId: 'w-2',
        detail: expect.stringContaining(
          'wallet event Credited has schema version 2; this release reads up to 1',
        ),
      }),
    ]);
    await expect(replayStream(t.db, registries.N, { streamType: WALLET, streamId: 'w-2' })).rejects.toThrow(
      UnsupportedEventVersionError,
    );
    expect((await snapshot()).rows[0]).toEqual(before);
    // Its command handler works from the state row, which every release writes alike, and writes v1.
    const nHandler = new CommandHandler({ db: t.db }).for(walletAggregate('N', queue));
    await nHandler.handle('w-2', (now) => ({ type: 'Credit', amountMinor: 10, now }));
    expect((await verifyStates(t.db, registries['N+2'], { streamTypes: [WALLET] })).drifts).toEqual([]);
  });
});
