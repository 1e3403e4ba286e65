/**
 * A Database whose transactions join an outer transaction the caller owns (the HTTP API runs each
 * request's commands, and its Idempotency-Key row, in one transaction: invariant 1 across the whole
 * request). `transaction(work)` runs `work` inside a SAVEPOINT of the outer transaction: a failure
 * rolls back only to the savepoint (so the library's own retry of a command after a ConcurrencyError,
 * or its look-up after a unique violation, still works), and nothing commits until the outer
 * transaction does. Serialization failures and deadlocks are not retried here: they abort the outer
 * transaction, which Database#transaction retries as a whole.
 */
import type { Database, QueryResult, SqlClient } from '../../ports/database.js';

export function joinedDatabase(tx: SqlClient, schema: string): Database {
  let depth = 0;
  return {
    schema,
    query<Row>(text: string, values?: readonly unknown[]): Promise<QueryResult<Row>> {
      return tx.query<Row>(text, values);
    },
    async transaction<T>(work: (inner: SqlClient) => Promise<T>): Promise<T> {
      const name = `herald_joined_${++depth}`;
      await tx.query(`savepoint ${name}`);
      try {
        const result = await work(tx);
        await tx.query(`release savepoint ${name}`);
        return result;
      } catch (error) {
        // A connection that failed cannot roll back; the outer transaction fails with the first error.
        await tx.query(`rollback to savepoint ${name}`).catch(() => {});
        throw error;
      } finally {
        depth--;
      }
    },
    async close() {
      // The outer transaction's owner closes the pool.
    },
  };
}
