/**
 * The TLS instances of scripts/services (services.d/tls.sh, ADR 0015) for the secure-connection tests:
 * their URLs from `scripts/services env`, the generated CA and certificates, and a way to start an
 * instance `scripts/services up` leaves out (kafka-tls, a second JVM, is started by the tests that need
 * it; `scripts/services down` stops it with the rest).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

type TlsVariable = 'DATABASE_TLS_URL' | 'AMQP_TLS_URL' | 'REDIS_TLS_URL' | 'KAFKA_TLS_BROKERS' | 'TLS_DIR';

function requireTlsEnv(name: TlsVariable): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(
      `${name} is not set: run the tests with \`npm test\` (or eval "$(bash scripts/services env)")`,
    );
  }
  return value;
}

/** Starts TLS instances that are not running (a no-op for running ones; bounded by the caller's hook timeout). */
export async function startTlsServices(
  ...names: ('postgres-tls' | 'rabbitmq-tls' | 'redis-tls' | 'kafka-tls')[]
) {
  try {
    await run('bash', ['scripts/services', 'up', ...names], { timeout: 110_000 });
  } catch (error) {
    const { stderr } = error as { stderr?: string };
    throw new Error(`scripts/services up ${names.join(' ')} failed:\n${stderr ?? String(error)}`);
  }
}

export interface TlsMaterial {
  /** The CA every TLS instance's certificate (DNS:localhost only) is issued by. */
  ca: string;
  /** A CA nobody trusts, with a client certificate it issued. */
  otherCa: string;
  otherClient: { cert: string; key: string };
  /** A client certificate for CN herald_cert, issued by `ca`. */
  client: { cert: string; key: string };
  /** The file with the password of every instance's `herald` user (with a trailing newline). */
  passwordFile: string;
  password: string;
}

export function tlsMaterial(): TlsMaterial {
  const dir = requireTlsEnv('TLS_DIR');
  const file = (name: string) => join(dir, name);
  const passwordFile = file('password');
  return {
    ca: file('ca.crt'),
    otherCa: file('other-ca.crt'),
    otherClient: { cert: file('other-client.crt'), key: file('other-client.key') },
    client: { cert: file('client.crt'), key: file('client.key') },
    passwordFile,
    password: readFileSync(passwordFile, 'utf8').trim(),
  };
}

/** `url` with its host replaced (e.g. 127.0.0.1, which the certificates do not name). */
export function withHost(url: string, host: string): string {
  const parsed = new URL(url);
  parsed.hostname = host;
  return parsed.toString();
}

/** `url` with user and password set. */
export function withCredentials(url: string, user: string, password: string): string {
  const parsed = new URL(url);
  parsed.username = user;
  parsed.password = password;
  return parsed.toString();
}

/** The instances' addresses, without their TLS parameters (the tests set those through the variables). */
export const tlsUrls = {
  database: () => stripQuery(requireTlsEnv('DATABASE_TLS_URL')),
  amqp: () => stripQuery(requireTlsEnv('AMQP_TLS_URL')),
  redis: () => requireTlsEnv('REDIS_TLS_URL'),
  kafkaBrokers: () => requireTlsEnv('KAFKA_TLS_BROKERS'),
  /** As `scripts/services env` prints it: TLS settings in the URL's own parameters. */
  databaseWithParameters: () => requireTlsEnv('DATABASE_TLS_URL'),
  amqpWithParameters: () => requireTlsEnv('AMQP_TLS_URL'),
};

function stripQuery(url: string): string {
  const parsed = new URL(url);
  parsed.search = '';
  return parsed.toString();
}
