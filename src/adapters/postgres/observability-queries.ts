/**
 * What a scrape of `/metrics` and a `/readyz` probe read from PostgreSQL (src/observability/). Each
 * statement is cheap whatever the backlog, because every role's endpoint runs them on every scrape:
 * - the outbox backlog per sink reads only the partial index of pending rows (no heap scan of sent
 *   rows, whatever the retention keeps); dead rows and the ordered keys they park, only the partial
 *   index of dead rows (rare by design: maintenance re-queues them);
 * - lease ages read the `lease` table (one row per projection, a handful in all);
 * - a projection's lag is one index descent per checkpoint: the first event (or receipt) after the
 *   checkpoint in (tx, position) order, on event_tx_position_idx / publish_receipt's primary key.
 * Ages come from the database clock (invariant 6), never a pod's.
 */
import type { SqlClient } from '../../ports/database.js';

export const PING = 'select 1 as ok';

/** Pending outbox rows per sink and the age of the oldest (ordered rows waiting behind their key count too). */
export const OUTBOX_BACKLOG = `
  select sink, count(*) as pending, extract(epoch from now() - min(created_at))::float8 as oldest_age_seconds
    from outbox
   where status = 'pending'
   group by sink`;

/** Dead rows per sink, and the ordered keys they park (a dead ordered row holds back its key). */
export const OUTBOX_DEAD = `
  select sink, count(*) as dead,
         count(distinct (destination, partition_key)) filter (where ordered) as parked_keys
    from outbox
   where status = 'dead'
   group by sink`;

export const LEASE_AGES = `
  select name, owner, extract(epoch from now() - renewed_at)::float8 as age_seconds, expires_at > now() as held
    from lease
   order by name`;

/**
 * For each (checkpoint, source): whether the checkpoint exists, and the age of the oldest entry after it
 * (0 when caught up). The projector reads only below pg_snapshot_xmin, so an entry committed above it
 * is lag too, which it is.
 */
export const PROJECTION_LAG = `
  select w.name, w.source, c.name is not null as present,
         extract(epoch from now() - coalesce(
           case when c.name is null then null
                when w.source = 'events' then
                  (select e.recorded_at from event e
                    where (e.tx, e.position) > (c.last_tx, c.last_position)
                    order by e.tx, e.position
                    limit 1)
                else
                  (select r.recorded_at from publish_receipt r
                    where (r.tx, r.id) > (c.last_tx, c.last_position)
                    order by r.tx, r.id
                    limit 1)
           end, now()))::float8 as lag_seconds
    from unnest($1::text[], $2::text[]) with ordinality as w(name, source, n)
    left join projection_checkpoint c on c.name = w.name
   order by w.n`;

export interface OutboxBacklogRow {
  sink: string;
  pending: number;
  oldestAgeSeconds: number;
}

export interface OutboxDeadRow {
  sink: string;
  dead: number;
  parkedKeys: number;
}

export interface LeaseAgeRow {
  name: string;
  owner: string;
  /** Seconds since the holder last renewed it (or took it). */
  ageSeconds: number;
  /** Not yet expired. */
  held: boolean;
}

export interface ProjectionLagRow {
  /** The checkpoint's name (`<projection>`, `<projection>/receipts`). */
  name: string;
  source: 'events' | 'receipts';
  /** False when no projector ever created the checkpoint. */
  present: boolean;
  /** Age of the oldest entry the checkpoint has not applied yet; 0 when caught up (or absent). */
  lagSeconds: number;
}

export async function ping(sql: SqlClient): Promise<void> {
  await sql.query(PING);
}

export async function outboxBacklog(sql: SqlClient): Promise<OutboxBacklogRow[]> {
  const { rows } = await sql.query<{ sink: string; pending: number; oldest_age_seconds: number }>(
    OUTBOX_BACKLOG,
  );
  return rows.map((r) => ({ sink: r.sink, pending: r.pending, oldestAgeSeconds: r.oldest_age_seconds }));
}

export async function outboxDead(sql: SqlClient): Promise<OutboxDeadRow[]> {
  const { rows } = await sql.query<{ sink: string; dead: number; parked_keys: number }>(OUTBOX_DEAD);
  return rows.map((r) => ({ sink: r.sink, dead: r.dead, parkedKeys: r.parked_keys }));
}

export async function leaseAges(sql: SqlClient): Promise<LeaseAgeRow[]> {
  const { rows } = await sql.query<{ name: string; owner: string; age_seconds: number; held: boolean }>(
    LEASE_AGES,
  );
  return rows.map((r) => ({ name: r.name, owner: r.owner, ageSeconds: r.age_seconds, held: r.held }));
}

export async function projectionLag(
  sql: SqlClient,
  checkpoints: readonly { name: string; source: 'events' | 'receipts' }[],
): Promise<ProjectionLagRow[]> {
  if (checkpoints.length === 0) return [];
  const { rows } = await sql.query<{
    name: string;
    source: 'events' | 'receipts';
    present: boolean;
    lag_seconds: number;
  }>(PROJECTION_LAG, [checkpoints.map((c) => c.name), checkpoints.map((c) => c.source)]);
  return rows.map((r) => ({
    name: r.name,
    source: r.source,
    present: r.present,
    lagSeconds: Math.max(0, r.lag_seconds),
  }));
}
