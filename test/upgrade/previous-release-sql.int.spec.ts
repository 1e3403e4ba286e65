/**
 * Expand/contract, checked (ADR 0039): every statement a released version issues (its snapshot in
 * test/upgrade/release-sql/, taken by `npm run upgrade:capture-sql`) still parses and plans against a
 * database migrated to HEAD — that release's pods keep running beside this one's during a rollout, so a
 * migration that drops, renames or retypes what they use would break them mid-upgrade.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { type PrepareFailure, prepareAll, type ReleaseSql, SNAPSHOT_DIR } from './release-sql.js';

const snapshots = readdirSync(SNAPSHOT_DIR)
  .filter((f) => f.endsWith('.json'))
  .map((f) => JSON.parse(readFileSync(join(SNAPSHOT_DIR, f), 'utf8')) as ReleaseSql);

const describeFailures = (failures: readonly PrepareFailure[]) =>
  failures.map((f) => `${f.source}: ${f.error}\n    ${f.sql.replace(/\s+/g, ' ').slice(0, 160)}`).join('\n');

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

describe('the previous releases’ SQL against the schema at HEAD', () => {
  it('has a snapshot to check', () => {
    expect(snapshots.length).toBeGreaterThan(0);
  });

  for (const snapshot of snapshots) {
    it(`every statement of release ${snapshot.version} prepares (${snapshot.statements.length} statements)`, async () => {
      const failures = await t.db.transaction((tx) => prepareAll(tx, snapshot.statements));
      expect(failures, describeFailures(failures)).toEqual([]);
    });
  }

  it('fails, naming the statements, when a migration drops or renames a column the release reads', async () => {
    const latest = snapshots.at(-1)!;
    // What a contract step shipped too early would do, inside a transaction that is rolled back.
    const check = (ddl: string) =>
      t.db
        .transaction(async (tx) => {
          await tx.query(ddl);
          const failures = await prepareAll(tx, latest.statements);
          throw Object.assign(new Error('rollback'), { failures });
        })
        .catch((error: { failures?: PrepareFailure[] }) => {
          if (!error.failures) throw error;
          return error.failures;
        });
    const dropped = await check('alter table event drop column meta');
    const append = dropped.find((f) => /^insert into event \(/.test(f.sql.trim()));
    expect(append?.source).toMatch(/^src\/adapters\/postgres\/event-queries\.ts:\d+$/);
    expect(append?.error).toMatch(/column "meta"/);
    const renamed = await check('alter table outbox rename column last_error to error');
    expect(renamed.length).toBeGreaterThan(0);
    expect(renamed.every((f) => /last_error/.test(f.error))).toBe(true);
    // A retyping is caught where a statement's types no longer fit (not every retyping is: the lint in
    // migration-rules.unit.spec.ts refuses them outright in an expand migration).
    const retyped = await check('alter table event alter column data type text');
    expect(retyped.map((f) => f.error)).toContain('operator does not exist: text ->> unknown');
  });
});
