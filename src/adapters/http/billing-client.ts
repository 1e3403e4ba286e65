/**
 * The billing port over HTTP (ADR 0014's shape, ADR 0023): `POST {base}/organizations/{org}/deductions
 * {key, amount, reason}` → 201 | 200 (a repeat: the first result) | 402 | 409 (the key was reversed),
 * `…/refunds {key, amount, reason}` → 201 | 200, `…/reversals {key, reason}` → 201 | 200, each answering
 * `{key, kind, amount, balanceAfter, applied, at[, reversedUnapplied]}`.
 *
 * One undici Agent per client (its own TLS: the CA the service is verified with, and a client
 * certificate for mTLS), a bearer token when configured, and a timeout per attempt. An attempt that
 * times out, cannot connect, is answered 5xx or 429, or answers something unreadable is retried after a
 * backoff with the SAME key (the key is the operation's identity: the service applies it once, so a
 * retry of a request whose answer was lost returns the first result, `applied: false`). When every
 * attempt failed the outcome is unknown: BillingUnavailableError (callers retry later with the key, or
 * reverse by it). 402 is InsufficientBalanceError, 409 ConflictError; any other 4xx (a refused token, a
 * request the service rejects) is a BillingUnavailableError that is not retried here (`permanent`).
 * Logs carry the key, the operation, the attempt and the correlation id, never the token.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Agent } from 'undici';
import { z } from 'zod';
import { canonicalMoney, toUnits } from '../../domain/sms/money.js';
import {
  BillingUnavailableError,
  ConflictError,
  errorMessage,
  HeraldError,
  InsufficientBalanceError,
  ValidationError,
} from '../../errors.js';
import { type Logger, silentLogger } from '../../logger.js';
import type {
  BillingOperation,
  BillingPort,
  BillingReceipt,
  BillingRequestOptions,
} from '../../ports/billing.js';
import type { TlsFiles } from '../../settings/connections.js';
import { lazyPackage } from '../lazy-package.js';
import { readTlsFiles } from '../tls-files.js';

const undici = lazyPackage<typeof import('undici')>('undici');

export interface HttpBillingOptions {
  /** The service's base URL (`https://billing.internal/v1`); operations are POSTed below it. */
  baseUrl: string;
  /** One attempt's limit: connecting, sending and reading the whole answer. */
  timeoutMs: number;
  /** Attempts per operation (1 = no retry), all with the operation's key. */
  attempts: number;
  /** Backoff before the second attempt; doubled each time (with jitter), at most `maxBackoffMs`. */
  retryBackoffMs: number;
  maxBackoffMs?: number;
  /** `Authorization: Bearer …` (HERALD_BILLING_TOKEN[_FILE]). */
  bearerToken?: string | undefined;
  /** The CA to verify the service with (absent: the system's CAs) and a client certificate (mTLS). */
  tls?: TlsFiles | undefined;
  logger?: Logger;
}

/** The answer's body (ADR 0014), read strictly enough that a foreign answer is never taken for a receipt. */
const receiptBody = z.object({
  key: z.string(),
  kind: z.enum(['credit', 'deduction', 'refund']),
  amount: z.union([z.string(), z.number()]).transform(String),
  balanceAfter: z.union([z.string(), z.number()]).transform(String),
  applied: z.boolean(),
  at: z.string(),
  reversedUnapplied: z.boolean().optional(),
});

/** The answer's body is read up to this many bytes; a longer one is not a receipt. */
const MAX_BODY_BYTES = 64 * 1024;

type Operation = 'deduction' | 'refund' | 'reversal';
const PATHS: Record<Operation, string> = {
  deduction: 'deductions',
  refund: 'refunds',
  reversal: 'reversals',
};

/** Why one attempt failed, and whether another attempt with the key may help. */
class AttemptFailure extends Error {
  constructor(
    message: string,
    readonly reason: 'timeout' | 'connection' | 'server-error' | 'throttled' | 'bad-answer' | 'rejected',
    readonly status: number | null,
    readonly retryable: boolean,
    readonly retryAfterMs: number | null = null,
  ) {
    super(message);
  }
}

function checkAmount(amount: string): string {
  const canonical = canonicalMoney(amount);
  if (toUnits(canonical) === 0) {
    throw new ValidationError('a billing amount must be positive', {
      field: 'amount',
      rule: 'amount.positive',
    });
  }
  return canonical;
}

/** `Retry-After` in delta-seconds (an HTTP date is ignored: the backoff applies). */
function retryAfterMs(value: string | string[] | undefined): number | null {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || !/^\d+$/.test(text.trim())) return null;
  return Number(text.trim()) * 1000;
}

export class HttpBillingClient implements BillingPort {
  private readonly agent: Agent;
  private readonly base: string;
  private readonly logger: Logger;

  constructor(private readonly options: HttpBillingOptions) {
    if (!Number.isInteger(options.attempts) || options.attempts < 1) {
      throw new ValidationError('attempts must be a positive integer', { field: 'attempts' });
    }
    this.base = options.baseUrl.replace(/\/+$/, '');
    this.logger = (options.logger ?? silentLogger).child({ component: 'billing-http' });
    this.agent = new (undici().Agent)({
      connect: {
        ...(options.tls ? readTlsFiles(options.tls, 'billing') : {}),
        timeout: options.timeoutMs,
      },
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      keepAliveTimeout: 4_000,
    });
  }

  async deduct(operation: BillingOperation, options?: BillingRequestOptions): Promise<BillingReceipt> {
    const amount = checkAmount(operation.amount);
    return this.send(
      'deduction',
      operation.organizationId,
      { key: operation.key, amount, reason: operation.reason ?? null },
      options,
    );
  }

  async refund(operation: BillingOperation, options?: BillingRequestOptions): Promise<BillingReceipt> {
    const amount = checkAmount(operation.amount);
    return this.send(
      'refund',
      operation.organizationId,
      { key: operation.key, amount, reason: operation.reason ?? null },
      options,
    );
  }

  reverse(
    organizationId: string,
    key: string,
    reason: string,
    options?: BillingRequestOptions,
  ): Promise<BillingReceipt> {
    return this.send('reversal', organizationId, { key, reason }, options);
  }

  /** Closes the client's connections (in-flight operations fail as unavailable). */
  close(): Promise<void> {
    return this.agent.close();
  }

  private async send(
    operation: Operation,
    organizationId: string,
    body: { key: string; amount?: string; reason: string | null },
    options: BillingRequestOptions | undefined,
  ): Promise<BillingReceipt> {
    const url = `${this.base}/organizations/${encodeURIComponent(organizationId)}/${PATHS[operation]}`;
    const correlationId = options?.correlationId ?? null;
    const log = this.logger.child({
      operation,
      key: body.key,
      organizationId,
      ...(correlationId ? { correlationId } : {}),
    });
    const payload = JSON.stringify(body);
    let last: AttemptFailure | undefined;
    for (let attempt = 1; attempt <= this.options.attempts; attempt++) {
      const requestId = randomUUID();
      const started = performance.now();
      try {
        const receipt = await this.attempt(operation, url, payload, body.key, requestId, correlationId);
        log.debug(
          {
            attempt,
            requestId,
            applied: receipt.applied,
            elapsedMs: Math.round(performance.now() - started),
          },
          'billing operation answered',
        );
        return receipt;
      } catch (error) {
        if (!(error instanceof AttemptFailure)) throw error; // 402, 409: the service's answer
        last = error;
        const elapsedMs = Math.round(performance.now() - started);
        const more = error.retryable && attempt < this.options.attempts;
        log.warn(
          {
            attempt,
            attempts: this.options.attempts,
            requestId,
            status: error.status,
            reason: error.reason,
            elapsedMs,
            err: error.message,
          },
          more ? 'billing attempt failed; retrying with the same key' : 'billing attempt failed',
        );
        if (!more) break;
        await delay(this.backoff(attempt, error.retryAfterMs));
      }
    }
    throw new BillingUnavailableError(
      `billing ${operation} of ${body.key} failed: ${last?.message ?? 'no attempt'}`,
      {
        key: body.key,
        operation,
        reason: last?.reason ?? null,
        status: last?.status ?? null,
        permanent: last ? !last.retryable : false,
      },
    );
  }

  private backoff(attempt: number, retryAfter: number | null): number {
    const max = this.options.maxBackoffMs ?? 5_000;
    const base = Math.min(max, this.options.retryBackoffMs * 2 ** (attempt - 1));
    const jittered = base / 2 + Math.random() * (base / 2);
    return retryAfter === null ? jittered : Math.min(max, Math.max(jittered, retryAfter));
  }

  /** One request: the receipt, or the service's refusal (402, 409), or an AttemptFailure. */
  private async attempt(
    operation: Operation,
    url: string,
    payload: string,
    key: string,
    requestId: string,
    correlationId: string | null,
  ): Promise<BillingReceipt> {
    const signal = AbortSignal.timeout(this.options.timeoutMs);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json',
      'idempotency-key': key,
      'x-request-id': requestId,
      ...(correlationId ? { 'x-correlation-id': correlationId } : {}),
      ...(this.options.bearerToken ? { authorization: `Bearer ${this.options.bearerToken}` } : {}),
    };
    let status: number;
    let text: string;
    let responseHeaders: Record<string, string | string[] | undefined>;
    try {
      const response = await undici().request(url, {
        method: 'POST',
        headers,
        body: payload,
        signal,
        dispatcher: this.agent,
      });
      status = response.statusCode;
      responseHeaders = response.headers;
      text = await readBounded(response.body);
    } catch (error) {
      if (signal.aborted) {
        throw new AttemptFailure(`no answer within ${this.options.timeoutMs} ms`, 'timeout', null, true);
      }
      const cause = (error as { cause?: { code?: unknown } }).cause;
      const code = (error as { code?: unknown }).code ?? cause?.code;
      throw new AttemptFailure(
        `cannot reach the billing service: ${typeof code === 'string' ? code : errorMessage(error)}`,
        'connection',
        null,
        true,
      );
    }
    if (status === 200 || status === 201) return this.receiptOf(operation, key, status, text);
    const problem = parseJson(text) as { detail?: unknown; balance?: unknown; amount?: unknown } | null;
    const detail = typeof problem?.detail === 'string' ? problem.detail.slice(0, 300) : `HTTP ${status}`;
    if (status === 402 && operation === 'deduction') {
      throw new InsufficientBalanceError(`billing refused ${key}: ${detail}`, {
        key,
        ...(typeof problem?.balance === 'string' ? { balance: problem.balance } : {}),
        ...(typeof problem?.amount === 'string' ? { amount: problem.amount } : {}),
      });
    }
    if (status === 409 && operation === 'deduction') {
      throw new ConflictError(`billing key ${key} was reversed before its deduction arrived: ${detail}`, {
        field: 'key',
        key,
      });
    }
    if (status === 429) {
      throw new AttemptFailure(
        `throttled (429): ${detail}`,
        'throttled',
        status,
        true,
        retryAfterMs(responseHeaders['retry-after']),
      );
    }
    if (status >= 500) throw new AttemptFailure(`HTTP ${status}: ${detail}`, 'server-error', status, true);
    // 401/403 (the token or certificate), 400/404/422 (a request the service refuses): another attempt
    // with the same request cannot help, and nothing was applied.
    throw new AttemptFailure(`HTTP ${status}: ${detail}`, 'rejected', status, false);
  }

  private receiptOf(operation: Operation, key: string, status: number, text: string): BillingReceipt {
    const parsed = receiptBody.safeParse(parseJson(text));
    const expectedKind = operation === 'deduction' ? 'deduction' : 'refund';
    if (!parsed.success || parsed.data.key !== key || parsed.data.kind !== expectedKind) {
      throw new AttemptFailure(
        `HTTP ${status} without a ${expectedKind} receipt for ${key}`,
        'bad-answer',
        status,
        true,
      );
    }
    const b = parsed.data;
    try {
      return {
        key: b.key,
        kind: b.kind,
        amount: canonicalMoney(b.amount),
        balanceAfter: canonicalMoney(b.balanceAfter),
        applied: b.applied,
        reversedUnapplied:
          b.reversedUnapplied ?? (operation === 'reversal' && toUnits(canonicalMoney(b.amount)) === 0),
        at: b.at,
      };
    } catch (error) {
      if (error instanceof HeraldError) {
        throw new AttemptFailure(`HTTP ${status} with an unreadable amount`, 'bad-answer', status, true);
      }
      throw error;
    }
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

async function readBounded(body: AsyncIterable<unknown> & { destroy(): unknown }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > MAX_BODY_BYTES) {
      body.destroy();
      break;
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
