/**
 * A fixture of three releases of one aggregate whose event changes shape (ADR 0039), for the upgrade
 * tests: a wallet that is opened and credited. Its `Credited` event was `{ amount }` in major units
 * (version 1) and becomes `{ amountMinor, currency }` (version 2):
 *
 *   - release N     reads and writes version 1; its decider knows only `{ amount }`;
 *   - release N+1   reads versions 1 and 2 (an upcaster), its decider knows only version 2, and it still
 *                   *writes* version 1 (a downcaster), because N — running beside it during the rollout —
 *                   cannot read version 2;
 *   - release N+2   writes version 2 (N is gone; N+1, which may run beside it, reads it).
 *
 * Every release keeps the same state table (the schema is expand/contract's business, not the event's),
 * and each `Credited` causes one message to the wallet's queue: `{ walletId, amount }` at message
 * version 1 from N, the same with an added `currency` (an additive change: still version 1) from N+1,
 * and `{ walletId, amountMinor, currency }` at message version 2 from N+2.
 */

import { z } from 'zod';
import type { Decider } from '../../src/domain/decider.js';
import { type EventSchemaDeclaration, EventSchemas } from '../../src/domain/event-schemas.js';
import { ConcurrencyError, IllegalStateError, ValidationError } from '../../src/errors.js';
import type { AggregateDescriptor } from '../../src/eventstore/aggregate.js';
import { MessageSchema } from '../../src/messaging/message-schemas.js';
import type { SqlClient } from '../../src/ports/database.js';
import { defineAggregate } from '../../src/registry/module.js';
import { defineConsumer } from '../../src/worker/consumer-definition.js';

export const WALLET = 'wallet';
export type Release = 'N' | 'N+1' | 'N+2';
export const RELEASES: readonly Release[] = ['N', 'N+1', 'N+2'];

export type WalletState = { status: 'none' } | { status: 'open'; balanceMinor: number; credits: number };
export type WalletCommand = { type: 'Open'; now: Date } | { type: 'Credit'; amountMinor: number; now: Date };

/** Version 1 of `Credited`: major units (what release N's decider knows). */
export type CreditedV1 = { amount: number };
/** Version 2 of `Credited`: minor units and a currency (what N+1's and N+2's deciders know). */
export type CreditedV2 = { amountMinor: number; currency: string };

type Opened = { type: 'Opened'; data: { organizationId: string } };
export type WalletEventV1 = Opened | { type: 'Credited'; data: CreditedV1 };
export type WalletEventV2 = Opened | { type: 'Credited'; data: CreditedV2 };

const opened = (state: WalletState): Extract<WalletState, { status: 'open' }> => {
  if (state.status !== 'open') throw new IllegalStateError('wallet is not open');
  return state;
};

/** A release's decider: `Credited` in the shape it knows, built from the minor amount and folded back. */
function walletDecider<Credited>(
  credited: (amountMinor: number) => Credited,
  minorOf: (data: Credited) => number | undefined,
): Decider<WalletState, WalletCommand, Opened | { type: 'Credited'; data: Credited }> {
  return {
    initialState: () => ({ status: 'none' }),
    decide(command, state) {
      if (command.type === 'Open') {
        if (state.status !== 'none') throw new IllegalStateError('wallet already open');
        return [{ type: 'Opened', data: { organizationId: 'org-1' } }];
      }
      opened(state);
      return [{ type: 'Credited', data: credited(command.amountMinor) }];
    },
    evolve(state, event) {
      if (event.type === 'Opened') return { status: 'open', balanceMinor: 0, credits: 0 };
      const open = opened(state);
      const minor = minorOf(event.data);
      if (minor === undefined || !Number.isInteger(minor))
        throw new ValidationError('Credited without its amount');
      return { ...open, balanceMinor: open.balanceMinor + minor, credits: open.credits + 1 };
    },
  };
}

/** Release N's decider: `Credited` is `{ amount }`. */
export const deciderN = walletDecider<CreditedV1>(
  (amountMinor) => ({ amount: amountMinor / 100 }),
  (data) => (typeof data.amount === 'number' ? Math.round(data.amount * 100) : undefined),
);

/** Releases N+1 and N+2's decider: `Credited` is `{ amountMinor, currency }`. */
export const deciderV2 = walletDecider<CreditedV2>(
  (amountMinor) => ({ amountMinor, currency: 'EUR' }),
  (data) => data.amountMinor,
);

/** The one change of `Credited`, 1 → 2 (and back, for the release that still writes 1). */
export const creditedV1toV2 = {
  type: 'Credited',
  from: 1,
  up: (data: unknown) => ({ amountMinor: Math.round((data as CreditedV1).amount * 100), currency: 'EUR' }),
};
export const creditedV2toV1 = {
  type: 'Credited',
  to: 1,
  down: (data: unknown) => {
    const v2 = data as CreditedV2;
    if (v2.currency !== 'EUR')
      throw new ValidationError(`version 1 of Credited has no currency ${v2.currency}`);
    return { amount: v2.amountMinor / 100 };
  },
};

export const SCHEMAS: Record<Release, EventSchemaDeclaration> = {
  N: {},
  'N+1': { upcasters: [creditedV1toV2], writes: { Credited: 1 }, downcasters: [creditedV2toV1] },
  'N+2': { upcasters: [creditedV1toV2] },
};

/** Message upcaster of the wallet queue: version 1 `{ walletId, amount }` → 2 `{ walletId, amountMinor, currency }`. */
export const walletMessagesV2 = new MessageSchema([
  {
    from: 1,
    up: (payload) => {
      const { amount, ...rest } = payload as { amount: number; walletId: string };
      return { ...rest, amountMinor: Math.round(amount * 100), currency: 'EUR' };
    },
  },
]);

export async function createWalletTable(sql: SqlClient): Promise<void> {
  await sql.query(`create table if not exists wallet (
    id text primary key, status text not null, balance_minor bigint not null, credits int not null,
    version int not null)`);
}

type Row = { id: string; status: 'open'; balance_minor: string; credits: number; version: number };
const stateOf = (row: Row): WalletState => ({
  status: 'open',
  balanceMinor: Number(row.balance_minor),
  credits: row.credits,
});

const EVENT_TYPES = new Set(['Opened', 'Credited']);

/** One release's descriptor of the wallet (its decider, its event schemas, its messages). */
export function walletAggregate(
  release: Release,
  queue: string,
): AggregateDescriptor<WalletState, WalletCommand, WalletEventV1 | WalletEventV2> {
  const decider = (release === 'N' ? deciderN : deciderV2) as Decider<
    WalletState,
    WalletCommand,
    WalletEventV1 | WalletEventV2
  >;
  return {
    streamType: WALLET,
    decider,
    events: new EventSchemas(WALLET, SCHEMAS[release]),
    messagesFor: ({ streamId, event }) => {
      if (event.type !== 'Credited') return [];
      if (release === 'N+2') {
        const data = event.data as CreditedV2;
        return [
          {
            destination: queue,
            version: 2,
            payload: { walletId: streamId, amountMinor: data.amountMinor, currency: data.currency },
          },
        ];
      }
      if (release === 'N') {
        return [
          { destination: queue, payload: { walletId: streamId, amount: (event.data as CreditedV1).amount } },
        ];
      }
      // N+1 adds a field to message version 1: an additive change, which old consumers ignore.
      const data = event.data as CreditedV2;
      return [
        {
          destination: queue,
          payload: { walletId: streamId, amount: data.amountMinor / 100, currency: data.currency },
        },
      ];
    },
    store: {
      async load(sql, id, options) {
        const { rows } = await sql.query<Row>(
          `select id, status, balance_minor, credits, version from wallet where id = $1${options?.forUpdate ? ' for update' : ''}`,
          [id],
        );
        return rows[0] ? { state: stateOf(rows[0]), version: rows[0].version } : null;
      },
      async save(sql, id, state, version, expectedVersion) {
        if (state.status === 'none') return;
        const result =
          expectedVersion === 0
            ? await sql.query(
                'insert into wallet (id, status, balance_minor, credits, version) values ($1, $2, $3, $4, $5) on conflict do nothing',
                [id, state.status, state.balanceMinor, state.credits, version],
              )
            : await sql.query(
                'update wallet set balance_minor = $2, credits = $3, version = $4 where id = $1 and version = $5',
                [id, state.balanceMinor, state.credits, version, expectedVersion],
              );
        if (result.rowCount !== 1) throw new ConcurrencyError(`wallet ${id} changed concurrently`);
      },
    },
    stateTable: {
      table: 'wallet',
      parseEvent(raw) {
        if (!EVENT_TYPES.has(raw.type)) throw new ValidationError(`not a wallet event: ${raw.type}`);
        return raw as WalletEventV1 | WalletEventV2;
      },
      exists: (state) => state.status !== 'none',
      async loadRows(sql, ids) {
        const { rows } = await sql.query<Row>(
          'select id, status, balance_minor, credits, version from wallet where id = any($1)',
          [ids],
        );
        return new Map(rows.map((r) => [r.id, { state: stateOf(r), version: r.version }]));
      },
      async insertRows(sql, rows) {
        for (const { streamId, state, version } of rows) {
          if (state.status === 'none') continue;
          await sql.query(
            'insert into wallet (id, status, balance_minor, credits, version) values ($1, $2, $3, $4, $5)',
            [streamId, state.status, state.balanceMinor, state.credits, version],
          );
        }
      },
      async rowsWithoutEvents(sql, limit) {
        const { rows } = await sql.query<{ id: string }>(
          `select id from wallet w where not exists
             (select 1 from event e where e.stream_type = 'wallet' and e.stream_id = w.id) order by id limit $1`,
          [limit],
        );
        return rows.map((r) => r.id);
      },
    },
  };
}

/** The queues of one side-by-side run: commands in, one message per credit out. */
export const walletQueues = (prefix: string) => ({
  commands: `${prefix}.commands`,
  credited: `${prefix}.credited`,
});

/** A command for a wallet, as the work queue carries it (message version 1 in every release). */
const WalletWork = z.object({
  walletId: z.string(),
  op: z.enum(['open', 'credit']),
  amountMinor: z.number().int().optional(),
});
/** The credited message as release N reads it (version 1; unknown fields dropped). */
const CreditedMessageV1 = z.object({ walletId: z.string(), amount: z.number() });
/** The credited message as N+1 and N+2 read it (version 2, older versions upcast). */
const CreditedMessageV2 = z.object({
  walletId: z.string(),
  amountMinor: z.number().int(),
  currency: z.string(),
});

export async function createCreditSeenTable(sql: SqlClient): Promise<void> {
  await sql.query(`create table if not exists wallet_credit_seen (
    message_id text primary key, wallet_id text not null, amount_minor bigint not null, release text not null)`);
}

/**
 * One release's whole wallet slice, as its role processes run it: the descriptor, a consumer that runs
 * the commands of the work queue (in its inbox transaction: each once), and a consumer of the credited
 * messages that records each once in `wallet_credit_seen` with the release that read it (N reads
 * message version 1; N+1 and N+2 read version 2, upcasting 1).
 */
export function walletRegistration(release: Release, prefix: string) {
  const queues = walletQueues(prefix);
  const aggregate = walletAggregate(release, queues.credited);
  return defineAggregate({
    aggregate,
    topology: { amqpQueues: [queues.commands, queues.credited] },
    consumers: ({ handler }) => [
      defineConsumer({
        consumer: 'wallet-commands',
        transport: 'amqp',
        sources: [queues.commands],
        parse: (payload) => WalletWork.parse(payload),
        handler: async (message, tx) => {
          const { walletId, op, amountMinor } = message.payload;
          const commands = handler.for(aggregate);
          const result = await commands.handleInTransaction(tx, walletId, (now) =>
            op === 'open' ? { type: 'Open', now } : { type: 'Credit', amountMinor: amountMinor ?? 0, now },
          );
          message.afterCommit(() => commands.signalAfterCommit([result]));
        },
      }),
      defineConsumer({
        consumer: 'wallet-ledger',
        transport: 'amqp',
        sources: [queues.credited],
        ...(release === 'N'
          ? {
              parse: (payload: unknown) => {
                const v1 = CreditedMessageV1.parse(payload);
                return { walletId: v1.walletId, amountMinor: Math.round(v1.amount * 100) };
              },
            }
          : { parse: (payload: unknown) => CreditedMessageV2.parse(payload), messages: walletMessagesV2 }),
        handler: async (message, tx) => {
          await tx.query(
            'insert into wallet_credit_seen (message_id, wallet_id, amount_minor, release) values ($1, $2, $3, $4)',
            [message.messageId, message.payload.walletId, message.payload.amountMinor, release],
          );
        },
      }),
    ],
  });
}
