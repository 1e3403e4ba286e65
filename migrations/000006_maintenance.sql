-- Maintenance services (src/maintenance/, docs/decisions/0009-aggregate-registry.md): the look-ups each
-- retention statement needs, so pruning stays an index range scan however large the tables grow.

-- `skipped` rows (an operator gave up on a dead row) are pruned after HERALD_OUTBOX_SKIPPED_RETENTION_DAYS,
-- counted from the skip. Rows skipped before this migration count from when they died.
alter table outbox add column skipped_at timestamptz;
update outbox set skipped_at = coalesce(dead_at, created_at) where status = 'skipped';
create index outbox_skipped_idx on outbox (skipped_at) where status = 'skipped';

-- Deleting old events of a side stream (the per-minute campaign_tick) checks the outbox foreign key for
-- each deleted event. The btree on event_position was dropped for relay throughput (000003); a BRIN
-- index serves the check (rows are inserted in event order) at almost no cost to the relay's updates.
create index outbox_event_position_brin on outbox using brin (event_position);

-- Inbox retention (HERALD_INBOX_RETENTION_DAYS): rows are written in time order, so BRIN suffices.
create index inbox_processed_at_brin on inbox using brin (processed_at);

-- Campaigns waiting in CANCELLING for their cancellation to settle (the campaign sweeper settles those with
-- nothing left to refund).
create index campaign_cancelling_idx on campaign (status_changed_at) where status = 'CANCELLING';

-- Idempotency keys expire (the HTTP API's Idempotency-Key, 24 h by default).
create index idempotency_key_expires_at_idx on idempotency_key (expires_at);
