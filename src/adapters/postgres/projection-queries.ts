/**
 * Projection checkpoint and table queries for the asynchronous projector (src/projections/). A
 * checkpoint is the (tx, position) of the last log entry a projection applied; it is read FOR UPDATE
 * and advanced in the SAME transaction as the projection's writes, guarded by the value it was read
 * with, so a batch is applied exactly once however many projector replicas run or restart.
 *
 * Rebuilds write into a shadow table (`<table>_rebuild`, created LIKE the live one) under shadow
 * checkpoints, then swap it in: drop the live table, rename the shadow, rename its indexes back to the
 * live names, and move the shadow checkpoints onto the live ones, all in one transaction that holds the
 * live checkpoints' row locks (so no live batch interleaves). Table names come from projections'
 * constants, never from input; they are still checked as plain identifiers.
 */
import { IllegalStateError } from '../../errors.js';
import type { SqlClient } from '../../ports/database.js';
import type { LogCursor } from '../../ports/events.js';

export const ENSURE_CHECKPOINT = `
  insert into projection_checkpoint (name) values ($1) on conflict (name) do nothing`;

export const LOCK_CHECKPOINT = `
  select last_tx::text as last_tx, last_position from projection_checkpoint where name = $1 for update`;

export const ADVANCE_CHECKPOINT = `
  update projection_checkpoint
     set last_tx = $4::xid8, last_position = $5, updated_at = now()
   where name = $1 and last_tx = $2::xid8 and last_position = $3`;

export const RESET_CHECKPOINTS = `
  insert into projection_checkpoint (name) select unnest($1::text[])
  on conflict (name) do update set last_tx = '0'::xid8, last_position = 0, updated_at = now()`;

export const DELETE_CHECKPOINTS = `delete from projection_checkpoint where name = any($1::text[])`;

export const SELECT_CHECKPOINTS = `
  select name, last_tx::text as last_tx, last_position, updated_at from projection_checkpoint order by name`;

/** Entries committed after a checkpoint, not yet applied (for `herald projections status`). */
export const EVENTS_AFTER = `select count(*) as n from event where (tx, position) > ($1::xid8, $2::bigint)`;
export const RECEIPTS_AFTER = `select count(*) as n from publish_receipt where (tx, id) > ($1::xid8, $2::bigint)`;

export const LIST_TABLE_INDEXES = `
  select indexname from pg_indexes where schemaname = current_schema() and tablename = $1 order by indexname`;

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

function identifier(name: string): string {
  if (!IDENTIFIER.test(name)) throw new IllegalStateError(`not a plain SQL identifier: ${name}`);
  return `"${name}"`;
}

export const createShadowTable = (live: string, shadow: string) =>
  `create table ${identifier(shadow)} (like ${identifier(live)} including all)`;
export const dropTable = (table: string) => `drop table if exists ${identifier(table)}`;
export const renameTable = (from: string, to: string) =>
  `alter table ${identifier(from)} rename to ${identifier(to)}`;
export const renameIndex = (from: string, to: string) =>
  `alter index ${identifier(from)} rename to ${identifier(to)}`;

export async function ensureCheckpoint(sql: SqlClient, name: string): Promise<void> {
  await sql.query(ENSURE_CHECKPOINT, [name]);
}

/** Locks the checkpoint row for this transaction; null when it does not exist. */
export async function lockCheckpoint(sql: SqlClient, name: string): Promise<LogCursor | null> {
  const { rows } = await sql.query<{ last_tx: string; last_position: number }>(LOCK_CHECKPOINT, [name]);
  const row = rows[0];
  return row ? { tx: row.last_tx, position: row.last_position } : null;
}

/** Moves the checkpoint from `from` to `to`; false when it was not at `from` any more. */
export async function advanceCheckpoint(
  sql: SqlClient,
  name: string,
  from: LogCursor,
  to: LogCursor,
): Promise<boolean> {
  const { rowCount } = await sql.query(ADVANCE_CHECKPOINT, [
    name,
    from.tx,
    from.position,
    to.tx,
    to.position,
  ]);
  return rowCount === 1;
}

export async function resetCheckpoints(sql: SqlClient, names: readonly string[]): Promise<void> {
  await sql.query(RESET_CHECKPOINTS, [names]);
}

export async function deleteCheckpoints(sql: SqlClient, names: readonly string[]): Promise<void> {
  await sql.query(DELETE_CHECKPOINTS, [names]);
}

export interface CheckpointRow {
  name: string;
  cursor: LogCursor;
  updatedAt: Date;
}

export async function listCheckpoints(sql: SqlClient): Promise<CheckpointRow[]> {
  const { rows } = await sql.query<{
    name: string;
    last_tx: string;
    last_position: number;
    updated_at: Date;
  }>(SELECT_CHECKPOINTS);
  return rows.map((row) => ({
    name: row.name,
    cursor: { tx: row.last_tx, position: row.last_position },
    updatedAt: row.updated_at,
  }));
}

/** Drops any leftover shadow table and creates it afresh, LIKE the live table (columns, defaults, keys, indexes). */
export async function recreateShadowTable(sql: SqlClient, live: string, shadow: string): Promise<void> {
  await sql.query(dropTable(shadow));
  await sql.query(createShadowTable(live, shadow));
}

/** Replaces the live table with the shadow one; the shadow's indexes take the live table's prefix. */
export async function swapShadowTable(sql: SqlClient, live: string, shadow: string): Promise<void> {
  await sql.query(dropTable(live));
  await sql.query(renameTable(shadow, live));
  const { rows } = await sql.query<{ indexname: string }>(LIST_TABLE_INDEXES, [live]);
  for (const { indexname } of rows) {
    if (indexname.startsWith(shadow)) {
      await sql.query(renameIndex(indexname, `${live}${indexname.slice(shadow.length)}`));
    }
  }
}

/** How many entries of a source lie after a checkpoint (the projection's lag). */
export async function countAfter(
  sql: SqlClient,
  source: 'events' | 'receipts',
  cursor: LogCursor,
): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(source === 'events' ? EVENTS_AFTER : RECEIPTS_AFTER, [
    cursor.tx,
    cursor.position,
  ]);
  return rows[0]?.n ?? 0;
}
