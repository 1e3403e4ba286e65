/**
 * The SQL seam (pg-boss's `executeSql` idea): everything that writes inside a transaction takes a
 * `SqlClient`, so the outbox writer and command handler enlist the caller's transaction rather than
 * opening their own (invariant 1). Implemented by src/adapters/postgres/database.ts.
 */
export interface QueryResult<Row> {
  rows: Row[];
  rowCount: number;
}

export interface SqlClient {
  query<Row = Record<string, unknown>>(text: string, values?: readonly unknown[]): Promise<QueryResult<Row>>;
}

export interface TransactionOptions {
  /** Retry the whole transaction on serialization failure / deadlock (40001, 40P01). Default true. */
  retryOnConflict?: boolean;
}

export interface Database extends SqlClient {
  readonly schema: string;
  /** Runs `work` in one transaction: commit on success, roll back on any throw. */
  transaction<T>(work: (tx: SqlClient) => Promise<T>, options?: TransactionOptions): Promise<T>;
  close(): Promise<void>;
}
