/**
 * A minimal aggregate used to test the event store, the command handler and the registry in isolation
 * from Herald's business aggregates: a ledger that can be opened, credited and closed; each credit
 * causes one outbox message. Its state table is created by `createLedgerTable`; `ledgerRegistration`
 * registers it (descriptor, state table mapping, its queue) the way a real aggregate is registered.
 */

import type { Decider } from '../../src/domain/decider.js';
import { ConcurrencyError, IllegalStateError, ValidationError } from '../../src/errors.js';
import type { AggregateDescriptor } from '../../src/eventstore/aggregate.js';
import type { SqlClient } from '../../src/ports/database.js';
import type { StateStore } from '../../src/ports/state-store.js';
import { defineAggregate, type RegisteredAggregate } from '../../src/registry/module.js';

export type LedgerState = { status: 'none' } | { status: 'open' | 'closed'; balance: number };
export type LedgerCommand =
  | { type: 'Open'; now: Date }
  | { type: 'Credit'; amount: number; now: Date }
  | { type: 'Close'; now: Date };
export type LedgerEvent =
  | { type: 'Opened'; data: { at: string } }
  | { type: 'Credited'; data: { amount: number } }
  | { type: 'Closed'; data: Record<string, never> };

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
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'Opened':
        return { status: 'open', balance: 0 };
      case 'Credited':
        return { status: 'open', balance: (state.status === 'open' ? state.balance : 0) + event.data.amount };
      case 'Closed':
        return { status: 'closed', balance: state.status === 'none' ? 0 : state.balance };
    }
  },
};

export async function createLedgerTable(sql: SqlClient): Promise<void> {
  await sql.query(`create table ledger (
    id text primary key, status text not null, balance numeric not null, version int not null)`);
}

export const ledgerStore: StateStore<LedgerState> = {
  async load(sql, id, options) {
    const { rows } = await sql.query<{ status: 'open' | 'closed'; balance: string; version: number }>(
      `select status, balance, version from ledger where id = $1${options?.forUpdate ? ' for update' : ''}`,
      [id],
    );
    const row = rows[0];
    return row ? { state: { status: row.status, balance: Number(row.balance) }, version: row.version } : null;
  },
  async save(sql, id, state, version, expectedVersion) {
    if (state.status === 'none') return;
    const result =
      expectedVersion === 0
        ? await sql.query(
            'insert into ledger (id, status, balance, version) values ($1, $2, $3, $4) on conflict do nothing',
            [id, state.status, state.balance, version],
          )
        : await sql.query(
            'update ledger set status = $2, balance = $3, version = $4 where id = $1 and version = $5',
            [id, state.status, state.balance, version, expectedVersion],
          );
    if (result.rowCount !== 1) throw new ConcurrencyError(`ledger ${id} changed concurrently`);
  },
};

const LEDGER_EVENTS = new Set(['Opened', 'Credited', 'Closed']);

type LedgerRow = { id: string; status: 'open' | 'closed'; balance: string; version: number };

export function ledgerAggregate(queue: string): AggregateDescriptor<LedgerState, LedgerCommand, LedgerEvent> {
  return {
    streamType: 'ledger',
    decider: ledgerDecider,
    store: ledgerStore,
    messagesFor: ({ event, streamId, state }) =>
      event.type === 'Credited'
        ? [{ destination: queue, payload: { ledgerId: streamId, amount: event.data.amount, state } }]
        : [],
    stateTable: {
      table: 'ledger',
      parseEvent(raw) {
        if (!LEDGER_EVENTS.has(raw.type)) throw new ValidationError(`not a ledger event: ${raw.type}`);
        return raw as LedgerEvent;
      },
      exists: (state) => state.status !== 'none',
      async loadRows(sql, ids) {
        const { rows } = await sql.query<LedgerRow>(
          'select id, status, balance, version from ledger where id = any($1)',
          [ids],
        );
        return new Map(
          rows.map((r) => [
            r.id,
            { state: { status: r.status, balance: Number(r.balance) }, version: r.version },
          ]),
        );
      },
      async insertRows(sql, rows) {
        for (const row of rows) {
          if (row.state.status === 'none') continue;
          await sql.query('insert into ledger (id, status, balance, version) values ($1, $2, $3, $4)', [
            row.streamId,
            row.state.status,
            row.state.balance,
            row.version,
          ]);
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

/** The ledger registered like any aggregate: its descriptor and the queue its credits go to. */
export function ledgerRegistration(queue: string): RegisteredAggregate {
  return defineAggregate({ aggregate: ledgerAggregate(queue), topology: { amqpQueues: [queue] } });
}
