/**
 * SMS billing's settings (ADR 0023): which billing port a deployment charges through — the PostgreSQL
 * ledger (`HERALD_BILLING=ledger`, the default) or an external billing service over HTTP
 * (`HERALD_BILLING=http`: its URL, a timeout per attempt, the attempts each operation gets with its one
 * key, the backoff between them, and its authentication: a bearer token, from a file with
 * `HERALD_BILLING_TOKEN_FILE`, and/or a client certificate for mTLS) — and how a CSV campaign's charge
 * that billing could not answer is retried. Composed into the configuration by the campaign
 * registration (`config.billing`).
 */
import { z } from 'zod';
import { ConfigError } from '../../../errors.js';
import { filePath, type TlsFiles } from '../../../settings/connections.js';
import { describeSetting as d, defineSettings, type SettingsOf } from '../../../settings/fragment.js';
import { nonNegativeInt, positiveInt, url } from '../../../settings/validators.js';

export interface HttpBillingSettings {
  /** The service's base URL, without a trailing slash. */
  readonly url: string;
  readonly timeoutMs: number;
  readonly attempts: number;
  readonly retryBackoffMs: number;
  readonly bearerToken: string | undefined;
  /** Set for https:// URLs: the CA the service is verified with and the client certificate (mTLS). */
  readonly tls: TlsFiles | undefined;
}

export interface BillingSettings {
  readonly mode: 'ledger' | 'http';
  /** Set when `mode` is `http`. */
  readonly http: HttpBillingSettings | undefined;
  /** A CSV campaign whose charge billing could not answer is charged again (same key) after this long… */
  readonly chargeRetryMs: number;
  /** …until this long after its first try; then the charge is reversed by its key and the campaign FAILED. */
  readonly chargeGiveUpMs: number;
}

const HTTP_ONLY = [
  'HERALD_BILLING_URL',
  'HERALD_BILLING_TOKEN',
  'HERALD_BILLING_CA_PATH',
  'HERALD_BILLING_CERT_PATH',
  'HERALD_BILLING_KEY_PATH',
] as const;

export const billingSettings = defineSettings({
  key: 'billing',
  title: 'SMS billing',
  env: {
    HERALD_BILLING: d(
      z.enum(['ledger', 'http']).default('ledger'),
      '`ledger`: the PostgreSQL ledger in Herald’s database (`herald billing credit` tops it up); `http`: an external billing service at `HERALD_BILLING_URL` (ADR 0014’s shape, ADR 0023)',
    ),
    HERALD_BILLING_URL: d(
      url(['https', 'http']).optional(),
      'with `HERALD_BILLING=http`: the billing service’s base URL; operations are POSTed to `{url}/organizations/{org}/deductions|refunds|reversals`',
    ),
    HERALD_BILLING_TIMEOUT_MS: d(
      positiveInt.max(120_000).default(5_000),
      'one attempt’s limit (connect, send, read the answer); a timed-out attempt is retried with the same key',
    ),
    HERALD_BILLING_ATTEMPTS: d(
      positiveInt.max(10).default(3),
      'attempts per billing operation, all with the operation’s key (a timeout, a connection error, a 5xx or 429 is retried); after the last one the outcome is unknown: HTTP 502, the campaign unchanged and retryable with the same key',
    ),
    HERALD_BILLING_RETRY_BACKOFF_MS: d(
      nonNegativeInt.max(60_000).default(250),
      'the wait before the second attempt, doubled for each further one (with jitter, at most 5 s; a 429’s Retry-After is honoured within that)',
    ),
    HERALD_BILLING_TOKEN: d(
      z.string().min(1).optional(),
      'bearer token sent as `Authorization: Bearer …` (a secret: prefer `HERALD_BILLING_TOKEN_FILE`); `http` needs it or a client certificate',
    ),
    HERALD_BILLING_CA_PATH: d(
      filePath.optional(),
      "for an https:// `HERALD_BILLING_URL`: the CA the service is verified with (unset: the system's CAs)",
    ),
    HERALD_BILLING_CERT_PATH: d(
      filePath.optional(),
      'client certificate for mTLS to the billing service (with `HERALD_BILLING_KEY_PATH`)',
    ),
    HERALD_BILLING_KEY_PATH: d(filePath.optional(), "the client certificate's key"),
    HERALD_SMS_CHARGE_RETRY_SECONDS: d(
      positiveInt.max(86_400).default(30),
      'a CSV campaign whose charge billing could not answer (its upload CHARGING, the campaign BUILDING) is charged again with the same `campaign:{id}` key after this long',
    ),
    HERALD_SMS_CHARGE_GIVE_UP_MINUTES: d(
      positiveInt.max(10_080).default(60),
      '…until this long after the build saved its last recipient; then the charge is reversed by its key and the campaign FAILED (the upload says why)',
    ),
  },
  secretVariables: ['HERALD_BILLING_TOKEN'],
  secrets: (e) => (e.HERALD_BILLING_TOKEN ? [e.HERALD_BILLING_TOKEN] : []),
  warnings: (e) =>
    e.HERALD_BILLING === 'http' && e.HERALD_BILLING_TOKEN && e.HERALD_BILLING_URL?.startsWith('http://')
      ? ['HERALD_BILLING_TOKEN is sent over a plain http:// HERALD_BILLING_URL (use https://)']
      : [],
  map(e): BillingSettings {
    const common = {
      chargeRetryMs: e.HERALD_SMS_CHARGE_RETRY_SECONDS * 1000,
      chargeGiveUpMs: e.HERALD_SMS_CHARGE_GIVE_UP_MINUTES * 60_000,
    };
    if (e.HERALD_BILLING === 'ledger') {
      const set = HTTP_ONLY.find((name) => e[name] !== undefined);
      if (set) throw new ConfigError(set, 'needs HERALD_BILLING=http (it is ledger)');
      return { mode: 'ledger', http: undefined, ...common };
    }
    if (e.HERALD_BILLING_URL === undefined) {
      throw new ConfigError('HERALD_BILLING_URL', 'is required by HERALD_BILLING=http');
    }
    const https = e.HERALD_BILLING_URL.startsWith('https://');
    const file = (
      ['HERALD_BILLING_CA_PATH', 'HERALD_BILLING_CERT_PATH', 'HERALD_BILLING_KEY_PATH'] as const
    ).find((name) => e[name] !== undefined);
    if (file && !https) throw new ConfigError(file, 'needs an https:// HERALD_BILLING_URL');
    if (e.HERALD_BILLING_CERT_PATH && !e.HERALD_BILLING_KEY_PATH) {
      throw new ConfigError(
        'HERALD_BILLING_KEY_PATH',
        'is required with HERALD_BILLING_CERT_PATH (a client certificate needs its key)',
      );
    }
    if (e.HERALD_BILLING_KEY_PATH && !e.HERALD_BILLING_CERT_PATH) {
      throw new ConfigError(
        'HERALD_BILLING_CERT_PATH',
        'is required with HERALD_BILLING_KEY_PATH (a client key needs its certificate)',
      );
    }
    if (!e.HERALD_BILLING_TOKEN && !e.HERALD_BILLING_CERT_PATH) {
      throw new ConfigError(
        'HERALD_BILLING_TOKEN',
        'HERALD_BILLING=http needs a bearer token (HERALD_BILLING_TOKEN or HERALD_BILLING_TOKEN_FILE) or a client certificate (HERALD_BILLING_CERT_PATH)',
      );
    }
    return {
      mode: 'http',
      http: {
        url: e.HERALD_BILLING_URL.replace(/\/+$/, ''),
        timeoutMs: e.HERALD_BILLING_TIMEOUT_MS,
        attempts: e.HERALD_BILLING_ATTEMPTS,
        retryBackoffMs: e.HERALD_BILLING_RETRY_BACKOFF_MS,
        bearerToken: e.HERALD_BILLING_TOKEN,
        tls: https
          ? {
              caPath: e.HERALD_BILLING_CA_PATH,
              certPath: e.HERALD_BILLING_CERT_PATH,
              keyPath: e.HERALD_BILLING_KEY_PATH,
            }
          : undefined,
      },
      ...common,
    };
  },
});

export type BillingConfig = SettingsOf<typeof billingSettings>;
