-- A CSV campaign whose charge billing could not answer (ADR 0023): the build saved every recipient and
-- asked billing to deduct `campaign:{id}`, but the outcome is unknown (a timeout, a 5xx, a connection
-- error). The upload waits in CHARGING — the campaign stays BUILDING with its recipients — and the build
-- sweep asks billing again with the same key every HERALD_SMS_CHARGE_RETRY_SECONDS (heartbeat_at is the
-- last try), until it answers (DONE and the campaign activated, or FAILED on a refusal) or
-- HERALD_SMS_CHARGE_GIVE_UP_MINUTES after `charge_pending_since` (the charge reversed by its key, FAILED).
alter table campaign_upload drop constraint campaign_upload_status_check;
alter table campaign_upload add constraint campaign_upload_status_check
  check (status in ('PENDING', 'IN_PROGRESS', 'CHARGING', 'DONE', 'FAILED'));
alter table campaign_upload
  add column charge_pending_since timestamptz,
  add column charge_attempts integer not null default 0;
create index campaign_upload_charging_idx on campaign_upload (heartbeat_at) where status = 'CHARGING';
