-- Campaign state table: the inline projection of the 'campaign' event stream (invariants 1 and 8).
-- Every column is a field of the decider's state; `version` is the stream version it reflects.
create table campaign (
  id                 uuid primary key,
  organization_id    text not null,
  channel            text not null check (channel in ('line', 'sms')),
  cast_type          text check (cast_type in ('broadcast', 'multicast')),
  audience_id        text,
  line_oa_id         text,
  name               text not null,
  idempotency_key    text,
  status             text not null check (status in ('DRAFT', 'BUILDING', 'QUEUED', 'SCHEDULED', 'DISPATCHING',
                       'PAUSED', 'COMPLETED', 'PARTIAL', 'FAILED', 'EXPIRED', 'CANCELLING', 'CANCELLED')),
  start_at           timestamptz,
  dispatch_deadline  timestamptz,
  claim_epoch        integer not null default 0,
  claimed_at         timestamptz,
  paused_from        text,
  deleted_at         timestamptz,
  resend_attempt     integer not null default 0,
  failure_reason     text,
  created_at         timestamptz not null,
  status_changed_at  timestamptz not null,
  version            integer not null
);
-- The scanner's claim: actionable campaigns in due order.
create index campaign_due_idx on campaign (start_at nulls first, id)
  where status in ('SCHEDULED', 'QUEUED') and deleted_at is null;
-- The reaper: live claims by age.
create index campaign_dispatching_idx on campaign (claimed_at) where status = 'DISPATCHING';
create unique index campaign_idempotency_idx on campaign (organization_id, idempotency_key)
  where idempotency_key is not null;

-- The default LINE delivery port records each delivery here, so duplicates are countable.
create table line_delivery (
  id            bigint generated always as identity primary key,
  campaign_id   uuid not null,
  epoch         integer not null,
  cast_type     text not null,
  audience_id   text,
  line_oa_id    text,
  message_id    text not null,
  delivered_at  timestamptz not null default now()
);
create index line_delivery_campaign_idx on line_delivery (campaign_id);
