/**
 * The relay's sink port: one adapter per broker (RabbitMQ now, Kafka next). `publish` resolves only
 * after the broker confirmed or refused each message (invariant 3): a result is `ok` only for a
 * broker acknowledgement (RabbitMQ publisher confirm of a routed message; Kafka acks=all).
 * A shared test suite runs against every adapter.
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
}

export type PublishOutcome =
  | { id: number; ok: true; brokerRef: string | null }
  | { id: number; ok: false; error: string };

export interface MessageSink {
  readonly kind: 'amqp' | 'kafka';
  /** Publishes a batch; never throws for a single message's failure (that is an outcome). */
  publish(batch: readonly OutboundMessage[]): Promise<PublishOutcome[]>;
  close(): Promise<void>;
}
