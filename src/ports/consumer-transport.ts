/**
 * The consumer toolkit's transport port: what the one delivery policy (src/worker/delivery-policy.ts)
 * needs from a broker, with an AMQP implementation (src/adapters/amqp/amqp-transport.ts) and a Kafka
 * one (src/adapters/kafka/kafka-transport.ts); one contract suite runs against both. A transport
 * receives deliveries, settles them (ack / offset), writes confirmed retry and dead-letter copies
 * (invariant 3 for the toolkit's own copies), and stops. It never decides what happens to a message:
 * that is the policy's, the same for every transport.
 */

export interface TransportDelivery {
  readonly body: Buffer;
  /** The message id (AMQP `messageId` property / Kafka `x-herald-message-id` header); undefined when missing. */
  readonly messageId: string | undefined;
  /** Headers as received (AMQP values may be numbers or buffers; Kafka values are text). */
  readonly headers: Record<string, unknown>;
  /** The broker's redelivered flag (AMQP; always false on Kafka). */
  readonly redelivered: boolean;
  /** Where the delivery came from, for log lines (e.g. partition and offset). */
  readonly logFields: Readonly<Record<string, unknown>>;
  /** A correlation id the transport carries outside the headers (AMQP's `correlationId` property). */
  readonly correlationId?: string | undefined;
}

export type CopyTarget = 'retry' | 'dead';

export type TransportState = 'starting' | 'consuming' | 'reconnecting' | 'stopping' | 'stopped' | 'failed';

export interface ConsumerTransport {
  /** The queue or topic consumed. */
  readonly source: string;
  /** What carries the message id on this transport, for error texts ('messageId', 'message id header'). */
  readonly messageIdLabel: string;
  readonly state: TransportState;
  readonly reconnects: number;
  /**
   * Declares the topology (the source, its retry and dead-letter destinations), connects, and calls
   * `onDelivery` for each message until stopped; resolves once deliveries flow. A transport may run
   * several deliveries at once (AMQP: up to the prefetch) or one per partition at a time (Kafka, which
   * waits for `onDelivery` before moving on).
   */
  start(onDelivery: (delivery: TransportDelivery) => Promise<void>): Promise<void>;
  /** The delivery is done (ack / its offset may move). False when that is no longer possible: it is redelivered. */
  settle(delivery: TransportDelivery): boolean;
  /**
   * Writes a copy of the delivery (same body and id, its headers plus `headers`) to the source's retry
   * or dead-letter destination and waits for the broker's confirm. False when the copy could not be
   * written: the delivery must then not be settled, so the broker delivers it again later.
   */
  publishCopy(
    delivery: TransportDelivery,
    target: CopyTarget,
    headers: Record<string, string | number>,
  ): Promise<boolean>;
  /** The toolkit failed on this delivery (a bug): give it back to the broker without settling it. */
  release(delivery: TransportDelivery, error: Error): void;
  /** Stops receiving; deliveries already received can still be settled. */
  cancel(): Promise<void>;
  /** Closes the connections; unsettled deliveries return to the broker. */
  close(): Promise<void>;
}
