/**
 * The `email` executor's SMTP client (the Mailer port) over nodemailer, configured by HERALD_SMTP_URL
 * (smtp:// or smtps://, credentials in the URL). The SMTP server is the operator's, not a job's target,
 * so the outbound allowlist does not apply to it. Replies are translated: a 5xx rejection (a bad
 * recipient, a refused message) is permanent, a 4xx reply or connection trouble transient; a timeout
 * (the AbortSignal) closes the connection and is transient.
 */
import type { Transporter } from 'nodemailer';
import { errorMessage, PermanentError, TransientError } from '../../errors.js';
import type { Mailer, MailMessage } from '../../ports/job-executor.js';
import { lazyPackage } from '../lazy-package.js';

const nodemailer = lazyPackage<typeof import('nodemailer')>('nodemailer');

export class NodemailerMailer implements Mailer {
  private readonly transport: Transporter;

  constructor(url: string) {
    this.transport = nodemailer().createTransport(url, {});
  }

  async send(
    message: MailMessage,
    options: { signal: AbortSignal },
  ): Promise<{ messageId: string; response: string }> {
    if (options.signal.aborted)
      throw new TransientError('email not sent: the job timed out', { timeout: true });
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(new TransientError('email aborted: the job timed out', { timeout: true }));
      options.signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      const info = await Promise.race([
        this.transport.sendMail({
          from: message.from,
          to: [...message.to],
          ...(message.cc ? { cc: [...message.cc] } : {}),
          subject: message.subject,
          text: message.text,
          ...(message.headers ? { headers: message.headers } : {}),
        }),
        aborted,
      ]);
      return { messageId: String(info.messageId ?? ''), response: String(info.response ?? '') };
    } catch (error) {
      if (error instanceof TransientError || error instanceof PermanentError) throw error;
      const code = (error as { responseCode?: number }).responseCode;
      const text = errorMessage(error);
      if (typeof code === 'number' && code >= 500) {
        throw new PermanentError(`SMTP server rejected the message: ${text}`, {
          responseStatus: code,
          output: text,
        });
      }
      throw new TransientError(
        `email not sent: ${text}`,
        { responseStatus: code ?? null, output: text },
        error,
      );
    } finally {
      if (onAbort) options.signal.removeEventListener('abort', onAbort);
    }
  }

  async close(): Promise<void> {
    this.transport.close();
  }
}
