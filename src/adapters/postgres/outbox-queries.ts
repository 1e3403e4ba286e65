/**
 * Outbox queries: the writer's batched insert (inside the caller's transaction, invariant 1) and the
 * relay's claim / mark-sent / schedule-retry / recover / prune statements (invariants 2, 3, 7).
 *
 * Claims lock rows with FOR UPDATE SKIP LOCKED inside a CTE (a plain `IN (SELECT … LIMIT n FOR
 * UPDATE SKIP LOCKED)` may be re-evaluated and claim more than n) and lease them by moving both
 * `locked_until` and `next_attempt_at` forward: a claimed row leaves the due range of the pending
 * index, and a relay that dies mid-batch loses its rows back to the others when the lease expires.
 * Each claim increments `attempts`, which doubles as the lease token: mark and retry statements
 * only touch rows still pending with the attempt number they claimed.
 */
import type { Headers } from '../../messaging/headers.js';
import type { SqlClient } from '../../ports/database.js';
import type { ClaimedForPublish, NewOutboxMessage, Sink } from '../../ports/outbox.js';

export const INSERT_OUTBOX = `
  insert into outbox (message_id, event_position, sink, destination, routing_key, partition_key,
                      headers, payload, priority, ordered, organization_id)
  select * from unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
                       $7::jsonb[], $8::jsonb[], $9::smallint[], $10::boolean[], $11::text[])
  returning id, message_id`;

/**
 * The relay's claim (CTE + FOR UPDATE SKIP LOCKED + lease, in (priority, next_attempt_at, id) order),
 * returning only what publishing needs and the payload as its JSON text, so the body is serialized once (by PostgreSQL) instead of parsed
 * into objects and stringified again for every message.
 *
 * Ordered rows (ADR 0007) are claimed only as the head of their key: no earlier (tx, id) row of the
 * same (sink, destination, partition_key) is unsent, and no transaction that could still commit one is
 * running (tx below the snapshot's xmin). An ordered candidate with an earlier unsent row is deferred
 * (next_attempt_at = 'infinity', out of the due range) while this statement holds that earlier row
 * FOR SHARE: its mark, and the wake-up of its key's next head that follows the mark, must then wait for
 * this claim to commit, so a deferral can never miss its wake-up. When the earlier row cannot be held
 * (being claimed or marked right now) the candidate is left due and judged again by the next claim.
 * A head whose transaction is not yet below xmin is postponed by 200 ms (a long transaction elsewhere
 * must not make relays re-scan it back to back). Returns the claimed rows plus one row with
 * `deferred` (how many were moved to waiting), so the relay knows a short claim still made progress.
 */
export const CLAIM_OUTBOX_FOR_PUBLISH = `
  with candidates as materialized (
    select id, ordered, sink, destination, partition_key, tx from outbox
     where status = 'pending' and next_attempt_at <= now() and sink = any($4::text[])
     order by priority, next_attempt_at, id
     limit $1
     for update skip locked
  ),
  judged as materialized (
    select c.id, c.tx < pg_snapshot_xmin(pg_current_snapshot()) as settled,
           (select e.id from outbox e
             where e.ordered and e.status in ('pending', 'dead') and e.sink = c.sink
               and e.destination = c.destination and e.partition_key = c.partition_key
               and (e.tx, e.id) < (c.tx, c.id)
             order by e.tx, e.id
             limit 1) as blocker
      from candidates c
     where c.ordered
  ),
  held as materialized (
    select e.id from outbox e
     where e.id in (select blocker from judged) and e.status in ('pending', 'dead')
       for share skip locked
  ),
  postponed as (
    update outbox o
       set next_attempt_at = case when j.blocker is null then now() + interval '200 milliseconds'
                                  else 'infinity'::timestamptz end
      from judged j
     where o.id = j.id
       and (j.blocker in (select id from held) or (j.blocker is null and not j.settled))
    returning j.blocker is not null as waiting
  ),
  claimed as (
    update outbox o
       set attempts = o.attempts + 1,
           locked_until = now() + make_interval(secs => $2),
           next_attempt_at = now() + make_interval(secs => $2),
           locked_by = $3
      from candidates c
     where o.id = c.id
       and (not c.ordered or c.id in (select id from judged where blocker is null and settled))
    returning o.id, o.message_id, o.sink, o.destination, o.routing_key, o.partition_key, o.headers,
              o.payload::text as payload_text, o.priority, o.attempts, o.ordered, o.organization_id,
              (extract(epoch from o.created_at) * 1000)::float8 as created_ms
  )
  select claimed.*, progress.deferred
    from (select count(*) filter (where waiting)::int as deferred from postponed) progress
    left join claimed on true`;

/**
 * Marks confirmed rows sent and, in the same statement, appends their publish receipts (the audit that
 * outlives outbox pruning: publish_receipt, migration 000005). Only rows the guard matched get one.
 */
export const MARK_SENT = `
  with marked as (
    update outbox o
       set status = 'sent', sent_at = now(), locked_until = null, locked_by = null,
           broker_ref = confirmed.broker_ref, last_error = null
      from unnest($1::bigint[], $2::int[], $3::text[]) as confirmed(id, attempts, broker_ref)
     where o.id = confirmed.id and o.status = 'pending' and o.attempts = confirmed.attempts
    returning o.id, o.message_id, o.event_position, o.sink, o.destination, o.routing_key, o.partition_key,
              o.broker_ref, o.attempts, o.recovery_count, o.sent_at
  ), receipts as (
    insert into publish_receipt (message_id, outbox_id, event_position, sink, destination, routing_key,
                                 partition_key, outcome, broker_ref, attempts, recovery_count, confirmed_at)
    select message_id, id, event_position, sink, destination, routing_key, partition_key, 'sent', broker_ref,
           attempts, recovery_count, sent_at
      from marked
  )
  select id from marked`;

/** Schedules retries; a row that reaches max attempts becomes dead and gets a `dead` receipt in the same statement. */
export const SCHEDULE_RETRY = `
  with retried as (
    update outbox o
       set status = case when o.attempts >= $4 then 'dead' else 'pending' end,
           dead_at = case when o.attempts >= $4 then now() else null end,
           next_attempt_at = now() + make_interval(secs => failed.delay_ms / 1000.0),
           locked_until = null, locked_by = null,
           last_error = left(failed.error, 2000)
      from unnest($1::bigint[], $2::int[], $3::text[], $5::double precision[])
             as failed(id, attempts, error, delay_ms)
     where o.id = failed.id and o.status = 'pending' and o.attempts = failed.attempts
    returning o.id, o.status, o.message_id, o.event_position, o.sink, o.destination, o.routing_key,
              o.partition_key, o.attempts, o.recovery_count, o.last_error
  ), receipts as (
    insert into publish_receipt (message_id, outbox_id, event_position, sink, destination, routing_key,
                                 partition_key, outcome, attempts, recovery_count, error)
    select message_id, id, event_position, sink, destination, routing_key, partition_key, 'dead', attempts,
           recovery_count, last_error
      from retried
     where status = 'dead'
  )
  select id, status from retried`;

/** Hands claimed rows back untouched (graceful shutdown before publishing): the attempt is not counted. */
export const RELEASE_CLAIMS = `
  update outbox o
     set attempts = o.attempts - 1, next_attempt_at = now(), locked_until = null, locked_by = null
    from unnest($1::bigint[], $2::int[]) as released(id, attempts)
   where o.id = released.id and o.status = 'pending' and o.attempts = released.attempts`;

export const RECOVER_DEAD = `
  with recoverable as (
    select id from outbox
     where status = 'dead' and dead_at <= now() - make_interval(secs => $1) and recovery_count < $2
     order by dead_at
     limit $3
     for update skip locked
  )
  update outbox o
     set status = 'pending', attempts = 0, recovery_count = o.recovery_count + 1,
         next_attempt_at = now(), dead_at = null
    from recoverable
   where o.id = recoverable.id and o.status = 'dead'
  returning o.id`;

export const PRUNE_SENT = `
  with prunable as (
    select id from outbox
     where status = 'sent' and sent_at < now() - make_interval(hours => $1)
     limit $2
     for update skip locked
  )
  delete from outbox o using prunable where o.id = prunable.id`;

/**
 * Delay until the earliest pending row becomes due (null: none pending), by the database clock.
 * Negative when already due; the function clamps. (Not `greatest(0, …)`: greatest ignores NULL, so an
 * empty outbox would read as "due now" and an idle relay would spin.) Ordered rows waiting behind an
 * earlier row of their key ('infinity', ADR 0007) are not due at any time; they are woken instead.
 * One descent of the pending claim index per priority (0…9) instead of a min() over every pending
 * row: waiting rows stay in that index, and a deep backlog of them must not slow down each idle wait.
 */
export const NEXT_DUE_IN_MS = `
  select (extract(epoch from (min(first.next_attempt_at) - now())) * 1000)::float8 as due_in_ms
    from generate_series(0, 9) as p(priority)
   cross join lateral (
     select next_attempt_at from outbox
      where status = 'pending' and priority = p.priority and next_attempt_at < 'infinity'
        and sink = any($1::text[])
      order by next_attempt_at
      limit 1) first`;

/** What the API shows of an outbox row. */
const OUTBOX_VIEW_COLUMNS = `id, message_id::text as message_id, event_position, sink, destination, routing_key,
  partition_key, headers, payload, priority, status, attempts, next_attempt_at, last_error, created_at, sent_at,
  dead_at, skipped_at, recovery_count, ordered`;

export const REQUEUE_DEAD_BY_ID = `
  update outbox set status = 'pending', attempts = 0, next_attempt_at = now(), dead_at = null
   where id = any($1::bigint[]) and status = 'dead' and ($2::text is null or organization_id = $2)
  returning id`;

/** One row of an organization (the API's outbox operations: another organization's row is not found). */
export const SELECT_ORGANIZATION_OUTBOX_ROW = `
  select ${OUTBOX_VIEW_COLUMNS} from outbox where id = $1 and organization_id = $2`;

/**
 * An organization's pending or dead rows after a cursor, in id order, through the partial indexes
 * on (organization_id, id) of migration 000009 (never a scan of the whole outbox).
 */
export const LIST_ORGANIZATION_OUTBOX = `
  select ${OUTBOX_VIEW_COLUMNS} from outbox
   where organization_id = $1 and status = $2 and organization_id is not null and id > $3
   order by id
   limit $4`;

export async function insertOutbox(sql: SqlClient, messages: readonly NewOutboxMessage[]): Promise<void> {
  if (messages.length === 0) return;
  await sql.query(INSERT_OUTBOX, outboxColumns(messages));
}

/**
 * The insert of a process that publishes its own rows after commit (ADR 0024): the rows flagged in $12
 * are written already claimed by `$14` (attempt 1, out of the due range until the lease of $13 seconds,
 * counted from the clock, not from the transaction's start, ends), returned as the relay's claim returns
 * them; the others are written pending for a relay, as INSERT_OUTBOX writes them.
 */
export const INSERT_OUTBOX_LEASED = `
  insert into outbox (message_id, event_position, sink, destination, routing_key, partition_key,
                      headers, payload, priority, ordered, organization_id,
                      attempts, next_attempt_at, locked_until, locked_by)
  select m.message_id, m.event_position, m.sink, m.destination, m.routing_key, m.partition_key, m.headers,
         m.payload, m.priority, m.ordered, m.organization_id,
         case when m.leased then 1 else 0 end,
         case when m.leased then clock_timestamp() + make_interval(secs => $13) else now() end,
         case when m.leased then clock_timestamp() + make_interval(secs => $13) end,
         case when m.leased then $14 end
    from unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
                $7::jsonb[], $8::jsonb[], $9::smallint[], $10::boolean[], $11::text[], $12::boolean[])
           as m(message_id, event_position, sink, destination, routing_key, partition_key, headers, payload,
                priority, ordered, organization_id, leased)
  returning id, message_id, sink, destination, routing_key, partition_key, headers,
            case when locked_by is not null then payload::text end as payload_text, priority, attempts, ordered,
            organization_id, (extract(epoch from created_at) * 1000)::float8 as created_ms`;

function outboxColumns(messages: readonly NewOutboxMessage[]): unknown[] {
  return [
    messages.map((m) => m.messageId),
    messages.map((m) => m.eventPosition),
    messages.map((m) => m.sink),
    messages.map((m) => m.destination),
    messages.map((m) => m.routingKey ?? null),
    messages.map((m) => m.partitionKey ?? null),
    messages.map((m) => JSON.stringify(m.headers ?? {})),
    messages.map((m) => JSON.stringify(m.payload)),
    messages.map((m) => m.priority ?? 3),
    messages.map((m) => m.ordered ?? false),
    messages.map((m) => m.organizationId ?? null),
  ];
}

/**
 * Inserts rows, those with `leased[i]` already claimed by `owner` for `leaseSeconds`; returns the leased
 * ones as claimed rows, ready to publish once the transaction commits.
 */
export async function insertOutboxLeased(
  sql: SqlClient,
  messages: readonly NewOutboxMessage[],
  leased: readonly boolean[],
  lease: { owner: string; leaseSeconds: number },
): Promise<ClaimedForPublish[]> {
  if (messages.length === 0) return [];
  const { rows } = await sql.query<ClaimedForPublishRow & { id: number; payload_text: string | null }>(
    INSERT_OUTBOX_LEASED,
    [...outboxColumns(messages), leased, lease.leaseSeconds, lease.owner],
  );
  return rows
    .filter((row) => row.payload_text !== null)
    .map((row) => toClaimed(row as ClaimedForPublishRow & { id: number }));
}

interface ClaimedForPublishRow {
  /** Null only on the progress row of a claim that claimed nothing. */
  id: number | null;
  message_id: string;
  sink: Sink;
  destination: string;
  routing_key: string | null;
  partition_key: string | null;
  headers: Headers;
  payload_text: string;
  priority: number;
  attempts: number;
  /** Epoch milliseconds: a number parses much faster than a timestamptz string. */
  created_ms: number;
  ordered: boolean;
  organization_id: string | null;
  /** On every row (and alone, with null columns, when nothing was claimed): ordered rows deferred. */
  deferred: number;
}

function toClaimed(row: ClaimedForPublishRow & { id: number }): ClaimedForPublish {
  return {
    id: row.id,
    messageId: row.message_id,
    sink: row.sink,
    destination: row.destination,
    routingKey: row.routing_key,
    partitionKey: row.partition_key,
    headers: row.headers,
    payloadText: row.payload_text,
    priority: row.priority,
    attempts: row.attempts,
    createdAt: new Date(row.created_ms),
    ordered: row.ordered,
    organizationId: row.organization_id,
  };
}

/** Claims up to `limit` due rows for `sinks`, leased for `lockSeconds`; returned in (priority, id) order. */
export async function claimOutboxForPublish(
  sql: SqlClient,
  params: { limit: number; lockSeconds: number; owner: string; sinks: readonly Sink[] },
): Promise<ClaimedForPublish[]> {
  return (await claimOutboxBatch(sql, params)).rows;
}

/**
 * The claim with its progress: `rows` claimed, plus `deferred`, the ordered rows moved to waiting
 * behind an earlier row of their key. Both count as progress: a claim of `limit` candidates that
 * deferred most of them does not mean the due range is empty.
 */
export async function claimOutboxBatch(
  sql: SqlClient,
  params: { limit: number; lockSeconds: number; owner: string; sinks: readonly Sink[] },
): Promise<{ rows: ClaimedForPublish[]; deferred: number }> {
  const { rows } = await sql.query<ClaimedForPublishRow>(CLAIM_OUTBOX_FOR_PUBLISH, [
    params.limit,
    params.lockSeconds,
    params.owner,
    params.sinks,
  ]);
  const claimed: ClaimedForPublish[] = [];
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    if (row.id === null) continue; // the progress row of a claim that claimed nothing
    claimed.push(toClaimed(row as ClaimedForPublishRow & { id: number }));
  }
  return {
    rows: claimed.sort((a, b) => a.priority - b.priority || a.id - b.id),
    deferred: rows[0]?.deferred ?? 0,
  };
}

export async function markSent(
  sql: SqlClient,
  confirmed: readonly { id: number; attempts: number; brokerRef: string | null }[],
): Promise<number> {
  return (await markSentIds(sql, confirmed)).length;
}

/** `markSent`, returning the ids the guard matched (the relay counts them per sink). */
export async function markSentIds(
  sql: SqlClient,
  confirmed: readonly { id: number; attempts: number; brokerRef: string | null }[],
): Promise<number[]> {
  if (confirmed.length === 0) return [];
  const { rows } = await sql.query<{ id: number }>(MARK_SENT, [
    confirmed.map((c) => c.id),
    confirmed.map((c) => c.attempts),
    confirmed.map((c) => c.brokerRef),
  ]);
  return rows.map((row) => row.id);
}

export async function scheduleRetry(
  sql: SqlClient,
  failed: readonly { id: number; attempts: number; error: string; delayMs: number }[],
  maxAttempts: number,
): Promise<{ id: number; status: 'pending' | 'dead' }[]> {
  if (failed.length === 0) return [];
  const { rows } = await sql.query<{ id: number; status: 'pending' | 'dead' }>(SCHEDULE_RETRY, [
    failed.map((f) => f.id),
    failed.map((f) => f.attempts),
    failed.map((f) => f.error),
    maxAttempts,
    failed.map((f) => f.delayMs),
  ]);
  return rows;
}

export async function releaseClaims(
  sql: SqlClient,
  claims: readonly { id: number; attempts: number }[],
): Promise<void> {
  if (claims.length === 0) return;
  await sql.query(RELEASE_CLAIMS, [claims.map((c) => c.id), claims.map((c) => c.attempts)]);
}

export async function recoverDead(
  sql: SqlClient,
  params: { cooldownSeconds: number; maxRounds: number; limit: number },
): Promise<number> {
  const { rowCount } = await sql.query(RECOVER_DEAD, [
    params.cooldownSeconds,
    params.maxRounds,
    params.limit,
  ]);
  return rowCount;
}

export async function pruneSent(
  sql: SqlClient,
  params: { retentionHours: number; limit: number },
): Promise<number> {
  const { rowCount } = await sql.query(PRUNE_SENT, [params.retentionHours, params.limit]);
  return rowCount;
}

export async function nextDueInMs(sql: SqlClient, sinks: readonly Sink[]): Promise<number | null> {
  const { rows } = await sql.query<{ due_in_ms: number | null }>(NEXT_DUE_IN_MS, [sinks]);
  const dueInMs = rows[0]?.due_in_ms ?? null;
  return dueInMs === null ? null : Math.max(0, dueInMs);
}

/** Re-queues dead rows (only those of the organization, when given); returns the re-queued ids. */
export async function requeueDead(
  sql: SqlClient,
  ids: readonly number[],
  organizationId: string | null = null,
): Promise<number[]> {
  const { rows } = await sql.query<{ id: number }>(REQUEUE_DEAD_BY_ID, [ids, organizationId]);
  return rows.map((row) => row.id);
}

export interface OutboxRowView {
  id: number;
  messageId: string;
  eventPosition: number;
  sink: Sink;
  destination: string;
  routingKey: string | null;
  partitionKey: string | null;
  headers: Headers;
  payload: unknown;
  priority: number;
  status: 'pending' | 'sent' | 'dead' | 'skipped';
  attempts: number;
  nextAttemptAt: string;
  lastError: string | null;
  createdAt: string;
  sentAt: string | null;
  deadAt: string | null;
  skippedAt: string | null;
  recoveryCount: number;
  ordered: boolean;
}

interface OutboxViewRow {
  id: number;
  message_id: string;
  event_position: number;
  sink: Sink;
  destination: string;
  routing_key: string | null;
  partition_key: string | null;
  headers: Headers;
  payload: unknown;
  priority: number;
  status: OutboxRowView['status'];
  attempts: number;
  next_attempt_at: Date | number;
  last_error: string | null;
  created_at: Date;
  sent_at: Date | null;
  dead_at: Date | null;
  skipped_at: Date | null;
  recovery_count: number;
  ordered: boolean;
}

const isoOrNull = (value: Date | null) => (value ? value.toISOString() : null);

function outboxView(row: OutboxViewRow): OutboxRowView {
  return {
    id: row.id,
    messageId: row.message_id,
    eventPosition: row.event_position,
    sink: row.sink,
    destination: row.destination,
    routingKey: row.routing_key,
    partitionKey: row.partition_key,
    headers: row.headers,
    payload: row.payload,
    priority: row.priority,
    status: row.status,
    attempts: row.attempts,
    // 'infinity' (an ordered row waiting behind its key's head) is not a finite Date.
    nextAttemptAt:
      row.next_attempt_at instanceof Date && Number.isFinite(row.next_attempt_at.getTime())
        ? row.next_attempt_at.toISOString()
        : 'infinity',
    lastError: row.last_error,
    createdAt: row.created_at.toISOString(),
    sentAt: isoOrNull(row.sent_at),
    deadAt: isoOrNull(row.dead_at),
    skippedAt: isoOrNull(row.skipped_at),
    recoveryCount: row.recovery_count,
    ordered: row.ordered,
  };
}

export async function organizationOutboxRow(
  sql: SqlClient,
  id: number,
  organizationId: string,
): Promise<OutboxRowView | null> {
  const { rows } = await sql.query<OutboxViewRow>(SELECT_ORGANIZATION_OUTBOX_ROW, [id, organizationId]);
  return rows[0] ? outboxView(rows[0]) : null;
}

export async function listOrganizationOutbox(
  sql: SqlClient,
  params: { organizationId: string; status: 'pending' | 'dead'; afterId: number; limit: number },
): Promise<OutboxRowView[]> {
  const { rows } = await sql.query<OutboxViewRow>(LIST_ORGANIZATION_OUTBOX, [
    params.organizationId,
    params.status,
    params.afterId,
    params.limit,
  ]);
  return rows.map(outboxView);
}
