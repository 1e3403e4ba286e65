-- Fewer writes per item (issue 22 item 3, docs/decisions/0032-fewer-writes-per-item.md): what a
-- scheduled action's path (claimed → executed → its message marked sent) writes to the WAL, cut without
-- taking an index from a read path that needs it or loosening a guard. Each statement below names the
-- reads it keeps served; the ADR has the plans (EXPLAIN) and the measured WAL before and after.
--
-- Applied in the migrator's transaction, as every file is: `create/drop index concurrently` cannot run
-- there. The drops are instant; each BRIN build reads its table once while holding a SHARE lock on it
-- (appends wait meanwhile: about a second per million rows on the benchmark machine), as 000006's did.

-- 1. Room on each outbox page for a row's next version. A row is written and then marked sent (by the
--    process that committed it, ADR 0024, or claimed and then marked by a relay). No mark or claim can
--    be a HOT update (each changes a column a partial index's predicate or a BRIN index reads), but when
--    the new version fits on the same page PostgreSQL logs only the bytes that changed (the headers and
--    payload before them are left out of the record) instead of the whole row again. At the default
--    fillfactor of 100 the pages were full, and every claim and mark logged the whole row on another
--    page. Sent rows are pruned after HERALD_RELAY_RETENTION_HOURS, so the emptier pages stay a bounded cost.
--    Only pages written from now on are affected; existing pages keep their rows as they are.
alter table outbox set (fillfactor = 50);

-- 2. The event log's time index: read only by range scans — `herald export` ([from, to), sorted by
--    recorded_at, position), side-stream retention (recorded_at < now() - retention) — never for a
--    point look-up. Events are appended in time order (recorded_at is the appending transaction's start,
--    positions grow with it), so a BRIN index finds a range's blocks at a fraction of the B-tree's cost,
--    which was an entry per event (two per action).
create index event_recorded_at_brin on event using brin (recorded_at);
drop index event_recorded_at_idx;

-- 3. An organization's actions by status (the API's and dashboard's list with a status filter). Every
--    state change of an action moved it in this index (two entries per action: claimed, executed). Now
--    it holds only the statuses an action rests in while waiting or after going wrong; the others are
--    listed through indexes every action is in anyway:
--    - processing (in flight): scheduled_action_processing_idx, the organization as a filter, sorted;
--    - done: scheduled_action_organization_execute_idx (organization_id, execute_at, id), status as a
--      filter (done actions are the bulk of an organization's history).
create index scheduled_action_organization_resting_idx on scheduled_action (organization_id, status, execute_at)
  where status in ('pending', 'failed', 'cancelled');
drop index scheduled_action_organization_idx;

-- 4. The inbox's message-id index: read only by `herald replay` (a message → the consumers' records of
--    it) and stale recovery's liveness check (was a sent message settled by any consumer?), and every
--    message every consumer records paid an entry for it. Both now find the records through the primary
--    key (consumer, message_id): the few distinct consumers by a loose index scan, then one probe per
--    consumer and message (replay-queries.ts, claim-liveness-queries.ts).
drop index inbox_message_id_idx;

-- 5. Receipts by event position (`herald replay`: an event → its messages' receipts). Receipts are
--    appended when the relay marks a row, moments after its event committed, so positions grow with the
--    heap: a BRIN index of small ranges (16 pages, some 600 receipts) finds an event's receipts reading
--    a range or two instead of an entry per receipt.
create index publish_receipt_event_position_brin on publish_receipt using brin (event_position)
  with (pages_per_range = 16);
drop index publish_receipt_event_position_idx;
