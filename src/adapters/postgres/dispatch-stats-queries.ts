/**
 * Queries of the `dispatch_stats` projection (src/projections/dispatch-stats.ts): increments applied in
 * one batch statement (unnest) in the projector's transaction, next to its checkpoint; a read of the
 * whole table; and DIRECT_DISPATCH_STATS, the same numbers counted straight from the event log and the
 * publish receipts. The projection must equal that count exactly (tests and `herald projections check`).
 */
import type { SqlClient } from '../../ports/database.js';

export type DispatchStatsTable = 'dispatch_stats' | 'dispatch_stats_rebuild';

export const DISPATCH_COUNTERS = [
  'claimed',
  'published',
  'delivered',
  'discarded',
  'failed',
  'dead',
] as const;
export type DispatchCounter = (typeof DISPATCH_COUNTERS)[number];

export const addDispatchStats = (table: DispatchStatsTable) => `
  insert into ${table} as s (hour, organization_id, destination, ${DISPATCH_COUNTERS.join(', ')})
  select * from unnest($1::timestamptz[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[],
                       $7::bigint[], $8::bigint[], $9::bigint[])
  on conflict (hour, organization_id, destination) do update
     set ${DISPATCH_COUNTERS.map((c) => `${c} = s.${c} + excluded.${c}`).join(', ')}`;

export const selectDispatchStats = (table: DispatchStatsTable) => `
  select hour, organization_id, destination, ${DISPATCH_COUNTERS.join(', ')}
    from ${table}
   where ($1::timestamptz is null or hour >= $1) and ($2::timestamptz is null or hour < $2)
   order by hour, organization_id, destination`;

/**
 * The definition the projection implements, as one query: per UTC hour, organization and destination,
 * CampaignClaimed → claimed, CampaignCompleted → delivered, CampaignFailed → failed (event time), and
 * LineDeliveryDiscarded → discarded; receipts of messages caused by campaign events: sent → published,
 * dead → dead (receipt time). Campaign-derived counters use the campaign's LINE queue as destination
 * ('' for sms); receipts use the receipt's destination. Unknown campaigns count under '' / ''.
 */
export const DIRECT_DISPATCH_STATS = `
  with facts as (
    select e.recorded_at as at, e.stream_id as campaign_id, null::text as destination,
           case e.type when 'CampaignClaimed' then 'claimed' when 'CampaignCompleted' then 'delivered'
                       else 'failed' end as counter
      from event e
     where e.stream_type = 'campaign' and e.type in ('CampaignClaimed', 'CampaignCompleted', 'CampaignFailed')
    union all
    select e.recorded_at, e.data->>'campaignId', null, 'discarded'
      from event e
     where e.stream_type = 'line_delivery' and e.type = 'LineDeliveryDiscarded'
    union all
    select r.recorded_at, e.stream_id, r.destination, case r.outcome when 'sent' then 'published' else 'dead' end
      from publish_receipt r join event e on e.position = r.event_position
     where e.stream_type = 'campaign'
  ), keyed as (
    select date_trunc('hour', f.at, 'UTC') as hour,
           coalesce(c.organization_id, '') as organization_id,
           coalesce(f.destination,
                    case when c.channel = 'line' and c.cast_type = 'broadcast' then 'line_broadcast_rich_message'
                         when c.channel = 'line' then 'line_multicast_rich_message'
                         else '' end) as destination,
           f.counter
      from facts f left join campaign c on c.id::text = lower(f.campaign_id)
  )
  select hour, organization_id, destination,
         ${DISPATCH_COUNTERS.map((c) => `count(*) filter (where counter = '${c}') as ${c}`).join(', ')}
    from keyed
   where $1::timestamptz is null or hour >= $1
   group by hour, organization_id, destination
  having $2::timestamptz is null or hour < $2
   order by hour, organization_id, destination`;

export interface DispatchStatsRow {
  hour: Date;
  organizationId: string;
  destination: string;
  claimed: number;
  published: number;
  delivered: number;
  discarded: number;
  failed: number;
  dead: number;
}

interface Row {
  hour: Date;
  organization_id: string;
  destination: string;
  claimed: number;
  published: number;
  delivered: number;
  discarded: number;
  failed: number;
  dead: number;
}

const toStats = (row: Row): DispatchStatsRow => ({
  hour: row.hour,
  organizationId: row.organization_id,
  destination: row.destination,
  claimed: row.claimed,
  published: row.published,
  delivered: row.delivered,
  discarded: row.discarded,
  failed: row.failed,
  dead: row.dead,
});

export async function addDispatchStatsRows(
  sql: SqlClient,
  table: DispatchStatsTable,
  rows: readonly DispatchStatsRow[],
): Promise<void> {
  if (rows.length === 0) return;
  await sql.query(addDispatchStats(table), [
    rows.map((r) => r.hour),
    rows.map((r) => r.organizationId),
    rows.map((r) => r.destination),
    ...DISPATCH_COUNTERS.map((counter) => rows.map((r) => r[counter])),
  ]);
}

export interface HourRange {
  from?: Date | string | null;
  to?: Date | string | null;
}

export async function readDispatchStats(
  sql: SqlClient,
  table: DispatchStatsTable = 'dispatch_stats',
  range: HourRange = {},
): Promise<DispatchStatsRow[]> {
  const { rows } = await sql.query<Row>(selectDispatchStats(table), [range.from ?? null, range.to ?? null]);
  return rows.map(toStats);
}

/** One organization's rows of `dispatch_stats` in [from, to): a range of the primary key's hours. */
export const SELECT_ORGANIZATION_DISPATCH_STATS = `
  select hour, organization_id, destination, ${DISPATCH_COUNTERS.join(', ')}
    from dispatch_stats
   where hour >= $1 and hour < $2 and organization_id = $3
   order by hour, destination`;

export async function readOrganizationDispatchStats(
  sql: SqlClient,
  organizationId: string,
  range: { from: Date | string; to: Date | string },
): Promise<DispatchStatsRow[]> {
  const { rows } = await sql.query<Row>(SELECT_ORGANIZATION_DISPATCH_STATS, [
    range.from,
    range.to,
    organizationId,
  ]);
  return rows.map(toStats);
}

/** The same statistics counted directly from events and receipts (what the projection must equal). */
export async function countDispatchStatsDirectly(
  sql: SqlClient,
  range: HourRange = {},
): Promise<DispatchStatsRow[]> {
  const { rows } = await sql.query<Row>(DIRECT_DISPATCH_STATS, [range.from ?? null, range.to ?? null]);
  return rows.map(toStats);
}
