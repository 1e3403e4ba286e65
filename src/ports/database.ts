/**
 * The SQL seam (pg-boss's `executeSql` idea): everything that writes inside a transaction takes a
 * `SqlClient`, so the outbox writer and command handler enlist the caller's transaction rather than
 * opening their own (invariant 1). Implemented by src/adapters/postgres/database.ts.
 */
import type { ClaimedForPublish, Sink } from './outbox.js';
export interface QueryResult<Row> {
  rows: Row[];
  rowCount: number;
}

export interface SqlClient {
  query<Row = Record<string, unknown>>(text: string, values?: readonly unknown[]): Promise<QueryResult<Row>>;
  /**
   * Inside a transaction of a process that publishes its own outbox rows after commit (ADR 0024): where
   * the outbox writer leases them. Absent: the rows wait for a relay.
   */
  readonly inlineOutbox?: InlineOutbox;
}

/**
 * The in-process publish of one transaction (ADR 0024): rows written leased to this process are handed
 * to its publisher once the transaction commits, and forgotten when it (or the savepoint they were
 * written in) rolls back. A row this process never marks returns to the relays when its lease ends.
 */
export interface InlineOutbox {
  /** `locked_by` of the leased rows. */
  readonly owner: string;
  readonly leaseSeconds: number;
  /** The sinks this process publishes to; rows for others wait for a relay. */
  readonly sinks: readonly Sink[];
  /** False while this process has its whole publishing budget in flight: new rows wait for a relay. */
  readonly accepting: boolean;
  /** Rows this transaction inserted leased to `owner`. */
  add(rows: readonly ClaimedForPublish[]): void;
}

/** Publishes the leased rows of committed transactions (the relay's publish-and-mark path, ADR 0024). */
export interface OutboxPublisher {
  readonly owner: string;
  readonly leaseSeconds: number;
  readonly sinks: readonly Sink[];
  readonly accepting: boolean;
  publish(rows: ClaimedForPublish[]): void;
}

export interface TransactionOptions {
  /** Retry the whole transaction on serialization failure / deadlock (40001, 40P01). Default true. */
  retryOnConflict?: boolean;
}

export interface Database extends SqlClient {
  readonly schema: string;
  /** From now on, transactions lease the outbox rows they write to `publisher`, which publishes them after commit. */
  publishOutboxInline?(publisher: OutboxPublisher | undefined): void;
  /** Runs `work` in one transaction: commit on success, roll back on any throw. */
  transaction<T>(work: (tx: SqlClient) => Promise<T>, options?: TransactionOptions): Promise<T>;
  close(): Promise<void>;
}
