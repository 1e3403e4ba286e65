/**
 * The dashboard's read queries (ADR 0018): each one bounded whatever the data (Temporal UI #2278 is a
 * dashboard counting a whole table per refresh). Counts read partial indexes and stop at a cap
 * (`OVERVIEW_COUNT_CAP`: the page shows "10,000+"); series read the `dispatch_stats` projection (one
 * row per hour and destination) and a capped sample of the last hour's publish receipts (BRIN range);
 * look-ups by business key are index probes (migration 000013). Ages come from the database clock
 * (invariant 6). Tenancy: every query takes the organization, except the instance-health facts
 * (consumer dead letters), which carry no organization.
 */
import type { SqlClient } from '../../ports/database.js';

/** Counts on the overview stop here (a count of a backlog is bounded work, never a table scan). */
export const OVERVIEW_COUNT_CAP = 10_000;
/** The latency series is computed from at most this many publishes of the last hour. */
export const LATENCY_SAMPLE = 2_000;

/** Dispatch counters of the last 24 hours (the projection's hours), per destination. */
export const DISPATCH_SERIES = `
  select hour, destination, claimed, published, delivered, discarded, failed, dead
    from dispatch_stats
   where organization_id = $1 and hour >= date_trunc('hour', now()) - interval '23 hours'
   order by hour, destination`;

/**
 * Due → published per minute of the last hour: the campaign messages confirmed by the broker, from the
 * campaign's due time (its start time, or the claim when it was sent early or queued) to the confirm.
 * A sample of at most LATENCY_SAMPLE receipts of the hour (BRIN range, the instance's), each joined to
 * its event and campaign by primary key (the lateral join keeps it a nested loop of index probes; a
 * merge join over the event log was 250 ms with a million events).
 */
export const LATENCY_SERIES = `
  with receipt as materialized (
    select confirmed_at, event_position from publish_receipt
     where recorded_at >= now() - interval '60 minutes' and outcome = 'sent'
     limit ${LATENCY_SAMPLE}
  ), sample as (
    select r.confirmed_at,
           extract(epoch from r.confirmed_at -
             case when c.start_at is not null and c.start_at <= e.recorded_at then c.start_at
                  else e.recorded_at end)::float8 as seconds
      from receipt r
      cross join lateral (select recorded_at, stream_id from event
                           where position = r.event_position and stream_type = 'campaign') e
      join campaign c on c.id = e.stream_id::uuid and c.organization_id = $1
  )
  select date_trunc('minute', confirmed_at) as minute, count(*)::int as published,
         percentile_cont(0.5) within group (order by greatest(seconds, 0)) as p50_seconds,
         percentile_cont(0.99) within group (order by greatest(seconds, 0)) as p99_seconds
    from sample
   group by 1
   order by 1`;

/** The organization's pending (or dead) outbox rows per sink and destination, oldest first, capped. */
export const OUTBOX_BY_DESTINATION = `
  select sink, destination, count(*)::int as rows,
         extract(epoch from now() - min(created_at))::float8 as oldest_age_seconds,
         min(dead_at) as first_dead_at
    from (select sink, destination, created_at, dead_at from outbox
           where status = $2 and organization_id = $1
           order by id
           limit ${OVERVIEW_COUNT_CAP + 1}) capped
   group by sink, destination
   order by sink, destination`;

/** Consumer dead letters per consumer (inbox_dead_idx; rare by design). */
export const INBOX_DEAD = `
  select consumer, count(*)::int as dead, max(processed_at) as last_at
    from (select consumer, processed_at from inbox where status = 'dead' limit ${OVERVIEW_COUNT_CAP + 1}) capped
   group by consumer
   order by consumer`;

/**
 * A phone number's recipients in the organization's campaigns, newest first, after a keyset cursor (the
 * recipient id): campaign_recipient_msisdn_idx backwards, each joined to its campaign by primary key.
 */
export const RECIPIENTS_BY_MSISDN = `
  select r.id, r.campaign_id::text as campaign_id, c.name as campaign_name, c.status as campaign_status,
         r.msisdn, r.status, r.operator, r.segments, r.cost::float8 as cost, r.attempts, r.deferrals,
         r.next_allowed_at, r.submission_id::text as submission_id, r.submitted_at, r.created_at
    from campaign_recipient r
    join campaign c on c.id = r.campaign_id
   where r.msisdn = $1 and c.organization_id = $2 and ($3::bigint is null or r.id < $3)
   order by r.id desc
   limit $4`;

/** Signals of a correlation key (optionally one name), latest first (action_signal_lookback_idx). */
export const SIGNALS_BY_CORRELATION = `
  select id::text as id, correlation_key, name, payload, unlocked, refused, unlocked_later, received_at
    from action_signal
   where organization_id = $1 and correlation_key = $2 and ($3::text is null or name = $3)
     and ($4::timestamptz is null or (received_at, id) < ($4, $5::uuid))
   order by received_at desc, id desc
   limit $6`;

/** Statuses of outbox rows of the organization (a bulk command answers per id). */
export const OUTBOX_STATUSES = `
  select id, status from outbox where id = any($1::bigint[]) and organization_id = $2`;

export interface DispatchSeriesRow {
  hour: Date;
  destination: string;
  claimed: number;
  published: number;
  delivered: number;
  discarded: number;
  failed: number;
  dead: number;
}

export async function dispatchSeries(sql: SqlClient, organizationId: string): Promise<DispatchSeriesRow[]> {
  const { rows } = await sql.query<Record<string, unknown>>(DISPATCH_SERIES, [organizationId]);
  return rows.map((r) => ({
    hour: r.hour as Date,
    destination: r.destination as string,
    claimed: Number(r.claimed),
    published: Number(r.published),
    delivered: Number(r.delivered),
    discarded: Number(r.discarded),
    failed: Number(r.failed),
    dead: Number(r.dead),
  }));
}

export interface LatencyRow {
  minute: Date;
  published: number;
  p50Seconds: number;
  p99Seconds: number;
}

export async function latencySeries(sql: SqlClient, organizationId: string): Promise<LatencyRow[]> {
  const { rows } = await sql.query<{
    minute: Date;
    published: number;
    p50_seconds: number;
    p99_seconds: number;
  }>(LATENCY_SERIES, [organizationId]);
  return rows.map((r) => ({
    minute: r.minute,
    published: r.published,
    p50Seconds: r.p50_seconds,
    p99Seconds: r.p99_seconds,
  }));
}

export interface DestinationCount {
  sink: string;
  destination: string;
  rows: number;
  oldestAgeSeconds: number;
}

/** Per destination, and whether the cap cut the count short. */
export async function outboxByDestination(
  sql: SqlClient,
  organizationId: string,
  status: 'pending' | 'dead',
): Promise<{ destinations: DestinationCount[]; capped: boolean }> {
  const { rows } = await sql.query<{
    sink: string;
    destination: string;
    rows: number;
    oldest_age_seconds: number;
  }>(OUTBOX_BY_DESTINATION, [organizationId, status]);
  const total = rows.reduce((sum, r) => sum + r.rows, 0);
  return {
    destinations: rows.map((r) => ({
      sink: r.sink,
      destination: r.destination,
      rows: r.rows,
      oldestAgeSeconds: Math.max(0, r.oldest_age_seconds),
    })),
    capped: total > OVERVIEW_COUNT_CAP,
  };
}

export async function inboxDead(
  sql: SqlClient,
): Promise<{ consumers: { consumer: string; dead: number; lastAt: Date }[]; capped: boolean }> {
  const { rows } = await sql.query<{ consumer: string; dead: number; last_at: Date }>(INBOX_DEAD);
  const total = rows.reduce((sum, r) => sum + r.dead, 0);
  return {
    consumers: rows.map((r) => ({ consumer: r.consumer, dead: r.dead, lastAt: r.last_at })),
    capped: total > OVERVIEW_COUNT_CAP,
  };
}

export interface RecipientHit {
  recipientId: number;
  campaignId: string;
  campaignName: string;
  campaignStatus: string;
  msisdn: string;
  status: string;
  operator: string;
  segments: number;
  cost: number;
  attempts: number;
  deferrals: number;
  nextAllowedAt: string | null;
  submissionId: string | null;
  submittedAt: string | null;
  createdAt: string;
}

/** A timestamp, or null for none and for ±infinity (which the driver reads as a number). */
const iso = (value: unknown): string | null =>
  value instanceof Date && !Number.isNaN(value.getTime()) ? value.toISOString() : null;

export async function recipientsByMsisdn(
  sql: SqlClient,
  params: { msisdn: string; organizationId: string; beforeId: number | null; limit: number },
): Promise<RecipientHit[]> {
  const { rows } = await sql.query<Record<string, unknown>>(RECIPIENTS_BY_MSISDN, [
    params.msisdn,
    params.organizationId,
    params.beforeId,
    params.limit,
  ]);
  return rows.map((r) => ({
    recipientId: Number(r.id),
    campaignId: r.campaign_id as string,
    campaignName: r.campaign_name as string,
    campaignStatus: r.campaign_status as string,
    msisdn: r.msisdn as string,
    status: r.status as string,
    operator: r.operator as string,
    segments: Number(r.segments),
    cost: Number(r.cost),
    attempts: Number(r.attempts),
    deferrals: Number(r.deferrals),
    // '-infinity' (no deferral) reads as an invalid Date: shown as null.
    nextAllowedAt: iso(r.next_allowed_at),
    submissionId: (r.submission_id as string | null) ?? null,
    submittedAt: iso(r.submitted_at),
    createdAt: (r.created_at as Date).toISOString(),
  }));
}

export interface SignalRecord {
  signalId: string;
  correlationKey: string;
  name: string;
  payload: unknown;
  unlocked: unknown;
  refused: unknown;
  unlockedLater: unknown;
  receivedAt: string;
}

export async function signalsByCorrelation(
  sql: SqlClient,
  params: {
    organizationId: string;
    correlationKey: string;
    name: string | null;
    before: { receivedAt: string; id: string } | null;
    limit: number;
  },
): Promise<SignalRecord[]> {
  const { rows } = await sql.query<Record<string, unknown>>(SIGNALS_BY_CORRELATION, [
    params.organizationId,
    params.correlationKey,
    params.name,
    params.before?.receivedAt ?? null,
    params.before?.id ?? null,
    params.limit,
  ]);
  return rows.map((r) => ({
    signalId: r.id as string,
    correlationKey: r.correlation_key as string,
    name: r.name as string,
    payload: r.payload,
    unlocked: r.unlocked,
    refused: r.refused,
    unlockedLater: r.unlocked_later,
    receivedAt: (r.received_at as Date).toISOString(),
  }));
}

export async function outboxStatuses(
  sql: SqlClient,
  ids: readonly number[],
  organizationId: string,
): Promise<Map<number, string>> {
  const { rows } = await sql.query<{ id: number; status: string }>(OUTBOX_STATUSES, [ids, organizationId]);
  return new Map(rows.map((r) => [Number(r.id), r.status]));
}
