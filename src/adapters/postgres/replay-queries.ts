/**
 * Look-ups `herald replay` makes to follow a stream's causal chain: the outbox rows its events caused
 * (still there until pruned; a scan of the outbox, which has no event_position index on purpose —
 * migration 000003 — and is bounded by the outbox's retention) and the consumers' inbox records of
 * those messages (by message id, through the inbox's primary key: ADR 0032 dropped the message id's own
 * index, which every consumed message paid for). Receipts are in receipt-queries.ts. Read-only.
 */
import type { SqlClient } from '../../ports/database.js';
import { distinctLeadingValues } from './loose-index-scan.js';

export const OUTBOX_FOR_EVENTS = `
  select id, message_id, event_position, sink, destination, routing_key, status, attempts, last_error,
         created_at, sent_at, dead_at, next_attempt_at, broker_ref, recovery_count
    from outbox
   where event_position = any($1::bigint[])
   order by id`;

/**
 * The inbox's primary key is (consumer, message_id): the distinct consumers by a loose index scan of it
 * (one descent per consumer, however many rows each has), then one probe per consumer and message.
 */
export const INBOX_FOR_MESSAGES = `
  ${distinctLeadingValues('consumers', 'inbox', 'consumer')}
  select i.consumer, i.message_id, i.status, i.attempts, i.error, i.received_at, i.processed_at
    from consumers c
    join inbox i on i.consumer = c.consumer and i.message_id = any($1::text[])
   order by i.received_at, i.consumer`;

export interface OutboxTrace {
  id: number;
  messageId: string;
  eventPosition: number;
  sink: string;
  destination: string;
  routingKey: string | null;
  status: 'pending' | 'sent' | 'dead';
  attempts: number;
  lastError: string | null;
  createdAt: Date;
  sentAt: Date | null;
  deadAt: Date | null;
  nextAttemptAt: Date;
  brokerRef: string | null;
  recoveryCount: number;
}

export interface InboxTrace {
  consumer: string;
  messageId: string;
  status: string;
  attempts: number;
  error: string | null;
  receivedAt: Date;
  processedAt: Date;
}

export async function outboxForEvents(sql: SqlClient, positions: readonly number[]): Promise<OutboxTrace[]> {
  if (positions.length === 0) return [];
  const { rows } = await sql.query<{
    id: number;
    message_id: string;
    event_position: number;
    sink: string;
    destination: string;
    routing_key: string | null;
    status: OutboxTrace['status'];
    attempts: number;
    last_error: string | null;
    created_at: Date;
    sent_at: Date | null;
    dead_at: Date | null;
    next_attempt_at: Date;
    broker_ref: string | null;
    recovery_count: number;
  }>(OUTBOX_FOR_EVENTS, [positions]);
  return rows.map((row) => ({
    id: row.id,
    messageId: row.message_id,
    eventPosition: row.event_position,
    sink: row.sink,
    destination: row.destination,
    routingKey: row.routing_key,
    status: row.status,
    attempts: row.attempts,
    lastError: row.last_error,
    createdAt: row.created_at,
    sentAt: row.sent_at,
    deadAt: row.dead_at,
    nextAttemptAt: row.next_attempt_at,
    brokerRef: row.broker_ref,
    recoveryCount: row.recovery_count,
  }));
}

export async function inboxForMessages(sql: SqlClient, messageIds: readonly string[]): Promise<InboxTrace[]> {
  if (messageIds.length === 0) return [];
  const { rows } = await sql.query<{
    consumer: string;
    message_id: string;
    status: string;
    attempts: number;
    error: string | null;
    received_at: Date;
    processed_at: Date;
  }>(INBOX_FOR_MESSAGES, [messageIds]);
  return rows.map((row) => ({
    consumer: row.consumer,
    messageId: row.message_id,
    status: row.status,
    attempts: row.attempts,
    error: row.error,
    receivedAt: row.received_at,
    processedAt: row.processed_at,
  }));
}
