/**
 * The aggregate registry is the one place an aggregate is made known: the test ledger, registered
 * beside the campaign and edited nowhere else, is verified, replayed, folded into the sandbox and
 * exported like the campaign; a stream type in the log that no registration claims makes verify (and
 * `herald verify`) fail loudly, so a forgotten registration cannot pass unnoticed. The ledger's one
 * registry line also brings its setting into the configuration, its sweeper into the scanner, its
 * fenced consumer into the worker, its route and live topic into the API and its verb into the CLI.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { campaignRegistration } from '../../src/aggregates/campaign/index.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { createApiKey } from '../../src/api/auth.js';
import { buildApiServer } from '../../src/api/server.js';
import { roleTable } from '../../src/cli/roles.js';
import { ValidationError } from '../../src/errors.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import { exportJsonLines } from '../../src/projections/export.js';
import { replayStream, stateAt } from '../../src/projections/replay.js';
import { buildSandbox } from '../../src/projections/sandbox.js';
import { verifyStates } from '../../src/projections/verify.js';
import { AggregateRegistry } from '../../src/registry/registry.js';
import { waitFor } from '../../src/testing/wait.js';
import type { ConsumedMessage } from '../../src/worker/delivery-policy.js';
import { campaignService, lineCampaign } from '../support/campaigns.js';
import { herald } from '../support/cli.js';
import {
  createLedgerTable,
  ledgerAggregate,
  ledgerRegistration,
  ledgerStore,
} from '../support/ledger-aggregate.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/services.js';

let t: TestDatabase;
const queue = uniqueName('herald_test_ledger');
const registry = new AggregateRegistry([campaignRegistration, ledgerRegistration(queue)]);
let openedAt: string;

beforeAll(async () => {
  t = await createTestDatabase();
  await createLedgerTable(t.db);
  const ledgers = new CommandHandler({ db: t.db }).for(ledgerAggregate(queue));
  for (const id of ['l-1', 'l-2', 'l-3']) {
    await ledgers.handle(id, (now) => ({ type: 'Open', now }));
    await ledgers.handle(id, (now) => ({ type: 'Credit', amount: 5, now }));
  }
  // The instant after the last event so far, at the millisecond (an ISO string has no microseconds:
  // now() read in the same millisecond as the last commit would print as before it), and the next
  // events strictly after it.
  openedAt = (
    await t.db.query<{ at: Date }>(
      "select date_trunc('milliseconds', max(recorded_at)) + interval '1 millisecond' as at from event",
    )
  ).rows[0]!.at.toISOString();
  await waitFor(
    async () =>
      (await t.db.query<{ after: boolean }>('select now() > $1 as after', [openedAt])).rows[0]!.after,
    { what: 'the database clock past openedAt', intervalMs: 1 },
  );
  await ledgers.handle('l-1', (now) => ({ type: 'Credit', amount: 10, now }));
  await ledgers.handle('l-2', (now) => ({ type: 'Close', now }));
  const service = campaignService(t.db);
  await service.create(lineCampaign());
});
afterAll(async () => t?.drop());

describe('aggregate registry', () => {
  it('verify covers a registered aggregate with no other edit, and finds its drift', async () => {
    const report = await verifyStates(t.db, registry);
    expect(report.streamTypes).toEqual(['campaign', 'ledger']);
    expect(report).toMatchObject({ streams: 4, driftedStreams: 0 });

    await t.db.query("update ledger set balance = 99 where id = 'l-3'");
    const drifted = await verifyStates(t.db, registry);
    expect(drifted.drifts).toEqual([
      expect.objectContaining({
        kind: 'field',
        streamType: 'ledger',
        streamId: 'l-3',
        field: 'balance',
        row: 99,
        replay: 5,
      }),
    ]);
    await t.db.query("update ledger set balance = 5 where id = 'l-3'");
  });

  it('replay, state at a time, the sandbox and export cover it too', async () => {
    const replay = await replayStream(t.db, registry, { streamType: 'ledger', streamId: 'l-1' });
    expect(replay.events.map((e) => e.type)).toEqual(['Opened', 'Credited', 'Credited']);
    expect(replay.state).toEqual({ status: 'open', balance: 15 });
    expect(replay.commands[1]!.messages).toHaveLength(1); // each credit caused one outbox message

    const then = await stateAt(t.db, registry, { streamType: 'ledger', streamId: 'l-1' }, openedAt);
    expect(then).toMatchObject({ version: 2, state: { status: 'open', balance: 5 } });

    const sandbox = await buildSandbox(t.db, registry, { until: openedAt, into: 'sandbox_ledger' });
    expect(sandbox.tables.map((x) => [x.table, x.rows])).toEqual([
      ['campaign', 0],
      ['ledger', 3],
    ]);
    const { rows } = await t.db.query<{ id: string; status: string; balance: string }>(
      'select id, status, balance from sandbox_ledger.ledger order by id',
    );
    expect(rows).toEqual([
      { id: 'l-1', status: 'open', balance: '5' },
      { id: 'l-2', status: 'open', balance: '5' },
      { id: 'l-3', status: 'open', balance: '5' },
    ]);

    const lines: string[] = [];
    const counts = await exportJsonLines(
      t.db,
      { from: null, to: null, streamTypes: ['ledger'], events: true, receipts: false },
      (chunk) => {
        lines.push(...chunk.trim().split('\n'));
      },
    );
    expect(counts.events).toBe(8);
    expect(new Set(lines.map((l) => JSON.parse(l).streamType))).toEqual(new Set(['ledger']));
  });

  it('a stream type in the log that no registration claims makes verify fail loudly, library and CLI', async () => {
    // Herald's own registry does not know the ledger.
    const report = await verifyStates(t.db, heraldRegistry);
    expect(report.drifts).toEqual([
      expect.objectContaining({
        kind: 'unclaimed-stream-type',
        streamType: 'ledger',
        detail: expect.stringMatching(/no registered aggregate claims that stream type/),
      }),
    ]);
    expect(report.driftedStreams).toBe(1);

    const cli = await herald(t, ['verify']);
    expect(cli.code).toBe(1);
    expect(cli.stdout).toMatch(/DRIFT ledger\/\* unclaimed-stream-type/);
    // Restricting verify to known stream types skips the check (nothing else is wrong).
    expect((await herald(t, ['verify', '--stream-type', 'campaign'])).code).toBe(0);
  });

  it('refuses a stream type, projection or role registered twice', () => {
    expect(() => new AggregateRegistry([campaignRegistration, campaignRegistration])).toThrow(
      ValidationError,
    );
    expect(
      () =>
        new AggregateRegistry([campaignRegistration, ledgerRegistration(queue), ledgerRegistration(queue)]),
    ).toThrow(/stream type 'ledger' is registered twice/);
    expect(registry.amqpQueues).toContain(queue);
  });
});

describe('a slice is its registration', () => {
  it('the ledger brings its setting, sweeper, fenced consumer, route, live topic and CLI verb', async () => {
    const config = registry.loadConfig({
      DATABASE_URL: t.url,
      HERALD_SCHEMA: t.schema,
      HERALD_TEST_LEDGER_SETTLE_AT: '20',
    });
    expect(config.ledger.settleAt).toBe(20);
    expect(registry.settings.map((f) => f.key)).toContain('ledger');

    const handler = new CommandHandler({ db: t.db });
    const ledgers = handler.for(ledgerAggregate(queue));
    const id = 'org-ledger:s-1';
    await ledgers.handle(id, (now) => ({ type: 'Open', now }));
    await ledgers.handle(id, (now) => ({ type: 'Credit', amount: 25, now }));
    const context = { config, db: t.db, handler, logger: silentLogger, wakeups: { signal: () => {} } };

    // The scanner's sweepers include the ledger's: it claims the ledger at its setting.
    const sweeper = registry.sweepers(context).find((s) => s.name === 'ledger.settle');
    expect(sweeper).toBeDefined();
    await sweeper!.sweep();
    expect((await ledgerStore.load(t.db, id))?.state).toEqual({
      status: 'settling',
      balance: 25,
      claimEpoch: 1,
    });
    const { rows } = await t.db.query<{ message_id: string; payload: { ledgerId: string; epoch: number } }>(
      'select message_id::text, payload from outbox where destination = $1',
      [`${queue}.settle`],
    );
    expect(rows.map((r) => r.payload)).toEqual([{ ledgerId: id, epoch: 1 }]);

    // The worker's consumers include its fenced one: it settles the live claim, refuses a stale one.
    const consumer = registry.consumers(context).find((c) => c.consumer === 'ledger-settler');
    expect(consumer?.sources).toEqual([`${queue}.settle`]);
    const message = (payload: unknown, messageId: string): ConsumedMessage<unknown> => ({
      messageId,
      payload,
      headers: {},
      attempt: 1,
      queue: `${queue}.settle`,
      redelivered: false,
      afterCommit: () => {},
    });
    const handle = (payload: unknown, messageId: string) =>
      t.db.transaction((tx) => consumer!.handler(message(payload, messageId), tx));
    expect(await handle(rows[0]!.payload, rows[0]!.message_id)).toBe('processed');
    expect((await ledgerStore.load(t.db, id))?.state).toEqual({ status: 'open', balance: 0, claimEpoch: 1 });
    expect(await handle({ ledgerId: id, epoch: 1 }, '00000000-0000-4000-8000-00000000ab01')).toEqual({
      discard: 'ledger is open, not settling',
    });

    // The API serves its route (of the caller's organization only) and its live topic.
    const app = await buildApiServer({
      db: t.db,
      wakeups: context.wakeups,
      config,
      registry,
      logger: silentLogger,
      readiness: async () => ({ ok: true, checks: [] }),
    });
    try {
      const { key } = await createApiKey(t.db, {
        organizationId: 'org-ledger',
        role: 'viewer',
        createdBy: null,
      });
      const get = (path: string) => app.inject({ url: path, headers: { authorization: `Bearer ${key}` } });
      const found = await get(`/v1/ledgers/${encodeURIComponent(id)}`);
      expect(found.statusCode).toBe(200);
      expect(found.json()).toEqual({ status: 'open', balance: 0, claimEpoch: 1 });
      expect((await get(`/v1/ledgers/${encodeURIComponent('org-other:s-1')}`)).statusCode).toBe(404);
      expect((await get('/v1/stream/topics')).json().topics).toEqual([
        'campaigns',
        'ledgers',
        'outbox',
        'overview',
      ]);
    } finally {
      await app.close();
    }

    // The CLI spreads its verb.
    const printed: string[] = [];
    const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      printed.push(String(chunk));
      return true;
    });
    try {
      const code = await roleTable(registry).ledgers!.run({
        config,
        logger: silentLogger,
        registry,
        args: [],
        options: {},
        argv: ['show', id],
        signal: new AbortController().signal,
      });
      expect(code).toBe(0);
    } finally {
      write.mockRestore();
    }
    expect(JSON.parse(printed.join(''))).toEqual({ status: 'open', balance: 0, claimEpoch: 1 });
  });
});
