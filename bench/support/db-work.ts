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
  /**
   * Statements executed in the database, COMMIT included (NaN without pg_stat_statements, or when it
   * evicted entries meanwhile: raise `pg_stat_statements.max`).
   */
  statements: number;
  /** Transactions committed in the database. */
  commits: number;
  /**
   * The WAL of the stretch by relation (`databaseWork(db, { byRelation: true })`, pg_walinspect): each
   * record counted against the relation of its first block reference, largest first.
   */
  byRelation?: WalOfRelation[];
}

export interface WalOfRelation {
  /** The relation's name, `(other)` for records without a block (commits, …) or of another database. */
  relation: string;
  records: number;
  /** Record lengths, full-page images included. */
  bytes: number;
  /** Of which full-page images. */
  fpiBytes: number;
}

interface Counters {
  lsn: string;
  statements: number;
  /** Times pg_stat_statements evicted entries (their calls leave the sums). */
  dealloc: number;
  commits: number;
}

async function counters(db: Database): Promise<Counters> {
  const { rows } = await db.query<{ lsn: string; commits: string }>(
    `select pg_current_wal_lsn()::text as lsn, xact_commit::text as commits
       from pg_stat_database where datname = current_database()`,
  );
  let statements = Number.NaN;
  let dealloc = 0;
  try {
    const s = await db.query<{ calls: string | null; dealloc: string }>(
      `select (select sum(calls) from pg_stat_statements
                where dbid = (select oid from pg_database where datname = current_database()))::text as calls,
              (select dealloc from pg_stat_statements_info)::text as dealloc`,
    );
    statements = Number(s.rows[0]!.calls ?? 0);
    dealloc = Number(s.rows[0]!.dealloc);
  } catch {
    // pg_stat_statements not loaded
  }
  return { lsn: rows[0]!.lsn, statements, dealloc, commits: Number(rows[0]!.commits) };
}

/**
 * The WAL between two LSNs by relation. The records are read back from pg_wal by pg_walinspect
 * (PostgreSQL 15+, superuser); the slot `databaseWork` holds meanwhile keeps them from being recycled.
 */
async function walByRelation(db: Database, from: string, to: string): Promise<WalOfRelation[]> {
  const { rows } = await db.query<{ relation: string; records: string; bytes: string; fpi_bytes: string }>(
    `select coalesce(pg_filenode_relation(0, (substring(block_ref from 'rel \\d+/\\d+/(\\d+)'))::oid)::regclass::text,
                     '(other)') as relation,
            count(*)::text as records, sum(record_length)::text as bytes, sum(fpi_length)::text as fpi_bytes
       from pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)
      group by 1
      order by sum(record_length) desc`,
    [from, to],
  );
  return rows.map((r) => ({
    relation: r.relation,
    records: Number(r.records),
    bytes: Number(r.bytes),
    fpiBytes: Number(r.fpi_bytes),
  }));
}

/**
 * Starts measuring; `since()` gives what the database did since. `byRelation`: also break the WAL down
 * by relation (a physical replication slot reserves the WAL until `since()` has read it).
 */
export async function databaseWork(db: Database, options: { byRelation?: boolean } = {}) {
  // Every database the benchmark created (one per run) keeps its entries: start from none, so this
  // run's statements do not push out each other (the benchmarks' services are their own).
  await db
    .query('create extension if not exists pg_stat_statements')
    .then(() => db.query('select pg_stat_statements_reset()'))
    .catch(() => {});
  const slot = `bench_wal_${process.pid}_${Date.now()}`;
  if (options.byRelation) {
    await db.query('create extension if not exists pg_walinspect');
    // A benchmark killed before since() leaves its slot behind, holding WAL: drop such leftovers first
    // (these slots are never active; one benchmark runs per services instance).
    await db.query(
      `select pg_drop_replication_slot(slot_name) from pg_replication_slots
        where slot_name like 'bench\\_wal\\_%' and not active`,
    );
    await db.query('select pg_create_physical_replication_slot($1, true)', [slot]);
  }
  const start = await counters(db);
  return {
    async since(): Promise<DatabaseWork> {
      const end = await counters(db);
      const { rows } = await db.query<{ bytes: string }>(
        'select pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::text as bytes',
        [end.lsn, start.lsn],
      );
      let byRelation: WalOfRelation[] | undefined;
      if (options.byRelation) {
        try {
          byRelation = await walByRelation(db, start.lsn, end.lsn);
        } finally {
          await db.query('select pg_drop_replication_slot($1)', [slot]);
        }
      }
      return {
        ...(byRelation ? { byRelation } : {}),
        walBytes: Number(rows[0]!.bytes),
        // Entries evicted in between take their calls with them: the difference would be wrong.
        statements: end.dealloc === start.dealloc ? end.statements - start.statements : Number.NaN,
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

/** One line per relation: `  outbox: 812 B (0 B full pages), 2.96 records per item`. */
export function describeWalByRelation(work: DatabaseWork, items: number): string[] {
  return (work.byRelation ?? []).map(
    (r) =>
      `  ${r.relation}: ${Math.round(r.bytes / items)} B (${Math.round(r.fpiBytes / items)} B full pages), ` +
      `${(r.records / items).toFixed(2)} records per item`,
  );
}
