/**
 * Fixtures of the `ha` project (ADR 0037): the clusters `npm run test:ha` starts with
 * `scripts/services up rabbitmq-cluster kafka-cluster postgres-ha`, reached through the HERALD_HA_*
 * variables `scripts/services env` prints, and the commands that take their nodes away.
 */
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { dropDatabase, recreateDatabase } from '../../src/adapters/postgres/admin.js';
import { createDatabase } from '../../src/adapters/postgres/database.js';
import { migrate } from '../../src/adapters/postgres/migrator.js';
import { loadConfig } from '../../src/config.js';
import type { TestDatabase } from '../support/services.js';
import { uniqueName } from '../support/services.js';

const run = promisify(execFile);
const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

type HaVariable =
  | 'HERALD_HA_AMQP_URLS'
  | 'HERALD_HA_KAFKA_BROKERS'
  | 'HERALD_HA_DATABASE_URL'
  | 'HERALD_HA_PG_NODE_URLS'
  | 'HERALD_HA_RABBITMQ_NODES';

export function requireHa(name: HaVariable): string {
  const value = process.env[name];
  if (!value)
    throw new Error(
      `${name} is not set: run the HA tests with \`npm run test:ha\`, which starts the clusters`,
    );
  return value;
}

/** `bash scripts/services <args…>` (the clusters of this checkout's port offset); its stdout. */
export async function services(...args: string[]): Promise<string> {
  const { stdout } = await run('bash', ['scripts/services', ...args], { cwd: REPO, timeout: 180_000 });
  return stdout;
}

/**
 * Waits until rabbitmq-cluster is whole again: every quorum queue has all three members online (a node
 * just started answers before its queue members have caught up; losing another node meanwhile would leave
 * a queue without a majority). Asked of the first node that answers.
 */
export async function rabbitmqWhole(timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let behind = 'no node answered';
  for (;;) {
    for (const node of [1, 2, 3]) {
      const listed = await services(
        'rabbitmqctl',
        String(node),
        'list_queues',
        'name',
        'type',
        'online',
        '--formatter',
        'json',
      )
        .then((out) => JSON.parse(out) as { name: string; type: string; online: string[] }[])
        .catch(() => undefined);
      if (!listed) continue;
      const short = listed.filter((q) => q.type === 'quorum' && q.online.length < 3);
      if (short.length === 0) return;
      behind = `${short.length} quorum queues with fewer than 3 members online (${short[0]!.name}: ${short[0]!.online.join(' ')})`;
      break;
    }
    if (Date.now() > deadline) throw new Error(`rabbitmq-cluster not whole after ${timeoutMs} ms: ${behind}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** A fresh, migrated database on the postgres-ha pair, reached through its failover proxy. */
export async function createHaDatabase(): Promise<TestDatabase> {
  const adminUrl = requireHa('HERALD_HA_DATABASE_URL');
  const name = uniqueName('herald_ha');
  const url = await recreateDatabase(adminUrl, name);
  const schema = 'herald';
  await migrate({ url, schema });
  const db = createDatabase({ url, schema, poolSize: 10 });
  return {
    url,
    schema,
    db,
    config: (overrides = {}) =>
      loadConfig({
        DATABASE_URL: url,
        HERALD_SCHEMA: schema,
        AMQP_URL: requireHa('HERALD_HA_AMQP_URLS'),
        KAFKA_BROKERS: requireHa('HERALD_HA_KAFKA_BROKERS'),
        HERALD_LOG_LEVEL: process.env.HERALD_LOG_LEVEL ?? 'silent',
        HERALD_METRICS_HOST: '127.0.0.1',
        HERALD_METRICS_PORT: '0',
        ...overrides,
      }),
    drop: async () => {
      await db.close();
      await dropDatabase(adminUrl, name);
    },
  };
}
