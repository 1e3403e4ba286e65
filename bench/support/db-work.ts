/**
 * What a measured stretch cost the database (issue 22, item 3: writes per item): WAL bytes written
 * (the cluster's `pg_current_wal_lsn()` moved; the benchmarks run on services of their own, so nothing
 * else writes) and, when `pg_stat_statements` is loaded (scripts/services preloads it), the statements
 * executed in the benchmark's database; and the transactions committed there (`pg_stat_database`,
 * implicit single-statement transactions included, which send no COMMIT). Statement counters move as
 * each statement ends; a backend publishes its commit count when it goes idle (at most once a second)
 * or exits, so read `since()` after the measured processes stopped (a few setup commits published late
 * may land in the figure: noise of well under 0.01 per item at benchmark sizes).
 */
import type { Database } from '../../src/ports/database.js';

export interface DatabaseWork {
  walBytes: number;
  /** Statements executed in the database, COMMIT included (NaN without pg_stat_statements). */
  statements: number;
  /** Transactions committed in the database. */
  commits: number;
}

interface Counters {
  lsn: string;
  statements: number;
  commits: number;
}

async function counters(db: Database): Promise<Counters> {
  const { rows } = await db.query<{ lsn: string; commits: string }>(
    `select pg_current_wal_lsn()::text as lsn, xact_commit::text as commits
       from pg_stat_database where datname = current_database()`,
  );
  let statements = Number.NaN;
  try {
    const s = await db.query<{ calls: string | null }>(
      `select sum(calls)::text as calls from pg_stat_statements
        where dbid = (select oid from pg_database where datname = current_database())`,
    );
    statements = Number(s.rows[0]!.calls ?? 0);
  } catch {
    // pg_stat_statements not loaded
  }
  return { lsn: rows[0]!.lsn, statements, commits: Number(rows[0]!.commits) };
}

/** Starts measuring; `since()` gives what the database did since. */
export async function databaseWork(db: Database) {
  await db.query('create extension if not exists pg_stat_statements').catch(() => {});
  const start = await counters(db);
  return {
    async since(): Promise<DatabaseWork> {
      const end = await counters(db);
      const { rows } = await db.query<{ bytes: string }>(
        'select pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::text as bytes',
        [end.lsn, start.lsn],
      );
      return {
        walBytes: Number(rows[0]!.bytes),
        statements: end.statements - start.statements,
        commits: end.commits - start.commits,
      };
    },
  };
}

/** `WAL 1.23 kB, 0.04 commits, 9.10 statements per item` */
export function describeWork(work: DatabaseWork, items: number): string {
  const per = (v: number) => (v / items).toFixed(2);
  return (
    `WAL ${(work.walBytes / items / 1024).toFixed(2)} kB, ${per(work.commits)} commits, ` +
    (Number.isNaN(work.statements)
      ? 'statements unknown (pg_stat_statements not loaded)'
      : `${per(work.statements)} statements`) +
    ' per item'
  );
}
