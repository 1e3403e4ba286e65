/**
 * The aggregate descriptor: everything Herald's generic machinery needs to know about one kind of
 * stream, said once. The command handler uses the decider, the state store (the inline projection of
 * invariant 1), the messages its events cause and when a state is due; replay, verify, the sandbox and
 * export use the state table mapping (invariant 8: folding a stream through `evolve` gives its row).
 * Sweepers, consumers, topology and projections are registered next to it (registry.ts), so a new
 * aggregate is a decider, this descriptor, its queries, a migration and one registry line.
 */
import type { Decider, DomainEvent } from '../domain/decider.js';
import type { OutboxMessageSpec } from '../outbox/outbox-writer.js';
import type { SqlClient } from '../ports/database.js';

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

/** A stream loaded (and locked) by a sweep query, ready for a batch of commands. */
export interface LoadedStream<State> {
  streamId: string;
  state: State;
  version: number;
}

export interface MessageContext<State, Event> {
  streamId: string;
  event: Event;
  /** The state right after the event. */
  state: State;
  version: number;
}

/** What the command handler needs: one transaction per transition (invariant 1). */
export interface Aggregate<State, Command, Event extends DomainEvent> {
  readonly streamType: string;
  readonly decider: Decider<State, Command, Event>;
  readonly store: StateStore<State>;
  /** Messages an event causes, given the state right after it (written in the same transaction). */
  readonly messagesFor?: (context: MessageContext<State, Event>) => OutboxMessageSpec[] | undefined;
  /**
   * When this state is next due for a sweeper (an ISO time; one in the past is due now), or null. After
   * a commit leaves a state due within the scanners' poll interval, the command handler wakes them.
   */
  readonly dueAt?: (state: State) => string | null;
  /**
   * The organization a state belongs to (tenancy: recorded on the outbox rows its events cause, so the
   * API shows an organization only its own). Default: the state's `organizationId` field, which every
   * Herald aggregate has; null when it has none.
   */
  readonly organizationOf?: (state: State) => string | null;
}

/** The organization of a state: the descriptor's `organizationOf`, else its `organizationId` field. */
export function organizationOf<State>(
  aggregate: Pick<Aggregate<State, unknown, DomainEvent>, 'organizationOf'>,
  state: State,
): string | null {
  if (aggregate.organizationOf) return aggregate.organizationOf(state);
  const id = (state as { organizationId?: unknown } | null)?.organizationId;
  return typeof id === 'string' ? id : null;
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

export interface AggregateDescriptor<State, Command, Event extends DomainEvent>
  extends Aggregate<State, Command, Event> {
  readonly stateTable: StateTableMapping<State, Event>;
}
