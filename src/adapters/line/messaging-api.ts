/**
 * The LINE Messaging API adapter, on the official SDK (`messagingApi.MessagingApiClient`): broadcast,
 * multicast and narrowcast with an `X-Line-Retry-Key`, and a token check. Every HTTP or network result
 * is an outcome, never a throw: a 409 carrying `x-line-accepted-request-id` is `duplicate` (LINE already
 * accepted this key: success), 429 is `throttled` or, for the monthly limit, `quota`; other 4xx are
 * `rejected`; 5xx, network errors and timeouts are `transient` (retry with the same key). The token
 * never appears in an outcome's message.
 */
import type { messagingApi } from '@line/bot-sdk';
import type { LineMessage as CampaignLineMessage } from '../../domain/campaign/line.js';

export type LineMessage = messagingApi.Message;

/** Compile-time proof that every message the campaign's zod schema accepts is a message of the SDK's types. */
export const campaignMessageIsSdkMessage = (message: CampaignLineMessage): LineMessage => message;

export type LineOutcome =
  | { kind: 'accepted'; requestId: string }
  | { kind: 'duplicate'; requestId: string | null; acceptedRequestId: string }
  | { kind: 'throttled'; requestId: string | null; retryAfterMs: number | null; message: string }
  | { kind: 'quota'; requestId: string | null; message: string }
  | {
      kind: 'rejected';
      status: number;
      requestId: string | null;
      message: string;
      details: { message?: string; property?: string }[];
    }
  | { kind: 'transient'; status: number | null; requestId: string | null; message: string };

export interface LineCall {
  token: string;
  retryKey: string;
  messages: readonly LineMessage[];
}

export interface LineMessagingPort {
  broadcast(call: LineCall): Promise<LineOutcome>;
  multicast(call: LineCall & { to: readonly string[] }): Promise<LineOutcome>;
  narrowcast(call: LineCall & { audienceGroupId: number }): Promise<LineOutcome>;
  /** Checks a token (GET quota); 'rejected' for an invalid token. */
  checkToken(token: string): Promise<LineOutcome>;
}

export interface LineMessagingApiOptions {
  /** `https://api.line.me`, or a simulator's URL. */
  baseUrl: string;
  /** How long a call may take before it is `transient` (it may still have been accepted: retry with its key). */
  timeoutMs?: number;
}

export const DEFAULT_LINE_TIMEOUT_MS = 10_000;
/** The SDK binds a client to one token; channels are few, so a small cache suffices. */
const MAX_CACHED_CLIENTS = 64;
const MONTHLY_LIMIT = /monthly limit/i;

class Timeout extends Error {}

/** `Retry-After` as milliseconds: delta-seconds or an HTTP date; null when absent or unreadable. */
export function retryAfterMs(value: string | null, now: number = Date.now()): number | null {
  if (value === null || value.trim() === '') return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

function redact(text: string, token: string): string {
  return token.length > 0 ? text.split(token).join('[redacted]') : text;
}

function errorBody(text: string): { message?: unknown; details?: unknown } | null {
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null ? parsed : null;
  } catch {
    return null;
  }
}

/** The outcome of a non-2xx answer. */
export function outcomeOfResponse(
  status: number,
  headers: Headers,
  bodyText: string,
  token = '',
): LineOutcome {
  const requestId = headers.get('x-line-request-id');
  const body = errorBody(bodyText);
  const message = redact(
    typeof body?.message === 'string'
      ? body.message
      : `HTTP ${status}${bodyText ? `: ${bodyText.slice(0, 200)}` : ''}`,
    token,
  );
  const acceptedRequestId = headers.get('x-line-accepted-request-id');
  if (status === 409 && acceptedRequestId) return { kind: 'duplicate', requestId, acceptedRequestId };
  if (status === 429) {
    if (MONTHLY_LIMIT.test(message)) return { kind: 'quota', requestId, message };
    return { kind: 'throttled', requestId, retryAfterMs: retryAfterMs(headers.get('retry-after')), message };
  }
  if (status >= 400 && status < 500 && status !== 408) {
    const details = Array.isArray(body?.details)
      ? (body.details as unknown[]).flatMap((detail) => {
          if (typeof detail !== 'object' || detail === null) return [];
          const { message: m, property: p } = detail as { message?: unknown; property?: unknown };
          return [
            {
              ...(typeof m === 'string' ? { message: redact(m, token) } : {}),
              ...(typeof p === 'string' ? { property: p } : {}),
            },
          ];
        })
      : [];
    return { kind: 'rejected', status, requestId, message, details };
  }
  return { kind: 'transient', status, requestId, message };
}

function outcomeOfError(error: unknown, token: string, timeoutMs: number, sdk: LineSdk): LineOutcome {
  if (error instanceof sdk.HTTPFetchError)
    return outcomeOfResponse(error.status, error.headers, error.body, token);
  if (error instanceof Timeout) {
    return { kind: 'transient', status: null, requestId: null, message: `no answer within ${timeoutMs} ms` };
  }
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  const reason =
    typeof cause?.code === 'string'
      ? cause.code
      : typeof cause?.message === 'string'
        ? cause.message
        : error instanceof Error
          ? error.message
          : String(error);
  return {
    kind: 'transient',
    status: null,
    requestId: null,
    message: redact(`network error: ${reason}`, token),
  };
}

type LineSdk = typeof import('@line/bot-sdk');
let loadedSdk: Promise<LineSdk> | undefined;
/** The SDK is imported on the first call, not when the CLI starts: ~370 modules no other role needs. */
export const lineSdk = (): Promise<LineSdk> => {
  loadedSdk ??= import('@line/bot-sdk');
  return loadedSdk;
};

export function lineMessagingApi(options: LineMessagingApiOptions): LineMessagingPort {
  const timeoutMs = options.timeoutMs ?? DEFAULT_LINE_TIMEOUT_MS;
  const clients = new Map<string, messagingApi.MessagingApiClient>();

  const clientFor = (sdk: LineSdk, token: string) => {
    let client = clients.get(token);
    if (client) clients.delete(token);
    else
      client = new sdk.messagingApi.MessagingApiClient({
        baseURL: options.baseUrl,
        channelAccessToken: token,
      });
    clients.set(token, client);
    if (clients.size > MAX_CACHED_CLIENTS) clients.delete(clients.keys().next().value!);
    return client;
  };

  /**
   * The SDK takes no abort signal, so the timeout stops the wait, not the request: an abandoned call's
   * late result is dropped (undici's own timeouts end the socket).
   */
  const call = async (
    token: string,
    send: (client: messagingApi.MessagingApiClient) => Promise<{ httpResponse: Response }>,
  ): Promise<LineOutcome> => {
    let timer: NodeJS.Timeout | undefined;
    const sdk = await lineSdk();
    try {
      const pending = send(clientFor(sdk, token));
      pending.catch(() => {});
      const { httpResponse } = await Promise.race([
        pending,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Timeout()), timeoutMs);
        }),
      ]);
      return { kind: 'accepted', requestId: httpResponse.headers.get('x-line-request-id') ?? '' };
    } catch (error) {
      return outcomeOfError(error, token, timeoutMs, sdk);
    } finally {
      clearTimeout(timer);
    }
  };

  return {
    broadcast: ({ token, retryKey, messages }) =>
      call(token, (client) => client.broadcastWithHttpInfo({ messages: [...messages] }, retryKey)),
    multicast: ({ token, retryKey, messages, to }) =>
      call(token, (client) =>
        client.multicastWithHttpInfo({ messages: [...messages], to: [...to] }, retryKey),
      ),
    narrowcast: ({ token, retryKey, messages, audienceGroupId }) =>
      call(token, (client) =>
        client.narrowcastWithHttpInfo(
          { messages: [...messages], recipient: { type: 'audience', audienceGroupId } },
          retryKey,
        ),
      ),
    checkToken: (token) => call(token, (client) => client.getMessageQuotaWithHttpInfo()),
  };
}
