import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATIONS_DIR, migrate, readMigrations } from '../../src/adapters/postgres/migrator.js';
import { heraldArgs } from '../support/cli.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

const run = promisify(execFile);
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ migrate: false });
});
afterAll(async () => t?.drop());

describe('migrations', () => {
  it('two `herald migrate` processes at once both succeed and apply each file once', async () => {
    const env = { ...process.env, DATABASE_URL: t.url, HERALD_SCHEMA: 'herald', HERALD_LOG_LEVEL: 'silent' };
    const cli = heraldArgs(['migrate']);
    const [a, b] = await Promise.all([
      run(process.execPath, cli, { env }),
      run(process.execPath, cli, { env }),
    ]);
    const outputs = [a.stdout, b.stdout].join('\n');
    const files = await readMigrations();
    expect(outputs).toContain('migrations applied');
    const { rows } = await t.db.query<{ id: number; name: string }>(
      'select id, name from migration order by id',
    );
    expect(rows.map((r) => r.name)).toEqual(files.map((f) => f.name));
    // Each file reported as applied by exactly one of the two processes.
    for (const file of files) {
      expect(outputs.split(file.name).length - 1).toBe(1);
    }
  });

  it('is idempotent and refuses an edited, already-applied migration', async () => {
    const again = await migrate({ url: t.url, schema: 'herald' });
    expect(again.applied).toEqual([]);

    const dir = await mkdtemp(join(tmpdir(), 'herald-migrations-'));
    const files = await readMigrations(MIGRATIONS_DIR);
    for (const file of files) await writeFile(join(dir, file.name), `${file.sql}\n-- edited`);
    await expect(migrate({ url: t.url, schema: 'herald', dir })).rejects.toThrow(
      /changed after it was applied/,
    );
  });

  it('--dry-run lists what would apply and writes nothing: not the schema, not a file, not a record', async () => {
    const env = {
      ...process.env,
      DATABASE_URL: t.url,
      HERALD_SCHEMA: 'herald_dry',
      HERALD_LOG_LEVEL: 'silent',
    };
    const files = await readMigrations();
    const cli = heraldArgs(['migrate', '--dry-run']);
    const fresh = await run(process.execPath, cli, { env });
    expect(fresh.stdout.trim()).toBe(
      `would apply: ${files.map((f) => f.name).join(', ')} (already applied: 0)`,
    );
    const schemas = await t.db.query<{ n: number }>(
      "select count(*)::int as n from information_schema.schemata where schema_name = 'herald_dry'",
    );
    expect(schemas.rows[0]!.n).toBe(0);

    // Partly applied (all but the last two): the dry run names exactly those two.
    const dir = await mkdtemp(join(tmpdir(), 'herald-migrations-'));
    for (const file of files.slice(0, -2)) await writeFile(join(dir, file.name), file.sql);
    await migrate({ url: t.url, schema: 'herald_dry', dir });
    const partly = await migrate({ url: t.url, schema: 'herald_dry', dryRun: true });
    expect(partly).toEqual({
      applied: [],
      pending: files.slice(-2).map((f) => f.name),
      alreadyApplied: files.length - 2,
    });
    const { rows } = await t.db.query<{ n: number }>('select count(*)::int as n from herald_dry.migration');
    expect(rows[0]!.n).toBe(files.length - 2);

    const bad = await run(process.execPath, heraldArgs(['migrate', '--dryrun']), {
      env,
    }).catch((error: { code: number; stderr: string }) => error);
    expect(bad).toMatchObject({ code: 2, stderr: expect.stringContaining('unknown option --dryrun') });
  });

  it('honours a configured schema name', async () => {
    const result = await migrate({ url: t.url, schema: 'herald_alt' });
    expect(result.applied.length).toBeGreaterThan(0);
    const { rows } = await t.db.query<{ n: number }>(
      "select count(*)::int as n from information_schema.tables where table_schema = 'herald_alt' and table_name = 'event'",
    );
    expect(rows[0]!.n).toBe(1);
  });
});
