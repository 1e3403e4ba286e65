/**
 * The outbox's vocabulary (invariants 2–4): what the writer inserts inside a transaction and what the
 * relay claims to publish. Pure types, implemented by src/adapters/postgres/outbox-queries.ts.
 */
import type { Headers } from '../messaging/headers.js';

export type Sink = 'amqp' | 'kafka';

export interface NewOutboxMessage {
  messageId: string;
  eventPosition: number;
  sink: Sink;
  destination: string;
  routingKey?: string | null;
  partitionKey?: string | null;
  headers?: Headers;
  payload: unknown;
  priority?: number;
  /** Published in (tx, id) order within its (sink, destination, partitionKey); needs a partition key. */
  ordered?: boolean;
  /** The organization of the event's stream (tenancy of the API's outbox operations); null: none. */
  organizationId?: string | null;
}

/** A claimed row as the relay publishes it: the payload stays JSON text. */
export interface ClaimedForPublish {
  id: number;
  messageId: string;
  sink: Sink;
  destination: string;
  routingKey: string | null;
  partitionKey: string | null;
  headers: Headers;
  payloadText: string;
  priority: number;
  /** The claim's attempt number: the lease token markSent / scheduleRetry / releaseClaims check. */
  attempts: number;
  createdAt: Date;
  /** Claimed as the head of its key: the next row of the key waits until this one is sent or skipped. */
  ordered: boolean;
  /** The organization of the row's event (the live stream tells only it that the row was sent or died). */
  organizationId?: string | null;
}
