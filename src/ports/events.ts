/**
 * The event log's vocabulary, shared by the event store, the projections and the adapters that
 * store it (invariants 1 and 8). Pure types: the PostgreSQL queries in src/adapters/postgres/
 * implement them, nothing here knows about a driver.
 */

/** Who and why, recorded on every event: correlation, causation, actor, pod. */
export interface EventMeta {
  correlationId?: string;
  causationId?: string;
  actor?: string;
  pod?: string;
  /** W3C traceparent of the span the command ran in (only while tracing is on; ADR 0017). */
  traceparent?: string;
  [key: string]: unknown;
}

export interface NewEvent {
  streamType: string;
  streamId: string;
  version: number;
  type: string;
  data: unknown;
  /** The schema version of `data` (ADR 0039); default 1. */
  schemaVersion?: number;
  meta: EventMeta;
}

export interface AppendedEvent {
  position: number;
  streamType: string;
  streamId: string;
  version: number;
  recordedAt: Date;
}

export interface StoredEvent {
  position: number;
  /** The writing transaction's id (xid8 as text): log followers order by (tx, position). */
  tx: string;
  streamType: string;
  streamId: string;
  version: number;
  type: string;
  data: unknown;
  /** The schema version of `data` as stored (1 for events written before versions existed; ADR 0039). */
  schemaVersion: number;
  meta: EventMeta;
  recordedAt: Date;
}

/** A gap-safe follower's position in the log: (tx, position). */
export interface LogCursor {
  tx: string;
  position: number;
}

export const LOG_START: LogCursor = { tx: '0', position: 0 };
