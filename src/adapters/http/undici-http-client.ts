/**
 * The job executors' HTTP client (the HttpClient port) over undici: one connection pool whose DNS
 * lookups apply the target allowlist (target-guard.ts), no redirects followed, the response body read
 * up to a bound and then dropped, every failure turned into Herald's typed errors — a refused target
 * is permanent (PermanentError: nothing was sent), anything on the way (DNS failure, refused or reset
 * connection, timeout via the AbortSignal) transient (TransientError).
 */
import type { Agent } from 'undici';
import { errorMessage, HeraldError, TransientError } from '../../errors.js';
import type { HttpClient, OutboundRequest, OutboundResponse } from '../../ports/job-executor.js';
import { lazyPackage } from '../lazy-package.js';
import { checkTarget, guardedLookup, type TargetPolicy, TargetRefusedError } from './target-guard.js';

const undici = lazyPackage<typeof import('undici')>('undici');

function refusal(error: unknown): TargetRefusedError | undefined {
  for (let e: unknown = error; e; e = (e as { cause?: unknown }).cause) {
    if (e instanceof TargetRefusedError) return e;
  }
  return undefined;
}

export class UndiciHttpClient implements HttpClient {
  private readonly agent: Agent;

  constructor(private readonly policy: TargetPolicy) {
    this.agent = new (undici().Agent)({
      connect: { lookup: guardedLookup(policy) as never },
      keepAliveTimeout: 4_000,
    });
  }

  async send(
    outbound: OutboundRequest,
    options: { signal: AbortSignal; maxBodyBytes: number },
  ): Promise<OutboundResponse> {
    const url = new URL(outbound.url);
    checkTarget(url, this.policy);
    try {
      const response = await undici().request(url, {
        method: outbound.method as 'GET',
        headers: outbound.headers,
        ...(outbound.body !== undefined ? { body: outbound.body } : {}),
        signal: options.signal,
        dispatcher: this.agent,
      });
      const chunks: Buffer[] = [];
      let kept = 0;
      let truncated = false;
      for await (const chunk of response.body) {
        const buffer = chunk as Buffer;
        if (kept + buffer.length > options.maxBodyBytes) {
          chunks.push(buffer.subarray(0, options.maxBodyBytes - kept));
          kept = options.maxBodyBytes;
          truncated = true;
          response.body.destroy();
          break;
        }
        chunks.push(buffer);
        kept += buffer.length;
      }
      return { status: response.statusCode, body: Buffer.concat(chunks).toString('utf8'), truncated };
    } catch (error) {
      const refused = refusal(error);
      if (refused) throw refused;
      if (error instanceof HeraldError) throw error;
      if (options.signal.aborted) {
        throw new TransientError(`request to ${url.host} aborted: ${errorMessage(options.signal.reason)}`, {
          url: outbound.url,
          timeout: true,
        });
      }
      const cause = (error as { cause?: unknown }).cause;
      throw new TransientError(
        `request to ${url.host} failed: ${errorMessage(error)}${cause ? ` (${errorMessage(cause)})` : ''}`,
        { url: outbound.url },
        error,
      );
    }
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}
