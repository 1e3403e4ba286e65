/**
 * Issues a short-lived LINE channel access token (client credentials) on the official SDK's
 * `channelAccessToken.ChannelAccessTokenClient`. A refusal (400/401: wrong id or secret) is a
 * PermanentError, anything else (5xx, 429, network, timeout, an unreadable answer) a TransientError;
 * the client secret never appears in an error.
 */
import { PermanentError, TransientError } from '../../errors.js';
import { lineSdk } from './messaging-api.js';

export interface IssueChannelTokenOptions {
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  timeoutMs?: number;
  /** The clock the expiry is computed on (default: Date.now). */
  now?: () => number;
}

export interface IssuedChannelToken {
  accessToken: string;
  expiresAt: Date;
}

const DEFAULT_TIMEOUT_MS = 10_000;

function redact(text: string, secret: string): string {
  return secret.length > 0 ? text.split(secret).join('[redacted]') : text;
}

/** LINE's token API answers errors as `{ error, error_description }`. */
function describe(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: unknown; error_description?: unknown };
    const parts = [parsed.error, parsed.error_description].filter((part) => typeof part === 'string');
    if (parts.length > 0) return parts.join(': ');
  } catch {
    // not JSON: fall through
  }
  return body.slice(0, 200);
}

export async function issueChannelToken(options: IssueChannelTokenOptions): Promise<IssuedChannelToken> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const { channelAccessToken, HTTPFetchError } = await lineSdk();
  const client = new channelAccessToken.ChannelAccessTokenClient({ baseURL: options.baseUrl });
  const details = { clientId: options.clientId };
  let timer: NodeJS.Timeout | undefined;
  let response: Awaited<ReturnType<typeof client.issueChannelTokenWithHttpInfo>>;
  try {
    const pending = client.issueChannelTokenWithHttpInfo(
      'client_credentials',
      options.clientId,
      options.clientSecret,
    );
    pending.catch(() => {});
    response = await Promise.race([
      pending,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new TransientError(`LINE channel token: no answer within ${timeoutMs} ms`, details)),
          timeoutMs,
        );
      }),
    ]);
  } catch (error) {
    if (error instanceof TransientError) throw error;
    if (error instanceof HTTPFetchError) {
      const reason = redact(describe(error.body), options.clientSecret);
      const message = `LINE channel token refused (HTTP ${error.status}): ${reason}`;
      const errorDetails = { ...details, status: error.status };
      if (error.status === 400 || error.status === 401) throw new PermanentError(message, errorDetails);
      throw new TransientError(message, errorDetails);
    }
    const cause = (error as { cause?: { code?: unknown } } | null)?.cause;
    const reason =
      typeof cause?.code === 'string' ? cause.code : error instanceof Error ? error.message : 'unknown';
    throw new TransientError(`LINE channel token: ${redact(reason, options.clientSecret)}`, details);
  } finally {
    clearTimeout(timer);
  }
  const { access_token: accessToken, expires_in: expiresIn } = response.body ?? {};
  if (typeof accessToken !== 'string' || accessToken === '' || typeof expiresIn !== 'number') {
    throw new TransientError('LINE channel token: the answer has no access_token or expires_in', details);
  }
  return { accessToken, expiresAt: new Date((options.now ?? Date.now)() + expiresIn * 1000) };
}
