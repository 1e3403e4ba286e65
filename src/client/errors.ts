/**
 * The client's errors: every refusal the API answers (an RFC 9457 problem document, ADR 0026) becomes a
 * `HeraldProblemError` carrying the document's members as typed fields, and a subclass per kind of
 * refusal a caller branches on (`instanceof HeraldValidationError`, or `error.kind`), never on message
 * text. An answer that is not a problem document (a proxy's HTML page) becomes one too, with the kind
 * `http-<status>`, so callers have one type to catch.
 */
import type { components } from './generated/schema.js';

/** The problem document as the API documents it (`components.schemas.Problem`). */
export type Problem = components['schemas']['Problem'];
/** One offending field of a 400 or 422: its dotted path and what is wrong with it. */
export type FieldError = NonNullable<Problem['errors']>[number];

/** The `type` URIs are `urn:herald:problem:<kind>`. */
const TYPE_PREFIX = 'urn:herald:problem:';

/**
 * The kinds the API answers (the `type` URI's last part): Herald's error codes in kebab case and the
 * HTTP layer's own refusals. Any other string is possible (a newer server), hence `string & {}`.
 */
export type ProblemKind =
  | 'validation-failed'
  | 'invalid-request'
  | 'malformed-json'
  | 'not-found'
  | 'route-not-found'
  | 'illegal-state'
  | 'conflict'
  | 'concurrency-conflict'
  | 'idempotency-key-in-use'
  | 'idempotency-key-reused'
  | 'unauthenticated'
  | 'forbidden'
  | 'csrf-rejected'
  | 'auth-throttled'
  | 'limit-reached'
  | 'insufficient-balance'
  | 'billing-unavailable'
  | 'overloaded'
  | 'database-unavailable'
  | 'broker-unavailable'
  | 'transient-failure'
  | (string & {});

export class HeraldProblemError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** `urn:herald:problem:<kind>`. */
  readonly type: string;
  /** The type's last part: `validation-failed`, `not-found`, `limit-reached`, … */
  readonly kind: ProblemKind;
  readonly title: string;
  readonly detail: string | undefined;
  /** Herald's error code (`VALIDATION_FAILED`, `NOT_FOUND`, …) where the API gives one. */
  readonly code: string | undefined;
  /** The server's request id: quote it to the operator, who finds the request in the logs by it. */
  readonly requestId: string | undefined;
  /** The request path the problem is about. */
  readonly instance: string | undefined;
  /** The offending fields (400, 422); empty otherwise. */
  readonly errors: readonly FieldError[];
  /** The whole document, extension members included. */
  readonly problem: Problem & Record<string, unknown>;
  /** The answer's Retry-After in milliseconds, when it had one. */
  readonly retryAfterMs: number | undefined;

  constructor(status: number, problem: Problem & Record<string, unknown>, retryAfterMs?: number) {
    super(problem.detail ?? problem.title);
    this.name = new.target.name;
    this.status = status;
    this.type = problem.type;
    this.kind = problem.type.startsWith(TYPE_PREFIX) ? problem.type.slice(TYPE_PREFIX.length) : problem.type;
    this.title = problem.title;
    this.detail = problem.detail;
    this.code = problem.code;
    this.requestId = problem.requestId;
    this.instance = problem.instance;
    this.errors = problem.errors ?? [];
    this.problem = problem;
    this.retryAfterMs = retryAfterMs;
  }

  /** The field errors on `field` (dotted, `line.messages.0.text`). */
  fieldErrors(field: string): FieldError[] {
    return this.errors.filter((e) => e.field === field);
  }
}

/** 400 or 422: the request is malformed or names invalid values; `errors` names the fields. */
export class HeraldValidationError extends HeraldProblemError {}
/** 401: no credential, or one the API does not know (revoked, expired, mistyped). */
export class HeraldUnauthorizedError extends HeraldProblemError {}
/** 403: the credential's role may not do this. */
export class HeraldForbiddenError extends HeraldProblemError {}
/** 404: no such resource in the credential's organization (another organization's is a 404 too). */
export class HeraldNotFoundError extends HeraldProblemError {}
/**
 * 409: the resource's status does not allow the command (`currentStatus` says which it is in), another
 * writer won, or a request with the same Idempotency-Key is still in flight.
 */
export class HeraldConflictError extends HeraldProblemError {
  /** The status the resource is in, for a command its status does not allow. */
  get currentStatus(): string | undefined {
    return this.problem.currentStatus;
  }
}
/**
 * 429: the caller's share of a limit is taken (`limit` names the setting) or its address is throttled
 * after failed authentications. The client retried it (Retry-After) as often as it was allowed to.
 */
export class HeraldRateLimitError extends HeraldProblemError {
  /** The setting whose limit was reached (`HERALD_API_STREAMS_PER_KEY`, …). */
  get limit(): string | undefined {
    return this.problem.limit;
  }
}
/** 502 or 503: a dependency is down or the process is at capacity; retried as often as allowed. */
export class HeraldUnavailableError extends HeraldProblemError {}

const BY_STATUS: Readonly<Record<number, typeof HeraldProblemError>> = {
  400: HeraldValidationError,
  401: HeraldUnauthorizedError,
  403: HeraldForbiddenError,
  404: HeraldNotFoundError,
  409: HeraldConflictError,
  422: HeraldValidationError,
  429: HeraldRateLimitError,
  502: HeraldUnavailableError,
  503: HeraldUnavailableError,
};

const isProblem = (value: unknown): value is Problem & Record<string, unknown> =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as Problem).type === 'string' &&
  typeof (value as Problem).title === 'string';

/** The error for a refused answer: its status, its problem document (or what came instead). */
export function problemError(response: Response, body: unknown, retryAfterMs?: number): HeraldProblemError {
  const problem: Problem & Record<string, unknown> = isProblem(body)
    ? body
    : {
        type: `${TYPE_PREFIX}http-${response.status}`,
        title: response.statusText || `HTTP ${response.status}`,
        status: response.status,
        ...(typeof body === 'string' && body ? { detail: body.slice(0, 500) } : {}),
      };
  const Class = BY_STATUS[response.status] ?? HeraldProblemError;
  return new Class(response.status, problem, retryAfterMs);
}
