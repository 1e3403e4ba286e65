/**
 * Forward-only migrations: numbered SQL files in migrations/ (000001_name.sql, …), applied in order,
 * each in its own transaction, recorded in `<schema>.migration`. A session-level advisory lock keyed
 * on the schema serializes concurrent `herald migrate` runs (several pods starting at once), so each
 * file is applied exactly once and every runner returns success. A dry run writes nothing (not even
 * the schema or the migration table) and lists what would apply, after the same checksum checks.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { HeraldError } from '../../errors.js';
import { packageRoot } from '../../package-root.js';
import { connectClient, translateDatabaseError } from './database.js';

export const MIGRATIONS_DIR = join(packageRoot(), 'migrations');

const SQL = {
  lock: 'select pg_advisory_lock(hashtext($1))',
  unlock: 'select pg_advisory_unlock(hashtext($1))',
  createSchema: (schema: string) => `create schema if not exists "${schema}"`,
  createTable: `create table if not exists migration (
      id integer primary key,
      name text not null,
      checksum text not null,
      applied_at timestamptz not null default now())`,
  applied: 'select id, name, checksum from migration order by id',
  tableExists: `select to_regclass(format('%I.migration', $1::text)) is not null as exists`,
  record: 'insert into migration (id, name, checksum) values ($1, $2, $3)',
} as const;

export interface MigrationFile {
  id: number;
  name: string;
  sql: string;
  checksum: string;
}

export interface MigrationResult {
  /** Applied by this run (a dry run: none). */
  applied: string[];
  /** A dry run: what would apply, in order (otherwise empty). */
  pending: string[];
  alreadyApplied: number;
}

export async function readMigrations(dir = MIGRATIONS_DIR): Promise<MigrationFile[]> {
  const files = (await readdir(dir)).filter((file) => /^\d{6}_[a-z0-9_]+\.sql$/.test(file)).sort();
  const migrations: MigrationFile[] = [];
  for (const [index, file] of files.entries()) {
    const id = Number(file.slice(0, 6));
    if (id !== index + 1) {
      throw new HeraldError(
        'VALIDATION_FAILED',
        `migration ${file} is out of sequence: expected ${index + 1}`,
      );
    }
    const sql = await readFile(join(dir, file), 'utf8');
    migrations.push({ id, name: file, sql, checksum: createHash('sha256').update(sql).digest('hex') });
  }
  return migrations;
}

export async function migrate(options: {
  url: string;
  schema: string;
  dir?: string;
  dryRun?: boolean;
}): Promise<MigrationResult> {
  const migrations = await readMigrations(options.dir);
  const client = await connectClient({
    url: options.url,
    schema: options.schema,
    applicationName: 'herald-migrate',
  });
  const lockKey = `herald.migrate.${options.schema}`;
  try {
    await client.query(SQL.lock, [lockKey]);
    try {
      const dryRun = options.dryRun ?? false;
      const hasTable = (await client.query(SQL.tableExists, [options.schema])).rows[0].exists as boolean;
      if (!dryRun) {
        await client.query(SQL.createSchema(options.schema));
        await client.query(SQL.createTable);
      }
      const done = new Map<number, { name: string; checksum: string }>();
      if (hasTable || !dryRun) {
        for (const row of (await client.query(SQL.applied)).rows) done.set(row.id, row);
      }
      const applied: string[] = [];
      const pending: string[] = [];
      for (const migration of migrations) {
        const previous = done.get(migration.id);
        if (previous) {
          if (previous.checksum !== migration.checksum) {
            throw new HeraldError(
              'VALIDATION_FAILED',
              `migration ${migration.name} was changed after it was applied (forward-only: add a new file instead)`,
            );
          }
          continue;
        }
        if (dryRun) {
          pending.push(migration.name);
          continue;
        }
        await client.query('begin');
        try {
          await client.query(migration.sql);
          await client.query(SQL.record, [migration.id, migration.name, migration.checksum]);
          await client.query('commit');
        } catch (error) {
          await client.query('rollback');
          throw new HeraldError(
            'DATABASE_ERROR',
            `migration ${migration.name} failed: ${(error as Error).message}`,
          );
        }
        applied.push(migration.name);
      }
      return { applied, pending, alreadyApplied: migrations.length - applied.length - pending.length };
    } finally {
      await client.query(SQL.unlock, [lockKey]);
    }
  } catch (error) {
    throw translateDatabaseError(error);
  } finally {
    await client.end();
  }
}
