/**
 * The relay's sink port: one adapter per broker (AmqpSink, KafkaSink), chosen per outbox row by its
 * `sink`. `publish` resolves only after the broker confirmed or refused each message (invariant 3): a
 * result is `ok` only for a broker acknowledgement (RabbitMQ publisher confirm of a routed message;
 * Kafka acks=all from an idempotent producer). A shared test suite (test/outbox/sink-contract.ts) runs
 * against every adapter.
 */
export interface OutboundMessage {
  /** The outbox row id: results are matched back by it. */
  id: number;
  /** Stable identity: AMQP `messageId` / Kafka header; the same on every re-publish (invariant 4). */
  messageId: string;
  destination: string;
  routingKey: string | null;
  partitionKey: string | null;
  headers: Record<string, string | number | boolean>;
  /** The JSON payload, serialized once by the relay. */
  body: Buffer;
  priority: number;
  /** When the outbox row was written: the AMQP `timestamp` / Kafka message timestamp (stable across re-publishes). */
  timestamp?: Date;
}

export type PublishOutcome =
  | { id: number; ok: true; brokerRef: string | null }
  | { id: number; ok: false; error: string; failure?: PublishFailure };

/**
 * Why a publish failed. `rejected` (the default): the broker judged this message (nack, unroutable,
 * too large) and the attempt counts towards `dead`. `unavailable`: the broker never judged it (no
 * connection, channel closed before the confirm, confirm timeout); the row waits with backoff and is
 * never made dead for it, since an outage says nothing about the message (invariant 2).
 */
export type PublishFailure = 'rejected' | 'unavailable';

/**
 * What a sink knows of its broker (readiness, ADR 0013): `idle` before it first connected (sinks
 * connect on their first publish), `connected`, or `lost` (the connection dropped, or the last attempt
 * to open one found no broker).
 */
export type SinkConnectionState = 'idle' | 'connected' | 'lost';

export interface MessageSink {
  readonly kind: 'amqp' | 'kafka';
  /** Publishes a batch; never throws for a single message's failure (that is an outcome). */
  publish(batch: readonly OutboundMessage[]): Promise<PublishOutcome[]>;
  close(): Promise<void>;
  readonly connectionState?: SinkConnectionState;
  /** Opens the connection now if there is none (a readiness probe after a loss); rejects without a broker. */
  ensureConnected?(): Promise<void>;
}
