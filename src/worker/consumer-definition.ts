/**
 * A consumer as a slice declares it and `herald worker` runs it: its inbox name (de-duplication is per
 * consumer, invariant 4), transport, source queues or topics, payload validation and handler. The
 * worker role starts one toolkit consumer per source, each with its retry and dead-letter queue.
 */
import type { MessageSchema } from '../messaging/message-schemas.js';
import type { Sink } from '../ports/outbox.js';
import type { Handler } from './delivery-policy.js';

export interface ConsumerDefinition<Payload = unknown> {
  /** The inbox name: de-duplication is per consumer (invariant 4). */
  readonly consumer: string;
  readonly transport: Sink;
  /** Queues (AMQP) or topics (Kafka). */
  readonly sources: readonly string[];
  /** Validates the JSON payload; a throw is permanent (rejected, never retried). */
  readonly parse: (payload: unknown) => Payload;
  /** Message schema versions read, with their upcasters (ADR 0039); default: version 1 only. */
  readonly messages?: MessageSchema;
  readonly handler: Handler<Payload>;
  /** Deliveries in flight at once (AMQP prefetch); default HERALD_CONSUMER_PREFETCH. */
  readonly prefetch?: number;
}

/** Erases a consumer's payload type for the registry (the one cast: `parse` produced the payload). */
export function defineConsumer<Payload>(definition: ConsumerDefinition<Payload>): ConsumerDefinition {
  return definition as unknown as ConsumerDefinition;
}
