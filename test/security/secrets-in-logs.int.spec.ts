/**
 * Logs never print a secret (ADR 0015). The real `herald` CLI runs against the TLS instances of
 * scripts/services with every way a secret arrives — a password inline in DATABASE_URL, AMQP_URL read
 * from AMQP_URL_FILE, the Redis and Kafka passwords from *_FILE files — first with the right ones at
 * debug level (`herald all` dispatches a campaign over AMQPS and publishes a Kafka row over SASL_SSL,
 * its tick connected to Redis over TLS), then with wrong ones, so every driver reports its
 * authentication failure (ioredis attaches AUTH's arguments, the password among them, to its errors).
 * All of that output, stdout and stderr, is searched for each secret.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropDatabase, recreateDatabase } from '../../src/adapters/postgres/admin.js';
import { createDatabase } from '../../src/adapters/postgres/database.js';
import type { LineSimulator } from '../../src/aggregates/campaign/line/simulator/server.js';
import { loadConfig } from '../../src/config.js';
import { REDACTED } from '../../src/logger.js';
import type { Database } from '../../src/ports/database.js';
import { waitFor } from '../../src/testing/wait.js';
import { seedOutbox } from '../outbox/support/fixtures.js';
import { campaignService, lineCampaign } from '../support/campaigns.js';
import { type RunningHerald, spawnHerald } from '../support/cli.js';
import {
  type LineWorld,
  lineWorld,
  startTestLineSimulator,
  TEST_LINE_CREDENTIALS_KEY,
  testLineSettings,
} from '../support/line.js';
import { uniqueName } from '../support/services.js';
import { startTlsServices, type TlsMaterial, tlsMaterial, tlsUrls, withCredentials } from '../support/tls.js';

let m: TlsMaterial;
let scratch: string;
let adminUrl: string;
let databaseName: string;
let databaseUrl: string;
let db: Database | undefined;
const running: RunningHerald[] = [];
let simulator: LineSimulator;
let line: LineWorld;

beforeAll(async () => {
  await startTlsServices('postgres-tls', 'rabbitmq-tls', 'redis-tls', 'kafka-tls');
  m = tlsMaterial();
  scratch = mkdtempSync(join(tmpdir(), 'herald-secrets-'));
  // DATABASE_TLS_URL carries sslmode=verify-full and sslrootcert; the password goes inline.
  adminUrl = withCredentials(tlsUrls.databaseWithParameters(), 'herald', m.password);
  databaseName = uniqueName('herald_test_tls');
  databaseUrl = await recreateDatabase(adminUrl, databaseName);
  simulator = await startTestLineSimulator();
});

afterAll(async () => {
  await Promise.all(running.map((child) => child.stop(5_000)));
  await db?.close();
  await simulator?.close();
  if (databaseName) await dropDatabase(adminUrl, databaseName);
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

function secretFile(name: string, content: string): string {
  const path = join(scratch, name);
  writeFileSync(path, `${content}\n`, { mode: 0o600 });
  return path;
}

const amqpUrl = (password: string) => withCredentials(tlsUrls.amqp(), 'herald', password);

/** Every secret as the services know it, over TLS with the CA verified. */
function environment(): Record<string, string> {
  return {
    HERALD_LOG_LEVEL: 'debug',
    HERALD_SCHEMA: 'herald',
    HERALD_METRICS_HOST: '127.0.0.1',
    HERALD_METRICS_PORT: '0',
    HERALD_API_HOST: '127.0.0.1',
    HERALD_API_PORT: '0',
    HERALD_SCANNER_POLL_MS: '500',
    HERALD_RELAY_IDLE_POLL_MS: '500',
    DATABASE_URL: databaseUrl,
    AMQP_URL_FILE: secretFile('amqp-url', amqpUrl(m.password)),
    HERALD_AMQP_CA_PATH: m.ca,
    REDIS_URL: tlsUrls.redis(),
    HERALD_REDIS_PASSWORD_FILE: m.passwordFile,
    HERALD_REDIS_CA_PATH: m.ca,
    KAFKA_BROKERS: tlsUrls.kafkaBrokers(),
    HERALD_KAFKA_SECURITY_PROTOCOL: 'SASL_SSL',
    HERALD_KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
    HERALD_KAFKA_SASL_USERNAME: 'herald',
    HERALD_KAFKA_SASL_PASSWORD_FILE: m.passwordFile,
    HERALD_KAFKA_CA_PATH: m.ca,
    HERALD_KAFKA_CREATE_TOPICS: 'true',
    HERALD_KAFKA_TOPIC_PARTITIONS: '1',
    HERALD_LINE_API_BASE_URL: simulator.url,
    HERALD_LINE_CREDENTIALS_KEY_FILE: secretFile('line-credentials-key', TEST_LINE_CREDENTIALS_KEY),
  };
}

function start(args: string[], env: Record<string, string>): RunningHerald {
  const child = spawnHerald(args, env);
  running.push(child);
  return child;
}

async function waitForOutput(child: RunningHerald, pattern: RegExp, what: string): Promise<void> {
  await waitFor(() => pattern.test(child.output()), { what, timeoutMs: 60_000 }).catch((error: Error) => {
    throw new Error(`${error.message}\n--- output ---\n${child.output().slice(-4_000)}`);
  });
}

/** The secret in every form it could be printed in: as is, percent-encoded, JSON-escaped. */
function expectNoSecret(output: string, secret: string, where: string): void {
  for (const form of new Set([secret, encodeURIComponent(secret), JSON.stringify(secret).slice(1, -1)])) {
    const at = output.indexOf(form);
    expect(at, `${where} printed a secret: …${output.slice(Math.max(0, at - 200), at + 60)}…`).toBe(-1);
  }
}

describe('secrets in logs', () => {
  it('a run with every secret set, then one with wrong secrets, prints none of them', async () => {
    const outputs: Record<string, string> = {};

    // 1. The right secrets: the whole system works over TLS.
    const all = start(['all'], environment());
    await waitForOutput(all, /migrations applied/, 'migrations over TLS');
    const config = loadConfig({ DATABASE_URL: databaseUrl, HERALD_SCHEMA: 'herald' });
    db = createDatabase({ url: config.databaseUrl, schema: 'herald', poolSize: 2 });
    // The campaign's LINE channel: its access token is sealed in the database and sent to LINE, never logged.
    line = await lineWorld(db, simulator, testLineSettings(simulator));
    const service = campaignService(db);
    const campaign = await service.create(lineCampaign({ castType: 'broadcast' }));
    await service.activate(campaign.campaignId);
    const topic = uniqueName('herald_tls_logs');
    const kafkaRow = await seedOutbox(db, { count: 1, sink: 'kafka', destination: topic });
    const sent = async (messageId: string) =>
      (await db!.query<{ status: string }>('select status from outbox where message_id = $1', [messageId]))
        .rows[0]?.status === 'sent';
    await waitFor(async () => (await service.get(campaign.campaignId)).status === 'COMPLETED', {
      what: 'the campaign COMPLETED over AMQPS',
      timeoutMs: 60_000,
    }).catch((error: Error) => {
      throw new Error(`${error.message}\n--- herald all ---\n${all.output().slice(-4_000)}`);
    });
    await waitFor(() => sent(kafkaRow.messageIds[0]!), {
      what: 'the Kafka row sent over SASL_SSL',
      timeoutMs: 60_000,
    });
    expect(all.output()).toMatch(/"msg":"tick role started"/);
    expect(all.output()).not.toMatch(/redis unavailable/);
    expect(await all.stop()).toBe(0);
    outputs['herald all'] = all.output();

    // 2. Wrong secrets, each service on its own (a relay waits for AMQP before it would try Kafka).
    const wrong = {
      database: `wrong-db-${randomBytes(6).toString('hex')}`,
      amqp: `wrong-amqp-${randomBytes(6).toString('hex')}`,
      redis: `wrong-redis-${randomBytes(6).toString('hex')}`,
      kafka: `wrong-kafka-${randomBytes(6).toString('hex')}`,
    };
    const base = environment();
    const withoutKafka = {
      ...base,
      KAFKA_BROKERS: '',
      HERALD_KAFKA_SECURITY_PROTOCOL: '',
      HERALD_KAFKA_SASL_MECHANISM: '',
      HERALD_KAFKA_SASL_USERNAME: '',
      HERALD_KAFKA_SASL_PASSWORD_FILE: '',
      HERALD_KAFKA_CA_PATH: '',
    };
    const badDatabaseUrl = new URL(databaseUrl);
    badDatabaseUrl.password = wrong.database;
    await seedOutbox(db, { count: 1, sink: 'kafka', destination: topic }); // for the Kafka-only relay to try
    const migrate = start(['migrate'], {
      ...base,
      DATABASE_URL: '',
      DATABASE_URL_FILE: secretFile('db-url', badDatabaseUrl.toString()),
    });
    const kafkaRelay = start(['relay'], {
      ...base,
      AMQP_URL_FILE: '',
      HERALD_AMQP_CA_PATH: '',
      HERALD_KAFKA_SASL_PASSWORD_FILE: '',
      HERALD_KAFKA_SASL_PASSWORD: wrong.kafka,
    });
    const amqpRelay = start(['relay'], {
      ...withoutKafka,
      AMQP_URL_FILE: secretFile('bad-amqp-url', amqpUrl(wrong.amqp)),
    });
    const tick = start(['tick'], {
      ...withoutKafka,
      HERALD_REDIS_PASSWORD_FILE: secretFile('redis-password', wrong.redis),
    });

    expect(await migrate.exited()).toBe(1);
    expect(migrate.output()).toMatch(/password authentication failed for user "herald"/);
    await waitForOutput(
      kafkaRelay,
      /SASL SCRAM SHA512 authentication failed/,
      'the Kafka authentication failure',
    );
    await waitForOutput(amqpRelay, /ACCESS.REFUSED/, 'the AMQP authentication failure');
    await waitForOutput(tick, /WRONGPASS/, 'the Redis authentication failure');
    // ioredis put the AUTH arguments on its error; the logger censored them.
    expect(tick.output()).toContain(`"args":"${REDACTED}"`);
    for (const [name, child] of Object.entries({
      migrate,
      'relay (Kafka)': kafkaRelay,
      'relay (AMQP)': amqpRelay,
      tick,
    })) {
      await child.stop();
      outputs[name] = child.output();
    }

    for (const [where, output] of Object.entries(outputs)) {
      expect(output.length, `${where} logged something`).toBeGreaterThan(200);
      expectNoSecret(output, m.password, where);
      expectNoSecret(output, line.token, where);
      expectNoSecret(output, TEST_LINE_CREDENTIALS_KEY, where);
      for (const secret of Object.values(wrong)) expectNoSecret(output, secret, where);
    }
  });
});
