/**
 * State models: for every registered aggregate (src/registry/ builds one from each descriptor), how to fold its events with the pure decider (parse, then `evolve`) and how to read and
 * write its rows, with the aggregate's types erased. Replay, verify and the point-in-time sandbox work
 * on any stream type with a state model, which is how invariant 8 ("folding a stream's events through
 * the pure evolve gives exactly its state row") is checked for every aggregate.
 */
import type { Decider, DomainEvent } from '../domain/decider.js';
import { type EventSchemas, noEventSchemas, UnsupportedEventVersionError } from '../domain/event-schemas.js';
import type { SqlClient } from '../ports/database.js';
import type { StoredEvent } from '../ports/events.js';
import type { StateTableMapping } from '../ports/state-store.js';

/** A stored event as a fold reads it: a missing schema version is version 1 (ADR 0039). */
export type FoldedEvent = Pick<StoredEvent, 'type' | 'data'> & { readonly schemaVersion?: number };

/** A state row (or folded state) as plain fields, for field-by-field comparison and printing. */
export type StateFields = Readonly<Record<string, unknown>>;

/** A fold in progress and the row it should equal, with the stream type's types erased. */
export interface StateModel {
  readonly streamType: string;
  /** The state table (in the configured schema); the sandbox creates one LIKE it. */
  readonly table: string;
  /** Streams whose messages' effects live in other streams keyed by the message id (replay). */
  readonly messageEffectStreams: readonly string[];
  initial(): unknown;
  /**
   * Upcasts the stored event to the current shape (the aggregate's event schemas), validates it and
   * folds it; throws ValidationError / IllegalStateError on corruption, UnsupportedEventVersionError for
   * a version newer than this release reads.
   */
  apply(state: unknown, event: FoldedEvent): unknown;
  /** A stored event with its data in the current shape (what every reader shows; ADR 0039). */
  upcast<E extends FoldedEvent>(event: E): E;
  /** False for the initial "no such stream" state (nothing to store). */
  exists(state: unknown): boolean;
  fields(state: unknown): StateFields;
  /** State rows by stream id (lower-case ids for uuid keys). */
  loadRows(
    sql: SqlClient,
    streamIds: readonly string[],
  ): Promise<Map<string, { fields: StateFields; version: number }>>;
  /** Inserts folded states as rows (into whatever `table` resolves to on the connection's search_path). */
  insertRows(
    sql: SqlClient,
    rows: readonly { streamId: string; state: unknown; version: number }[],
  ): Promise<void>;
  /** Stream ids of rows no event explains (at most `limit`). */
  rowsWithoutEvents(sql: SqlClient, limit: number): Promise<string[]>;
  /** The key rows are stored under for a stream id. */
  rowKey(streamId: string): string;
  /** The organization a state (or a row's fields) belongs to, or null: the aggregate's `organizationOf`. */
  organizationOf(state: unknown): string | null;
  /**
   * The organization a stream belongs to, from its first event (what it was created for: the log, not a
   * row that may have drifted): the state that event folds to, or, when it cannot be folded, the event's
   * own `organizationId` field. The organization filter of stream scans (verify per organization).
   */
  organizationOfStream(first: FoldedEvent): string | null;
}

/**
 * The state models replay, verify, the sandbox and the API read: every stream type a registration
 * claims (its aggregates' and side streams'), and the models of those with a state table.
 */
export interface StateModelCatalogue {
  readonly stateModels: ReadonlyMap<string, StateModel>;
  /** Every stream type a registration claims: aggregates and their side streams. */
  readonly streamTypes: readonly string[];
  /** The model of a stream type; throws ValidationError naming the known ones. */
  stateModelFor(streamType: string): StateModel;
  /** A stored event in the current shape of its stream type (every reader of the log; ADR 0039). */
  upcast<E extends FoldedEvent & { readonly streamType: string }>(event: E): E;
}

/**
 * A stored event upcast by a state model, or, for a stream type without one (a side stream), checked
 * to be version 1: a newer version is refused like any version a release does not read.
 */
export function upcastWith<E extends FoldedEvent & { readonly streamType: string }>(
  model: StateModel | undefined,
  event: E,
): E {
  if (model) return model.upcast(event);
  const version = event.schemaVersion ?? 1;
  if (version !== 1) throw new UnsupportedEventVersionError(event.streamType, event.type, version, 1);
  return event;
}

interface StateModelDefinition<State, Event extends DomainEvent> extends StateTableMapping<State, Event> {
  streamType: string;
  messageEffectStreams?: readonly string[];
  decider: Pick<Decider<State, never, Event>, 'evolve' | 'initialState'>;
  /** The organization of a state (the descriptor's); default: its `organizationId` field. */
  organizationOf?: (state: State) => string | null;
  /** The aggregate's event schemas (ADR 0039); default: every event at version 1. */
  events?: EventSchemas;
}

/** A state's (or an event's data's) `organizationId` field, when it is a string. */
const organizationField = (value: unknown): string | null => {
  const id = (value as { organizationId?: unknown } | null)?.organizationId;
  return typeof id === 'string' ? id : null;
};

/** Builds a registry entry; the casts below are the one place the entry's types are erased. */
export function defineStateModel<State, Event extends DomainEvent>(
  definition: StateModelDefinition<State, Event>,
): StateModel {
  const { decider } = definition;
  const schemas = definition.events ?? noEventSchemas(definition.streamType);
  const upcast = <E extends FoldedEvent>(event: E): E => schemas.current(event);
  const parse = (event: FoldedEvent) => definition.parseEvent({ type: event.type, data: upcast(event).data });
  const organizationOf = (state: unknown): string | null =>
    definition.organizationOf ? definition.organizationOf(state as State) : organizationField(state);
  return {
    streamType: definition.streamType,
    table: definition.table,
    messageEffectStreams: definition.messageEffectStreams ?? [],
    initial: () => decider.initialState(),
    apply: (state, event) => decider.evolve(state as State, parse(event)),
    upcast,
    exists: (state) => definition.exists(state as State),
    fields: (state) => ({ ...(state as object) }),
    loadRows: async (sql, ids) => {
      const loaded = await definition.loadRows(sql, ids);
      return new Map(
        [...loaded].map(([id, row]) => [id, { fields: { ...(row.state as object) }, version: row.version }]),
      );
    },
    insertRows: (sql, rows) =>
      definition.insertRows(
        sql,
        rows.map((row) => ({ streamId: row.streamId, state: row.state as State, version: row.version })),
      ),
    rowsWithoutEvents: definition.rowsWithoutEvents,
    rowKey: (id) => definition.rowKey?.(id) ?? id,
    organizationOf,
    organizationOfStream: (first) => {
      let state: State;
      try {
        state = decider.evolve(decider.initialState(), parse(first));
      } catch {
        return organizationField(first.data);
      }
      return organizationOf(state);
    },
  };
}
