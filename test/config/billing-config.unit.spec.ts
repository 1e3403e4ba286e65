/**
 * The `billing` section of loadConfig (ADR 0023): the ledger by default; HERALD_BILLING=http with its
 * URL, timeouts, attempts and authentication (a bearer token, also from HERALD_BILLING_TOKEN_FILE, or a
 * client certificate); each invalid value or combination stops start-up naming its variable; the token
 * is a secret the logger scrubs.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { configRefusal } from '../support/config.js';

const base = { DATABASE_URL: 'postgres://herald@127.0.0.1:5432/herald' };
const http = { ...base, HERALD_BILLING: 'http', HERALD_BILLING_URL: 'https://billing.internal/v1/' };
const dir = mkdtempSync(join(tmpdir(), 'herald-billing-config-'));
const file = (name: string, content: string) => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};

const refusal = configRefusal;

describe('billing settings', () => {
  it('defaults: the PostgreSQL ledger; unanswered CSV charges retried every 30 s for an hour', () => {
    expect(loadConfig(base).billing).toEqual({
      mode: 'ledger',
      http: undefined,
      chargeRetryMs: 30_000,
      chargeGiveUpMs: 3_600_000,
    });
  });

  it('http: the URL without its trailing slash, 5 s per attempt, 3 attempts, 250 ms backoff, the token a secret', () => {
    const config = loadConfig({ ...http, HERALD_BILLING_TOKEN: 'tok-0123456789abcdef' });
    expect(config.billing).toEqual({
      mode: 'http',
      http: {
        url: 'https://billing.internal/v1',
        timeoutMs: 5_000,
        attempts: 3,
        retryBackoffMs: 250,
        bearerToken: 'tok-0123456789abcdef',
        tls: { caPath: undefined, certPath: undefined, keyPath: undefined },
      },
      chargeRetryMs: 30_000,
      chargeGiveUpMs: 3_600_000,
    });
    expect(config.secrets).toContain('tok-0123456789abcdef');
  });

  it('the token from HERALD_BILLING_TOKEN_FILE (one trailing newline dropped); mTLS from files', () => {
    const token = file('token', 'from-a-file-0123456789\n');
    const cert = file('client.crt', 'cert');
    const key = file('client.key', 'key');
    const ca = file('ca.crt', 'ca');
    const config = loadConfig({
      ...http,
      HERALD_BILLING_TOKEN_FILE: token,
      HERALD_BILLING_CA_PATH: ca,
      HERALD_BILLING_CERT_PATH: cert,
      HERALD_BILLING_KEY_PATH: key,
      HERALD_BILLING_TIMEOUT_MS: '2000',
      HERALD_BILLING_ATTEMPTS: '5',
    });
    expect(config.billing.http).toMatchObject({
      bearerToken: 'from-a-file-0123456789',
      timeoutMs: 2_000,
      attempts: 5,
      tls: { caPath: ca, certPath: cert, keyPath: key },
    });
    expect(config.secrets).toContain('from-a-file-0123456789');
    // A client certificate alone authenticates too.
    expect(
      loadConfig({ ...http, HERALD_BILLING_CERT_PATH: cert, HERALD_BILLING_KEY_PATH: key }).billing.http
        ?.bearerToken,
    ).toBeUndefined();
  });

  it.each([
    [{ ...base, HERALD_BILLING: 'stripe' }, 'HERALD_BILLING'],
    [{ ...base, HERALD_BILLING: 'http', HERALD_BILLING_TOKEN: 't0123456' }, 'HERALD_BILLING_URL'],
    [
      { ...http, HERALD_BILLING_URL: 'ftp://billing', HERALD_BILLING_TOKEN: 't0123456' },
      'HERALD_BILLING_URL',
    ],
    [http, 'HERALD_BILLING_TOKEN'],
    [
      { ...http, HERALD_BILLING_TOKEN: 't0123456', HERALD_BILLING_TIMEOUT_MS: '0' },
      'HERALD_BILLING_TIMEOUT_MS',
    ],
    [{ ...http, HERALD_BILLING_TOKEN: 't0123456', HERALD_BILLING_ATTEMPTS: '11' }, 'HERALD_BILLING_ATTEMPTS'],
    [
      { ...http, HERALD_BILLING_TOKEN: 't0123456', HERALD_BILLING_CA_PATH: '/nonexistent/ca.crt' },
      'HERALD_BILLING_CA_PATH',
    ],
    [{ ...base, HERALD_BILLING_URL: 'https://billing.internal' }, 'HERALD_BILLING_URL'],
    [{ ...base, HERALD_BILLING_TOKEN: 't0123456' }, 'HERALD_BILLING_TOKEN'],
    [{ ...base, HERALD_SMS_CHARGE_RETRY_SECONDS: '0' }, 'HERALD_SMS_CHARGE_RETRY_SECONDS'],
    [{ ...base, HERALD_BILLING_TOKEN_FILE: '/nonexistent/token' }, 'HERALD_BILLING_TOKEN_FILE'],
  ])('%o is refused naming %s', (env, variable) => {
    expect(refusal(env as Record<string, string>).field).toBe(variable);
  });

  it('TLS files need an https:// URL; a certificate needs its key and a key its certificate', () => {
    const cert = file('c.crt', 'c');
    const key = file('c.key', 'k');
    const plain = {
      ...http,
      HERALD_BILLING_URL: 'http://billing.internal',
      HERALD_BILLING_TOKEN: 't0123456',
    };
    expect(refusal({ ...plain, HERALD_BILLING_CA_PATH: cert }).field).toBe('HERALD_BILLING_CA_PATH');
    expect(refusal({ ...http, HERALD_BILLING_CERT_PATH: cert }).field).toBe('HERALD_BILLING_KEY_PATH');
    expect(refusal({ ...http, HERALD_BILLING_TOKEN: 't0123456', HERALD_BILLING_KEY_PATH: key }).field).toBe(
      'HERALD_BILLING_CERT_PATH',
    );
    // A token over plain http works, with a warning.
    expect(loadConfig(plain).warnings).toContainEqual(
      expect.stringMatching(/HERALD_BILLING_TOKEN is sent over a plain http/),
    );
  });
});
