/**
 * Ports of the job executors (seed 004's job types): outbound HTTP and SMTP, implemented in
 * src/adapters/http/ (undici, with the target allowlist applied after DNS resolution) and
 * src/adapters/smtp/ (nodemailer). Implementations translate every driver error into Herald's typed
 * errors: PermanentError when retrying cannot help (a refused target, a rejected message),
 * TransientError when a later attempt may succeed (connection trouble, a timeout, a 4xx SMTP reply).
 * An executor (one per job type) is a `JobExecutor` over these ports.
 */

export interface OutboundRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

export interface OutboundResponse {
  status: number;
  /** At most the requested number of bytes of the body, as text. */
  body: string;
  /** True when the body was longer than what was kept. */
  truncated: boolean;
}

export interface HttpClient {
  /**
   * Sends one request (no redirects followed) and reads at most `maxBodyBytes` of the response. A target
   * the allowlist refuses throws PermanentError before anything is sent; `signal` aborts (timeouts).
   */
  send(
    request: OutboundRequest,
    options: { signal: AbortSignal; maxBodyBytes: number },
  ): Promise<OutboundResponse>;
  close(): Promise<void>;
}

export interface MailMessage {
  from: string;
  to: readonly string[];
  cc?: readonly string[];
  subject: string;
  text: string;
  headers?: Record<string, string>;
}

export interface Mailer {
  /** Sends one message; resolves with the server's final reply. */
  send(
    message: MailMessage,
    options: { signal: AbortSignal },
  ): Promise<{ messageId: string; response: string }>;
  close(): Promise<void>;
}

/** What one attempt of a job reported: kept on its run. */
export interface ExecutionReport {
  responseStatus: number | null;
  output: string | null;
}

export interface ExecutionContext {
  runId: string;
  jobId: string;
  scheduledFor: string;
  attempt: number;
  /** Aborted at the job's timeout. */
  signal: AbortSignal;
}

/** Runs one attempt of a job of some type; throws PermanentError / TransientError on failure. */
export interface JobExecutor<Job> {
  execute(job: Job, context: ExecutionContext): Promise<ExecutionReport>;
}
