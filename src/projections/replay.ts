/**
 * `herald replay`: what happened to one stream and what the system believed at any moment
 * (invariant 8). For a stream it returns every event in order with its metadata, and the causal chain
 * of each command: command (correlation id, actor, pod) → its events → the outbox messages they caused
 * → each message's publish receipt(s) → the consumers' inbox records → the events the consumers
 * appended in response (their causation id is the message id). Receipts outlive outbox pruning, so the
 * chain is complete after the outbox row is gone: messages are found through the outbox while it
 * holds them, and through receipts (which keep message id → event position) always.
 *
 * `stateAt` folds the events recorded up to a time with the pure `evolve` of the stream type's state
 * model (from the registry). Everything is read in one repeatable-read snapshot.
 */

import { SNAPSHOT_READ_ONLY } from '../adapters/postgres/cursor-queries.js';
import { readStream, readStreams } from '../adapters/postgres/event-queries.js';
import { type PublishReceipt, receiptsForEvents } from '../adapters/postgres/receipt-queries.js';
import {
  type InboxTrace,
  inboxForMessages,
  type OutboxTrace,
  outboxForEvents,
} from '../adapters/postgres/replay-queries.js';
import { NotFoundError, ValidationError } from '../errors.js';
import type { Database } from '../ports/database.js';
import type { StoredEvent } from '../ports/events.js';
import type { FoldedEvent, StateModel, StateModelCatalogue } from './state-models.js';

export interface StreamRef {
  streamType: string;
  streamId: string;
}

/** `<streamType>/<streamId>`, e.g. `campaign/0b6f…`; the id is everything after the first slash. */
export function parseStreamRef(text: string): StreamRef {
  const slash = text.indexOf('/');
  if (slash <= 0 || slash === text.length - 1) {
    throw new ValidationError(`expected <streamType>/<streamId> (e.g. campaign/<uuid>), got '${text}'`, {
      stream: text,
    });
  }
  return { streamType: text.slice(0, slash), streamId: text.slice(slash + 1) };
}

export interface ReplayEvent {
  position: number;
  tx: string;
  version: number;
  type: string;
  data: unknown;
  meta: StoredEvent['meta'];
  recordedAt: Date;
}

export interface EffectTrace {
  streamType: string;
  streamId: string;
  version: number;
  position: number;
  type: string;
  actor: string | null;
  recordedAt: Date;
  /** Ids the outside world gave the effect (e.g. LINE's `requestId`), so the chain reaches past Herald. */
  externalRefs: Record<string, string>;
}

export interface MessageTrace {
  messageId: string;
  /** The event (in this stream) that caused the message. */
  eventVersion: number;
  eventPosition: number;
  sink: string;
  destination: string;
  /** The outbox row, while retention keeps it. */
  outbox: OutboxTrace | null;
  receipts: PublishReceipt[];
  inbox: InboxTrace[];
  effects: EffectTrace[];
}

export interface CommandTrace {
  tx: string;
  correlationId: string | null;
  causationId: string | null;
  actor: string | null;
  pod: string | null;
  recordedAt: Date;
  /** Versions of the events the command appended to this stream. */
  versions: number[];
  messages: MessageTrace[];
}

export interface StreamReplay extends StreamRef {
  version: number;
  events: ReplayEvent[];
  commands: CommandTrace[];
  /** The state folded from all events, when the stream type has a state model. */
  state: unknown;
}

export interface StateAt extends StreamRef {
  at: string;
  /** Version the stream had at that time (0: it did not exist yet). */
  version: number;
  lastEvent: { version: number; position: number; type: string; recordedAt: Date } | null;
  state: unknown;
}

const text = (value: unknown): string | null => (typeof value === 'string' ? value : null);

/**
 * An event's references to what happened outside Herald: its string fields named `requestId` or
 * `…RequestId` (a provider's id for the call, e.g. LINE's `x-line-request-id`) and `retryKey`.
 */
export function externalRefs(data: unknown): Record<string, string> {
  if (typeof data !== 'object' || data === null) return {};
  return Object.fromEntries(
    Object.entries(data).filter(
      (entry): entry is [string, string] =>
        typeof entry[1] === 'string' && /^(requestId|\w+RequestId|retryKey)$/.test(entry[0]),
    ),
  );
}

/** Folds events with a state model; the result is the state after the last one. */
export function foldEvents(model: StateModel, events: readonly FoldedEvent[]): unknown {
  let state = model.initial();
  for (const event of events) state = model.apply(state, event);
  return state;
}

export async function replayStream(
  db: Database,
  registry: StateModelCatalogue,
  ref: StreamRef,
): Promise<StreamReplay> {
  return db.transaction(async (tx) => {
    await tx.query(SNAPSHOT_READ_ONLY);
    const events = (await readStream(tx, ref.streamType, ref.streamId)).map((e) => registry.upcast(e));
    if (events.length === 0)
      throw new NotFoundError(`stream ${ref.streamType}/${ref.streamId} has no events`);
    const positions = events.map((e) => e.position);
    const outbox = await outboxForEvents(tx, positions);
    const receipts = await receiptsForEvents(tx, positions);
    const byPosition = new Map(events.map((e) => [e.position, e]));

    const messages = new Map<string, MessageTrace>();
    const message = (messageId: string, eventPosition: number, sink: string, destination: string) => {
      let trace = messages.get(messageId);
      if (!trace) {
        trace = {
          messageId,
          eventPosition,
          eventVersion: byPosition.get(eventPosition)?.version ?? 0,
          sink,
          destination,
          outbox: null,
          receipts: [],
          inbox: [],
          effects: [],
        };
        messages.set(messageId, trace);
      }
      return trace;
    };
    for (const row of outbox)
      message(row.messageId, row.eventPosition, row.sink, row.destination).outbox = row;
    for (const receipt of receipts) {
      message(receipt.messageId, receipt.eventPosition, receipt.sink, receipt.destination).receipts.push(
        receipt,
      );
    }
    const ids = [...messages.keys()];
    for (const entry of await inboxForMessages(tx, ids)) messages.get(entry.messageId)?.inbox.push(entry);

    const effect = (e: StoredEvent): EffectTrace => ({
      streamType: e.streamType,
      streamId: e.streamId,
      version: e.version,
      position: e.position,
      type: e.type,
      actor: text(e.meta.actor),
      recordedAt: e.recordedAt,
      externalRefs: externalRefs(e.data),
    });
    for (const e of events) {
      const cause = text(e.meta.causationId);
      if (cause) messages.get(cause)?.effects.push(effect(e));
    }
    const model = registry.stateModels.get(ref.streamType);
    for (const streamType of model?.messageEffectStreams ?? []) {
      for (const e of await readStreams(tx, streamType, ids))
        messages.get(e.streamId)?.effects.push(effect(registry.upcast(e)));
    }

    const commands: CommandTrace[] = [];
    for (const e of events) {
      let command = commands.at(-1);
      if (!command || command.tx !== e.tx) {
        command = {
          tx: e.tx,
          correlationId: text(e.meta.correlationId),
          causationId: text(e.meta.causationId),
          actor: text(e.meta.actor),
          pod: text(e.meta.pod),
          recordedAt: e.recordedAt,
          versions: [],
          messages: [],
        };
        commands.push(command);
      }
      command.versions.push(e.version);
      for (const trace of messages.values()) {
        if (trace.eventPosition === e.position) command.messages.push(trace);
      }
    }

    return {
      ...ref,
      version: events.at(-1)!.version,
      events: events.map((e) => ({
        position: e.position,
        tx: e.tx,
        version: e.version,
        type: e.type,
        data: e.data,
        meta: e.meta,
        recordedAt: e.recordedAt,
      })),
      commands,
      state: model ? foldEvents(model, events) : null,
    };
  });
}

/**
 * The state the stream had at `at` (ISO 8601 with an offset): the fold of the events recorded up to
 * and including that instant. Version 0 and the initial state when the stream did not exist yet.
 */
export async function stateAt(
  db: Database,
  registry: StateModelCatalogue,
  ref: StreamRef,
  at: string,
): Promise<StateAt> {
  const model = registry.stateModelFor(ref.streamType);
  const events = await db.transaction(async (tx) => {
    await tx.query(SNAPSHOT_READ_ONLY);
    return readStream(tx, ref.streamType, ref.streamId, { until: at });
  });
  const last = events.at(-1);
  return {
    ...ref,
    at,
    version: last?.version ?? 0,
    lastEvent: last
      ? { version: last.version, position: last.position, type: last.type, recordedAt: last.recordedAt }
      : null,
    state: foldEvents(model, events),
  };
}

const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$/;

/** Checks a CLI time: ISO 8601 with Z or an offset (never the pod's local zone). Returns it unchanged. */
export function parseInstant(value: string, option: string): string {
  if (!INSTANT.test(value) || Number.isNaN(Date.parse(value))) {
    throw new ValidationError(
      `${option} must be an ISO 8601 time with Z or an offset, e.g. 2026-11-29T19:00:00Z (got '${value}')`,
      { option, value },
    );
  }
  return value;
}
