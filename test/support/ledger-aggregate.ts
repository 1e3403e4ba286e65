/**
 * A minimal aggregate used to test the event store and command handler in isolation from Herald's
 * business aggregates: a ledger that can be opened, credited and closed; each credit causes one
 * outbox message. Its state table is created by `createLedgerTable`.
 */

import type { Decider } from '../../src/domain/decider.js';
import { ConcurrencyError, IllegalStateError } from '../../src/errors.js';
import type { Aggregate, StateStore } from '../../src/eventstore/command-handler.js';
import type { SqlClient } from '../../src/ports/database.js';

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
  async load(sql, id) {
    const { rows } = await sql.query<{ status: 'open' | 'closed'; balance: string; version: number }>(
      'select status, balance, version from ledger where id = $1',
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

export function ledgerAggregate(queue: string): Aggregate<LedgerState, LedgerCommand, LedgerEvent> {
  return {
    streamType: 'ledger',
    decider: ledgerDecider,
    store: ledgerStore,
    messagesFor: ({ event, streamId, state }) =>
      event.type === 'Credited'
        ? [{ destination: queue, payload: { ledgerId: streamId, amount: event.data.amount, state } }]
        : [],
  };
}
