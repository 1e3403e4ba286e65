/**
 * Typed errors with stable codes. Every failure Herald reports crosses module boundaries as one of
 * these, so callers branch on `code` (or `instanceof`) and never on message text. Driver errors are
 * translated into these inside src/adapters/.
 */
export type HeraldErrorCode =
  | 'CONFIG_INVALID'
  | 'VALIDATION_FAILED'
  | 'ILLEGAL_STATE'
  | 'NOT_FOUND'
  | 'CONCURRENCY_CONFLICT'
  | 'CONFLICT'
  | 'DATABASE_UNAVAILABLE'
  | 'DATABASE_ERROR'
  | 'BROKER_UNAVAILABLE'
  | 'PUBLISH_REJECTED'
  | 'PERMANENT_FAILURE'
  | 'TRANSIENT_FAILURE'
  | 'UNAUTHENTICATED'
  | 'INVALID_TOKEN'
  | 'FORBIDDEN'
  | 'CSRF_REJECTED'
  | 'AUTH_THROTTLED'
  | 'IDEMPOTENCY_KEY_IN_USE'
  | 'IDEMPOTENCY_KEY_REUSED'
  | 'INSUFFICIENT_BALANCE'
  | 'BILLING_UNAVAILABLE'
  | 'LIMIT_REACHED'
  | 'OVERLOADED'
  | 'UNSUPPORTED_VERSION';

export class HeraldError extends Error {
  readonly code: HeraldErrorCode;
  readonly details: Record<string, unknown>;

  constructor(
    code: HeraldErrorCode,
    message: string,
    details: Record<string, unknown> = {},
    cause?: unknown,
  ) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }
}

/** Configuration failed validation; `field` names the offending environment variable. */
export class ConfigError extends HeraldError {
  constructor(
    readonly field: string,
    reason: string,
  ) {
    super('CONFIG_INVALID', `invalid configuration: ${field}: ${reason}`, { field, reason });
  }
}

/** Input (a command, an API body) is malformed. Nothing was changed. */
export class ValidationError extends HeraldError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('VALIDATION_FAILED', message, details);
  }
}

/** A command is not allowed in the aggregate's current state. Nothing was changed. */
export class IllegalStateError extends HeraldError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('ILLEGAL_STATE', message, details);
  }
}

export class NotFoundError extends HeraldError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('NOT_FOUND', message, details);
  }
}

/** Another writer appended to the stream first (optimistic concurrency). Safe to retry from a fresh load. */
export class ConcurrencyError extends HeraldError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('CONCURRENCY_CONFLICT', message, details);
  }
}

/**
 * A unique business key is already taken (an idempotency key reused on create, …). Nothing was
 * changed; `details` names the field and, where known, what holds the key.
 */
export class ConflictError extends HeraldError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('CONFLICT', message, details);
  }
}

/** A request carried no valid credentials (HTTP API: missing, unknown or revoked API key). */
export class UnauthenticatedError extends HeraldError {
  constructor(
    message: string,
    details: Record<string, unknown> = {},
    code: 'UNAUTHENTICATED' | 'INVALID_TOKEN' = 'UNAUTHENTICATED',
  ) {
    super(code, message, details);
  }
}

/**
 * A bearer JWT that does not verify (expired, not yet valid, another audience or issuer, an unknown
 * key id, a bad signature, a refused algorithm): `details.reason` says which (RFC 6750 `invalid_token`;
 * HTTP: 401 with `WWW-Authenticate: Bearer error="invalid_token"`). Counts as a failed authentication.
 */
export class InvalidTokenError extends UnauthenticatedError {
  constructor(message: string, reason: string) {
    super(
      message,
      { reason, wwwAuthenticate: `Bearer error="invalid_token", error_description="${reason}"` },
      'INVALID_TOKEN',
    );
  }
}

/** The caller is known but its role does not allow the operation (e.g. a viewer key sending a command). */
export class ForbiddenError extends HeraldError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('FORBIDDEN', message, details);
  }
}

/** A command sent with a dashboard session cookie lacks the session's CSRF token (`x-csrf-token`). */
export class CsrfError extends HeraldError {
  constructor(message: string) {
    super('CSRF_REJECTED', message);
  }
}

/**
 * Too many failed authentications from one client address within the window (the HTTP API's throttle,
 * src/api/auth-throttle.ts): refused before the credentials count; `details.retryAfterSeconds` says when
 * the window ends. HTTP: 429 with Retry-After.
 */
export class AuthThrottledError extends HeraldError {
  constructor(message: string, details: { retryAfterSeconds: number; limit: number; windowSeconds: number }) {
    super('AUTH_THROTTLED', message, details);
  }
}

/**
 * An Idempotency-Key is in use: `IDEMPOTENCY_KEY_IN_USE` while the first request with it is still in
 * flight (retry later), `IDEMPOTENCY_KEY_REUSED` when it was used for a different request.
 */
export class IdempotencyKeyError extends HeraldError {
  constructor(
    code: 'IDEMPOTENCY_KEY_IN_USE' | 'IDEMPOTENCY_KEY_REUSED',
    message: string,
    details: Record<string, unknown> = {},
  ) {
    super(code, message, details);
  }
}

/**
 * The organization's balance does not cover a charge (the billing port refused the deduction; nothing
 * was charged). HTTP: 402.
 */
export class InsufficientBalanceError extends HeraldError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('INSUFFICIENT_BALANCE', message, details);
  }
}

/**
 * The billing service could not be reached or its answer was lost (an ambiguous outcome: the operation
 * may or may not have been applied, so callers reverse it by its key). HTTP: 502.
 */
export class BillingUnavailableError extends HeraldError {
  constructor(message: string, details: Record<string, unknown> = {}, cause?: unknown) {
    super('BILLING_UNAVAILABLE', message, details, cause);
  }
}

/** The database could not be reached or dropped the connection; the operation may be retried. */
export class DatabaseUnavailableError extends HeraldError {
  constructor(message: string, cause?: unknown) {
    super('DATABASE_UNAVAILABLE', message, {}, cause);
  }
}

/** The broker could not be reached or closed the channel; the outbox keeps the work pending. */
export class BrokerUnavailableError extends HeraldError {
  constructor(message: string, cause?: unknown) {
    super('BROKER_UNAVAILABLE', message, {}, cause);
  }
}

/** The broker refused a message (nack, unroutable, too large). Counts as a failed attempt. */
export class PublishRejectedError extends HeraldError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('PUBLISH_REJECTED', message, details);
  }
}

/**
 * Thrown by a consumer handler when retrying cannot help (bad payload, business rule). The message is
 * acknowledged and the failure recorded; it is never redelivered.
 */
export class PermanentError extends HeraldError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('PERMANENT_FAILURE', message, details);
  }
}

/**
 * Thrown by a consumer handler for a message it cannot handle but an operator may want to drive again
 * once something changed (e.g. a job type this worker does not know): dead-lettered at once (a copy in
 * `<queue>.dead`, inbox `dead`), never retried, and the consumer goes on with the next message.
 */
export class DeadLetterError extends PermanentError {}

/** Thrown by a consumer handler when a later attempt may succeed. Retried with a delay, then dead-lettered. */
export class TransientError extends HeraldError {
  constructor(message: string, details: Record<string, unknown> = {}, cause?: unknown) {
    super('TRANSIENT_FAILURE', message, details, cause);
  }
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A capacity limit is reached: `LIMIT_REACHED` for one caller's share (an organization's or a key's),
 * `OVERLOADED` for the whole process's. Nothing was changed; `limit` names the setting, `max` its value
 * (the answer carries the API's Retry-After).
 */
export class LimitError extends HeraldError {
  constructor(
    code: 'LIMIT_REACHED' | 'OVERLOADED',
    message: string,
    details: { limit: string; max: number },
  ) {
    super(code, message, details);
  }
}
