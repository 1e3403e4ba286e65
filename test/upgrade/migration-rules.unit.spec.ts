/**
 * Every migration not yet shipped in a release (newer than the last snapshot's list) keeps the expand
 * rules (ADR 0039): it never breaks the previous release, which runs beside it during a rollout.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { migrationViolations } from './migration-rules.js';
import { type ReleaseSql, ROOT, SNAPSHOT_DIR } from './release-sql.js';

const released = new Set(
  readdirSync(SNAPSHOT_DIR)
    .filter((f) => f.endsWith('.json'))
    .flatMap((f) => (JSON.parse(readFileSync(join(SNAPSHOT_DIR, f), 'utf8')) as ReleaseSql).migrations),
);
const migrations = readdirSync(join(ROOT, 'migrations'))
  .filter((f) => f.endsWith('.sql'))
  .sort();
const unreleased = migrations.filter((f) => !released.has(f));

describe('migration rules: expand now, contract a release later', () => {
  it('knows which migrations are released (the snapshot lists them)', () => {
    expect(released.size).toBeGreaterThan(0);
    for (const name of released) expect(migrations).toContain(name);
  });

  for (const name of unreleased) {
    it(`${name} only expands (or is a declared contract step)`, () => {
      const sql = readFileSync(join(ROOT, 'migrations', name), 'utf8');
      expect(migrationViolations(sql)).toEqual([]);
    });
  }

  it.each([
    ['alter table event drop column meta;', 'drops a column'],
    ['alter table outbox drop column if exists last_error, add column error text;', 'drops a column'],
    ['drop table inbox;', 'drops a table or view'],
    ['alter table outbox rename column last_error to error;', 'renames'],
    ['alter table outbox rename to outbox_v2;', 'renames'],
    ['alter table event alter column data type text;', "changes a column's type"],
    ['alter table event alter column data set data type text;', "changes a column's type"],
    ['alter table outbox alter column broker_ref set not null;', 'sets a column not null'],
    [
      'alter table event add column schema_version smallint not null;',
      'adds a not null column without a default',
    ],
  ])('refuses %s (%s)', (sql, rule) => {
    expect(migrationViolations(sql).map((v) => v.rule)).toEqual([rule]);
  });

  it.each([
    'alter table event add column schema_version smallint not null default 1;',
    'alter table outbox add column note text;',
    'create index concurrently if not exists outbox_note_idx on outbox (note);',
    "-- the previous release's drop column is not this one's\ncreate table x (id int primary key);",
    'alter table api_session alter column key_id drop not null;',
    'alter table x add column y bigint generated always as identity not null;',
  ])('accepts %s', (sql) => {
    expect(migrationViolations(sql)).toEqual([]);
  });

  it('accepts anything in a migration declared as a contract step on its first line', () => {
    expect(
      migrationViolations(
        '-- contract: outbox.last_error, unused since 0.2.0\nalter table outbox drop column last_error;',
      ),
    ).toEqual([]);
  });
});
