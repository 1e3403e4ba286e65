/**
 * Test fixtures on the real services started by scripts/services (npm test exports their URLs).
 * Each test file gets a fresh database (graphile-worker style) migrated with the real migrator, so
 * files run in parallel without sharing rows; broker resources get unique names per test.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { dropDatabase, recreateDatabase } from '../../src/adapters/postgres/admin.js';
import { createDatabase } from '../../src/adapters/postgres/database.js';
import { migrate } from '../../src/adapters/postgres/migrator.js';
import type { HeraldSettings as HeraldConfig } from '../../src/config.js';
import { loadConfig } from '../../src/config.js';
import type { Database } from '../../src/ports/database.js';

export function requireEnv(name: 'DATABASE_URL' | 'AMQP_URL' | 'REDIS_URL' | 'KAFKA_BROKERS'): string {
  const value = process.env[name];
  if (!value)
    throw new Error(`${name} is not set: run the tests with \`npm test\`, which starts the services`);
  return value;
}

/** A loopback port free a moment ago (for a child process or server to listen on). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  if (!address || typeof address !== 'object') throw new Error('no free port');
  return address.port;
}

export function uniqueName(prefix: string): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`;
}

export interface TestDatabase {
  url: string;
  schema: string;
  db: Database;
  config: (overrides?: Record<string, string>) => HeraldConfig;
  drop: () => Promise<void>;
}

export async function createTestDatabase(
  options: { schema?: string; migrate?: boolean } = {},
): Promise<TestDatabase> {
  const adminUrl = requireEnv('DATABASE_URL');
  const name = uniqueName('herald_test');
  const url = await recreateDatabase(adminUrl, name);
  const schema = options.schema ?? 'herald';
  if (options.migrate ?? true) await migrate({ url, schema });
  const db = createDatabase({ url, schema, poolSize: 20 });
  const config = (overrides: Record<string, string> = {}) =>
    loadConfig({
      DATABASE_URL: url,
      HERALD_SCHEMA: schema,
      AMQP_URL: process.env.AMQP_URL,
      REDIS_URL: process.env.REDIS_URL,
      KAFKA_BROKERS: process.env.KAFKA_BROKERS,
      HERALD_LOG_LEVEL: process.env.HERALD_LOG_LEVEL ?? 'silent',
      // Roles started by tests serve their metrics endpoint on a free loopback port (ADR 0013).
      HERALD_METRICS_HOST: '127.0.0.1',
      HERALD_METRICS_PORT: '0',
      ...overrides,
    });
  return {
    url,
    schema,
    db,
    config,
    drop: async () => {
      await db.close();
      await dropDatabase(adminUrl, name);
    },
  };
}
