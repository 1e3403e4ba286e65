/**
 * A stream's events as an aggregate's readers see them: in the current shape of each event type
 * (ADR 0039: the aggregate's upcasters applied, a version newer than this release reads refused). The
 * services' history reads go through this, as replay, verify and the projector go through the registry.
 */
import { readStream } from '../adapters/postgres/event-queries.js';
import { noEventSchemas } from '../domain/event-schemas.js';
import type { SqlClient } from '../ports/database.js';
import type { StoredEvent } from '../ports/events.js';
import type { Aggregate } from './aggregate.js';

export async function readCurrentStream(
  sql: SqlClient,
  aggregate: Pick<Aggregate<unknown, unknown, never>, 'streamType' | 'events'>,
  streamId: string,
  options: { afterVersion?: number; until?: Date | string } = {},
): Promise<StoredEvent[]> {
  const schemas = aggregate.events ?? noEventSchemas(aggregate.streamType);
  return (await readStream(sql, aggregate.streamType, streamId, options)).map((e) => schemas.current(e));
}
