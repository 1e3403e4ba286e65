/**
 * Errors as RFC 9457 problem details (`application/problem+json`), from one table: Herald's typed
 * errors (src/errors.ts, by code), Fastify's request errors and the HTTP layer's own refusals (an
 * unknown route, a method the path does not declare, bytes that are not UTF-8, a request Node's parser
 * refuses) map to an HTTP status and a `type` URI here and nowhere else. Every problem's `type` is
 * `urn:herald:problem:<kind>` (never `about:blank`), so a client can tell the kinds apart. Nothing
 * answers 500 but a real fault, whose message is never sent (it is logged with the request id, which
 * the problem carries so the two can be matched).
 */
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { HeraldError, type HeraldErrorCode } from '../errors.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/**
 * The API's one Retry-After, in seconds (seed 003's 2): every answer that asks the client to come back —
 * 409 while a request with the same Idempotency-Key is in flight, 429 when a caller's share of a limit
 * is taken, 502 when billing did not answer (the campaign unchanged, retryable with the same key), 503
 * when a dependency is down or the process is at capacity — says this.
 */
export const RETRY_AFTER_SECONDS = 2;

/** Statuses a client should retry after RETRY_AFTER_SECONDS (with the same Idempotency-Key). */
function retryAfterOf(error: HeraldError, status: number): Record<string, string> | undefined {
  // A 429 that knows when its window ends (the authentication throttle's) says so.
  const after = error.details.retryAfterSeconds;
  if (status === 429 && typeof after === 'number')
    return { 'retry-after': String(Math.max(1, Math.ceil(after))) };
  if (error.code === 'IDEMPOTENCY_KEY_IN_USE' || status === 429 || status === 502 || status === 503) {
    return { 'retry-after': String(RETRY_AFTER_SECONDS) };
  }
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
  INVALID_TOKEN: 401,
  FORBIDDEN: 403,
  CSRF_REJECTED: 403,
  AUTH_THROTTLED: 429,
  IDEMPOTENCY_KEY_IN_USE: 409,
  IDEMPOTENCY_KEY_REUSED: 422,
  // SMS campaigns' billing port (ADR 0014): refused (402) or unreachable / ambiguous (502).
  INSUFFICIENT_BALANCE: 402,
  BILLING_UNAVAILABLE: 502,
  // Capacity: one caller's share (an organization's, a key's) or the whole process's.
  LIMIT_REACHED: 429,
  OVERLOADED: 503,
  DATABASE_UNAVAILABLE: 503,
  BROKER_UNAVAILABLE: 503,
  TRANSIENT_FAILURE: 503,
  // An event a newer release wrote, read by this one during a rollout (ADR 0039): served by the new pods.
  UNSUPPORTED_VERSION: 503,
  // Faults: never a client's doing.
  CONFIG_INVALID: 500,
  DATABASE_ERROR: 500,
  PUBLISH_REJECTED: 500,
  PERMANENT_FAILURE: 500,
};

/**
 * Fastify's own request errors that are the client's doing (their messages are safe to show): status
 * and problem kind. Another `FST_` error with a 4xx status keeps its status, kind `fastify-<code>`.
 */
const FASTIFY_PROBLEMS: Readonly<Record<string, { status: number; kind: string }>> = {
  FST_ERR_VALIDATION: { status: 400, kind: 'invalid-request' },
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, kind: 'malformed-json' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, kind: 'empty-json-body' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, kind: 'invalid-content-length' },
  FST_ERR_BAD_URL: { status: 400, kind: 'bad-url' },
  FST_ERR_MAX_PARAM_LENGTH: { status: 414, kind: 'uri-too-long' },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, kind: 'body-too-large' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 415, kind: 'unsupported-media-type' },
  FST_ERR_NOT_FOUND: { status: 404, kind: 'route-not-found' },
};

/** The `type` of a problem of this kind (`route-not-found`) or Herald code (`ROUTE_NOT_FOUND`). */
export const problemType = (kindOrCode: string): string =>
  `urn:herald:problem:${kindOrCode.toLowerCase().replaceAll('_', '-')}`;

/**
 * A refusal of the HTTP layer itself, before any route's handler (invalid UTF-8, malformed JSON, a
 * method the path does not declare): thrown where it is found, answered as its status and code.
 */
export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    /** `INVALID_UTF8`, `MALFORMED_JSON`, `METHOD_NOT_ALLOWED`, …: the problem's code and `type`. */
    readonly code: string,
    detail: string,
    readonly extra: { errors?: FieldError[]; headers?: Record<string, string> } = {},
  ) {
    super(detail);
    this.name = 'HttpProblem';
  }
}

const TITLES: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  402: 'Payment Required',
  404: 'Not Found',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  409: 'Conflict',
  413: 'Content Too Large',
  414: 'URI Too Long',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
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
      .describe(
        'a URI naming the kind of problem, urn:herald:problem:<kind> (`validation-failed`, `malformed-json`, `method-not-allowed`, …)',
      ),
    title: z.string(),
    status: z.number().int(),
    detail: z.string().optional(),
    instance: z.string().optional().describe('the request path'),
    code: z.string().optional().describe("Herald's error code (src/errors.ts) or Fastify's"),
    requestId: z.string().optional(),
    errors: z.array(fieldErrorSchema).optional(),
    currentStatus: z.string().optional().describe('an illegal state: the status the resource is in'),
    limit: z
      .string()
      .optional()
      .describe('a capacity limit reached (429, or 503 for the whole process): the setting that sets it'),
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
export function problemFor(
  error: unknown,
  context: { requestId: string; instance: string; contentType?: string | undefined },
): MappedError {
  const base = { requestId: context.requestId, instance: context.instance };
  if (error instanceof HeraldError) {
    const status = STATUS_BY_CODE[error.code] ?? 500;
    if (status >= 500 && status !== 503 && status !== 502) {
      return { status: 500, fault: true, problem: internal(base) };
    }
    const currentStatus =
      status === 409 && typeof error.details.status === 'string' ? error.details.status : undefined;
    const errors = status === 422 || status === 400 ? heraldFieldErrors(error) : undefined;
    const challenge = error.details.wwwAuthenticate;
    const headers =
      typeof challenge === 'string'
        ? { ...retryAfterOf(error, status), 'www-authenticate': challenge }
        : retryAfterOf(error, status);
    const limit = typeof error.details.limit === 'string' ? error.details.limit : undefined;
    return {
      status,
      fault: status >= 500,
      ...(headers ? { headers } : {}),
      problem: {
        type: `urn:herald:problem:${error.code.toLowerCase().replaceAll('_', '-')}`,
        title: TITLES[status] ?? 'Error',
        status,
        // A 503 names the dependency, never a driver message (a process at capacity says so).
        detail:
          status === 503 && error.code !== 'OVERLOADED'
            ? 'a dependency is unavailable; retry later'
            : error.message,
        code: error.code,
        ...base,
        ...(errors ? { errors } : {}),
        ...(currentStatus ? { currentStatus } : {}),
        ...(limit ? { limit } : {}),
      },
    };
  }
  if (error instanceof HttpProblem) {
    return {
      status: error.status,
      fault: error.status >= 500,
      ...(error.extra.headers ? { headers: error.extra.headers } : {}),
      problem: {
        type: problemType(error.code),
        title: TITLES[error.status] ?? 'Error',
        status: error.status,
        detail: error.message,
        code: error.code,
        ...base,
        ...(error.extra.errors ? { errors: error.extra.errors } : {}),
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
        type: problemType('invalid-request'),
        title: TITLES[400]!,
        status: 400,
        detail: `invalid request: ${errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`,
        code: 'FST_ERR_VALIDATION',
        ...base,
        errors,
      },
    };
  }
  const known = typeof fastify.code === 'string' ? FASTIFY_PROBLEMS[fastify.code] : undefined;
  const clientStatus =
    known?.status ??
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
        type: problemType(known?.kind ?? `fastify-${(fastify.code as string).replace(/^FST_ERR_/, '')}`),
        title: TITLES[clientStatus] ?? 'Error',
        status: clientStatus,
        detail:
          fastify.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
            ? `a body of type ${context.contentType ?? '(none)'} is not accepted by this operation (its requestBody in /openapi.json says which is)`
            : typeof fastify.message === 'string'
              ? fastify.message
              : undefined,
        code: fastify.code as string,
        ...base,
      },
    };
  }
  return { status: 500, fault: true, problem: internal(base) };
}

function internal(base: { requestId: string; instance: string }): Problem {
  return {
    type: problemType('internal-error'),
    title: TITLES[500]!,
    status: 500,
    detail: `an internal error occurred; it was logged with request id ${base.requestId}`,
    ...base,
  };
}

/** A problem for a status the API produces itself (unknown route, dashboard not built, …): `type` from its code. */
export function problem(
  status: number,
  detail: string,
  extra: Partial<Problem> & { instance: string; code: string },
): Problem {
  return { type: problemType(extra.code), title: TITLES[status] ?? 'Error', status, detail, ...extra };
}

/**
 * A request Node's HTTP parser refuses before Fastify sees it (no route, no request id of Fastify's):
 * the status, code and reason for the parser's error code (Node's `clientError` event).
 */
export function clientErrorProblem(errorCode: string | undefined): { status: number; problem: Problem } {
  const [status, code, detail] =
    errorCode === 'HPE_HEADER_OVERFLOW'
      ? [431, 'HEADERS_TOO_LARGE', 'the request headers exceed the size the server accepts']
      : errorCode === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'REQUEST_TIMEOUT', 'the request was not received in time']
        : errorCode === 'HPE_INVALID_METHOD'
          ? [400, 'MALFORMED_REQUEST', 'the request method is not one HTTP/1.1 defines']
          : errorCode === 'HPE_INVALID_URL'
            ? [
                400,
                'MALFORMED_REQUEST',
                'the request target holds a character a URL may not (a control character or a space)',
              ]
            : errorCode === 'HPE_INVALID_HEADER_TOKEN' || errorCode === 'HPE_INVALID_HEADER_VALUE'
              ? [400, 'MALFORMED_REQUEST', 'a header name or value holds a character HTTP does not allow']
              : [400, 'MALFORMED_REQUEST', `the request is not valid HTTP/1.1 (${errorCode ?? 'unknown'})`];
  return {
    status,
    problem: { type: problemType(code), title: TITLES[status] ?? 'Error', status, detail, code },
  };
}
