/**
 * State tables, generically: an aggregate's inline projection (invariant 1) is a table with one column
 * per state field and the stream version it reflects. From a column list this builds the statements
 * every state table needs — load one (optionally FOR UPDATE), load many (locked in key order), insert
 * and update in batches over arrays or one row with a parameter per column (each update guarded by its
 * expected version: a row that moved on fails the whole transaction with ConcurrencyError), and the
 * verify query for rows no stream explains (invariant 8) — and the row ↔ state conversion (times as
 * canonical ISO strings, absent as null).
 */
import { ConcurrencyError } from '../../errors.js';
import type { SqlClient } from '../../ports/database.js';
import type { StateStore, StateTableMapping } from '../../ports/state-store.js';

/** A column stored from a state field (read back into it), or computed from the state (write only). */
export type StateColumn<State> =
  | {
      readonly column: string;
      readonly type: string;
      readonly field: keyof State & string;
      /** Normalizes the stored value when a row is read (e.g. defaults for fields added to a jsonb later). */
      readonly read?: (stored: unknown) => unknown;
    }
  | { readonly column: string; readonly type: string; readonly compute: (state: State) => unknown };

export interface StateTableSpec<State> {
  readonly table: string;
  /** The stream type whose events explain the rows. */
  readonly streamType: string;
  /** The key column (the stream id) and its type: uuid keys are validated and compared lower-case. */
  readonly key: {
    readonly column: string;
    readonly type: 'uuid' | 'text';
    readonly field: keyof State & string;
  };
  readonly columns: readonly StateColumn<State>[];
  /** Turns a unique violation on insert into a domain error (e.g. a taken idempotency key), or undefined. */
  readonly onUniqueViolation?: (constraint: string, inserted: readonly State[]) => Error | undefined;
}

type Row = Record<string, unknown> & { version: number };
export interface StateWrite<State> {
  state: State;
  version: number;
  expectedVersion: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (id: string) => UUID.test(id);

/**
 * The statements every state table built in this process uses, by table: what the previous-release SQL
 * snapshot (test/upgrade/, ADR 0039) collects besides the query modules' constants, since these are
 * generated from the column lists rather than written out.
 */
export const GENERATED_STATEMENTS = new Map<string, Readonly<Record<string, string>>>();

export function stateTable<State>(spec: StateTableSpec<State>) {
  const { table, key } = spec;
  const all = [{ column: key.column, type: key.type, field: key.field }, ...spec.columns];
  const stored = all.filter((c): c is Extract<StateColumn<State>, { field: string }> => 'field' in c);
  const columnList = all.map((c) => c.column).join(', ');
  const qualified = all.map((c) => `t.${c.column}`).join(', ');
  const unnestArgs = all.map((c, i) => `$${i + 1}::${c.type}[]`).join(', ');
  const versionArg = all.length + 1;

  const select = `select ${columnList}, version from ${table} where ${key.column} = $1`;
  const selectMany = `
  select ${qualified}, t.version
    from unnest($1::${key.type}[]) as wanted(id) join ${table} t on t.${key.column} = wanted.id`;
  const statements = {
    columnList,
    qualified,
    select,
    selectForUpdate: `${select} for update`,
    /**
     * A join with unnest() rather than `= any($1)`: for a few thousand ids the planner prefers a
     * sequential scan of the whole table for `= any`, several times slower than the index look-ups.
     */
    selectMany,
    /** Locked in key order, so concurrent batches lock in one order. */
    selectManyForUpdate: `${selectMany} order by t.${key.column} for update of t`,
    insert: `
  insert into ${table} (${columnList}, version)
  select * from unnest(${unnestArgs}, $${versionArg}::int[])`,
    update: `
  update ${table} t
     set ${all
       .slice(1)
       .map((c) => `${c.column} = s.${c.column}`)
       .join(', ')}, version = s.version
    from unnest(${unnestArgs}, $${versionArg}::int[], $${versionArg + 1}::int[])
           as s(${columnList}, version, expected_version)
   where t.${key.column} = s.${key.column} and t.version = s.expected_version`,
    /**
     * One row, with one parameter per column: what a single command writes. PostgreSQL then parses no
     * array per column (the batch form's `unnest` costs about twice the server time for one row).
     */
    updateOne: `
  update ${table}
     set ${all
       .slice(1)
       .map((c, i) => `${c.column} = $${i + 2}::${c.type}`)
       .join(', ')}, version = $${versionArg}
   where ${key.column} = $1::${key.type} and version = $${versionArg + 1}`,
    withoutEvents: `
  select t.${key.column}::text as id from ${table} t
   where not exists (select 1 from event e where e.stream_type = '${spec.streamType}' and e.stream_id = t.${key.column}::text)
   order by t.${key.column}
   limit $1`,
  };

  GENERATED_STATEMENTS.set(table, statements);

  const validKey = (id: string) => key.type !== 'uuid' || UUID.test(id);
  const rowKey = (id: string) => (key.type === 'uuid' ? id.toLowerCase() : id);

  function fromRow(row: Row): { state: State; version: number } {
    const state: Record<string, unknown> = {};
    for (const { column, field, read } of stored) {
      const value = row[column];
      const plain = value instanceof Date ? value.toISOString() : (value ?? null);
      state[field] = read ? read(plain) : plain;
    }
    return { state: state as State, version: row.version };
  }

  function columnValue(c: (typeof all)[number], state: State): unknown {
    const value = 'compute' in c ? c.compute(state) : (state as Record<string, unknown>)[c.field];
    if (value === undefined || value === null) return null;
    // jsonb parameters as JSON text (a JS array would be sent as a PostgreSQL array).
    return c.type === 'jsonb' ? JSON.stringify(value) : value;
  }

  function columnArrays(states: readonly State[]): unknown[][] {
    return all.map((c) => states.map((state) => columnValue(c, state)));
  }

  return {
    table,
    ...statements,
    fromRow,
    rowKey,

    async load(sql: SqlClient, id: string, options: { forUpdate?: boolean } = {}) {
      if (!validKey(id)) return null;
      const { rows } = await sql.query<Row>(options.forUpdate ? statements.selectForUpdate : select, [id]);
      return rows[0] ? fromRow(rows[0]) : null;
    },

    /** Rows by key (as PostgreSQL spells them: uuids lower-case); invalid or missing keys are absent. */
    async loadMany(sql: SqlClient, ids: readonly string[], options: { forUpdate?: boolean } = {}) {
      const valid = [...new Set(ids.filter(validKey))];
      if (valid.length === 0) return new Map<string, { state: State; version: number }>();
      const { rows } = await sql.query<Row>(options.forUpdate ? statements.selectManyForUpdate : selectMany, [
        valid,
      ]);
      return new Map(rows.map((row) => [String(row[key.column]), fromRow(row)]));
    },

    /** Inserts new rows (expectedVersion 0) and updates existing ones, each guarded by its expected version. */
    async save(sql: SqlClient, writes: readonly StateWrite<State>[]): Promise<void> {
      const inserts = writes.filter((w) => w.expectedVersion === 0);
      const updates = writes.filter((w) => w.expectedVersion > 0);
      if (inserts.length > 0) {
        try {
          await sql.query(statements.insert, [
            ...columnArrays(inserts.map((w) => w.state)),
            inserts.map((w) => w.version),
          ]);
        } catch (error) {
          const pgError = error as { code?: string; constraint?: string };
          if (pgError.code === '23505' && pgError.constraint && spec.onUniqueViolation) {
            const translated = spec.onUniqueViolation(
              pgError.constraint,
              inserts.map((w) => w.state),
            );
            if (translated) throw translated;
          }
          throw error;
        }
      }
      if (updates.length === 1) {
        const [w] = updates as [StateWrite<State>];
        const { rowCount } = await sql.query(statements.updateOne, [
          ...all.map((c) => columnValue(c, w.state)),
          w.version,
          w.expectedVersion,
        ]);
        if (rowCount !== 1) throw new ConcurrencyError(`1 ${table} row(s) changed concurrently`);
      } else if (updates.length > 0) {
        const { rowCount } = await sql.query(statements.update, [
          ...columnArrays(updates.map((w) => w.state)),
          updates.map((w) => w.version),
          updates.map((w) => w.expectedVersion),
        ]);
        if (rowCount !== updates.length) {
          throw new ConcurrencyError(`${updates.length - rowCount} ${table} row(s) changed concurrently`);
        }
      }
    },

    async rowsWithoutEvents(sql: SqlClient, limit: number): Promise<string[]> {
      const { rows } = await sql.query<{ id: string }>(statements.withoutEvents, [limit]);
      return rows.map((row) => row.id);
    },

    /** Converts rows a custom query selected (`columnList, version`). */
    rows(rows: readonly Row[]) {
      return rows.map(fromRow);
    },
  };
}

export type StateTable<State> = ReturnType<typeof stateTable<State>>;

type Stored<State> = { state: State; version: number };

/**
 * An aggregate's state store (the command handler's) and state table mapping (replay's, verify's) over
 * a state table whose rows are the aggregate's states other than the initial `NONE`.
 */
export function tableBackedState<State extends { status: string }, Event>(
  table: StateTable<Exclude<State, { status: 'NONE' }>>,
  parseEvent: (raw: { type: string; data: unknown }) => Event,
): { store: StateStore<State>; stateTable: StateTableMapping<State, Event> } {
  type Row = Exclude<State, { status: 'NONE' }>;
  const row = (state: State): Row => {
    if (state.status === 'NONE') throw new Error(`a ${table.table} state row cannot be NONE`);
    return state as Row;
  };
  const writes = (list: readonly { state: State; version: number; expectedVersion: number }[]) =>
    list.map((w) => ({ state: row(w.state), version: w.version, expectedVersion: w.expectedVersion }));
  return {
    store: {
      load: (sql, id, options) => table.load(sql, id, options) as Promise<Stored<State> | null>,
      async loadMany(sql, ids, options) {
        const rows = (await table.loadMany(sql, ids, options)) as Map<string, Stored<State>>;
        // Keyed by the ids as given (PostgreSQL returns uuids lower-case).
        const byId = new Map<string, Stored<State>>();
        for (const id of ids) {
          const found = rows.get(table.rowKey(id));
          if (found) byId.set(id, found);
        }
        return byId;
      },
      save: (sql, _id, state, version, expectedVersion) =>
        table.save(sql, writes([{ state, version, expectedVersion }])),
      saveMany: (sql, list) => table.save(sql, writes(list)),
    },
    stateTable: {
      table: table.table,
      parseEvent,
      exists: (state) => state.status !== 'NONE',
      loadRows: (sql, ids) => table.loadMany(sql, ids) as Promise<Map<string, Stored<State>>>,
      insertRows: (sql, rows) => table.save(sql, writes(rows.map((r) => ({ ...r, expectedVersion: 0 })))),
      rowsWithoutEvents: (sql, limit) => table.rowsWithoutEvents(sql, limit),
      rowKey: table.rowKey,
    },
  };
}
