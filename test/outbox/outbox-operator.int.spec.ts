/**
 * `herald outbox parked | requeue | skip` (ADR 0007) on real PostgreSQL: a dead head parks its ordered
 * key and shows up; skip records who and why and lets the key drain; requeue puts the head first again;
 * only dead rows move. One run goes through the real CLI process to prove the role is wired.
 */
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { claimOutboxBatch, scheduleRetry } from '../../src/adapters/postgres/outbox-queries.js';
import { silentLogger } from '../../src/logger.js';
import { runOutboxCommand } from '../../src/outbox/outbox-admin.js';
import { waitFor } from '../../src/testing/wait.js';
import { heraldArgs } from '../support/cli.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { seedOrdered } from './support/ordered-fixtures.js';

const run = promisify(execFile);
const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});
beforeEach(async () => {
  await database.db.query('truncate outbox');
});

async function command(args: string[], options: Record<string, string | boolean> = {}) {
  let output = '';
  const code = await runOutboxCommand({
    db: database.db,
    logger: silentLogger,
    args,
    options,
    defaultActor: 'cli:test',
    write: (text) => {
      output += text;
    },
  });
  return { code, output };
}

/**
 * Claims until something comes back: an ordered row is claimable only once no transaction older than
 * its own is open anywhere on the server (ADR 0007's xmin gate), and other test files run in parallel.
 */
const claimSome = (owner: string) =>
  waitFor(
    async () => {
      const { rows } = await claimOutboxBatch(database.db, {
        limit: 10,
        lockSeconds: 30,
        owner,
        sinks: ['kafka'],
      });
      return rows.length > 0 ? rows : undefined;
    },
    { what: 'a claim' },
  );

/** Key `k` with `rows` ordered rows whose head is dead. Returns the head's id. */
async function parkKey(rows: number): Promise<number> {
  await seedOrdered(database.db, { sink: 'kafka', destination: 'orders', keys: ['k'], perKey: rows });
  const claimed = await claimSome('test');
  const head = claimed[0]!;
  await scheduleRetry(
    database.db,
    [{ id: head.id, attempts: head.attempts, error: 'rejected by broker: MESSAGE_TOO_LARGE', delayMs: 0 }],
    1,
  );
  return head.id;
}

const rowState = async (id: number) =>
  (
    await database.db.query<{ status: string; last_error: string | null; attempts: number }>(
      'select status, last_error, attempts from outbox where id = $1',
      [id],
    )
  ).rows[0];

describe('herald outbox', () => {
  it('parked lists the key with its dead head; skip records the operator and drains the key', async () => {
    expect(await command(['parked'])).toEqual({ code: 0, output: 'no parked keys\n' });
    const head = await parkKey(3);

    const parked = await command(['parked']);
    expect(parked.code).toBe(0);
    expect(parked.output).toContain(`kafka:orders key=k head=${head} waiting=2 attempts=1`);
    expect(parked.output).toContain('MESSAGE_TOO_LARGE');

    const skipped = await command(['skip', String(head)], {
      reason: 'payload over the topic limit',
      actor: 'ana',
    });
    expect(skipped).toEqual({ code: 0, output: `skipped ${head} (kafka:orders key=k)\n` });
    expect(await rowState(head)).toMatchObject({
      status: 'skipped',
      last_error:
        'skipped by ana: payload over the topic limit; last error: rejected by broker: MESSAGE_TOO_LARGE',
    });
    expect((await command(['parked'])).output).toBe('no parked keys\n');
    // the next row of k is the head now, and due
    const rows = await claimSome('t');
    expect(rows.map((r) => JSON.parse(r.payloadText).seq)).toEqual([1]);

    // a row that is not dead is never skipped or re-queued
    expect((await command(['skip', String(rows[0]!.id)])).code).toBe(1);
    expect((await command(['requeue', String(rows[0]!.id)])).code).toBe(1);
  });

  it('requeue puts the dead head back first, attempts reset', async () => {
    const head = await parkKey(2);
    expect(await command(['requeue', String(head)])).toEqual({ code: 0, output: `re-queued ${head}\n` });
    expect(await rowState(head)).toMatchObject({ status: 'pending', attempts: 0 });
    const rows = await claimSome('t');
    expect(rows.map((r) => r.id)).toEqual([head]);
  });

  it('answers a bad command with usage and exit code 2', async () => {
    expect((await command(['frobnicate'])).code).toBe(2);
    expect((await command(['skip'])).output).toMatch(/an outbox row id is required/);
    expect((await command(['parked'], { limit: 'x' })).code).toBe(2);
  });

  it('is wired into the herald CLI (child process)', async () => {
    const head = await parkKey(2);
    const { stdout } = await run(process.execPath, heraldArgs(['outbox', 'parked', '--json']), {
      cwd: REPO,
      timeout: 60_000,
      env: {
        ...process.env,
        DATABASE_URL: database.url,
        HERALD_SCHEMA: database.schema,
        HERALD_LOG_LEVEL: 'silent',
      },
    });
    const parked = JSON.parse(stdout) as { id: number; partitionKey: string; waiting: number }[];
    expect(parked).toEqual([expect.objectContaining({ id: head, partitionKey: 'k', waiting: 1 })]);
  });
});
