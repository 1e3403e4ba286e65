/**
 * A minimal aggregate used to test the event store, the command handler and the registry in isolation
 * from Herald's business aggregates: a ledger that can be opened, credited and closed; each credit
 * causes one outbox message. A ledger whose balance reaches its setting (HERALD_TEST_LEDGER_SETTLE_AT)
 * is claimed for settlement by its sweeper (epoch, message) and settled by its fenced consumer. Its
 * state table is created by `createLedgerTable`; `ledgerRegistration` registers the whole slice — its
 * descriptor with the fenced claim, setting, sweeper, consumer, service, route, live topic and CLI verb
 * — the way a real slice is registered (docs/adding-an-aggregate.md).
 */

import { principalOf } from '../../src/api/http.js';
import type { RouteDeps } from '../../src/api/module.js';
import { oneShot, out, parse, servicesOn, UsageError } from '../../src/cli/one-shot.js';
import type { Decider } from '../../src/domain/decider.js';
import { ConcurrencyError, IllegalStateError, NotFoundError, ValidationError } from '../../src/errors.js';
import type { ClaimedAggregate } from '../../src/eventstore/aggregate.js';
import type { SqlClient } from '../../src/ports/database.js';
import type { StateStore } from '../../src/ports/state-store.js';
import { defineAggregate } from '../../src/registry/module.js';
import { defineClaimSweeper } from '../../src/scanner/sweeper.js';
import { defineSettings, describeSetting } from '../../src/settings/fragment.js';
import { positiveInt } from '../../src/settings/validators.js';
import { defineConsumer } from '../../src/worker/consumer-definition.js';
import { fencedHandler } from '../../src/worker/fenced-handler.js';

/** `claimEpoch` appears once a ledger was first claimed for settlement. */
export type LedgerState =
  | { status: 'none' }
  | { status: 'open' | 'closed'; balance: number; claimEpoch?: number }
  | { status: 'settling'; balance: number; claimEpoch: number };
export type LedgerCommand =
  | { type: 'Open'; now: Date }
  | { type: 'Credit'; amount: number; now: Date }
  | { type: 'Close'; now: Date }
  | { type: 'ClaimSettlement'; now: Date }
  | { type: 'Settle'; epoch: number; now: Date };
export type LedgerEvent =
  | { type: 'Opened'; data: { at: string } }
  | { type: 'Credited'; data: { amount: number } }
  | { type: 'Closed'; data: Record<string, never> }
  | { type: 'SettlementClaimed'; data: { epoch: number } }
  | { type: 'Settled'; data: { epoch: number; amount: number } };

const epochOf = (state: LedgerState) => (state.status === 'none' ? 0 : (state.claimEpoch ?? 0));

const claimEpochOf = (state: LedgerState) =>
  state.status !== 'none' && state.claimEpoch !== undefined ? { claimEpoch: state.claimEpoch } : {};

export const ledgerDecider: Decider<LedgerState, LedgerCommand, LedgerEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    switch (command.type) {
      case 'Open':
        if (state.status !== 'none') throw new IllegalStateError('already open');
        return [{ type: 'Opened', data: { at: command.now.toISOString() } }];
      case 'Credit':
        if (state.status !== 'open') throw new IllegalStateError('not open');
        return [{ type: 'Credited', data: { amount: command.amount } }];
      case 'Close':
        if (state.status !== 'open') throw new IllegalStateError('not open');
        return [{ type: 'Closed', data: {} }];
      case 'ClaimSettlement':
        if (state.status !== 'open') throw new IllegalStateError('not open');
        return [{ type: 'SettlementClaimed', data: { epoch: epochOf(state) + 1 } }];
      case 'Settle':
        if (state.status !== 'settling') throw new IllegalStateError('not settling');
        if (state.claimEpoch !== command.epoch) throw new IllegalStateError('stale epoch');
        return [{ type: 'Settled', data: { epoch: command.epoch, amount: state.balance } }];
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'Opened':
        return { status: 'open', balance: 0 };
      case 'Credited':
        return {
          ...claimEpochOf(state),
          status: 'open',
          balance: (state.status === 'open' ? state.balance : 0) + event.data.amount,
        };
      case 'Closed':
        return {
          ...claimEpochOf(state),
          status: 'closed',
          balance: state.status === 'none' ? 0 : state.balance,
        };
      case 'SettlementClaimed':
        return {
          status: 'settling',
          balance: state.status === 'none' ? 0 : state.balance,
          claimEpoch: event.data.epoch,
        };
      case 'Settled':
        return { status: 'open', balance: 0, claimEpoch: event.data.epoch };
    }
  },
};

export async function createLedgerTable(sql: SqlClient): Promise<void> {
  await sql.query(`create table ledger (
    id text primary key, status text not null, balance numeric not null, version int not null,
    claim_epoch int)`);
}

export const ledgerStore: StateStore<LedgerState> = {
  async load(sql, id, options) {
    const { rows } = await sql.query<LedgerRow>(
      `select id, status, balance, version, claim_epoch from ledger where id = $1${options?.forUpdate ? ' for update' : ''}`,
      [id],
    );
    const row = rows[0];
    return row ? { state: stateOf(row), version: row.version } : null;
  },
  async save(sql, id, state, version, expectedVersion) {
    if (state.status === 'none') return;
    const result =
      expectedVersion === 0
        ? await sql.query(
            'insert into ledger (id, status, balance, version, claim_epoch) values ($1, $2, $3, $4, $5) on conflict do nothing',
            [id, state.status, state.balance, version, state.claimEpoch ?? null],
          )
        : await sql.query(
            'update ledger set status = $2, balance = $3, version = $4, claim_epoch = $6 where id = $1 and version = $5',
            [id, state.status, state.balance, version, expectedVersion, state.claimEpoch ?? null],
          );
    if (result.rowCount !== 1) throw new ConcurrencyError(`ledger ${id} changed concurrently`);
  },
};

const LEDGER_EVENTS = new Set(['Opened', 'Credited', 'Closed', 'SettlementClaimed', 'Settled']);

type LedgerRow = {
  id: string;
  status: 'open' | 'closed' | 'settling';
  balance: string;
  version: number;
  claim_epoch: number | null;
};

function stateOf(row: LedgerRow): LedgerState {
  const balance = Number(row.balance);
  if (row.status === 'settling') return { status: 'settling', balance, claimEpoch: row.claim_epoch! };
  return {
    status: row.status,
    balance,
    ...(row.claim_epoch !== null ? { claimEpoch: row.claim_epoch } : {}),
  };
}

/** The queue a ledger's settlement claim sends its message to. */
export const settleQueueOf = (queue: string) => `${queue}.settle`;

export function ledgerAggregate(queue: string): ClaimedAggregate<LedgerState, LedgerCommand, LedgerEvent> {
  return {
    streamType: 'ledger',
    decider: ledgerDecider,
    store: ledgerStore,
    messagesFor: ({ event, streamId, state }) =>
      event.type === 'Credited'
        ? [{ destination: queue, payload: { ledgerId: streamId, amount: event.data.amount, state } }]
        : event.type === 'SettlementClaimed'
          ? [{ destination: settleQueueOf(queue), payload: { ledgerId: streamId, epoch: event.data.epoch } }]
          : [],
    claim: {
      noun: 'ledger',
      idField: 'ledgerId',
      liveStatuses: ['settling'],
      discard: {
        streamType: 'ledger_settlement',
        eventType: 'LedgerSettlementDiscarded',
        description: 'LedgerSettlementDiscarded: a settlement message the destination re-check refused',
      },
    },
    stateTable: {
      table: 'ledger',
      parseEvent(raw) {
        if (!LEDGER_EVENTS.has(raw.type)) throw new ValidationError(`not a ledger event: ${raw.type}`);
        return raw as LedgerEvent;
      },
      exists: (state) => state.status !== 'none',
      async loadRows(sql, ids) {
        const { rows } = await sql.query<LedgerRow>(
          'select id, status, balance, version, claim_epoch from ledger where id = any($1)',
          [ids],
        );
        return new Map(rows.map((r) => [r.id, { state: stateOf(r), version: r.version }]));
      },
      async insertRows(sql, rows) {
        for (const row of rows) {
          if (row.state.status === 'none') continue;
          await sql.query(
            'insert into ledger (id, status, balance, version, claim_epoch) values ($1, $2, $3, $4, $5)',
            [row.streamId, row.state.status, row.state.balance, row.version, row.state.claimEpoch ?? null],
          );
        }
      },
      async rowsWithoutEvents(sql, limit) {
        const { rows } = await sql.query<{ id: string }>(
          `select id from ledger l where not exists
             (select 1 from event e where e.stream_type = 'ledger' and e.stream_id = l.id) order by id limit $1`,
          [limit],
        );
        return rows.map((r) => r.id);
      },
    },
  };
}

/** The test ledger's setting: the balance at which its sweeper claims a ledger for settlement. */
export const ledgerSettings = defineSettings({
  key: 'ledger',
  title: 'Test ledger',
  env: {
    HERALD_TEST_LEDGER_SETTLE_AT: describeSetting(
      positiveInt.default(100),
      'the test ledger: a balance at least this high is claimed for settlement',
    ),
  },
  map: (e) => ({ settleAt: e.HERALD_TEST_LEDGER_SETTLE_AT }),
});

const LOCK_SETTLEABLE = `
  select id, status, balance, version, claim_epoch from ledger
   where status = 'open' and balance >= $1 order by id for update skip locked limit $2`;

/** The ledger's service, as its route and CLI verb use it. */
export interface LedgerServices {
  ledgers: { get(id: string): Promise<LedgerState | undefined> };
}

/**
 * The ledger registered like any slice: its descriptor and queues, and every part around it — a
 * setting, the settlement sweeper, the fenced settlement consumer, a service, a route
 * (`GET /v1/ledgers/:id`, of the caller's organization: ids are `<organization>:<name>`), a live topic
 * and a CLI verb (`herald ledgers show <id>`).
 */
export function ledgerRegistration(queue: string) {
  const aggregate = ledgerAggregate(queue);
  return defineAggregate({
    aggregate,
    settings: [ledgerSettings],
    topology: { amqpQueues: [queue, settleQueueOf(queue)] },
    sweepers: ({ config, db, handler, logger, wakeups }) => [
      defineClaimSweeper(
        {
          name: 'ledger.settle',
          aggregate,
          actor: 'ledger-settler',
          lockDue: async (tx, limit) => {
            const { rows } = await tx.query<LedgerRow>(LOCK_SETTLEABLE, [config.ledger.settleAt, limit]);
            return rows.map((r) => ({ streamId: r.id, state: stateOf(r), version: r.version }));
          },
          command: (_stream, now) => ({ type: 'ClaimSettlement', now }),
        },
        { db, handler, logger, wakeups, batchSize: config.scanner.batchSize },
      ),
    ],
    consumers: ({ handler, logger }) => [
      defineConsumer({
        consumer: 'ledger-settler',
        transport: 'amqp',
        sources: [settleQueueOf(queue)],
        parse: (payload) => payload as { ledgerId: string; epoch: number },
        handler: fencedHandler(
          {
            consumer: 'ledger-settler',
            aggregate,
            effect: async () => {},
            complete: ({ epoch }, now) => ({ type: 'Settle' as const, epoch, now }),
            fail: ({ epoch }, _reason, now) => ({ type: 'Settle' as const, epoch, now }),
          },
          { handler, logger },
        ),
      }),
    ],
    service: ({ db }): LedgerServices => ({
      ledgers: { get: async (id) => (await ledgerStore.load(db, id))?.state },
    }),
    api: {
      routes: async (app, { commands }: RouteDeps<LedgerServices>) => {
        app.get('/ledgers/:id', async (request) => {
          const { id } = request.params as { id: string };
          const state = id.startsWith(`${principalOf(request).organizationId}:`)
            ? await commands.readers.ledgers.get(id)
            : undefined;
          if (!state) throw new NotFoundError(`ledger ${id} not found`);
          return state;
        });
      },
      topics: { ledgers: [aggregate.streamType] },
    },
    cli: {
      ledgers: {
        summary: 'the test ledger: show <id>',
        run: oneShot('herald ledgers show <id>', async (context, db) => {
          const [sub, id] = parse(context.argv, {}).positionals;
          if (sub !== 'show' || !id) throw new UsageError('expected show <id>');
          const state = await servicesOn<LedgerServices>(context, db).ledgers.get(id);
          if (!state) throw new NotFoundError(`ledger ${id} not found`);
          out(JSON.stringify(state));
          return 0;
        }),
      },
    },
  });
}
