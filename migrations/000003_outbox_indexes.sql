-- Relay throughput: every claim and every mark-sent rewrites the whole outbox tuple (no HOT update is
-- possible: indexed columns change), so each btree index costs a write per update, two per message.
-- - outbox_event_position_idx only served the foreign key's check on event deletes, and events are
--   never deleted (the log is append-only): dropped.
-- - outbox_sent_idx served pruning; a BRIN index on sent_at serves it as well (rows are sent roughly in
--   the order they sit in the heap) at a fraction of the maintenance cost.
drop index if exists outbox_event_position_idx;
drop index if exists outbox_sent_idx;
create index outbox_sent_at_brin on outbox using brin (sent_at);
