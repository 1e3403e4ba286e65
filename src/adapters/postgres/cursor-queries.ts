/**
 * Server-side cursors for reads that must not hold a whole result in memory (verify, the point-in-time
 * sandbox, export): DECLARE once, FETCH a batch at a time, CLOSE. One plan and one scan however large
 * the log, instead of keyset pages that descend the index again for every page. Used inside a
 * transaction the caller owns; with `SNAPSHOT_READ_ONLY` first, every batch (and any look-up the
 * caller makes between batches) sees the same snapshot, so events and state rows written together
 * (invariant 1) are read together.
 */
import { ValidationError } from '../../errors.js';
import type { SqlClient } from '../../ports/database.js';

/** Must be the first statement of the transaction. Takes no xid: it never holds back pg_snapshot_xmin. */
export const SNAPSHOT_READ_ONLY = 'set transaction isolation level repeatable read, read only';
/** One snapshot for a transaction that writes (the sandbox). */
export const SNAPSHOT_READ_WRITE = 'set transaction isolation level repeatable read';

const CURSOR_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export const declareCursor = (name: string, query: string) => `declare ${name} no scroll cursor for ${query}`;
export const fetchCursor = (name: string, count: number) => `fetch forward ${count} from ${name}`;
export const closeCursor = (name: string) => `close ${name}`;

/**
 * Runs `query` as a cursor in `tx` and hands its rows to `handle` `batchSize` at a time, in order.
 * `handle` may use `tx` between batches (the cursor stays open).
 */
export async function forEachBatch<Row>(
  tx: SqlClient,
  cursor: { name: string; query: string; params: readonly unknown[]; batchSize: number },
  handle: (rows: Row[]) => Promise<void> | void,
): Promise<void> {
  if (!CURSOR_NAME.test(cursor.name)) throw new ValidationError(`invalid cursor name ${cursor.name}`);
  if (!Number.isInteger(cursor.batchSize) || cursor.batchSize < 1) {
    throw new ValidationError(`invalid cursor batch size ${cursor.batchSize}`);
  }
  await tx.query(declareCursor(cursor.name, cursor.query), cursor.params);
  for (;;) {
    const { rows } = await tx.query<Row>(fetchCursor(cursor.name, cursor.batchSize));
    if (rows.length === 0) break;
    await handle(rows);
    if (rows.length < cursor.batchSize) break;
  }
  await tx.query(closeCursor(cursor.name));
}
