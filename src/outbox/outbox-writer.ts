/**
 * Turns "this event causes these messages" into outbox rows written in the caller's transaction
 * (invariant 1). Each row gets its stable `message_id` here, once (invariant 4): a random one, or one
 * the aggregate derives from what the message is (`derivedMessageId`, e.g. "the claim of campaign X at
 * epoch 3"), so stale recovery can find a claim's message from the claim alone. The relay, never
 * business code, publishes it (invariant 2). Standard headers carry the ids every consumer and log
 * line needs: message id, event type, stream, correlation id. A process that publishes its own rows
 * writes them leased to itself (ADR 0024); the relay takes whatever it does not mark.
 */
import { randomUUID } from 'node:crypto';
import { v5 as uuidV5 } from 'uuid';
import { insertOutbox, insertOutboxLeased } from '../adapters/postgres/outbox-queries.js';
import { HEADER, type Headers } from '../messaging/headers.js';
import type { SqlClient } from '../ports/database.js';
import type { EventMeta } from '../ports/events.js';
import type { NewOutboxMessage, Sink } from '../ports/outbox.js';

/** Herald's UUID v5 namespace for derived message ids. */
const MESSAGE_ID_NAMESPACE = '0c9a1a44-5d0e-4a43-9d7e-5a6f3b0e7d21';

/**
 * A message id derived from what the message is (RFC 4122 v5): the same parts always give the same id,
 * so it must name something that happens once (a stream's claim at one epoch), never a retry.
 */
export function derivedMessageId(...parts: readonly (string | number)[]): string {
  return uuidV5(parts.join('/'), MESSAGE_ID_NAMESPACE);
}

export interface OutboxMessageSpec {
  /** Default: a random UUID. A derived id (`derivedMessageId`) must be unique to this message. */
  messageId?: string;
  /** Defaults to 'amqp'. */
  sink?: Sink;
  /** AMQP: the queue (published through the default exchange) or, with routingKey, the exchange. Kafka: the topic. */
  destination: string;
  routingKey?: string;
  /** Kafka message key / per-key ordering; defaults to the stream id. */
  partitionKey?: string;
  headers?: Headers;
  payload: unknown;
  /**
   * The payload's schema version (ADR 0039), sent as `x-herald-message-version`; default 1. Bump it only
   * for a change that is not additive, and only once the previous release's consumers read it.
   */
  version?: number;
  /** 0 (first) … 9; default 3. Reporting-style traffic uses 5 so it never blocks dispatch. */
  priority?: number;
  /**
   * Per-key order (ADR 0007): the relay publishes this row only after every earlier ordered row of the
   * same (sink, destination, partitionKey) was sent or skipped, never two of them at once.
   */
  ordered?: boolean;
}

export interface MessageOrigin {
  eventPosition: number;
  eventType: string;
  streamType: string;
  streamId: string;
  meta: EventMeta;
  /** The organization the stream belongs to (the API shows an organization only its own rows). */
  organizationId?: string | null;
}

export function toOutboxRows(origin: MessageOrigin, specs: readonly OutboxMessageSpec[]): NewOutboxMessage[] {
  return specs.map((spec) => ({
    messageId: spec.messageId ?? randomUUID(),
    eventPosition: origin.eventPosition,
    sink: spec.sink ?? 'amqp',
    destination: spec.destination,
    routingKey: spec.routingKey ?? null,
    partitionKey: spec.partitionKey ?? origin.streamId,
    headers: {
      [HEADER.eventType]: origin.eventType,
      [HEADER.streamType]: origin.streamType,
      [HEADER.streamId]: origin.streamId,
      ...(origin.meta.correlationId ? { [HEADER.correlationId]: origin.meta.correlationId } : {}),
      ...(origin.meta.causationId ? { [HEADER.causationId]: origin.meta.causationId } : {}),
      ...(origin.meta.traceparent ? { [HEADER.traceparent]: origin.meta.traceparent } : {}),
      [HEADER.messageVersion]: String(spec.version ?? 1),
      ...spec.headers,
    },
    payload: spec.payload,
    priority: spec.priority ?? 3,
    ordered: spec.ordered ?? false,
    organizationId: origin.organizationId ?? null,
  }));
}

/**
 * Writes outbox rows inside `tx`. Returns how many were written, so callers know to wake the relay.
 * In a process that publishes its own rows (ADR 0024), the unordered rows for its sinks are written
 * leased to it and published once `tx` commits; ordered rows always wait for a relay, whose claim alone
 * knows whether a row heads its key (ADR 0007).
 */
export async function writeOutbox(tx: SqlClient, rows: readonly NewOutboxMessage[]): Promise<number> {
  const inline = tx.inlineOutbox;
  const leased = inline?.accepting ? rows.map((row) => !row.ordered && inline.sinks.includes(row.sink)) : [];
  if (inline && leased.includes(true)) inline.add(await insertOutboxLeased(tx, rows, leased, inline));
  else await insertOutbox(tx, rows);
  return rows.length;
}
