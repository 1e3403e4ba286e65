/**
 * Secure connections (ADR 0015) against the TLS instances of scripts/services: PostgreSQL with TLS
 * required, RabbitMQ over AMQPS and Redis over TLS with an ACL user, each configured through loadConfig
 * and connected through Herald's own adapters. Every instance's certificate names DNS:localhost only,
 * so connecting through 127.0.0.1 is a server whose certificate does not match; other-ca.crt is a CA
 * that did not issue it. Kafka over SASL_SSL: kafka-sasl-ssl.int.spec.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AmqpConnection } from '../../src/adapters/amqp/amqp-connection.js';
import { createDatabase } from '../../src/adapters/postgres/database.js';
import { RedisLock } from '../../src/adapters/redis/redis-lock.js';
import type { HeraldSettings as HeraldConfig } from '../../src/config.js';
import { loadConfig } from '../../src/config.js';
import { BrokerUnavailableError } from '../../src/errors.js';
import { waitFor } from '../../src/testing/wait.js';
import { uniqueName } from '../support/services.js';
import {
  startTlsServices,
  type TlsMaterial,
  tlsMaterial,
  tlsUrls,
  withCredentials,
  withHost,
} from '../support/tls.js';

/** Node's words for a chain that does not lead to the configured CA. */
const UNTRUSTED =
  /self-signed certificate in certificate chain|unable to (get local issuer|verify the first) certificate/;

let m: TlsMaterial;
let scratch: string;

beforeAll(async () => {
  await startTlsServices('postgres-tls', 'rabbitmq-tls', 'redis-tls');
  m = tlsMaterial();
  scratch = mkdtempSync(join(tmpdir(), 'herald-tls-'));
});

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

function config(env: Record<string, string>): HeraldConfig {
  return loadConfig({ HERALD_LOG_LEVEL: 'silent', ...env });
}

// ---------------------------------------------------------------------------------------------
describe('PostgreSQL with TLS required', () => {
  const url = (host = 'localhost', user = 'herald') =>
    withHost(withCredentials(tlsUrls.database(), user, user === 'herald' ? m.password : ''), host);

  async function session(c: HeraldConfig) {
    const db = createDatabase({
      url: c.databaseUrl,
      schema: 'public',
      poolSize: 1,
      applicationName: 'tls-test',
    });
    try {
      const { rows } = await db.query<{ ssl: boolean; version: string; user: string }>(
        'select s.ssl, s.version, current_user as user from pg_stat_ssl s where s.pid = pg_backend_pid()',
      );
      return rows[0];
    } finally {
      await db.close();
    }
  }

  it('verify-full: connects to the server its CA issued a certificate for, over TLS', async () => {
    const c = config({ DATABASE_URL: url(), HERALD_DB_SSLMODE: 'verify-full', HERALD_DB_SSL_CA_PATH: m.ca });
    expect(await session(c)).toEqual({
      ssl: true,
      version: expect.stringMatching(/^TLSv1\.[23]$/),
      user: 'herald',
    });
  });

  it("takes the same settings from DATABASE_URL's own libpq parameters (sslmode, sslrootcert)", async () => {
    const withParameters = withCredentials(tlsUrls.databaseWithParameters(), 'herald', m.password);
    expect(new URL(withParameters).searchParams.get('sslmode')).toBe('verify-full');
    expect(await session(config({ DATABASE_URL: withParameters }))).toMatchObject({ ssl: true });
  });

  it('verify-full refuses a server whose certificate does not name the host it was reached by', async () => {
    const c = config({
      DATABASE_URL: url('127.0.0.1'),
      HERALD_DB_SSLMODE: 'verify-full',
      HERALD_DB_SSL_CA_PATH: m.ca,
    });
    await expect(session(c)).rejects.toThrow(/IP: 127\.0\.0\.1 is not in the cert's list/);
  });

  it('verify-ca accepts that server (the chain only), which is why verify-full is the mode to use', async () => {
    const c = config({
      DATABASE_URL: url('127.0.0.1'),
      HERALD_DB_SSLMODE: 'verify-ca',
      HERALD_DB_SSL_CA_PATH: m.ca,
    });
    expect(await session(c)).toMatchObject({ ssl: true });
  });

  it('refuses a server whose certificate another CA issued', async () => {
    const c = config({
      DATABASE_URL: url(),
      HERALD_DB_SSLMODE: 'verify-full',
      HERALD_DB_SSL_CA_PATH: m.otherCa,
    });
    await expect(session(c)).rejects.toThrow(UNTRUSTED);
  });

  it("the server refuses plain text; HERALD_DB_SSLMODE=disable wins over the URL's sslmode=verify-full", async () => {
    const withParameters = withCredentials(tlsUrls.databaseWithParameters(), 'herald', m.password);
    const c = config({ DATABASE_URL: withParameters, HERALD_DB_SSLMODE: 'disable' });
    expect(new URL(c.databaseUrl).searchParams.get('sslmode')).toBe('disable');
    await expect(session(c)).rejects.toThrow(/no pg_hba\.conf entry .*no encryption/);
  });

  it('a client certificate authenticates herald_cert; without one, or with one another CA issued, it is refused', async () => {
    const tls = { HERALD_DB_SSLMODE: 'verify-full', HERALD_DB_SSL_CA_PATH: m.ca };
    const withCert = config({
      DATABASE_URL: url('localhost', 'herald_cert'),
      ...tls,
      HERALD_DB_SSL_CERT_PATH: m.client.cert,
      HERALD_DB_SSL_KEY_PATH: m.client.key,
    });
    expect(await session(withCert)).toMatchObject({ ssl: true, user: 'herald_cert' });
    await expect(session(config({ DATABASE_URL: url('localhost', 'herald_cert'), ...tls }))).rejects.toThrow(
      /connection requires a valid client certificate/,
    );
    const untrusted = config({
      DATABASE_URL: url('localhost', 'herald_cert'),
      ...tls,
      HERALD_DB_SSL_CERT_PATH: m.otherClient.cert,
      HERALD_DB_SSL_KEY_PATH: m.otherClient.key,
    });
    await expect(session(untrusted)).rejects.toThrow(/alert unknown ca/);
  });
});

// ---------------------------------------------------------------------------------------------
describe('RabbitMQ over AMQPS', () => {
  const url = (host = 'localhost', password = m.password) =>
    withHost(withCredentials(tlsUrls.amqp(), 'herald', password), host);

  /** Connects through Herald's AmqpConnection, publishes with a confirm and reads the message back. */
  async function roundTrip(c: HeraldConfig): Promise<string> {
    const connection = await AmqpConnection.connect({
      url: c.amqpUrl!,
      name: 'tls-test',
      connectTimeoutMs: 5_000,
    });
    try {
      const channel = await connection.confirmChannel();
      const queue = uniqueName('herald_tls');
      await channel.assertQueue(queue, { durable: false, autoDelete: false });
      channel.sendToQueue(queue, Buffer.from('over amqps'));
      await channel.waitForConfirms();
      const message = await waitFor(async () => await channel.get(queue, { noAck: true }), {
        what: 'the message',
      });
      await channel.deleteQueue(queue);
      return message.content.toString();
    } finally {
      await connection.close();
    }
  }

  it('connects with CA verification, the password read from AMQP_URL_FILE', async () => {
    const file = join(scratch, 'amqp-url');
    writeFileSync(file, `${url()}\n`);
    const c = config({
      DATABASE_URL: 'postgres://unused@localhost/x',
      AMQP_URL_FILE: file,
      HERALD_AMQP_CA_PATH: m.ca,
    });
    expect(new URL(c.amqpUrl!).searchParams.get('cacertfile')).toBe(m.ca);
    expect(await roundTrip(c)).toBe('over amqps');
  });

  it("takes the CA from the URL's own cacertfile parameter too", async () => {
    const withParameters = withCredentials(tlsUrls.amqpWithParameters(), 'herald', m.password);
    expect(
      await roundTrip(config({ DATABASE_URL: 'postgres://unused@localhost/x', AMQP_URL: withParameters })),
    ).toBe('over amqps');
  });

  it('refuses a server whose certificate does not name the host; server_name_indication names the expected one', async () => {
    const base = { DATABASE_URL: 'postgres://unused@localhost/x', HERALD_AMQP_CA_PATH: m.ca };
    const error = await roundTrip(config({ ...base, AMQP_URL: url('127.0.0.1') })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BrokerUnavailableError);
    expect((error as Error).message).toMatch(/IP: 127\.0\.0\.1 is not in the cert's list/);
    const named = `${url('127.0.0.1')}?server_name_indication=localhost`;
    expect(await roundTrip(config({ ...base, AMQP_URL: named }))).toBe('over amqps');
  });

  it('refuses a server whose certificate another CA issued, and plain AMQP on the TLS port', async () => {
    const base = { DATABASE_URL: 'postgres://unused@localhost/x' };
    await expect(
      roundTrip(config({ ...base, AMQP_URL: url(), HERALD_AMQP_CA_PATH: m.otherCa })),
    ).rejects.toThrow(UNTRUSTED);
    // The TLS listener hangs up on AMQP's plain protocol header (at once, or once it read it).
    const plain = url().replace(/^amqps:/, 'amqp:');
    await expect(roundTrip(config({ ...base, AMQP_URL: plain }))).rejects.toThrow(
      /closed abruptly during opening handshake|ECONNRESET/,
    );
  });

  it('presents a client certificate: one the CA issued is accepted, one from another CA refused', async () => {
    const base = {
      DATABASE_URL: 'postgres://unused@localhost/x',
      AMQP_URL: url(),
      HERALD_AMQP_CA_PATH: m.ca,
    };
    expect(
      await roundTrip(
        config({ ...base, HERALD_AMQP_CERT_PATH: m.client.cert, HERALD_AMQP_KEY_PATH: m.client.key }),
      ),
    ).toBe('over amqps');
    await expect(
      roundTrip(
        config({
          ...base,
          HERALD_AMQP_CERT_PATH: m.otherClient.cert,
          HERALD_AMQP_KEY_PATH: m.otherClient.key,
        }),
      ),
    ).rejects.toThrow(/alert unknown ca/);
  });
});

// ---------------------------------------------------------------------------------------------
describe('Redis over TLS with an ACL user', () => {
  const locks: RedisLock[] = [];
  afterAll(async () => {
    await Promise.all(locks.map((lock) => lock.close()));
  });

  /** A RedisLock as the tick role builds it, with a logger whose lines the test reads. */
  function lock(env: Record<string, string>) {
    const lines: string[] = [];
    const logger = pino({ level: 'debug' }, { write: (line: string) => lines.push(line) });
    const c = config({ DATABASE_URL: 'postgres://unused@localhost/x', ...env });
    const created = new RedisLock({
      ...c.redis!,
      logger,
      timeoutMs: 5_000,
      name: uniqueName('herald-tls-test'),
    });
    locks.push(created);
    return {
      lock: created,
      lines,
      failure: (pattern: RegExp) =>
        waitFor(() => lines.find((l) => pattern.test(l)), { what: `a failure matching ${pattern}` }),
    };
  }

  const tls = () => ({ REDIS_URL: tlsUrls.redis(), HERALD_REDIS_CA_PATH: m.ca });

  it('sets a key as the ACL user, the password read from HERALD_REDIS_PASSWORD_FILE', async () => {
    const { lock: redis } = lock({ ...tls(), HERALD_REDIS_PASSWORD_FILE: m.passwordFile });
    await waitFor(() => redis.ready, { what: 'an authenticated TLS connection' });
    const key = uniqueName('herald-tls-key');
    expect(await redis.setOnce(key, 30)).toBe('acquired');
    expect(await redis.setOnce(key, 30)).toBe('taken');
  });

  it('is refused with a wrong password, and as the default user (disabled)', async () => {
    const wrong = lock({ ...tls(), HERALD_REDIS_PASSWORD: 'not-the-password' });
    await wrong.failure(/WRONGPASS/);
    expect(wrong.lock.ready).toBe(false);
    const defaultUser = lock({
      REDIS_URL: tlsUrls.redis().replace('herald@', ''),
      HERALD_REDIS_CA_PATH: m.ca,
      HERALD_REDIS_PASSWORD: m.password,
    });
    await defaultUser.failure(/WRONGPASS|NOAUTH/);
    expect(defaultUser.lock.ready).toBe(false);
  });

  it('refuses a server whose certificate does not name the host, or another CA issued', async () => {
    const byAddress = lock({
      ...tls(),
      REDIS_URL: withHost(tlsUrls.redis(), '127.0.0.1'),
      HERALD_REDIS_PASSWORD: m.password,
    });
    await byAddress.failure(/IP: 127\.0\.0\.1 is not in the cert's list/);
    const otherCa = lock({ ...tls(), HERALD_REDIS_CA_PATH: m.otherCa, HERALD_REDIS_PASSWORD: m.password });
    await otherCa.failure(UNTRUSTED);
    expect(byAddress.lock.ready || otherCa.lock.ready).toBe(false);
  });

  it("a socket's second error (our refusal, then the server's alert) finds a listener: no uncaught exception", async () => {
    // ioredis listens with once(), so a second 'error' on a socket went uncaught and ended the
    // process (redis/ioredis#962); seen here as the server's "alert decode error" after we refused
    // its certificate mid-handshake. RedisLock's connector keeps a listener for the socket's life.
    const refused = lock({ ...tls(), HERALD_REDIS_CA_PATH: m.otherCa, HERALD_REDIS_PASSWORD: m.password });
    const client = (refused.lock as unknown as { client: { stream?: import('node:tls').TLSSocket } }).client;
    const socket = await waitFor(() => client.stream, { what: 'the first socket' });
    await refused.failure(UNTRUSTED);
    await waitFor(() => socket.destroyed, { what: 'the refused socket destroyed' });
    expect(() => socket.emit('error', new Error('tlsv1 alert decode error'))).not.toThrow();
    await waitFor(() => refused.lines.find((l) => l.includes('redis socket error')), {
      what: 'the second error logged',
    });
  });

  it('presents a client certificate: one the CA issued is accepted, one from another CA refused', async () => {
    const ours = lock({
      ...tls(),
      HERALD_REDIS_PASSWORD: m.password,
      HERALD_REDIS_CERT_PATH: m.client.cert,
      HERALD_REDIS_KEY_PATH: m.client.key,
    });
    await waitFor(() => ours.lock.ready, { what: 'a connection with our client certificate' });
    const theirs = lock({
      ...tls(),
      HERALD_REDIS_PASSWORD: m.password,
      HERALD_REDIS_CERT_PATH: m.otherClient.cert,
      HERALD_REDIS_KEY_PATH: m.otherClient.key,
    });
    await theirs.failure(/redis unavailable: .*alert unknown ca/);
    expect(theirs.lock.ready).toBe(false);
  });
});
