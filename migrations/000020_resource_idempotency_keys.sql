-- The Idempotency-Key header a resource was created with, on the resource (issue 23), from its creation
-- event. Rows created before it was recorded: null, as their events replay.
alter table cron_job add column idempotency_key text;
alter table scheduled_action add column idempotency_key text;
-- A campaign's `idempotency_key` is the organization's own unique key from the create body (seed 003);
-- the header's goes in a column of its own, not unique (a failed SMS create releases its key, and the
-- retry with the same key makes a new campaign).
alter table campaign add column request_idempotency_key text;
