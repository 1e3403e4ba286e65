/**
 * The database part of a `/metrics` scrape (src/observability/metrics.ts): the outbox backlog and dead
 * rows per sink, lease ages and projection lag, read in one round of indexed queries that gives up
 * after SCRAPE_QUERY_TIMEOUT_MS, so a slow database costs the scrape its database series, never the
 * scrape. Nothing here decides anything (it observes).
 */
import {
  leaseAges,
  outboxBacklog,
  outboxDead,
  projectionLag,
} from '../adapters/postgres/observability-queries.js';
import type { DatabaseSample, DatabaseSource } from '../observability/metrics.js';
import type { SqlClient } from '../ports/database.js';
import type { ProjectionSource } from '../projections/projection.js';

/** A scrape's database queries give up after this long (Prometheus' default scrape timeout is 10 s). */
const SCRAPE_QUERY_TIMEOUT_MS = 3_000;

export function databaseSource(
  db: SqlClient,
  checkpoints: () => readonly { name: string; projection: string; source: ProjectionSource }[],
): DatabaseSource {
  return { sample: () => readSample(db, checkpoints()) };
}

async function readSample(
  db: SqlClient,
  checkpoints: readonly { name: string; projection: string; source: ProjectionSource }[],
): Promise<DatabaseSample | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer within ${SCRAPE_QUERY_TIMEOUT_MS} ms`)),
      SCRAPE_QUERY_TIMEOUT_MS,
    );
  });
  try {
    const [outbox, dead, leases, lag] = await Promise.race([
      Promise.all([outboxBacklog(db), outboxDead(db), leaseAges(db), projectionLag(db, checkpoints)]),
      timeout,
    ]);
    const projectionOf = new Map(checkpoints.map((c) => [c.name, c.projection]));
    return {
      outbox,
      dead,
      leases,
      projections: lag.map((row) => ({ ...row, projection: projectionOf.get(row.name) ?? row.name })),
    };
  } catch {
    return null;
  } finally {
    clearTimeout(timer);
  }
}
