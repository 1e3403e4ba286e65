-- Per-key ordering for outbox rows that ask for it (ADR 0007). A row written with `ordered = true` is
-- published only when it is the head of its key: no earlier row of the same (sink, destination,
-- partition_key) is still unsent (pending, in flight or dead). Rows behind a head wait with
-- next_attempt_at = 'infinity' (out of the claim's due range) until the head is sent or skipped.
--
-- `tx` is the writing transaction's id, as on the event log: "earlier" means earlier in (tx, id), and
-- an ordered row is claimed only once tx < pg_snapshot_xmin(pg_current_snapshot()), so no transaction
-- that could still commit an earlier row of its key is running. Existing rows keep tx null (no table
-- rewrite: the default is set after the column exists); they are all unordered.
alter table outbox add column ordered boolean not null default false;
alter table outbox add column tx xid8;
alter table outbox alter column tx set default pg_current_xact_id();
alter table outbox add constraint outbox_ordered_key_check
  check (not ordered or (partition_key is not null and tx is not null)) not valid;
alter table outbox validate constraint outbox_ordered_key_check;

-- `skipped`: an operator gave up on a dead row (`herald outbox skip <id>`), so an ordered key behind it
-- drains; recovery never re-queues it. last_error records who skipped it, why, and the last failure.
alter table outbox drop constraint outbox_status_check;
alter table outbox add constraint outbox_status_check
  check (status in ('pending', 'sent', 'dead', 'skipped')) not valid;
alter table outbox validate constraint outbox_status_check;

-- Unsent ordered rows by key in (tx, id) order: finds a row's earlier unsent row (the claim's head
-- check) and each key's head (wake-ups, `herald outbox parked`). Unordered rows never enter it, so the
-- unordered relay path pays nothing for it.
create index outbox_ordered_key_idx on outbox (sink, destination, partition_key, tx, id)
  where ordered and status in ('pending', 'dead');
