/**
 * Errors as RFC 9457 problem details (`application/problem+json`), from one table: Herald's typed
 * errors (src/errors.ts, by code) and Fastify's request errors map to an HTTP status here and nowhere
 * else. Nothing answers 500 but a real fault, whose message is never sent (it is logged with the
 * request id, which the problem carries so the two can be matched).
 */
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { HeraldError, type HeraldErrorCode } from '../errors.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/**
 * The API's one Retry-After, in seconds (seed 003's 2): every answer that asks the client to come back —
 * 409 while a request with the same Idempotency-Key is in flight, 502 when billing did not answer (the
 * campaign unchanged, retryable with the same key), 503 when a dependency is down — says this.
 */
export const RETRY_AFTER_SECONDS = 2;

/** Statuses a client should retry after RETRY_AFTER_SECONDS (with the same Idempotency-Key). */
function retryAfterOf(error: HeraldError, status: number): Record<string, string> | undefined {
  if (error.code === 'IDEMPOTENCY_KEY_IN_USE' || status === 502 || status === 503) {
    return { 'retry-after': String(RETRY_AFTER_SECONDS) };
  }
  // A 429 says when its window ends (the authentication throttle's).
  const after = error.details.retryAfterSeconds;
  if (status === 429 && typeof after === 'number')
    return { 'retry-after': String(Math.max(1, Math.ceil(after))) };
  return undefined;
}

/** The one table: Herald error code → HTTP status. */
export const STATUS_BY_CODE: Readonly<Record<HeraldErrorCode, number>> = {
  VALIDATION_FAILED: 422,
  ILLEGAL_STATE: 409,
  NOT_FOUND: 404,
  CONCURRENCY_CONFLICT: 409,
  CONFLICT: 409,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  CSRF_REJECTED: 403,
  AUTH_THROTTLED: 429,
  IDEMPOTENCY_KEY_IN_USE: 409,
  IDEMPOTENCY_KEY_REUSED: 422,
  // SMS campaigns' billing port (ADR 0014): refused (402) or unreachable / ambiguous (502).
  INSUFFICIENT_BALANCE: 402,
  BILLING_UNAVAILABLE: 502,
  DATABASE_UNAVAILABLE: 503,
  BROKER_UNAVAILABLE: 503,
  TRANSIENT_FAILURE: 503,
  // Faults: never a client's doing.
  CONFIG_INVALID: 500,
  DATABASE_ERROR: 500,
  PUBLISH_REJECTED: 500,
  PERMANENT_FAILURE: 500,
};

/** Fastify's own request errors that are the client's doing (their messages are safe to show). */
const FASTIFY_STATUS: Readonly<Record<string, number>> = {
  FST_ERR_VALIDATION: 400,
  FST_ERR_CTP_INVALID_JSON_BODY: 400,
  FST_ERR_CTP_EMPTY_JSON_BODY: 400,
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 400,
  FST_ERR_BAD_URL: 400,
  FST_ERR_CTP_BODY_TOO_LARGE: 413,
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 415,
  FST_ERR_NOT_FOUND: 404,
};

const TITLES: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Content Too Large',
  402: 'Payment Required',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

export const fieldErrorSchema = z.object({
  field: z.string().describe('the offending field, dotted (`wait.names.0`); `(root)` for the whole value'),
  message: z.string(),
  rule: z
    .string()
    .optional()
    .describe('the rule the field breaks, where the domain names one (SMS campaigns: `tags.too-long`)'),
});

/** The problem document every error response carries (RFC 9457 members plus Herald's extensions). */
export const problemSchema = z
  .object({
    type: z
      .string()
      .describe('a URI naming the kind of problem (`about:blank` or urn:herald:problem:<code>)'),
    title: z.string(),
    status: z.number().int(),
    detail: z.string().optional(),
    instance: z.string().optional().describe('the request path'),
    code: z.string().optional().describe("Herald's error code (src/errors.ts) or Fastify's"),
    requestId: z.string().optional(),
    errors: z.array(fieldErrorSchema).optional(),
    currentStatus: z.string().optional().describe('an illegal state: the status the resource is in'),
  })
  .meta({ id: 'Problem' });

export type Problem = z.output<typeof problemSchema>;
export type FieldError = z.output<typeof fieldErrorSchema>;

export interface MappedError {
  status: number;
  problem: Problem;
  /** A 5xx the operator must see (logged at error level with the request id). */
  fault: boolean;
  headers?: Record<string, string>;
}

const dotted = (path: readonly (string | number)[]) => (path.length ? path.map(String).join('.') : '(root)');

function zodFieldErrors(error: { validation: unknown[]; validationContext?: string }): FieldError[] {
  const where =
    error.validationContext && error.validationContext !== 'body' ? `${error.validationContext}.` : '';
  return error.validation.flatMap((raw) => {
    const issue = raw as {
      instancePath: string;
      message: string;
      keyword: string;
      params?: { keys?: string[] };
    };
    const path = issue.instancePath.split('/').filter(Boolean);
    if (issue.keyword === 'unrecognized_keys' && issue.params?.keys?.length) {
      return issue.params.keys.map((key) => ({
        field: `${where}${dotted([...path, key])}`,
        message: 'unknown field',
      }));
    }
    return [{ field: `${where}${dotted(path)}`, message: issue.message }];
  });
}

function heraldFieldErrors(error: HeraldError): FieldError[] | undefined {
  const issues = error.details.issues;
  if (Array.isArray(issues)) {
    return issues.map((issue: { path?: string[]; field?: string; rule?: string; message?: string }) => ({
      // A domain that names its fields and rules (SMS campaigns: `recipients[3].tags.name`, `tags.too-long`).
      field: issue.field ?? dotted(issue.path ?? []),
      message: issue.message ?? error.message,
      ...(issue.rule ? { rule: issue.rule } : {}),
    }));
  }
  const field = error.details.field ?? error.details.option;
  return typeof field === 'string' ? [{ field, message: error.message }] : undefined;
}

/** Maps anything thrown while handling a request to its status and problem document. */
export function problemFor(error: unknown, context: { requestId: string; instance: string }): MappedError {
  const base = { requestId: context.requestId, instance: context.instance };
  if (error instanceof HeraldError) {
    const status = STATUS_BY_CODE[error.code] ?? 500;
    if (status >= 500 && status !== 503 && status !== 502) {
      return { status: 500, fault: true, problem: internal(base) };
    }
    const currentStatus =
      status === 409 && typeof error.details.status === 'string' ? error.details.status : undefined;
    const errors = status === 422 || status === 400 ? heraldFieldErrors(error) : undefined;
    const headers = retryAfterOf(error, status);
    return {
      status,
      fault: status >= 500,
      ...(headers ? { headers } : {}),
      problem: {
        type: `urn:herald:problem:${error.code.toLowerCase().replaceAll('_', '-')}`,
        title: TITLES[status] ?? 'Error',
        status,
        // A 503 names the dependency, never a driver message.
        detail: status === 503 ? 'a dependency is unavailable; retry later' : error.message,
        code: error.code,
        ...base,
        ...(errors ? { errors } : {}),
        ...(currentStatus ? { currentStatus } : {}),
      },
    };
  }
  const fastify = error as { code?: unknown; statusCode?: unknown; message?: unknown };
  if (hasZodFastifySchemaValidationErrors(error)) {
    const errors = zodFieldErrors(error as { validation: unknown[]; validationContext?: string });
    return {
      status: 400,
      fault: false,
      problem: {
        type: 'urn:herald:problem:invalid-request',
        title: TITLES[400]!,
        status: 400,
        detail: `invalid request: ${errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`,
        code: 'FST_ERR_VALIDATION',
        ...base,
        errors,
      },
    };
  }
  const known = typeof fastify.code === 'string' ? FASTIFY_STATUS[fastify.code] : undefined;
  const clientStatus =
    known ??
    (typeof fastify.code === 'string' &&
    fastify.code.startsWith('FST_') &&
    typeof fastify.statusCode === 'number' &&
    fastify.statusCode >= 400 &&
    fastify.statusCode < 500
      ? fastify.statusCode
      : undefined);
  if (clientStatus !== undefined) {
    return {
      status: clientStatus,
      fault: false,
      problem: {
        type: 'about:blank',
        title: TITLES[clientStatus] ?? 'Error',
        status: clientStatus,
        detail: typeof fastify.message === 'string' ? fastify.message : undefined,
        code: fastify.code as string,
        ...base,
      },
    };
  }
  return { status: 500, fault: true, problem: internal(base) };
}

function internal(base: { requestId: string; instance: string }): Problem {
  return {
    type: 'about:blank',
    title: TITLES[500]!,
    status: 500,
    detail: `an internal error occurred; it was logged with request id ${base.requestId}`,
    ...base,
  };
}

/** A problem for a status the API produces itself (unknown route, unauthenticated, …). */
export function problem(
  status: number,
  detail: string,
  extra: Partial<Problem> & { instance: string },
): Problem {
  return { type: 'about:blank', title: TITLES[status] ?? 'Error', status, detail, ...extra };
}
