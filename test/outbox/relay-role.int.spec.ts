import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logger.js';
import { AggregateRegistry } from '../../src/registry/registry.js';
import { waitFor } from '../../src/testing/wait.js';
import { ledgerRegistration } from '../support/ledger-aggregate.js';
import { runTestRole } from '../support/roles.js';
import { createTestDatabase, requireEnv, type TestDatabase, uniqueName } from '../support/services.js';
import { BrokerFixture, deliveryStats, outboxCounts, seedOutbox } from './support/fixtures.js';

const CHILD = join(dirname(fileURLToPath(import.meta.url)), 'support', 'relay-role-child.ts');

let database: TestDatabase;
let broker: BrokerFixture;

beforeAll(async () => {
  database = await createTestDatabase();
  broker = await BrokerFixture.open();
});

afterAll(async () => {
  await broker?.close();
  await database?.drop();
});

describe('relay role', () => {
  it('declares its queues, relays, and returns when the signal aborts', async () => {
    const queue = uniqueName('herald_test_role');
    broker.adopt(queue);
    const seeded = await seedOutbox(database.db, { count: 200, destination: queue }); // queue does not exist yet
    const controller = new AbortController();
    const registry = new AggregateRegistry([ledgerRegistration(queue)]);
    const running = runTestRole('relay', database.config(), controller.signal, {
      registry,
      logger: silentLogger,
    });

    await waitFor(async () => (await outboxCounts(database.db)).sent === 200, { what: 'rows sent' });
    const received = await broker.consume(queue);
    await waitFor(() => received.length >= 200, { what: 'deliveries' });
    expect(deliveryStats(broker.deliveries, seeded.messageIds)).toMatchObject({ distinct: 200, total: 200 });

    controller.abort();
    await running;
  });

  it('on SIGTERM stops claiming, finishes in-flight work and exits 0 by itself', async () => {
    const queue = uniqueName('herald_test_sigterm');
    broker.adopt(queue);
    await database.db.query('truncate outbox');
    await seedOutbox(database.db, { count: 30_000, destination: queue });
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
      env: {
        ...process.env,
        DATABASE_URL: database.url,
        HERALD_SCHEMA: database.schema,
        AMQP_URL: requireEnv('AMQP_URL'),
        HERALD_LOG_LEVEL: 'silent',
        HERALD_RELAY_BATCH_SIZE: '500',
        HERALD_RELAY_IN_FLIGHT: '2000',
        RELAY_QUEUES: queue,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    try {
      // The child starts from source (tsx): on a loaded machine that alone can take tens of seconds.
      await waitFor(async () => (await outboxCounts(database.db)).sent > 0, {
        what: 'relaying under way',
        timeoutMs: 90_000,
      });
      child.kill('SIGTERM');
      const timeout = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const [code, signal] = await exited;
      clearTimeout(timeout);
      expect({ code, signal }).toEqual({ code: 0, signal: null });
      expect(output).toContain('"stopped":true');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }

    const { rows } = await database.db.query<{ claimed: number; counted: number }>(
      `select count(*) filter (where status = 'pending' and locked_until is not null)::int as claimed,
              count(*) filter (where status = 'pending' and attempts > 0)::int as counted
         from outbox`,
    );
    expect(rows[0]).toEqual({ claimed: 0, counted: 0 });
    const counts = await outboxCounts(database.db);
    expect(counts.sent + counts.pending).toBe(30_000);
    expect(counts.sent).toBeLessThan(30_000); // the stop landed mid-drain
  });
});
