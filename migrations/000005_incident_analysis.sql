-- Incident analysis (invariant 8, docs/decisions/0008-projections-replay-verify.md): publish receipts,
-- the first asynchronous projection, and the look-ups `herald replay` follows.

-- Publish receipts: one row per final outcome the relay recorded for an outbox row, written by the SAME
-- statement that changes the row: `sent` by the mark that follows the broker's confirm (invariant 3),
-- `dead` by the retry that exhausted the attempts. Append-only, and kept longer than the outbox (its own
-- retention, HERALD_RECEIPT_RETENTION_DAYS), so what was published, where and when survives outbox
-- pruning; `message_id` and `event_position` keep the link to the message and the event that caused
-- it. `tx` makes receipts followable like the event log: readers take rows with
-- tx < pg_snapshot_xmin(pg_current_snapshot()) in (tx, id) order, so none is skipped.
-- No foreign key to event: it would cost the relay an index probe per row, and events are never deleted.
create table publish_receipt (
  id              bigint generated always as identity,
  tx              xid8 not null default pg_current_xact_id(),
  message_id      uuid not null,
  outbox_id       bigint not null,
  event_position  bigint not null,
  sink            text not null,
  destination     text not null,
  routing_key     text,
  partition_key   text,
  outcome         text not null check (outcome in ('sent', 'dead')),
  -- The broker's reference for the publish (Kafka partition/offset); null for AMQP.
  broker_ref      text,
  attempts        integer not null,
  recovery_count  integer not null,
  -- `dead`: the last publish error.
  error           text,
  -- `sent`: when the relay marked the row sent, right after the broker's confirm (database clock).
  confirmed_at    timestamptz,
  recorded_at     timestamptz not null default now(),
  primary key (tx, id),
  check ((outcome = 'sent') = (confirmed_at is not null))
);
-- Replay: event → its messages' receipts. Positions grow with time, so inserts stay at the right edge.
create index publish_receipt_event_position_idx on publish_receipt (event_position);
-- Export by time range and retention pruning; receipts are appended in time order, so BRIN suffices.
create index publish_receipt_recorded_at_brin on publish_receipt using brin (recorded_at);

-- Replay: message → the consumers' inbox records (the primary key starts with the consumer).
create index inbox_message_id_idx on inbox (message_id);

-- Projection `dispatch_stats` (src/projections/dispatch-stats.ts): campaign dispatch per UTC hour,
-- organization and destination. Written only by the projector, in the same transaction as its
-- checkpoint; `herald projections rebuild dispatch_stats` rebuilds it beside this table and swaps.
-- '' stands for "none" in the key (an sms campaign has no single destination).
create table dispatch_stats (
  hour             timestamptz not null,
  organization_id  text not null,
  destination      text not null,
  claimed          bigint not null default 0,
  published        bigint not null default 0,
  delivered        bigint not null default 0,
  discarded        bigint not null default 0,
  failed           bigint not null default 0,
  dead             bigint not null default 0,
  primary key (hour, organization_id, destination)
);
