/**
 * pino JSON logger. Lines about a message carry `correlationId`, `aggregateId` (stream id) and
 * `messageId`, bound through `logger.child({...})` at the point where those ids are known.
 *
 * Logs never print a secret (ADR 0015), in three layers: fields named like secrets are censored by
 * pino's `redact` (including the AUTH arguments ioredis attaches to its errors); credentials in any URL
 * of a line (`scheme://user:password@`) are replaced; and every secret value of the configuration
 * (`config.secrets`: passwords, as written and as they appear in URLs) is replaced wherever a driver or
 * an error message put it. The last two run on each serialized line (`hooks.streamWrite`).
 */
import { type Logger, pino } from 'pino';

export type { Logger };

export interface LoggerOptions {
  level: string;
  pod: string;
  role?: string;
  /** Secret values to scrub from every line: `config.secrets`. */
  secrets?: readonly string[];
}

export const REDACTED = '[redacted]';

/** Paths of secret fields, after serializers ran (so `err.*` is the serialized error). */
const REDACTED_PATHS = [
  'password',
  '*.password',
  'passphrase',
  '*.passphrase',
  'sasl.password',
  '*.sasl.password',
  // ioredis attaches the failed command to its errors: AUTH's arguments are the user and password.
  'err.command.args',
  'err.cause.command.args',
  'error.command.args',
];

/** `scheme://user:password@` → `scheme://user:[redacted]@` (a password may not contain / @ or quotes unescaped). */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:@/"'<>]*):[^\s@/"'<>]+@/gi;

/** Replaces the password of every URL in `text` (log lines, error messages). */
export function redactUrlCredentials(text: string): string {
  return text.includes('://') ? text.replace(URL_CREDENTIALS, `$1:${REDACTED}@`) : text;
}

/**
 * Shorter values are not scrubbed: replacing a three-letter string everywhere would garble every line,
 * and such a value is no secret. Neither is a password equal to its user name (the test services'
 * `herald:herald`): the name is printed freely.
 */
const MIN_SECRET_LENGTH = 4;

/** A function that scrubs URL credentials and the given secret values from a text. */
export function secretScrubber(secrets: readonly string[]): (text: string) => string {
  const forms = secrets.flatMap((secret) => [
    secret,
    JSON.stringify(secret).slice(1, -1),
    encodeURIComponent(secret),
  ]);
  // Longest first, so a secret containing another is replaced whole.
  const needles = [...new Set(forms)]
    .filter((value) => value.length >= MIN_SECRET_LENGTH)
    .sort((a, b) => b.length - a.length);
  return (text) => {
    let out = redactUrlCredentials(text);
    for (const needle of needles) {
      if (out.includes(needle)) out = out.split(needle).join(REDACTED);
    }
    return out;
  };
}

export function createLogger(options: LoggerOptions): Logger {
  const scrub = secretScrubber(options.secrets ?? []);
  return pino({
    level: options.level,
    base: { pod: options.pod, ...(options.role ? { role: options.role } : {}) },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    redact: { paths: REDACTED_PATHS, censor: REDACTED },
    hooks: { streamWrite: scrub },
  });
}

/** A silent logger for library callers and tests that pass none. */
export const silentLogger: Logger = pino({ level: 'silent' });
