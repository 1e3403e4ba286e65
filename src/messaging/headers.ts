/**
 * Every message header Herald reads or writes, defined once. The outbox writer stamps the origin
 * headers on each row (invariant 4: the ids a consumer and its log lines need travel with the
 * message); the relay's Kafka sink adds the message id as a header (AMQP carries it as the
 * `messageId` property); the consumer toolkit reads the attempt number and writes the failure headers
 * on its retry and dead-letter copies.
 */
export const HEADER = {
  /** Origin of the message: the event that caused it. */
  eventType: 'x-herald-event-type',
  streamType: 'x-herald-stream-type',
  streamId: 'x-herald-stream-id',
  correlationId: 'x-correlation-id',
  causationId: 'x-causation-id',
  /** W3C trace context of the span that wrote the message (ADR 0017): present only while tracing. */
  traceparent: 'traceparent',
  /** The claim epoch a claim's message carries (invariant 5); also in the payload. */
  epoch: 'x-herald-epoch',
  organizationId: 'x-herald-organization-id',
  /** The payload's schema version, a major version (ADR 0039; message-schemas.ts): absent means 1. */
  messageVersion: 'x-herald-message-version',
  /** Kafka only: the outbox row's message_id, the consumer's inbox key (invariant 4). */
  messageId: 'x-herald-message-id',
  contentType: 'content-type',
  /** Consumer copies: 1-based attempt number of this delivery. */
  attempt: 'x-herald-attempt',
  /** Dead-letter copies: why the last attempt failed. */
  error: 'x-herald-error',
  /** Dead-letter copies: ISO time of the last failure (informational; decisions use the database clock). */
  failedAt: 'x-herald-failed-at',
  /** Dead-letter copies: the consumer name and the queue (or topic) the message was consumed from. */
  consumer: 'x-herald-consumer',
  queue: 'x-herald-queue',
} as const;

export type HeaderValue = string | number | boolean;
export type Headers = Record<string, HeaderValue>;
