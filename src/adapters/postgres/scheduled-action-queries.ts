/**
 * Scheduled-action queries: the state tables of actions and signals (inline projections, invariant 1),
 * the claim and stale-recovery look-ups (FOR UPDATE SKIP LOCKED: any number of scanners or workers,
 * invariant 7), the signal ↔ wait matching, the lookback, subjects and listing. Times compare with the
 * database's now() (invariant 6).
 */
import type { ReceivedSignal } from '../../domain/action-signal.js';
import type { ActionStatus, ExistingAction } from '../../domain/scheduled-action.js';
import type { SqlClient } from '../../ports/database.js';
import { STALE_CLAIMED_AT } from './claim-liveness-queries.js';
import { stateTable } from './state-table.js';

export const scheduledActionTable = stateTable<ExistingAction>({
  table: 'scheduled_action',
  streamType: 'scheduled_action',
  key: { column: 'id', type: 'uuid', field: 'actionId' },
  columns: [
    { column: 'organization_id', type: 'text', field: 'organizationId' },
    { column: 'mode', type: 'text', field: 'mode' },
    { column: 'action_type', type: 'text', field: 'actionType' },
    { column: 'action_config', type: 'jsonb', field: 'actionConfig' },
    { column: 'source_config', type: 'jsonb', field: 'sourceConfig' },
    { column: 'workflow_id', type: 'text', field: 'workflowId' },
    { column: 'workflow_node_path', type: 'text', field: 'workflowNodePath' },
    { column: 'subject_id', type: 'text', field: 'subjectId' },
    { column: 'status', type: 'text', field: 'status' },
    { column: 'execute_at', type: 'timestamptz', field: 'executeAt' },
    { column: 'expires_at', type: 'timestamptz', field: 'expiresAt' },
    { column: 'wait', type: 'jsonb', field: 'wait' },
    { column: 'correlation_key', type: 'text', compute: (s) => s.wait?.correlationKey },
    { column: 'expiry', type: 'jsonb', field: 'expiry' },
    { column: 'max_retries', type: 'int', field: 'maxRetries' },
    { column: 'retry_count', type: 'int', field: 'retryCount' },
    { column: 'unlocked_by', type: 'jsonb', field: 'unlockedBy' },
    { column: 'fired_now', type: 'boolean', field: 'firedNow' },
    { column: 'expired', type: 'boolean', field: 'expired' },
    { column: 'due_because', type: 'text', field: 'dueBecause' },
    { column: 'claim_epoch', type: 'int', field: 'claimEpoch' },
    { column: 'claimed_at', type: 'timestamptz', field: 'claimedAt' },
    { column: 'branch', type: 'text', field: 'branch' },
    { column: 'delivery', type: 'text', field: 'delivery' },
    { column: 'last_error', type: 'text', field: 'lastError' },
    { column: 'cancel_reason', type: 'text', field: 'cancelReason' },
    { column: 'outcome', type: 'text', field: 'outcome' },
    { column: 'created_at', type: 'timestamptz', field: 'createdAt' },
    { column: 'status_changed_at', type: 'timestamptz', field: 'statusChangedAt' },
    { column: 'idempotency_key', type: 'text', field: 'idempotencyKey' },
  ],
});

export const actionSignalTable = stateTable<ReceivedSignal>({
  table: 'action_signal',
  streamType: 'action_signal',
  key: { column: 'id', type: 'uuid', field: 'signalId' },
  columns: [
    { column: 'status', type: 'text', field: 'status' },
    { column: 'organization_id', type: 'text', field: 'organizationId' },
    { column: 'correlation_key', type: 'text', field: 'correlationKey' },
    { column: 'name', type: 'text', field: 'name' },
    { column: 'payload', type: 'jsonb', field: 'payload' },
    { column: 'unlocked', type: 'jsonb', field: 'unlocked' },
    { column: 'refused', type: 'jsonb', field: 'refused' },
    { column: 'unlocked_later', type: 'jsonb', field: 'unlockedLater' },
    { column: 'received_at', type: 'timestamptz', field: 'receivedAt' },
  ],
});

const columns = scheduledActionTable.columnList;
type Row = Record<string, unknown> & { version: number };

/** Pending actions due by now (a wait at its deadline), in due order, locked for this claim. */
export const LOCK_DUE_ACTIONS = `
  select ${columns}, version from scheduled_action
   where status = 'pending' and execute_at <= now()
   order by execute_at, id
   limit $1
   for update skip locked`;

export const NEXT_ACTION_DUE_IN_MS = `
  select (extract(epoch from (min(execute_at) - now())) * 1000)::float8 as due_in_ms
    from scheduled_action where status = 'pending'`;

export const FIND_STALE_ACTIONS = `
  select ${columns}, version from scheduled_action
   where status = 'processing' and claimed_at < ${STALE_CLAIMED_AT}
   order by claimed_at
   limit $2`;

export const LOCK_STALE_ACTIONS = `
  select ${scheduledActionTable.qualified}, t.version
    from scheduled_action t
    join unnest($2::uuid[], $3::int[]) as found(id, version) on t.id = found.id and t.version = found.version
   where t.status = 'processing' and t.claimed_at < ${STALE_CLAIMED_AT}
   order by t.claimed_at
   for update of t skip locked`;

/**
 * The waits a signal may unlock: pending waits of the organization and correlation key that list the
 * name and are not yet resolved, locked (a signal and a claim of the same wait serialize on the row).
 */
export const LOCK_WAITS_FOR_SIGNAL = `
  select ${columns}, version from scheduled_action
   where status = 'pending' and mode = 'waitForSignal'
     and organization_id = $1 and correlation_key = $2 and wait->'names' ? $3
     and unlocked_by is null and not expired and not fired_now
   order by id
   for update`;

/**
 * The latest signal of any of the names for an organization and correlation key received within the
 * lookback window (the seed's pre-save check, closing the early-signal race).
 */
export const FIND_PRIOR_SIGNAL = `
  select ${actionSignalTable.columnList}, version from action_signal
   where organization_id = $1 and correlation_key = $2 and name = any($3::text[])
     and received_at >= now() - make_interval(secs => $4 / 1000.0)
   order by received_at desc
   limit 1`;

/**
 * Serializes scheduling a wait and receiving a signal for one organization and correlation key: whichever
 * runs second sees the other's commit (READ COMMITTED reads per statement), so a signal is never missed by
 * a wait saved at the same moment. Transaction-scoped: released at commit or rollback.
 */
export const LOCK_CORRELATION = `select pg_advisory_xact_lock(hashtextextended($1 || chr(31) || $2, 2))`;

export const UPSERT_SUBJECT = `
  insert into subject (organization_id, id, attributes, updated_at) values ($1, $2, $3::jsonb, now())
  on conflict (organization_id, id) do update set attributes = excluded.attributes, updated_at = now()
  returning updated_at`;

export const SELECT_SUBJECT = `select attributes, updated_at from subject where organization_id = $1 and id = $2`;

export const LIST_ACTIONS = `
  select ${columns}, version from scheduled_action
   where ($1::text is null or organization_id = $1)
     and ($2::text is null or status = $2)
     and ($3::text is null or workflow_id = $3)
   order by execute_at desc, id
   limit $4`;

/**
 * An organization's actions by execute time, latest first, after a keyset cursor (execute_at, id):
 * scheduled_action_organization_execute_idx; with a status pending, failed or cancelled
 * scheduled_action_organization_resting_idx, processing scheduled_action_processing_idx (the in-flight
 * claims, sorted), done the first index with the status as a filter (migration 000022, ADR 0032).
 */
export const LIST_ORGANIZATION_ACTIONS = `
  select ${columns}, version from scheduled_action
   where organization_id = $1
     and ($2::text is null or status = $2)
     and ($3::text is null or workflow_id = $3)
     and ($4::timestamptz is null or (execute_at, id) < ($4, $5::uuid))
     and ($7::text is null or mode = $7)
     and ($8::text is null or correlation_key = $8)
   order by execute_at desc, id desc
   limit $6`;

export async function lockDueActions(sql: SqlClient, limit: number) {
  const { rows } = await sql.query<Row>(LOCK_DUE_ACTIONS, [limit]);
  return scheduledActionTable.rows(rows);
}

export async function nextActionDueInMs(sql: SqlClient): Promise<number | null> {
  const { rows } = await sql.query<{ due_in_ms: number | null }>(NEXT_ACTION_DUE_IN_MS);
  const dueInMs = rows[0]?.due_in_ms ?? null;
  return dueInMs === null ? null : Math.max(0, dueInMs);
}

export async function findStaleActions(sql: SqlClient, staleAfterMs: number, limit: number) {
  const { rows } = await sql.query<Row>(FIND_STALE_ACTIONS, [staleAfterMs, limit]);
  return scheduledActionTable.rows(rows);
}

export async function lockStaleActions(
  sql: SqlClient,
  found: readonly { streamId: string; version: number }[],
  staleAfterMs: number,
) {
  if (found.length === 0) return [];
  const { rows } = await sql.query<Row>(LOCK_STALE_ACTIONS, [
    staleAfterMs,
    found.map((f) => f.streamId),
    found.map((f) => f.version),
  ]);
  return scheduledActionTable.rows(rows);
}

export async function lockCorrelation(sql: SqlClient, organizationId: string, correlationKey: string) {
  await sql.query(LOCK_CORRELATION, [organizationId, correlationKey]);
}

export async function lockWaitsForSignal(
  sql: SqlClient,
  signal: { organizationId: string; correlationKey: string; name: string },
) {
  const { rows } = await sql.query<Row>(LOCK_WAITS_FOR_SIGNAL, [
    signal.organizationId,
    signal.correlationKey,
    signal.name,
  ]);
  return scheduledActionTable.rows(rows);
}

export async function findPriorSignal(
  sql: SqlClient,
  wait: { organizationId: string; correlationKey: string; names: readonly string[] },
  lookbackMs: number,
): Promise<ReceivedSignal | null> {
  const { rows } = await sql.query<Row>(FIND_PRIOR_SIGNAL, [
    wait.organizationId,
    wait.correlationKey,
    wait.names,
    lookbackMs,
  ]);
  return rows[0] ? actionSignalTable.fromRow(rows[0]).state : null;
}

export interface SubjectRecord {
  organizationId: string;
  subjectId: string;
  attributes: Record<string, unknown>;
  updatedAt: string;
}

export async function upsertSubject(
  sql: SqlClient,
  organizationId: string,
  subjectId: string,
  attributes: Record<string, unknown>,
): Promise<SubjectRecord> {
  const { rows } = await sql.query<{ updated_at: Date }>(UPSERT_SUBJECT, [
    organizationId,
    subjectId,
    JSON.stringify(attributes),
  ]);
  return { organizationId, subjectId, attributes, updatedAt: rows[0]!.updated_at.toISOString() };
}

export async function loadSubject(
  sql: SqlClient,
  organizationId: string,
  subjectId: string,
): Promise<SubjectRecord | null> {
  const { rows } = await sql.query<{ attributes: Record<string, unknown>; updated_at: Date }>(
    SELECT_SUBJECT,
    [organizationId, subjectId],
  );
  const row = rows[0];
  return row
    ? { organizationId, subjectId, attributes: row.attributes, updatedAt: row.updated_at.toISOString() }
    : null;
}

export interface ActionFilter {
  organizationId?: string;
  status?: ActionStatus;
  workflowId?: string;
  limit?: number;
}

export async function listActions(sql: SqlClient, filter: ActionFilter = {}) {
  const { rows } = await sql.query<Row>(LIST_ACTIONS, [
    filter.organizationId ?? null,
    filter.status ?? null,
    filter.workflowId ?? null,
    filter.limit ?? 100,
  ]);
  return scheduledActionTable.rows(rows).map((r) => r.state);
}

export interface OrganizationActionFilter {
  organizationId: string;
  status?: ActionStatus;
  workflowId?: string;
  /** The last action of the previous page. */
  before?: { executeAt: string; id: string } | null;
  limit: number;
  /** `waitForSignal`: the waits (the dashboard's "waiting" list, with status pending). */
  mode?: 'normal' | 'waitForSignal';
  correlationKey?: string;
}

export async function listOrganizationActions(sql: SqlClient, filter: OrganizationActionFilter) {
  const { rows } = await sql.query<Row>(LIST_ORGANIZATION_ACTIONS, [
    filter.organizationId,
    filter.status ?? null,
    filter.workflowId ?? null,
    filter.before?.executeAt ?? null,
    filter.before?.id ?? null,
    filter.limit,
    filter.mode ?? null,
    filter.correlationKey ?? null,
  ]);
  return scheduledActionTable.rows(rows).map((r) => r.state);
}
