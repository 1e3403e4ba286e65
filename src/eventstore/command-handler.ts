/**
 * The generic command handler (invariant 1: one transaction per transition). For a pure decider it
 * loads the state row, reads `now()` from the database (invariant 6) into the command, runs `decide`,
 * folds the new events with `evolve`, and in ONE transaction appends the events at the expected
 * version, updates the state row (the inline projection) and inserts the outbox rows the events
 * cause. Any throw rolls all three back. After commit it signals the relay when outbox rows were
 * written, and the scanners when a state became due within their poll interval (the descriptor's
 * `dueAt`): coalesced NOTIFYs that only cut latency (invariant 7).
 */
import { randomUUID } from 'node:crypto';
import { appendEvents } from '../adapters/postgres/event-queries.js';
import type { DomainEvent } from '../domain/decider.js';
import { ConcurrencyError } from '../errors.js';
import { currentTraceparent, inSpan, tracingOn } from '../observability/tracing.js';
import { toOutboxRows, writeOutbox } from '../outbox/outbox-writer.js';
import type { Database, SqlClient } from '../ports/database.js';
import type { AppendedEvent, EventMeta } from '../ports/events.js';
import type { NewOutboxMessage } from '../ports/outbox.js';
import { channels, type WakeupSignal } from '../ports/wakeups.js';
import type { HeraldConfig } from '../settings/core.js';
import { type Aggregate, type LoadedStream, organizationOf } from './aggregate.js';

export interface BatchResult<State, Event> {
  results: CommandResult<State, Event>[];
  /** Streams whose command the decider refused (left unchanged), with the reason. */
  refused: { streamId: string; error: Error }[];
}

export interface CommandOptions {
  meta?: EventMeta;
  /** Fail with ConcurrencyError unless the stream is at this version (no retry). */
  expectedVersion?: number;
  /** Retries on ConcurrencyError from a fresh load when no expectedVersion is given. Default 3. */
  maxConflictRetries?: number;
}

export interface CommandResult<State, Event> {
  streamId: string;
  /** The transaction's database time the command was decided at. */
  now: Date;
  events: Event[];
  appended: AppendedEvent[];
  state: State;
  version: number;
  outbox: NewOutboxMessage[];
}

export interface CommandHandlerDeps {
  db: Database;
  wakeups?: WakeupSignal;
  pod?: string;
  /**
   * A commit that leaves a state due within this many ms (the descriptor's `dueAt`) wakes the
   * scanners; later ones are found by their poll, so pass the scanners' poll interval
   * (config.scanner.pollMs). Default 30 s, the default poll.
   */
  wakeHorizonMs?: number;
  /** The process's configuration, given to the descriptors' `messagesFor` (configured destinations). */
  config?: HeraldConfig;
}

const NOW = 'select now() as now';

export async function databaseNow(sql: SqlClient): Promise<Date> {
  const { rows } = await sql.query<{ now: Date }>(NOW);
  return rows[0]!.now;
}

export class CommandHandler {
  constructor(private readonly deps: CommandHandlerDeps) {}

  /** Binds an aggregate type, so commands are checked against its command union. */
  for<State, Command, Event extends DomainEvent>(
    aggregate: Aggregate<State, Command, Event>,
  ): AggregateCommands<State, Command, Event> {
    return new AggregateCommands(this.deps, aggregate);
  }
}

export class AggregateCommands<State, Command, Event extends DomainEvent> {
  constructor(
    private readonly deps: CommandHandlerDeps,
    readonly aggregate: Aggregate<State, Command, Event>,
  ) {}

  /** How an event the decider produced is stored: in the version this release writes (ADR 0039). */
  private encode(event: Event): { type: string; data: unknown; schemaVersion: number } {
    const schemas = this.aggregate.events;
    if (!schemas) return { type: event.type, data: event.data, schemaVersion: 1 };
    return { type: event.type, ...schemas.encode(event) };
  }

  /** Runs a command against one stream; `makeCommand` receives the transaction's database time. */
  async handle(
    streamId: string,
    makeCommand: (now: Date) => Command,
    options: CommandOptions = {},
  ): Promise<CommandResult<State, Event>> {
    const retries = options.expectedVersion === undefined ? (options.maxConflictRetries ?? 3) : 0;
    for (let attempt = 0; ; attempt++) {
      try {
        const result = await this.deps.db.transaction((tx) =>
          this.handleInTransaction(tx, streamId, makeCommand, options),
        );
        this.signalAfterCommit([result]);
        return result;
      } catch (error) {
        if (error instanceof ConcurrencyError && attempt < retries) continue;
        throw error;
      }
    }
  }

  /**
   * Runs a command against a state the caller holds — what its previous command on this stream returned
   * — without loading the row again: a writer that drives one stream step by step (the LINE delivery
   * records every chunk) saves a round trip per step. The row's update, guarded by the held version, is
   * the first write and takes the row lock (every writer's lock order: state row, then event), so a row
   * that moved on meanwhile (a heartbeat, a pause) is a ConcurrencyError before anything is written;
   * then, and when the held state decides nothing or refuses the command, it runs as `handle` runs it,
   * from a fresh load, and that decision stands.
   */
  async handleFrom(
    held: LoadedStream<State>,
    makeCommand: (now: Date) => Command,
    options: Pick<CommandOptions, 'meta'> = {},
  ): Promise<CommandResult<State, Event>> {
    let result: CommandResult<State, Event> | null;
    try {
      result = await this.deps.db.transaction((tx) =>
        tracingOn()
          ? inSpan(
              `command ${this.aggregate.streamType}`,
              { attributes: { 'herald.stream': `${this.aggregate.streamType}/${held.streamId}` } },
              () =>
                this.decideAndWriteFrom(tx, held, makeCommand, {
                  meta: { traceparent: currentTraceparent(), ...options.meta },
                }),
            )
          : this.decideAndWriteFrom(tx, held, makeCommand, options),
      );
    } catch (error) {
      if (!(error instanceof ConcurrencyError)) throw error;
      result = null;
    }
    if (result === null) return this.handle(held.streamId, makeCommand, options);
    this.signalAfterCommit([result]);
    return result;
  }

  /** handleFrom's transaction; null when the held state cannot decide it (the caller loads afresh). */
  private async decideAndWriteFrom(
    tx: SqlClient,
    held: LoadedStream<State>,
    makeCommand: (now: Date) => Command,
    options: Pick<CommandOptions, 'meta'>,
  ): Promise<CommandResult<State, Event> | null> {
    const { decider, store, streamType } = this.aggregate;
    const { streamId, version } = held;
    const now = await databaseNow(tx);
    let events: Event[];
    try {
      events = decider.decide(makeCommand(now), held.state);
    } catch {
      return null;
    }
    if (events.length === 0) return null;
    const states: State[] = [];
    let state = held.state;
    for (const event of events) {
      state = decider.evolve(state, event);
      states.push(state);
    }
    // Guarded by the held version; throws ConcurrencyError (nothing written) when the row moved on.
    await store.save(tx, streamId, state, version + events.length, version);
    const meta: EventMeta = { correlationId: randomUUID(), pod: this.deps.pod, ...options.meta };
    const appended = await appendEvents(
      tx,
      events.map((event, index) => ({
        streamType,
        streamId,
        version: version + index + 1,
        ...this.encode(event),
        meta,
      })),
    );
    const outbox: NewOutboxMessage[] = [];
    for (const [index, event] of events.entries()) {
      const after = states[index]!;
      const specs =
        this.aggregate.messagesFor?.({ streamId, event, state: after, version: version + index + 1 }) ?? [];
      const origin = {
        eventPosition: appended[index]!.position,
        eventType: event.type,
        streamType,
        streamId,
        meta,
        organizationId: organizationOf(this.aggregate, after),
      };
      outbox.push(...toOutboxRows(origin, specs));
    }
    await writeOutbox(tx, outbox);
    return { streamId, now, events, appended, state, version: version + events.length, outbox };
  }

  /**
   * The wake-ups a committed transaction owes: the relay when it wrote outbox rows, the scanners when
   * it left a state due within the wake horizon. Callers of the *InTransaction forms call this after
   * their own commit; `handle` does it itself.
   */
  signalAfterCommit(
    results: readonly CommandResult<State, Event>[],
    wakeups: WakeupSignal | undefined = this.deps.wakeups,
  ): void {
    if (!wakeups || results.length === 0) return;
    const schema = this.deps.db.schema;
    if (results.some((r) => r.outbox.length > 0)) wakeups.signal(channels.outbox(schema));
    // The dashboard's live stream (coalesced to one NOTIFY a second per process and stream type), told
    // which organizations changed: each organization's pages hear only of their own changes.
    const changed = new Set<string | null>();
    const outboxOf = new Set<string>();
    for (const result of results) {
      if (result.events.length > 0) changed.add(organizationOf(this.aggregate, result.state));
      for (const row of result.outbox) if (row.organizationId) outboxOf.add(row.organizationId);
    }
    for (const organizationId of changed) {
      wakeups.signal(channels.changed(schema, this.aggregate.streamType), organizationId);
    }
    for (const organizationId of outboxOf) wakeups.signal(channels.changed(schema, 'outbox'), organizationId);
    const dueAt = this.aggregate.dueAt;
    if (!dueAt) return;
    const horizon = this.deps.wakeHorizonMs ?? 30_000;
    const dueSoon = results.some((r) => {
      if (r.events.length === 0) return false;
      const due = dueAt(r.state);
      return due !== null && Date.parse(due) - r.now.getTime() <= horizon;
    });
    if (dueSoon) wakeups.signal(channels.due(schema));
  }

  /** The same, inside a transaction the caller owns (it must call signalAfterCommit after its commit). */
  handleInTransaction(
    tx: SqlClient,
    streamId: string,
    makeCommand: (now: Date) => Command,
    options: CommandOptions = {},
  ): Promise<CommandResult<State, Event>> {
    if (!tracingOn()) return this.decideAndWrite(tx, streamId, makeCommand, options);
    const { streamType } = this.aggregate;
    return inSpan(
      `command ${streamType}`,
      { attributes: { 'herald.stream': `${streamType}/${streamId}` } },
      () =>
        this.decideAndWrite(tx, streamId, makeCommand, {
          ...options,
          meta: { traceparent: currentTraceparent(), ...options.meta },
        }),
    );
  }

  private async decideAndWrite(
    tx: SqlClient,
    streamId: string,
    makeCommand: (now: Date) => Command,
    options: CommandOptions,
  ): Promise<CommandResult<State, Event>> {
    const { decider, store, streamType } = this.aggregate;
    const now = await databaseNow(tx);
    // The row lock first, then the append: every writer of an existing stream locks in this order
    // (sweeps lock their rows FOR UPDATE before appending too), so writers never deadlock each other.
    // A stream expected not to exist yet (version 0, e.g. a fresh uuid) is not looked up: if it does
    // exist after all, its first event's version collides and the append throws ConcurrencyError.
    const loaded = options.expectedVersion === 0 ? null : await store.load(tx, streamId, { forUpdate: true });
    const current = loaded?.state ?? decider.initialState();
    const version = loaded?.version ?? 0;
    if (options.expectedVersion !== undefined && options.expectedVersion !== version) {
      throw new ConcurrencyError(`stream ${streamType}/${streamId} is at version ${version}`, {
        streamType,
        streamId,
        expectedVersion: options.expectedVersion,
        actualVersion: version,
      });
    }
    const events = decider.decide(makeCommand(now), current);
    if (events.length === 0)
      return { streamId, now, events, appended: [], state: current, version, outbox: [] };

    const meta: EventMeta = { correlationId: randomUUID(), pod: this.deps.pod, ...options.meta };
    const appended = await appendEvents(
      tx,
      events.map((event, index) => ({
        streamType,
        streamId,
        version: version + index + 1,
        ...this.encode(event),
        meta,
      })),
    );
    let state = current;
    const outbox: NewOutboxMessage[] = [];
    for (const [index, event] of events.entries()) {
      state = decider.evolve(state, event);
      const specs =
        this.aggregate.messagesFor?.({
          streamId,
          event,
          state,
          version: version + index + 1,
          config: this.deps.config,
        }) ?? [];
      const origin = {
        eventPosition: appended[index]!.position,
        eventType: event.type,
        streamType,
        streamId,
        meta,
        organizationId: organizationOf(this.aggregate, state),
      };
      outbox.push(...toOutboxRows(origin, specs));
    }
    await store.save(tx, streamId, state, version + events.length, version);
    await writeOutbox(tx, outbox);
    return { streamId, now, events, appended, state, version: version + events.length, outbox };
  }

  /**
   * Sweeps: runs one command per stream already loaded and locked in `tx` (FOR UPDATE SKIP LOCKED),
   * then appends all events, saves all state rows and writes all outbox rows in three batch
   * statements — still one transaction (invariant 1). `makeCommand` may return null to skip a stream.
   */
  async handleBatchInTransaction(
    tx: SqlClient,
    streams: readonly LoadedStream<State>[],
    makeCommand: (stream: LoadedStream<State>, now: Date) => Command | null,
    options: Pick<CommandOptions, 'meta'> & {
      /** Each stream's own metadata (e.g. the message that caused its command), over `meta`. */
      metaFor?: (stream: LoadedStream<State>) => EventMeta;
    } = {},
  ): Promise<BatchResult<State, Event>> {
    const { decider, store, streamType } = this.aggregate;
    if (streams.length === 0) return { results: [], refused: [] };
    const now = await databaseNow(tx);
    const shared: EventMeta = { correlationId: randomUUID(), pod: this.deps.pod, ...options.meta };
    const metaOf = options.metaFor
      ? (stream: LoadedStream<State>) => ({ ...shared, ...options.metaFor!(stream) })
      : () => shared;
    const decided: { stream: LoadedStream<State>; events: Event[] }[] = [];
    const refused: BatchResult<State, Event>['refused'] = [];
    for (const stream of streams) {
      const command = makeCommand(stream, now);
      if (command === null) continue;
      try {
        const events = decider.decide(command, stream.state);
        if (events.length > 0) decided.push({ stream, events });
      } catch (error) {
        refused.push({ streamId: stream.streamId, error: error as Error });
      }
    }
    const appended = await appendEvents(
      tx,
      decided.flatMap(({ stream, events }) =>
        events.map((event, index) => ({
          streamType,
          streamId: stream.streamId,
          version: stream.version + index + 1,
          ...this.encode(event),
          meta: metaOf(stream),
        })),
      ),
    );
    let cursor = 0;
    const results: CommandResult<State, Event>[] = [];
    const outbox: NewOutboxMessage[] = [];
    for (const { stream, events } of decided) {
      let state = stream.state;
      const mine = appended.slice(cursor, cursor + events.length);
      cursor += events.length;
      const messages: NewOutboxMessage[] = [];
      for (const [index, event] of events.entries()) {
        state = decider.evolve(state, event);
        const version = stream.version + index + 1;
        const specs =
          this.aggregate.messagesFor?.({
            streamId: stream.streamId,
            event,
            state,
            version,
            config: this.deps.config,
          }) ?? [];
        const origin = {
          eventPosition: mine[index]!.position,
          eventType: event.type,
          streamType,
          streamId: stream.streamId,
          meta: metaOf(stream),
          organizationId: organizationOf(this.aggregate, state),
        };
        messages.push(...toOutboxRows(origin, specs));
      }
      outbox.push(...messages);
      results.push({
        streamId: stream.streamId,
        now,
        events,
        appended: mine,
        state,
        version: stream.version + events.length,
        outbox: messages,
      });
    }
    const writes = results.map((r) => ({
      streamId: r.streamId,
      state: r.state,
      version: r.version,
      expectedVersion: r.version - r.events.length,
    }));
    if (store.saveMany) await store.saveMany(tx, writes);
    else for (const w of writes) await store.save(tx, w.streamId, w.state, w.version, w.expectedVersion);
    await writeOutbox(tx, outbox);
    return { results, refused };
  }
}
