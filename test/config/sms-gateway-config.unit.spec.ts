/**
 * `herald sms-gateway`'s settings (ADR 0022): SMSC connections as JSON with defaults, passwords as a
 * secret (from a file too, scrubbed from logs), and every bad value refused naming the variable and the
 * field.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { configRefusal } from '../support/config.js';

const base = { DATABASE_URL: 'postgres://herald@127.0.0.1:5432/herald' };
const smsc = { name: 'gp', host: 'smsc.example', port: 2775, systemId: 'herald', channels: ['gp-smpp-1'] };

const refusal = (env: Record<string, string>): string => configRefusal({ ...base, ...env }).message;

describe('sms gateway settings', () => {
  it('defaults: no SMSC, 30 s responses, 120 s before a silent part is unconfirmed', () => {
    expect(loadConfig(base).smsGateway).toMatchObject({
      smscs: [],
      responseTimeoutMs: 30_000,
      unconfirmedAfterMs: 120_000,
      enquireLinkMs: 30_000,
      throttleBackoffMs: 1_000,
      maxResubmits: 3,
    });
  });

  it('an SMSC gets its defaults, its password from the secret (or its file), and the route tps of its binds', () => {
    const dir = mkdtempSync(join(tmpdir(), 'herald-smsc-'));
    const file = join(dir, 'passwords.json');
    writeFileSync(file, '{"gp":"s3cret"}\n');
    const config = loadConfig({
      ...base,
      HERALD_SMS_GATEWAY_SMSCS: JSON.stringify([
        { ...smsc, binds: { transmitters: 2, receivers: 1 }, tpsPerBind: 40 },
      ]),
      HERALD_SMS_GATEWAY_PASSWORDS_FILE: file,
    });
    expect(config.smsGateway.smscs[0]).toEqual({
      ...smsc,
      tls: false,
      systemType: '',
      binds: { transceivers: 0, transmitters: 2, receivers: 1 },
      window: 10,
      tpsPerBind: 40,
      tps: 80,
      destTon: 1,
      destNpi: 1,
      concatenation: 'udh',
      serviceType: '',
      password: 's3cret',
    });
    expect(config.secrets).toContain('s3cret');
  });

  it('refuses bad values naming the variable and the field', () => {
    expect(refusal({ HERALD_SMS_GATEWAY_SMSCS: 'nope' })).toMatch(/HERALD_SMS_GATEWAY_SMSCS.*not JSON/);
    expect(refusal({ HERALD_SMS_GATEWAY_SMSCS: JSON.stringify([{ ...smsc, port: 0 }]) })).toMatch(
      /HERALD_SMS_GATEWAY_SMSCS.*\[0\]\.port/,
    );
    expect(
      refusal({ HERALD_SMS_GATEWAY_SMSCS: JSON.stringify([{ ...smsc, binds: { receivers: 1 } }]) }),
    ).toMatch(/\[0\]\.binds.*transceiver or transmitter/);
    expect(refusal({ HERALD_SMS_GATEWAY_SMSCS: JSON.stringify([{ ...smsc, colour: 'red' }]) })).toMatch(
      /\[0\]/,
    );
    expect(refusal({ HERALD_SMS_GATEWAY_SMSCS: JSON.stringify([smsc, { ...smsc, name: 'gp2' }]) })).toMatch(
      /channel gp-smpp-1 is served by both gp and gp2/,
    );
    expect(refusal({ HERALD_SMS_GATEWAY_PASSWORDS: '{"robi":"x"}' })).toMatch(
      /HERALD_SMS_GATEWAY_PASSWORDS: robi: no such SMSC/,
    );
    expect(
      refusal({
        HERALD_SMS_GATEWAY_RESPONSE_TIMEOUT_SECONDS: '60',
        HERALD_SMS_GATEWAY_UNCONFIRMED_AFTER_SECONDS: '60',
      }),
    ).toMatch(/HERALD_SMS_GATEWAY_UNCONFIRMED_AFTER_SECONDS: must exceed/);
  });
});
