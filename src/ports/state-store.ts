/**
 * The state-table port: how the command handler, replay, verify and the sandbox read and write one
 * aggregate type's state rows (the inline projection of invariant 1, folded again by invariant 8).
 * Implemented by src/adapters/postgres/state-table.ts; declared by each aggregate's descriptor.
 */
import type { SqlClient } from './database.js';

export interface LoadOptions {
  /**
   * Lock the row for the rest of the transaction. Every writer that changes an existing stream takes
   * this lock before it appends, so all writers lock in one order (state row, then the event's unique
   * index entry) and never deadlock each other.
   */
  forUpdate?: boolean;
}

/** The inline projection of one aggregate type: its state table. */
export interface StateStore<State> {
  load(
    sql: SqlClient,
    streamId: string,
    options?: LoadOptions,
  ): Promise<{ state: State; version: number } | null>;
  /**
   * Inserts (expectedVersion 0) or updates the row guarded by `version = expectedVersion`;
   * must throw ConcurrencyError when no row matched.
   */
  save(
    sql: SqlClient,
    streamId: string,
    state: State,
    version: number,
    expectedVersion: number,
  ): Promise<void>;
  /**
   * Several rows, keyed by the stream ids as given (absent: no row); with `forUpdate`, locked in a
   * stable order (concurrent batches lock in one order). Consumers' batch forms use it.
   */
  loadMany?(
    sql: SqlClient,
    streamIds: readonly string[],
    options?: LoadOptions,
  ): Promise<Map<string, { state: State; version: number }>>;
  /** Batch form of `save` for sweeps; each write guarded by its own expected version. */
  saveMany?(
    sql: SqlClient,
    writes: readonly { streamId: string; state: State; version: number; expectedVersion: number }[],
  ): Promise<void>;
}

/** How a stream type's state rows are read and written by replay, verify and the sandbox. */
export interface StateTableMapping<State, Event> {
  /** The state table (in the configured schema); the sandbox creates one LIKE it. */
  readonly table: string;
  /** Validates a stored event (throws ValidationError: a malformed event in the log is corruption). */
  parseEvent(raw: { type: string; data: unknown }): Event;
  /** False for the initial "no such stream" state (nothing to store). */
  exists(state: State): boolean;
  /** State rows by stream id (the keys as `rowKey` spells them). */
  loadRows(
    sql: SqlClient,
    streamIds: readonly string[],
  ): Promise<Map<string, { state: State; version: number }>>;
  /** Inserts folded states (into whatever `table` resolves to on the connection's search_path). */
  insertRows(
    sql: SqlClient,
    rows: readonly { streamId: string; state: State; version: number }[],
  ): Promise<void>;
  /** Stream ids of rows no event explains (at most `limit`). */
  rowsWithoutEvents(sql: SqlClient, limit: number): Promise<string[]>;
  /** The key rows are stored under for a stream id (e.g. lower-case for uuid columns). Default: as is. */
  rowKey?(streamId: string): string;
}
