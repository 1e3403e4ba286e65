import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../src/testing/wait.js';
import { createTestDatabase, requireEnv, type TestDatabase } from '../support/services.js';
import { BrokerFixture, seedOutbox } from './support/fixtures.js';
import { RelayHarness } from './support/relay-harness.js';

const here = dirname(fileURLToPath(import.meta.url));
const CHILD = join(here, 'support', 'crash-relay-child.ts');

let database: TestDatabase;
let broker: BrokerFixture;
let relays: RelayHarness;
let child: ChildProcess | undefined;

beforeAll(async () => {
  database = await createTestDatabase();
  broker = await BrokerFixture.open();
  relays = new RelayHarness(database);
});

afterAll(async () => {
  child?.kill('SIGKILL');
  await relays?.close();
  await broker?.close();
  await database?.drop();
});

const INBOX_INSERT = `insert into inbox (consumer, message_id) values ('crash-test', $1) on conflict do nothing`;

describe('relay crash between confirm and mark (invariant 4)', () => {
  it('re-publishes with the same message id after the lease expires; the inbox consumer processes it once', async () => {
    const queue = await broker.queue('crash');
    let effects = 0;
    let duplicates = 0;
    const received = await broker.consume(queue, async (delivery) => {
      const { rowCount } = await database.db.query(INBOX_INSERT, [delivery.messageId]);
      if (rowCount === 1) effects++;
      else duplicates++;
    });
    const seeded = await seedOutbox(database.db, { count: 1, destination: queue });
    const messageId = seeded.messageIds[0]!;

    child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
      env: {
        ...process.env,
        DATABASE_URL: database.url,
        HERALD_SCHEMA: database.schema,
        AMQP_URL: requireEnv('AMQP_URL'),
        HERALD_RELAY_LOCK_SECONDS: '1',
        HERALD_LOG_LEVEL: 'silent',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines = createInterface({ input: child.stdout! });
    const confirmed = await waitForLine(
      lines,
      (line) => (line.confirmed as string[] | undefined) ?? undefined,
    );
    expect(confirmed).toEqual([messageId]);

    // The broker has it; the row is still claimed, not sent. Now the relay dies.
    await waitFor(() => effects === 1, { what: 'first delivery processed' });
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
    const [claimed] = (
      await database.db.query<{ status: string; attempts: number }>('select status, attempts from outbox')
    ).rows;
    expect(claimed).toEqual({ status: 'pending', attempts: 1 });

    // Database time decides when the dead relay's lease is over (invariant 6).
    await waitFor(
      async () =>
        (await database.db.query<{ expired: boolean }>('select now() > locked_until as expired from outbox'))
          .rows[0]?.expired,
      { what: 'lease expiry by the database clock', intervalMs: 50 },
    );
    const { relay } = relays.make();
    await relay.drainOnce();

    await waitFor(() => received.length === 2 && effects + duplicates === 2, { what: 'the re-publish' });
    expect(received.map((d) => d.messageId)).toEqual([messageId, messageId]);
    expect(effects).toBe(1);
    expect(duplicates).toBe(1);
    const { rows } = await database.db.query<{ status: string; attempts: number; inbox: number }>(
      `select status, attempts, (select count(*)::int from inbox where consumer = 'crash-test') as inbox from outbox`,
    );
    expect(rows[0]).toEqual({ status: 'sent', attempts: 2, inbox: 1 });
  });
});

async function waitForLine<T>(
  lines: AsyncIterable<string>,
  pick: (parsed: Record<string, unknown>) => T | undefined,
): Promise<T> {
  const timeout = setTimeout(() => child?.kill('SIGKILL'), 30_000);
  try {
    for await (const line of lines) {
      let parsed: Record<string, unknown>;
      try {
        parsed = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue;
      }
      const picked = pick(parsed);
      if (picked !== undefined) return picked;
    }
    throw new Error('child exited before reporting');
  } finally {
    clearTimeout(timeout);
  }
}
