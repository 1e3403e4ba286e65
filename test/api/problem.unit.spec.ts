/**
 * One Retry-After for the whole API (seed 003's 2 s, src/api/problem.ts): every answer that asks the
 * client to come back — 409 while the Idempotency-Key is in flight, 502 when billing did not answer,
 * 503 when a dependency is down — carries the same value, whatever a thrown error's details say.
 */
import { describe, expect, it } from 'vitest';
import { IN_PROGRESS_RETRY_AFTER_SECONDS } from '../../src/api/idempotency.js';
import {
  clientErrorProblem,
  HttpProblem,
  problem,
  problemFor,
  RETRY_AFTER_SECONDS,
} from '../../src/api/problem.js';
import {
  BillingUnavailableError,
  DatabaseUnavailableError,
  IdempotencyKeyError,
  InsufficientBalanceError,
  LimitError,
  TransientError,
} from '../../src/errors.js';

const context = { requestId: 'req-1', instance: '/v1/campaigns' };

describe('Retry-After', () => {
  it("is the seed's 2 s, one value for every retryable answer", () => {
    expect(RETRY_AFTER_SECONDS).toBe(2);
    expect(IN_PROGRESS_RETRY_AFTER_SECONDS).toBe(RETRY_AFTER_SECONDS);
    const cases = [
      // Even an error that carries another value (or none) answers the one value.
      new IdempotencyKeyError('IDEMPOTENCY_KEY_IN_USE', 'in flight', { retryAfterSeconds: 1 }),
      new IdempotencyKeyError('IDEMPOTENCY_KEY_IN_USE', 'in flight'),
      new BillingUnavailableError('billing did not answer', { key: 'campaign:x' }),
      new DatabaseUnavailableError('down'),
      new TransientError('too many streams'),
      new LimitError('LIMIT_REACHED', 'your share', { limit: 'HERALD_API_STREAMS_PER_KEY', max: 1 }),
      new LimitError('OVERLOADED', 'the process is full', { limit: 'HERALD_API_STREAMS_MAX', max: 1 }),
    ];
    expect(cases.map((error) => problemFor(error, context))).toEqual([
      expect.objectContaining({ status: 409, headers: { 'retry-after': '2' } }),
      expect.objectContaining({ status: 409, headers: { 'retry-after': '2' } }),
      expect.objectContaining({ status: 502, headers: { 'retry-after': '2' } }),
      expect.objectContaining({ status: 503, headers: { 'retry-after': '2' } }),
      expect.objectContaining({ status: 503, headers: { 'retry-after': '2' } }),
      expect.objectContaining({ status: 429, headers: { 'retry-after': '2' } }),
      expect.objectContaining({ status: 503, headers: { 'retry-after': '2' } }),
    ]);
  });

  it('a limit reached names its setting; a full process says so rather than "a dependency is unavailable"', () => {
    const share = problemFor(
      new LimitError('LIMIT_REACHED', 'your organization holds 3 streams', {
        limit: 'HERALD_API_STREAMS_PER_ORGANIZATION',
        max: 3,
      }),
      context,
    );
    expect(share).toMatchObject({
      status: 429,
      fault: false,
      problem: {
        type: 'urn:herald:problem:limit-reached',
        title: 'Too Many Requests',
        detail: 'your organization holds 3 streams',
        limit: 'HERALD_API_STREAMS_PER_ORGANIZATION',
      },
    });
    const full = problemFor(
      new LimitError('OVERLOADED', 'this process serves 5 streams', {
        limit: 'HERALD_API_STREAMS_MAX',
        max: 5,
      }),
      context,
    );
    expect(full.problem).toMatchObject({
      status: 503,
      detail: 'this process serves 5 streams',
      limit: 'HERALD_API_STREAMS_MAX',
    });
    // Other 503s still never show their message.
    expect(problemFor(new DatabaseUnavailableError('ECONNREFUSED 127.0.0.1'), context).problem.detail).toBe(
      'a dependency is unavailable; retry later',
    );
  });

  it('is not sent where retrying the same request cannot help (402)', () => {
    const mapped = problemFor(new InsufficientBalanceError('short', { balance: '1.0000' }), context);
    expect(mapped.status).toBe(402);
    expect(mapped.headers).toBeUndefined();
    expect(mapped.problem).toMatchObject({ code: 'INSUFFICIENT_BALANCE', title: 'Payment Required' });
  });

  it('502 names billing, a fault the operator sees, without a driver message hidden', () => {
    const mapped = problemFor(
      new BillingUnavailableError('billing deduction of campaign:x failed: HTTP 503'),
      context,
    );
    expect(mapped).toMatchObject({
      status: 502,
      fault: true,
      problem: {
        code: 'BILLING_UNAVAILABLE',
        title: 'Bad Gateway',
        type: 'urn:herald:problem:billing-unavailable',
      },
    });
  });
});

describe('problem types', () => {
  it('every kind has a urn:herald:problem type, never about:blank', () => {
    const fastify = (code: string, statusCode: number, message = 'm') =>
      Object.assign(new Error(message), { code, statusCode });
    const mapped = [
      problemFor(new DatabaseUnavailableError('down'), context),
      problemFor(fastify('FST_ERR_BAD_URL', 400), context),
      problemFor(fastify('FST_ERR_MAX_PARAM_LENGTH', 414), context),
      problemFor(fastify('FST_ERR_CTP_INVALID_MEDIA_TYPE', 415), { ...context, contentType: 'text/xml' }),
      problemFor(fastify('FST_ERR_CTP_BODY_TOO_LARGE', 413), context),
      problemFor(fastify('FST_ERR_SOMETHING_NEW', 400), context),
      problemFor(new HttpProblem(405, 'METHOD_NOT_ALLOWED', 'no', { headers: { allow: 'GET' } }), context),
      problemFor(new Error('a fault'), context),
    ];
    expect(mapped.map((m) => [m.status, m.problem.type])).toEqual([
      [503, 'urn:herald:problem:database-unavailable'],
      [400, 'urn:herald:problem:bad-url'],
      [414, 'urn:herald:problem:uri-too-long'],
      [415, 'urn:herald:problem:unsupported-media-type'],
      [413, 'urn:herald:problem:body-too-large'],
      [400, 'urn:herald:problem:fastify-something-new'],
      [405, 'urn:herald:problem:method-not-allowed'],
      [500, 'urn:herald:problem:internal-error'],
    ]);
    expect(mapped[3]!.problem.detail).toContain('text/xml');
    expect(mapped[6]!.headers).toEqual({ allow: 'GET' });
    expect(mapped[7]!.problem.detail).not.toContain('a fault');
    expect(problem(404, 'no route', { instance: '/x', code: 'ROUTE_NOT_FOUND' }).type).toBe(
      'urn:herald:problem:route-not-found',
    );
  });

  it("Node's parser errors: 431 for oversized headers, 408 for a slow request, otherwise 400 with the reason", () => {
    expect(clientErrorProblem('HPE_HEADER_OVERFLOW')).toMatchObject({
      status: 431,
      problem: { type: 'urn:herald:problem:headers-too-large', title: 'Request Header Fields Too Large' },
    });
    expect(clientErrorProblem('ERR_HTTP_REQUEST_TIMEOUT').status).toBe(408);
    expect(clientErrorProblem('HPE_INVALID_URL').problem.detail).toContain('control character');
    expect(clientErrorProblem('HPE_SOMETHING')).toMatchObject({
      status: 400,
      problem: {
        type: 'urn:herald:problem:malformed-request',
        detail: expect.stringContaining('HPE_SOMETHING'),
      },
    });
  });
});
