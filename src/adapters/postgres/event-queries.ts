/**
 * Event log queries. Appends are batched through unnest() (a single event: a plain insert) and guarded
 * by the unique (stream_type, stream_id, version) constraint: a second writer with the same expected
 * version violates it and gets ConcurrencyError (invariant 1). Log reads stay below
 * pg_snapshot_xmin(pg_current_snapshot()) and follow (tx, position), so an event whose transaction
 * took its position early but commits late is never skipped by a follower.
 */
import { ConcurrencyError } from '../../errors.js';
import type { SqlClient } from '../../ports/database.js';
import type { AppendedEvent, EventMeta, LogCursor, NewEvent, StoredEvent } from '../../ports/events.js';
import { forEachBatch } from './cursor-queries.js';
import { distinctLeadingValues } from './loose-index-scan.js';

export const APPEND_EVENTS = `
  insert into event (stream_type, stream_id, version, type, data, meta, schema_version)
  select stream_type, stream_id, version, type, data, meta, schema_version
    from unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::jsonb[], $6::jsonb[], $7::smallint[])
      as appended(stream_type, stream_id, version, type, data, meta, schema_version)
  returning position, stream_type, stream_id, version, recorded_at`;

/** One event (a single command's append): plain parameters, no array per column for the server to parse. */
export const APPEND_EVENT = `
  insert into event (stream_type, stream_id, version, type, data, meta, schema_version)
  values ($1, $2, $3::int, $4, $5::jsonb, $6::jsonb, $7::smallint)
  returning position, stream_type, stream_id, version, recorded_at`;

export const STREAM_VERSION = `
  select coalesce(max(version), 0)::int as version from event where stream_type = $1 and stream_id = $2`;

export const READ_STREAM = `
  select position, tx::text as tx, stream_type, stream_id, version, type, data, schema_version, meta, recorded_at
    from event
   where stream_type = $1 and stream_id = $2 and version > $3
     and ($4::timestamptz is null or recorded_at <= $4)
   order by version`;

export const READ_LOG_AFTER = `
  select position, tx::text as tx, stream_type, stream_id, version, type, data, schema_version, meta, recorded_at
    from event
   where (tx, position) > ($1::xid8, $2::bigint)
     and tx < pg_snapshot_xmin(pg_current_snapshot())
     and ($4::text[] is null or stream_type = any($4))
   order by tx, position
   limit $3`;

/**
 * Every event of one stream type in stream order (stream id, then version), optionally only those
 * recorded up to a time: the scan verify and the point-in-time sandbox fold, through a cursor.
 */
export const SCAN_STREAMS = `
  select position, tx::text as tx, stream_type, stream_id, version, type, data, schema_version, meta, recorded_at
    from event
   where stream_type = $1 and ($2::timestamptz is null or recorded_at <= $2)
   order by stream_id, version`;

/** The first event of every stream of a type (recorded up to $2), in stream order: whose each stream is. */
export const SCAN_FIRST_EVENTS = `
  select position, tx::text as tx, stream_type, stream_id, version, type, data, schema_version, meta, recorded_at
    from event
   where stream_type = $1 and version = 1 and ($2::timestamptz is null or recorded_at <= $2)
   order by stream_id`;

/** Every event of the given streams of a type (recorded up to $2), in stream order. */
export const SCAN_STREAMS_OF = `
  select position, tx::text as tx, stream_type, stream_id, version, type, data, schema_version, meta, recorded_at
    from event
   where stream_type = $1 and stream_id = any($3::text[]) and ($2::timestamptz is null or recorded_at <= $2)
   order by stream_id, version`;

/** Several streams of one type, in stream order (replay's look-up of the streams a message caused). */
export const READ_STREAMS = `
  select position, tx::text as tx, stream_type, stream_id, version, type, data, schema_version, meta, recorded_at
    from event
   where stream_type = $1 and stream_id = any($2::text[])
   order by stream_id, version`;

/**
 * The distinct stream types in the log, by a loose index scan of the (stream_type, stream_id, version)
 * unique index: one index descent per stream type, however many events there are.
 */
export const DISTINCT_STREAM_TYPES = `
  ${distinctLeadingValues('types', 'event', 'stream_type')}
  select stream_type from types where stream_type is not null`;

/** Export: events recorded in [from, to), optionally of some stream types, in time order (a cursor query). */
export const EXPORT_EVENTS = `
  select position, tx::text as tx, stream_type, stream_id, version, type, data, schema_version, meta, recorded_at
    from event
   where ($1::timestamptz is null or recorded_at >= $1)
     and ($2::timestamptz is null or recorded_at < $2)
     and ($3::text[] is null or stream_type = any($3))
   order by recorded_at, position`;

interface EventRow {
  position: number;
  tx: string;
  stream_type: string;
  stream_id: string;
  version: number;
  type: string;
  data: unknown;
  schema_version: number;
  meta: EventMeta;
  recorded_at: Date;
}

const toStoredEvent = (row: EventRow): StoredEvent => ({
  position: row.position,
  tx: row.tx,
  streamType: row.stream_type,
  streamId: row.stream_id,
  version: row.version,
  type: row.type,
  data: row.data,
  schemaVersion: row.schema_version,
  meta: row.meta,
  recordedAt: row.recorded_at,
});

/** Appends events (any number of streams) and returns them with their positions, in input order. */
export async function appendEvents(sql: SqlClient, events: readonly NewEvent[]): Promise<AppendedEvent[]> {
  if (events.length === 0) return [];
  try {
    const [text, values]: [string, unknown[]] =
      events.length === 1
        ? [
            APPEND_EVENT,
            [
              events[0]!.streamType,
              events[0]!.streamId,
              events[0]!.version,
              events[0]!.type,
              JSON.stringify(events[0]!.data),
              JSON.stringify(events[0]!.meta),
              events[0]!.schemaVersion ?? 1,
            ],
          ]
        : [
            APPEND_EVENTS,
            [
              events.map((e) => e.streamType),
              events.map((e) => e.streamId),
              events.map((e) => e.version),
              events.map((e) => e.type),
              events.map((e) => JSON.stringify(e.data)),
              events.map((e) => JSON.stringify(e.meta)),
              events.map((e) => e.schemaVersion ?? 1),
            ],
          ];
    const { rows } = await sql.query<{
      position: number;
      stream_type: string;
      stream_id: string;
      version: number;
      recorded_at: Date;
    }>(text, values);
    const byKey = new Map(
      rows.map((row) => [`${row.stream_type}\u0000${row.stream_id}\u0000${row.version}`, row]),
    );
    return events.map((e) => {
      const row = byKey.get(`${e.streamType}\u0000${e.streamId}\u0000${e.version}`)!;
      return {
        position: row.position,
        streamType: e.streamType,
        streamId: e.streamId,
        version: e.version,
        recordedAt: row.recorded_at,
      };
    });
  } catch (error) {
    const pgError = error as { code?: string; constraint?: string };
    if (pgError.code === '23505' && pgError.constraint === 'event_stream_version_unique') {
      const first = events[0]!;
      throw new ConcurrencyError(
        `stream ${first.streamType}/${first.streamId} was appended to concurrently`,
        {
          streamType: first.streamType,
          streamId: first.streamId,
          version: first.version,
        },
      );
    }
    throw error;
  }
}

export async function streamVersion(sql: SqlClient, streamType: string, streamId: string): Promise<number> {
  const { rows } = await sql.query<{ version: number }>(STREAM_VERSION, [streamType, streamId]);
  return rows[0]?.version ?? 0;
}

export async function readStream(
  sql: SqlClient,
  streamType: string,
  streamId: string,
  options: { afterVersion?: number; until?: Date | string } = {},
): Promise<StoredEvent[]> {
  const { rows } = await sql.query<EventRow>(READ_STREAM, [
    streamType,
    streamId,
    options.afterVersion ?? 0,
    options.until ?? null,
  ]);
  return rows.map(toStoredEvent);
}

/** Reads the next committed events after `cursor` that no running transaction can still precede. */
export async function readLogAfter(
  sql: SqlClient,
  cursor: LogCursor,
  limit: number,
  streamTypes?: readonly string[],
): Promise<StoredEvent[]> {
  const { rows } = await sql.query<EventRow>(READ_LOG_AFTER, [
    cursor.tx,
    cursor.position,
    limit,
    streamTypes ?? null,
  ]);
  return rows.map(toStoredEvent);
}

export async function readStreams(
  sql: SqlClient,
  streamType: string,
  streamIds: readonly string[],
): Promise<StoredEvent[]> {
  if (streamIds.length === 0) return [];
  const { rows } = await sql.query<EventRow>(READ_STREAMS, [streamType, streamIds]);
  return rows.map(toStoredEvent);
}

/** Which streams a scan keeps: those whose first event `of` names organization `id`. */
export interface OrganizationFilter {
  id: string;
  /** The organization a stream belongs to, from its first event (the state model's). */
  of: (first: StoredEvent) => string | null;
}

/**
 * Streams every event of `streamType` (recorded up to `until`, if given) in stream order through a
 * cursor, `batchSize` at a time. Run inside a transaction (SNAPSHOT_READ_ONLY first for one snapshot).
 * With `organization`, only the streams whose first event names that organization: a cursor over the
 * streams' first events, and for each batch of them the kept streams' events through a second cursor
 * (a stream with no version 1 belongs to no organization).
 */
export function scanStreams(
  tx: SqlClient,
  params: {
    streamType: string;
    until: string | null;
    batchSize: number;
    organization?: OrganizationFilter | undefined;
  },
  handle: (events: StoredEvent[]) => Promise<void> | void,
): Promise<void> {
  const { organization } = params;
  if (organization) {
    return forEachBatch<EventRow>(
      tx,
      {
        name: 'herald_scan_first_events',
        query: SCAN_FIRST_EVENTS,
        params: [params.streamType, params.until],
        batchSize: params.batchSize,
      },
      async (rows) => {
        const kept = rows
          .map(toStoredEvent)
          .filter((first) => organization.of(first) === organization.id)
          .map((first) => first.streamId);
        if (kept.length === 0) return;
        await forEachBatch<EventRow>(
          tx,
          {
            name: 'herald_scan_organization_streams',
            query: SCAN_STREAMS_OF,
            params: [params.streamType, params.until, kept],
            batchSize: params.batchSize,
          },
          (events) => handle(events.map(toStoredEvent)),
        );
      },
    );
  }
  return forEachBatch<EventRow>(
    tx,
    {
      name: 'herald_scan_streams',
      query: SCAN_STREAMS,
      params: [params.streamType, params.until],
      batchSize: params.batchSize,
    },
    (rows) => handle(rows.map(toStoredEvent)),
  );
}

/** Streams the events in the filter through a cursor, in (recorded_at, position) order. */
export function exportEvents(
  tx: SqlClient,
  filter: { from: string | null; to: string | null; streamTypes: readonly string[] | null },
  batchSize: number,
  handle: (events: StoredEvent[]) => Promise<void> | void,
): Promise<void> {
  return forEachBatch<EventRow>(
    tx,
    {
      name: 'herald_export_events',
      query: EXPORT_EVENTS,
      params: [filter.from, filter.to, filter.streamTypes],
      batchSize,
    },
    (rows) => handle(rows.map(toStoredEvent)),
  );
}

export async function distinctStreamTypes(sql: SqlClient): Promise<string[]> {
  const { rows } = await sql.query<{ stream_type: string }>(DISTINCT_STREAM_TYPES);
  return rows.map((row) => row.stream_type);
}

/**
 * The traceparent each stream's latest event was written under (tracing, ADR 0017): a claim continues
 * the trace of the command that made the stream due. One probe of the (stream_type, stream_id, version)
 * index per stream; only called while tracing is on.
 */
export async function latestTraceparents(
  sql: SqlClient,
  streamType: string,
  streamIds: readonly string[],
): Promise<Map<string, string>> {
  if (streamIds.length === 0) return new Map();
  const { rows } = await sql.query<{ stream_id: string; traceparent: string | null }>(
    `select s.id as stream_id,
            (select e.meta->>'traceparent' from event e
              where e.stream_type = $1 and e.stream_id = s.id order by e.version desc limit 1) as traceparent
       from unnest($2::text[]) as s(id)`,
    [streamType, streamIds],
  );
  return new Map(rows.filter((r) => r.traceparent).map((r) => [r.stream_id, r.traceparent!]));
}
