/**
 * PostgreSQL connection pool and transactions. Every connection's search_path is the configured
 * schema, so query modules use unqualified table names. Driver errors become typed errors here:
 * lost connections → DatabaseUnavailableError; unique violations on the event stream →
 * ConcurrencyError (raised by the event store, which knows the stream). TLS comes from the URL's libpq
 * parameters (sslmode, sslrootcert, sslcert, sslkey; loadConfig writes the HERALD_DB_SSL* variables
 * into them, ADR 0015), with libpq's meaning of each sslmode.
 */
import { createHash } from 'node:crypto';
import type { ConnectionOptions } from 'node:tls';
import pg from 'pg';
import { ConfigError, DatabaseUnavailableError, HeraldError } from '../../errors.js';
import type {
  Database,
  OutboxPublisher,
  QueryResult,
  SqlClient,
  TransactionOptions,
} from '../../ports/database.js';
import type { ClaimedForPublish } from '../../ports/outbox.js';
import type { PostgresSslMode } from '../../settings/connections.js';
import { readTlsFiles } from '../tls-files.js';

// bigint (int8) columns arrive as strings by default; positions and ids stay well below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

/** SQLSTATEs after which the same transaction may simply be run again (graphile-worker's list). */
const RETRYABLE_SQLSTATES = new Set(['40001', '40P01', '57P03', '55P03']);
/** SQLSTATE classes that mean the connection or server went away. */
const UNAVAILABLE_CLASSES = ['08', '57'];
const UNAVAILABLE_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
]);

export function isRetryableSqlError(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && RETRYABLE_SQLSTATES.has(code);
}

export function isConnectionError(error: unknown): boolean {
  if (error instanceof DatabaseUnavailableError) return true;
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string') {
    if (UNAVAILABLE_ERRNOS.has(code)) return true;
    if (code.length === 5 && UNAVAILABLE_CLASSES.includes(code.slice(0, 2)) && code !== '57014') return true;
  }
  const message = error instanceof Error ? error.message : '';
  return /Connection terminated|connection timeout|Client has encountered a connection error/i.test(message);
}

export function translateDatabaseError(error: unknown): unknown {
  if (error instanceof HeraldError) return error;
  if (isConnectionError(error)) {
    return new DatabaseUnavailableError(`database unavailable: ${(error as Error).message}`, error);
  }
  return error;
}

/**
 * Parameterized statements are sent as named prepared statements: PostgreSQL parses and plans each
 * query text once per pooled connection instead of on every execution (about half of the server's
 * work for Herald's short statements). Names derive from the text, so every connection and process
 * agrees on them. (A transaction-pooling PgBouncer in front needs protocol-level prepared statement
 * support, 1.21 or later; HERALD_DB_PREPARE=false — `prepare: false` — turns this off.)
 */
const statementNames = new Map<string, string>();

function named(text: string, values: readonly unknown[] | undefined, prepare: boolean): pg.QueryConfig {
  if (!prepare || !values || values.length === 0) return { text, values: values as unknown[] | undefined };
  let name = statementNames.get(text);
  if (!name) {
    name = `herald_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
    statementNames.set(text, name);
  }
  return { name, text, values: values as unknown[] };
}

export interface DatabaseOptions {
  url: string;
  schema: string;
  poolSize?: number;
  applicationName?: string;
  /** Send parameterized statements as named prepared statements (default true). */
  prepare?: boolean;
}

const TLS_PARAMETERS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey', 'ssl', 'uselibpqcompat'];

/**
 * pg's `ssl` option from a URL's libpq TLS parameters, and the URL without them (pg would otherwise
 * apply its own reading of them over this option; it treats require and verify-ca as verify-full).
 * libpq's meanings: disable — plain text; require — encrypted, the server verified only when a CA is
 * given (then as verify-ca); verify-ca — the chain checked against the CA, not the host name;
 * verify-full — the chain and the host name (the system's CAs without sslrootcert). `ssl` is always set,
 * so the driver never falls back to PGSSLMODE from the environment.
 */
export function postgresTls(url: string): { connectionString: string; ssl: false | ConnectionOptions } {
  if (!TLS_PARAMETERS.some((name) => url.includes(`${name}=`))) return { connectionString: url, ssl: false };
  const parsed = new URL(url);
  const params = parsed.searchParams;
  const mode = (params.get('sslmode') ?? undefined) as PostgresSslMode | undefined;
  const files = {
    caPath: params.get('sslrootcert') ?? undefined,
    certPath: params.get('sslcert') ?? undefined,
    keyPath: params.get('sslkey') ?? undefined,
  };
  for (const name of TLS_PARAMETERS) params.delete(name);
  const connectionString = parsed.toString();
  if (mode === undefined || mode === 'disable') return { connectionString, ssl: false };
  const tls: ConnectionOptions = readTlsFiles(files, 'PostgreSQL');
  const skipHostName = { checkServerIdentity: () => undefined };
  switch (mode) {
    case 'require':
      return {
        connectionString,
        ssl: tls.ca ? { ...tls, ...skipHostName } : { ...tls, rejectUnauthorized: false },
      };
    case 'verify-ca':
      return { connectionString, ssl: { ...tls, ...skipHostName } };
    case 'verify-full':
      return { connectionString, ssl: tls };
    default: {
      const unknown: never = mode;
      throw new ConfigError('DATABASE_URL', `sslmode=${String(unknown)} is not supported`);
    }
  }
}

/** Connection settings shared by the pool and by dedicated clients (LISTEN, migrations). */
export function connectionConfig(options: DatabaseOptions): pg.ClientConfig {
  const { connectionString, ssl } = postgresTls(options.url);
  return {
    connectionString,
    ssl,
    options: `-c search_path=${options.schema},public`,
    application_name: options.applicationName ?? 'herald',
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
  };
}

/** `savepoint x`, `rollback to savepoint x`, `release savepoint x`: the in-process publish follows them. */
const SAVEPOINT_COMMAND =
  /^\s*(savepoint|rollback\s+to\s+savepoint|release\s+savepoint)\s+("?[\w$]+"?)\s*;?\s*$/i;

/**
 * The rows one transaction leased to this process's publisher (ADR 0024), with the savepoints that
 * could still take some of them back: a row written after a savepoint that is rolled back to never
 * existed, so it must never be published.
 */
class LeasedRows {
  readonly rows: ClaimedForPublish[] = [];
  private readonly savepoints: { name: string; count: number }[] = [];

  follow(text: string): void {
    const match = SAVEPOINT_COMMAND.exec(text);
    if (!match) return;
    const kind = match[1]!.toLowerCase().replace(/\s+/g, ' ');
    const name = match[2]!.replaceAll('"', '').toLowerCase();
    if (kind === 'savepoint') {
      this.savepoints.push({ name, count: this.rows.length });
      return;
    }
    const at = this.savepoints.findLastIndex((s) => s.name === name);
    if (at < 0) return;
    if (kind === 'release savepoint') {
      this.savepoints.length = at; // it and every savepoint set after it are gone; the rows stay
    } else {
      this.rows.length = this.savepoints[at]!.count; // the savepoint itself stays
      this.savepoints.length = at + 1;
    }
  }
}

class PgDatabase implements Database {
  private publisher: OutboxPublisher | undefined;

  constructor(
    private readonly pool: pg.Pool,
    readonly schema: string,
    private readonly prepare: boolean,
  ) {}

  publishOutboxInline(publisher: OutboxPublisher | undefined): void {
    this.publisher = publisher;
  }

  async query<Row>(text: string, values?: readonly unknown[]): Promise<QueryResult<Row>> {
    try {
      const result = await this.pool.query(named(text, values, this.prepare));
      return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 };
    } catch (error) {
      throw translateDatabaseError(error);
    }
  }

  async transaction<T>(work: (tx: SqlClient) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    const retry = options.retryOnConflict ?? true;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.runOnce(work);
      } catch (error) {
        if (retry && attempt < 5 && isRetryableSqlError(error)) continue;
        throw translateDatabaseError(error);
      }
    }
  }

  private async runOnce<T>(work: (tx: SqlClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: unknown;
    // pg-pool listens for 'error' only on idle clients: a connection lost mid-transaction would
    // otherwise be an uncaught exception. Record it, and destroy the client on release.
    const onError = (error: Error) => {
      broken = error;
    };
    client.on('error', onError);
    // BEGIN goes with the transaction's first statement: in one round trip when that statement has no
    // parameters (a simple query of both, as the command handler's `select now()` is), else just before
    // it. A transaction that runs no statement sends neither BEGIN nor COMMIT.
    let begun: Promise<unknown> | null = null;
    const publisher = this.publisher;
    const leased = publisher ? new LeasedRows() : undefined;
    try {
      const prepare = this.prepare;
      const tx: SqlClient = {
        ...(publisher && leased
          ? {
              inlineOutbox: {
                owner: publisher.owner,
                leaseSeconds: publisher.leaseSeconds,
                sinks: publisher.sinks,
                get accepting() {
                  return publisher.accepting;
                },
                add: (rows: readonly ClaimedForPublish[]) => leased.rows.push(...rows),
              },
            }
          : {}),
        async query<Row>(text: string, values?: readonly unknown[]) {
          if (leased && (!values || values.length === 0)) leased.follow(text);
          if (begun === null) {
            if (!values || values.length === 0) {
              const merged = client.query(`begin; ${text}`) as unknown as Promise<pg.QueryResult[]>;
              begun = merged;
              const results = await merged;
              const result = results[results.length - 1]!;
              return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 };
            }
            begun = client.query('begin');
          }
          // Statements issued meanwhile wait for BEGIN too, and go in the order they were issued.
          await begun;
          const result = await client.query(named(text, values, prepare));
          return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 };
        },
      };
      const result = await work(tx);
      // COMMIT of a transaction a caught error aborted answers ROLLBACK: its rows never existed.
      const committed = begun === null || (await client.query('commit')).command === 'COMMIT';
      if (committed && publisher && leased && leased.rows.length > 0) publisher.publish(leased.rows);
      return result;
    } catch (error) {
      try {
        if (begun !== null) await client.query('rollback');
      } catch (rollbackError) {
        broken = rollbackError;
      }
      throw error;
    } finally {
      // A client whose connection failed or whose rollback failed is in an unknown state: destroy it.
      client.removeListener('error', onError);
      client.release(broken instanceof Error ? broken : undefined);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

export function createDatabase(options: DatabaseOptions): Database {
  const pool = new pg.Pool({ ...connectionConfig(options), max: options.poolSize ?? 10 });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  return new PgDatabase(pool, options.schema, options.prepare ?? true);
}

/** A dedicated client outside the pool (migrations, advisory locks held across statements). */
export async function connectClient(options: DatabaseOptions): Promise<pg.Client> {
  const client = new pg.Client(connectionConfig(options));
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (error) {
    throw translateDatabaseError(error);
  }
  return client;
}
