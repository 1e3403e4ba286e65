/**
 * The job executors of seed 004's types over the outbound ports (src/ports/job-executor.ts):
 * - `ping`: GET (or HEAD) the URL; any 2xx is a success;
 * - `webhook`: the JSON body to the URL (POST by default) with the run's id, occurrence and attempt in
 *   `x-herald-*` headers and, with a signing secret, `x-herald-signature: sha256=<HMAC of "<run id>.<body>">`;
 * - `slack`: `{ text, username?, icon_emoji?, channel? }` POSTed to an incoming-webhook URL;
 * - `email`: one message through the configured SMTP server.
 * Any other outcome than success is a failed attempt (TransientError: the run retries, seed 004), with
 * the response status and a bounded excerpt of the output in the error's details; what retrying cannot
 * change (a refused target, no SMTP server configured) is a PermanentError.
 */
import { createHmac } from 'node:crypto';
import type { ExecutableJob, WebhookPayload } from '../../domain/cron-job.js';
import { PermanentError, TransientError } from '../../errors.js';
import type {
  ExecutionContext,
  ExecutionReport,
  HttpClient,
  JobExecutor,
  Mailer,
  OutboundRequest,
} from '../../ports/job-executor.js';

export interface CronExecutorDeps {
  http: HttpClient;
  /** Unset: email jobs fail permanently (HERALD_SMTP_URL is not configured). */
  mailer?: Mailer | undefined;
  /** Sender of email jobs that name none. */
  mailFrom?: string | undefined;
  /** Bytes of output kept on the run. */
  outputMaxBytes: number;
}

export const SIGNATURE_HEADER = 'x-herald-signature';

/** The webhook signature: HMAC-SHA256 of "<run id>.<body>", hex, as `sha256=<hex>`. */
export function webhookSignature(secret: string, runId: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${runId}.${body}`).digest('hex')}`;
}

function runHeaders(context: ExecutionContext): Record<string, string> {
  return {
    'user-agent': 'herald-cron/1',
    'x-herald-run-id': context.runId,
    'x-herald-job-id': context.jobId,
    'x-herald-scheduled-for': context.scheduledFor,
    'x-herald-attempt': String(context.attempt),
  };
}

function webhookRequest(payload: WebhookPayload, context: ExecutionContext): OutboundRequest {
  const body = JSON.stringify(payload.body ?? {});
  return {
    url: payload.url,
    method: payload.method,
    headers: {
      'content-type': 'application/json',
      ...payload.headers,
      ...runHeaders(context),
      ...(payload.signingSecret
        ? { [SIGNATURE_HEADER]: webhookSignature(payload.signingSecret, context.runId, body) }
        : {}),
    },
    body,
  };
}

export function cronExecutor(deps: CronExecutorDeps): JobExecutor<ExecutableJob> {
  const http = async (
    what: string,
    request: OutboundRequest,
    context: ExecutionContext,
  ): Promise<ExecutionReport> => {
    const response = await deps.http.send(request, {
      signal: context.signal,
      maxBodyBytes: deps.outputMaxBytes,
    });
    const output = response.body + (response.truncated ? ' …' : '');
    if (response.status >= 200 && response.status < 300) return { responseStatus: response.status, output };
    throw new TransientError(`${what}: HTTP ${response.status}`, { responseStatus: response.status, output });
  };
  return {
    async execute(job, context) {
      switch (job.jobType) {
        case 'ping':
          return http(
            `ping ${job.payload.url}`,
            {
              url: job.payload.url,
              method: job.payload.method,
              headers: { ...job.payload.headers, ...runHeaders(context) },
            },
            context,
          );
        case 'webhook':
          return http(`webhook ${job.payload.url}`, webhookRequest(job.payload, context), context);
        case 'slack': {
          const { text, username, iconEmoji, channel } = job.payload;
          return http(
            'slack webhook',
            {
              url: job.payload.webhookUrl,
              method: 'POST',
              headers: { 'content-type': 'application/json', ...runHeaders(context) },
              body: JSON.stringify({
                text,
                ...(username ? { username } : {}),
                ...(iconEmoji ? { icon_emoji: iconEmoji } : {}),
                ...(channel ? { channel } : {}),
              }),
            },
            context,
          );
        }
        case 'email': {
          if (!deps.mailer)
            throw new PermanentError('email job: no SMTP server is configured (HERALD_SMTP_URL)');
          const { to, cc, subject, text, from } = job.payload;
          const sent = await deps.mailer.send(
            {
              from: from ?? deps.mailFrom ?? 'herald@localhost',
              to: Array.isArray(to) ? to : [to],
              ...(cc ? { cc } : {}),
              subject,
              text,
              headers: { 'X-Herald-Run-Id': context.runId, 'X-Herald-Scheduled-For': context.scheduledFor },
            },
            { signal: context.signal },
          );
          const code = Number(/^(\d{3})/.exec(sent.response)?.[1] ?? Number.NaN);
          return {
            responseStatus: Number.isInteger(code) ? code : null,
            output: sent.response.slice(0, deps.outputMaxBytes),
          };
        }
      }
    },
  };
}
