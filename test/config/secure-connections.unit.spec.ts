/**
 * Secure-connection settings (src/connections.ts, ADR 0015) as loadConfig reads them: secrets from
 * X_FILE, TLS variables written into the URLs' own parameters (the variables win), the contradictions
 * refused with the variable named; the adapters' reading of them (pg's ssl option per libpq sslmode,
 * RabbitMQ's URI parameters); and the log scrubber. Connections themselves: test/security/.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { amqpTlsOptions } from '../../src/adapters/amqp/amqp-connection.js';
import { kafkaSecurityOptions } from '../../src/adapters/kafka/kafka-client.js';
import { postgresTls } from '../../src/adapters/postgres/database.js';
import { loadConfig } from '../../src/config.js';
import { REDACTED, redactUrlCredentials, secretScrubber } from '../../src/logger.js';
import { configRefusal } from '../support/config.js';

// Created when the file loads: the it.each tables below are built before any hook runs.
const dir = mkdtempSync(join(tmpdir(), 'herald-connections-'));
const file = (name: string, content: string) => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};
const ca = file('ca.crt', 'CA BYTES');
const cert = file('client.crt', 'CERT BYTES');
const key = file('client.key', 'KEY BYTES');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const DB = 'postgres://herald:s3cret-pw@db.example.com:5432/herald';
const base = { DATABASE_URL: DB };

const refusal = configRefusal;

describe('secrets from files (X_FILE)', () => {
  it('reads the value, without one trailing newline', () => {
    const config = loadConfig({
      DATABASE_URL_FILE: file('db-url', `${DB}\n`),
      REDIS_URL: 'redis://127.0.0.1:6379',
      HERALD_REDIS_PASSWORD_FILE: file('redis-pw', 'two newlines\n\n'),
    });
    expect(config.databaseUrl).toBe(DB);
    expect(config.redis?.password).toBe('two newlines\n');
  });

  it('refuses both X and X_FILE, naming both', () => {
    const error = refusal({ ...base, DATABASE_URL_FILE: file('db-url-2', DB) });
    expect(error.field).toBe('DATABASE_URL_FILE');
    expect(error.message).toMatch(/DATABASE_URL is set as well.*DATABASE_URL and DATABASE_URL_FILE/);
  });

  it('refuses an unreadable or empty file, and names X_FILE when the content is invalid', () => {
    expect(refusal({ ...base, AMQP_URL_FILE: join(dir, 'missing') }).message).toMatch(
      /AMQP_URL_FILE: cannot read .*ENOENT/,
    );
    expect(refusal({ ...base, AMQP_URL_FILE: file('empty', '\n') }).message).toMatch(
      /AMQP_URL_FILE: .* is empty/,
    );
    const invalid = refusal({ ...base, AMQP_URL_FILE: file('http-url', 'http://x\n') });
    expect(invalid.field).toBe('AMQP_URL_FILE');
    expect(invalid.message).toMatch(/the file's content: must start with amqp/);
  });

  it('lists every secret value for the logger, not a password equal to its user name', () => {
    const config = loadConfig({
      DATABASE_URL: 'postgres://herald:p%40ss%2Fword@db/herald',
      AMQP_URL: 'amqp://herald:herald@127.0.0.1:5672',
      REDIS_URL: 'redis://127.0.0.1:6379',
      HERALD_REDIS_PASSWORD: 'redis-secret',
      HERALD_KAFKA_SECURITY_PROTOCOL: 'SASL_SSL',
      HERALD_KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
      HERALD_KAFKA_SASL_USERNAME: 'herald',
      HERALD_KAFKA_SASL_PASSWORD_FILE: file('kafka-pw', 'kafka-secret\n'),
    });
    expect([...config.secrets].sort()).toEqual([
      'kafka-secret',
      'p%40ss%2Fword',
      'p@ss/word',
      'redis-secret',
    ]);
  });
});

describe('PostgreSQL TLS', () => {
  const params = (url: string) => Object.fromEntries(new URL(url).searchParams);

  it('writes the variables into the URL as libpq parameters; they win over the URL', () => {
    const config = loadConfig({
      DATABASE_URL: `${DB}?sslmode=require&sslrootcert=${join(dir, 'elsewhere')}&application_name=x`,
      HERALD_DB_SSLMODE: 'verify-full',
      HERALD_DB_SSL_CA_PATH: ca,
      HERALD_DB_SSL_CERT_PATH: cert,
      HERALD_DB_SSL_KEY_PATH: key,
    });
    expect(params(config.databaseUrl)).toEqual({
      application_name: 'x',
      sslmode: 'verify-full',
      sslrootcert: ca,
      sslcert: cert,
      sslkey: key,
    });
  });

  it("accepts the URL's own parameters, and pg's ssl=true as verify-full", () => {
    expect(
      params(loadConfig({ DATABASE_URL: `${DB}?sslmode=verify-ca&sslrootcert=${ca}` }).databaseUrl),
    ).toEqual({
      sslmode: 'verify-ca',
      sslrootcert: ca,
    });
    expect(params(loadConfig({ DATABASE_URL: `${DB}?ssl=true` }).databaseUrl)).toEqual({
      sslmode: 'verify-full',
    });
  });

  it('leaves a URL without TLS settings as it is', () => {
    expect(loadConfig(base).databaseUrl).toBe(DB);
  });

  it.each([
    [{ DATABASE_URL: `${DB}?sslmode=prefer` }, 'DATABASE_URL', /sslmode=prefer is not supported/],
    [{ ...base, HERALD_DB_SSLMODE: 'allow' }, 'HERALD_DB_SSLMODE', /verify-full/],
    [{ ...base, HERALD_DB_SSLMODE: 'verify-ca' }, 'HERALD_DB_SSL_CA_PATH', /required by sslmode verify-ca/],
    [{ ...base, HERALD_DB_SSL_CA_PATH: ca }, 'HERALD_DB_SSL_CA_PATH', /needs HERALD_DB_SSLMODE .*unset/],
    [
      { ...base, HERALD_DB_SSLMODE: 'disable', HERALD_DB_SSL_CA_PATH: ca },
      'HERALD_DB_SSL_CA_PATH',
      /is disable/,
    ],
    [{ DATABASE_URL: `${DB}?sslrootcert=${ca}` }, 'DATABASE_URL (sslrootcert)', /needs HERALD_DB_SSLMODE/],
    [
      { ...base, HERALD_DB_SSLMODE: 'verify-full', HERALD_DB_SSL_CERT_PATH: cert },
      'HERALD_DB_SSL_KEY_PATH',
      /needs its key/,
    ],
    [{ ...base, HERALD_DB_SSL_CA_PATH: join(dir, 'nope') }, 'HERALD_DB_SSL_CA_PATH', /cannot read/],
    [
      { DATABASE_URL: `${DB}?sslmode=verify-full&sslrootcert=${join(dir, 'nope')}` },
      'DATABASE_URL',
      /sslrootcert: cannot read/,
    ],
  ])('refuses %j naming %s', (env, field, reason) => {
    const error = refusal(env);
    expect(error.field).toBe(field);
    expect(error.message).toMatch(reason);
  });

  it('warns that require without a CA does not verify the server', () => {
    expect(loadConfig({ ...base, HERALD_DB_SSLMODE: 'require' }).warnings.join('\n')).toMatch(/not verified/);
  });

  it("gives pg libpq's meaning of each sslmode, and a URL without the parameters", () => {
    const at = (query: string) => postgresTls(`${DB}?application_name=x&${query}`);
    expect(at('sslmode=disable')).toEqual({ connectionString: `${DB}?application_name=x`, ssl: false });
    expect(postgresTls(DB)).toEqual({ connectionString: DB, ssl: false });
    // require: encrypted, unverified without a CA; with one, the chain (as verify-ca)
    expect(at('sslmode=require').ssl).toEqual({ rejectUnauthorized: false });
    const requireWithCa = at(`sslmode=require&sslrootcert=${ca}`).ssl as Record<string, unknown>;
    expect(requireWithCa.ca?.toString()).toBe('CA BYTES');
    expect(requireWithCa.rejectUnauthorized).toBeUndefined();
    expect(typeof requireWithCa.checkServerIdentity).toBe('function');
    // verify-ca: the chain, not the host name
    const verifyCa = at(`sslmode=verify-ca&sslrootcert=${ca}`).ssl as Record<string, unknown>;
    expect((verifyCa.checkServerIdentity as () => unknown)()).toBeUndefined();
    // verify-full: Node's defaults (chain and host name), with the client certificate
    const full = at(`sslmode=verify-full&sslrootcert=${ca}&sslcert=${cert}&sslkey=${key}`);
    expect(full.connectionString).toBe(`${DB}?application_name=x`);
    expect(Object.keys(full.ssl as object).sort()).toEqual(['ca', 'cert', 'key']);
    expect((full.ssl as { key: Buffer }).key.toString()).toBe('KEY BYTES');
  });
});

describe('AMQPS', () => {
  it("writes the variables into RabbitMQ's URI parameters; the adapter takes them out as tls options", () => {
    const config = loadConfig({
      ...base,
      AMQP_URL: `amqps://herald:pw@mq.example.com:5671/vhost?heartbeat=5&cacertfile=${join(dir, 'elsewhere')}`,
      HERALD_AMQP_CA_PATH: ca,
      HERALD_AMQP_CERT_PATH: cert,
      HERALD_AMQP_KEY_PATH: key,
    });
    const url = new URL(config.amqpUrl!);
    expect(Object.fromEntries(url.searchParams)).toEqual({
      heartbeat: '5',
      cacertfile: ca,
      certfile: cert,
      keyfile: key,
    });
    const tls = amqpTlsOptions(url);
    expect(url.toString()).toBe('amqps://herald:pw@mq.example.com:5671/vhost?heartbeat=5');
    expect({ ca: tls.ca?.toString(), cert: tls.cert?.toString(), key: tls.key?.toString() }).toEqual({
      ca: 'CA BYTES',
      cert: 'CERT BYTES',
      key: 'KEY BYTES',
    });
    const named = new URL('amqps://h:p@10.0.0.5?server_name_indication=mq.example.com');
    expect(amqpTlsOptions(named)).toEqual({ servername: 'mq.example.com' });
  });

  it.each([
    [{ ...base, AMQP_URL: 'amqp://h:p@x', HERALD_AMQP_CA_PATH: ca }, 'HERALD_AMQP_CA_PATH', /amqps:\/\//],
    [{ ...base, HERALD_AMQP_CA_PATH: ca }, 'HERALD_AMQP_CA_PATH', /needs AMQP_URL/],
    [
      { ...base, AMQP_URL: 'amqps://h:p@x', HERALD_AMQP_KEY_PATH: key },
      'HERALD_AMQP_CERT_PATH',
      /needs its certificate/,
    ],
  ])('refuses %j naming %s', (env, field, reason) => {
    const error = refusal(env);
    expect(error.field).toBe(field);
    expect(error.message).toMatch(reason);
  });
});

describe('Kafka TLS and SASL', () => {
  const sasl = {
    HERALD_KAFKA_SECURITY_PROTOCOL: 'SASL_SSL',
    HERALD_KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
    HERALD_KAFKA_SASL_USERNAME: 'herald',
    HERALD_KAFKA_SASL_PASSWORD: 'kafka-secret',
  };

  it('defaults to PLAINTEXT, and maps SASL_SSL to kafkajs ssl and sasl options', () => {
    expect(loadConfig(base).kafka.security).toEqual({
      protocol: 'PLAINTEXT',
      tls: undefined,
      sasl: undefined,
    });
    expect(kafkaSecurityOptions(loadConfig(base).kafka.security)).toEqual({});
    const security = loadConfig({ ...base, ...sasl, HERALD_KAFKA_CA_PATH: ca }).kafka.security;
    const options = kafkaSecurityOptions(security);
    expect(options.sasl).toEqual({
      mechanism: 'scram-sha-512',
      username: 'herald',
      password: 'kafka-secret',
    });
    expect((options.ssl as { ca: Buffer }).ca.toString()).toBe('CA BYTES');
    // SSL without a CA file: the system's CAs
    expect(
      kafkaSecurityOptions(loadConfig({ ...base, HERALD_KAFKA_SECURITY_PROTOCOL: 'SSL' }).kafka.security),
    ).toEqual({
      ssl: {},
    });
  });

  it.each([
    [
      { ...base, HERALD_KAFKA_SECURITY_PROTOCOL: 'SASL_SSL' },
      'HERALD_KAFKA_SASL_MECHANISM',
      /required by .*SASL_SSL/,
    ],
    [{ ...base, ...sasl, HERALD_KAFKA_SASL_PASSWORD: '' }, 'HERALD_KAFKA_SASL_PASSWORD', /required/],
    [{ ...base, HERALD_KAFKA_CA_PATH: ca }, 'HERALD_KAFKA_CA_PATH', /SSL or SASL_SSL .*PLAINTEXT/],
    [
      { ...base, HERALD_KAFKA_SECURITY_PROTOCOL: 'SSL', HERALD_KAFKA_SASL_USERNAME: 'x' },
      'HERALD_KAFKA_SASL_USERNAME',
      /SASL_SSL or SASL_PLAINTEXT/,
    ],
    [{ ...base, ...sasl, HERALD_KAFKA_SASL_MECHANISM: 'GSSAPI' }, 'HERALD_KAFKA_SASL_MECHANISM', /./],
  ])('refuses %j naming %s', (env, field, reason) => {
    const error = refusal(env);
    expect(error.field).toBe(field);
    expect(error.message).toMatch(reason);
  });

  it('warns that SASL PLAIN over SASL_PLAINTEXT sends the password in clear', () => {
    const config = loadConfig({
      ...base,
      ...sasl,
      HERALD_KAFKA_SECURITY_PROTOCOL: 'SASL_PLAINTEXT',
      HERALD_KAFKA_SASL_MECHANISM: 'PLAIN',
    });
    expect(config.warnings.join('\n')).toMatch(/unencrypted/);
  });
});

describe('Redis TLS and ACL', () => {
  it('takes the credentials out of the URL; the variables win over them', () => {
    expect(
      loadConfig({ ...base, REDIS_URL: 'rediss://alice:url-pw@cache:6380/2', HERALD_REDIS_CA_PATH: ca })
        .redis,
    ).toEqual({
      url: 'rediss://cache:6380/2',
      username: 'alice',
      password: 'url-pw',
      tls: { caPath: ca, certPath: undefined, keyPath: undefined },
    });
    const config = loadConfig({
      ...base,
      REDIS_URL: 'redis://alice:url-pw@cache:6379',
      HERALD_REDIS_USERNAME: 'herald',
      HERALD_REDIS_PASSWORD: 'var-pw',
    });
    expect(config.redis).toEqual({
      url: 'redis://cache:6379',
      username: 'herald',
      password: 'var-pw',
      tls: undefined,
    });
  });

  it.each([
    [
      { ...base, REDIS_URL: 'redis://cache:6379', HERALD_REDIS_CA_PATH: ca },
      'HERALD_REDIS_CA_PATH',
      /rediss:\/\//,
    ],
    [{ ...base, HERALD_REDIS_PASSWORD: 'x-secret' }, 'HERALD_REDIS_PASSWORD', /needs REDIS_URL/],
  ])('refuses %j naming %s', (env, field, reason) => {
    const error = refusal(env);
    expect(error.field).toBe(field);
    expect(error.message).toMatch(reason);
  });
});

describe('log scrubbing', () => {
  it('replaces the password of any URL in a text', () => {
    expect(
      redactUrlCredentials(
        'connect amqps://herald:p4ss@mq:5671/v and postgres://u:x%40y@db/h, http://h:80/p@x',
      ),
    ).toBe(`connect amqps://herald:${REDACTED}@mq:5671/v and postgres://u:${REDACTED}@db/h, http://h:80/p@x`);
  });

  it('replaces every secret value, also JSON-escaped and percent-encoded; short ones are left', () => {
    const scrub = secretScrubber(['quo"te-secret', 'p@ss/word', 'abc']);
    const line = JSON.stringify({ a: 'x quo"te-secret y', b: 'p%40ss%2Fword', c: 'abc' });
    expect(JSON.parse(scrub(line))).toEqual({ a: `x ${REDACTED} y`, b: REDACTED, c: 'abc' });
  });
});
