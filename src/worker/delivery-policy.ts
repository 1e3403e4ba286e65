/**
 * The transport-neutral parts of the consumer toolkits (`consume` over RabbitMQ, `consumeKafka` over
 * Kafka): how a body becomes a payload (a bad one is a PermanentError, never retried), how a handler's
 * result reads, and how an outcome is counted and logged. Both toolkits share one contract
 * (invariant 4: inbox de-duplication in the handler's transaction); this keeps its rules in one place.
 */
import { PermanentError } from '../errors.js';
import type { Logger } from '../logger.js';

export function describeError(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

/** JSON, then the caller's `parse` (e.g. a zod parse); either failing is permanent. */
export function decodePayload<T>(body: Buffer, parse?: (payload: unknown) => T): T {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw new PermanentError(`payload is not valid JSON: ${describeError(error)}`);
  }
  if (!parse) return json as T;
  try {
    return parse(json);
  } catch (error) {
    throw new PermanentError(`payload rejected by parse: ${describeError(error)}`);
  }
}

export function isDiscard(result: unknown): result is { discard: string } {
  return (
    typeof result === 'object' &&
    result !== null &&
    typeof (result as { discard?: unknown }).discard === 'string'
  );
}

export type DeliveryOutcome = 'processed' | 'discarded' | 'duplicate';

/** Counts and logs a committed delivery's outcome. */
export function countOutcome(
  counters: { processed: number; discarded: number; duplicates: number },
  outcome: DeliveryOutcome,
  reason: string | undefined,
  log: Logger,
): void {
  if (outcome === 'duplicate') {
    counters.duplicates++;
    log.info('duplicate message; already handled');
  } else if (outcome === 'discarded') {
    counters.discarded++;
    log.info({ reason }, 'message discarded');
  } else {
    counters.processed++;
    log.debug('message processed');
  }
}
