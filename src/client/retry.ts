/**
 * The client's transport: one `fetch` that adds the credential to each attempt (a function credential is
 * asked again each time, so a refreshed token is used) and retries what is safe to retry. 429 and 503
 * are refusals (nothing was done) and are retried after the answer's `Retry-After` (seconds or an HTTP
 * date), and so is a 409 `idempotency-key-in-use` (the same key is still being worked on, or was left
 * reserved by a request a failover cut: the answer says when to ask again); a network error is retried only for a request that is safe to send twice: a GET/HEAD, or a
 * command carrying an `Idempotency-Key` (the same key on every attempt: the request is replayed
 * byte for byte, so the API answers a repeat with the first answer, ADR 0012). Waits go through an
 * injectable `sleep` and clock so tests do not wait.
 */

export interface RetryOptions {
  /** Attempts in all, the first included (default 4; 1 = never retry). */
  maxAttempts?: number;
  /**
   * The longest wait the client accepts before a retry (default 30 000 ms): an answer asking for more
   * is returned to the caller (as its error) instead of waited for.
   */
  maxDelayMs?: number;
  /** The wait before retrying a network error or an answer without Retry-After (default 500 ms, doubling). */
  baseDelayMs?: number;
  /** Waits `ms` (default: a timer), rejecting when `signal` aborts. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** The clock an HTTP-date Retry-After is read against (default Date.now). */
  now?: () => number;
}

export type Credential = string | (() => string | Promise<string>);

export interface TransportOptions {
  credential: Credential;
  fetch: (request: Request) => Promise<Response>;
  retries: Required<RetryOptions>;
}

/** A timer that an abort cancels. */
export function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export const DEFAULT_RETRIES = {
  maxAttempts: 4,
  maxDelayMs: 30_000,
  baseDelayMs: 500,
  sleep: defaultSleep,
  now: Date.now,
} satisfies Required<RetryOptions>;

/** Retry-After in milliseconds (delay-seconds or an HTTP date), or undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, now: number): number | undefined {
  if (header === null) return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

const RETRIED_STATUSES = new Set([429, 503]);
const KEY_IN_USE = 'urn:herald:problem:idempotency-key-in-use';

/** Whether an answer is a refusal to retry: 429, 503, or 409 for an Idempotency-Key still in use. */
async function retried(response: Response): Promise<boolean> {
  if (RETRIED_STATUSES.has(response.status)) return true;
  if (response.status !== 409) return false;
  const problem = (await response
    .clone()
    .json()
    .catch(() => null)) as { type?: unknown } | null;
  return problem?.type === KEY_IN_USE;
}

/** A request that may reach the server twice without doing twice what it asks. */
const replayable = (request: Request) =>
  request.method === 'GET' || request.method === 'HEAD' || request.headers.has('idempotency-key');

/** The `fetch` the typed client runs on: credential per attempt, retries as above. */
export function retryingFetch(options: TransportOptions): (request: Request) => Promise<Response> {
  const { retries } = options;
  const credential =
    typeof options.credential === 'function' ? options.credential : () => options.credential as string;
  return async (request) => {
    // Read once: every attempt sends the same bytes (and the same Idempotency-Key header).
    const body = request.body ? await request.arrayBuffer() : undefined;
    for (let attempt = 1; ; attempt++) {
      const headers = new Headers(request.headers);
      headers.set('authorization', `Bearer ${await credential()}`);
      const last = attempt >= retries.maxAttempts;
      const backoff = retries.baseDelayMs * 2 ** (attempt - 1);
      let response: Response;
      try {
        response = await options.fetch(
          new Request(request.url, {
            method: request.method,
            headers,
            signal: request.signal,
            redirect: request.redirect,
            ...(body !== undefined ? { body } : {}),
          }),
        );
      } catch (error) {
        if (last || request.signal.aborted || !replayable(request) || backoff > retries.maxDelayMs)
          throw error;
        await retries.sleep(backoff, request.signal);
        continue;
      }
      if (last || !(await retried(response))) return response;
      const wait = retryAfterMs(response.headers.get('retry-after'), retries.now()) ?? backoff;
      if (wait > retries.maxDelayMs) return response;
      await response.body?.cancel();
      await retries.sleep(wait, request.signal);
    }
  };
}
