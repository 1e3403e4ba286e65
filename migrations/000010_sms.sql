-- Per-recipient SMS campaigns, part 1 (seed 003; docs/decisions/0014-sms-campaigns.md): the campaign's
-- SMS facts, its recipients, CSV uploads, the routing and pricing tables (seeded below), and the
-- billing ledger (the default billing port).

-- The campaign state row gains the SMS facts (definition, totals, charge, build attempt, progress
-- counters: one jsonb field of the decider's state) and `sms_unsent` (pending + deferred, computed from
-- them when the row is written) for the dispatch sweep's index.
alter table campaign add column sms jsonb;
alter table campaign add column sms_unsent integer not null default 0;
-- The dispatch sweep: DISPATCHING SMS campaigns with recipients left, least recently progressed first.
create index campaign_sms_dispatch_idx on campaign (claimed_at)
  where status = 'DISPATCHING' and channel = 'sms' and sms_unsent > 0 and deleted_at is null;

-- One row per recipient with everything frozen at creation (seed 003, step 9): final content, route
-- (operator, sender, channel, MNO user), rate, segments and cost. A phone number is not unique within a
-- campaign (seed 003: "does not treat a phone number as unique"); a CSV build skips in-file duplicates.
-- status: PENDING (ready) → SUBMITTED, or DEFERRED (outside its send window until next_allowed_at,
-- never dropped) → SUBMITTED. next_allowed_at is -infinity while PENDING, so ready rows are one index
-- range. Part 2 adds the delivery statuses.
create table campaign_recipient (
  id               bigint generated always as identity primary key,
  campaign_id      uuid not null,
  msisdn           text not null,
  operator         text not null,
  timezone         text not null,
  tags             jsonb,
  content          text not null,
  encoding         text not null check (encoding in ('GSM7', 'UCS2')),
  segments         smallint not null check (segments between 1 and 10),
  lang             text not null check (lang in ('bn', 'en')),
  sender           text not null,
  route_channel    text not null,
  mno_user         text not null,
  rate             numeric(12, 4) not null check (rate >= 0),
  cost             numeric(14, 4) not null check (cost >= 0),
  status           text not null default 'PENDING' check (status in ('PENDING', 'DEFERRED', 'SUBMITTED')),
  next_allowed_at  timestamptz not null default '-infinity',
  deferrals        integer not null default 0,
  attempts         integer not null default 0,
  submission_id    uuid,
  submitted_at     timestamptz,
  created_at       timestamptz not null default now()
);
-- The dispatcher's claim: a campaign's unsent recipients that may be sent now, in order.
create index campaign_recipient_ready_idx on campaign_recipient (campaign_id, next_allowed_at, id)
  where status in ('PENDING', 'DEFERRED');
-- A campaign's recipients in creation order (lists, clearing a failed build).
create index campaign_recipient_campaign_idx on campaign_recipient (campaign_id, id);
-- A submission's recipients (part 2: delivery reports name the submission).
create index campaign_recipient_submission_idx on campaign_recipient (submission_id) where submission_id is not null;

-- Bulk CSV uploads (seed 003's campaign_upload): the file as received (in chunks, so it is stored and
-- read back in bounded memory), the metadata, and the build's outcome. status: PENDING → IN_PROGRESS
-- (a build attempt holds it; heartbeat_at is its last batch) → DONE or FAILED.
create table campaign_upload (
  id               uuid primary key,
  campaign_id      uuid not null unique,
  organization_id  text not null,
  status           text not null default 'PENDING' check (status in ('PENDING', 'IN_PROGRESS', 'DONE', 'FAILED')),
  meta             jsonb not null,
  file_name        text,
  size_bytes       bigint not null,
  sha256           text not null,
  chunks           integer not null,
  attempt          integer not null default 0,
  claimed_by       text,
  heartbeat_at     timestamptz,
  rows_read        bigint not null default 0,
  accepted_count   integer not null default 0,
  rejected_count   integer not null default 0,
  rejected_by_reason jsonb not null default '{}'::jsonb,
  error            text,
  created_at       timestamptz not null default now(),
  finished_at      timestamptz
);
-- The build worker's claim: uploads waiting or being built, oldest first.
create index campaign_upload_claim_idx on campaign_upload (created_at) where status in ('PENDING', 'IN_PROGRESS');

create table campaign_upload_chunk (
  upload_id  uuid not null references campaign_upload (id) on delete cascade,
  seq        integer not null,
  data       bytea not null,
  primary key (upload_id, seq)
);

-- Routing and pricing (the default routing port). Prefixes are E.164 digits without '+' (longest
-- prefix wins); a route or rate of organization null applies to every organization that has none of
-- its own.
create table sms_operator_prefix (
  prefix    text primary key check (prefix ~ '^[0-9]{2,15}$'),
  operator  text not null
);

create table sms_route (
  id               bigint generated always as identity primary key,
  organization_id  text,
  operator         text not null,
  message_type     text not null check (message_type in ('PROMOTIONAL', 'TRANSACTIONAL')),
  sender           text not null,
  channel          text not null,
  mno_user         text not null,
  active           boolean not null default true,
  priority         integer not null default 0
);
create index sms_route_lookup_idx on sms_route (operator, message_type, organization_id) where active;

create table sms_rate (
  organization_id  text,
  operator         text not null,
  message_type     text not null check (message_type in ('PROMOTIONAL', 'TRANSACTIONAL')),
  rate             numeric(12, 4) not null check (rate >= 0),
  unique nulls not distinct (organization_id, operator, message_type)
);

-- Bangladesh's mobile operators by number range (8801X…).
insert into sms_operator_prefix (prefix, operator) values
  ('88013', 'GP'), ('88017', 'GP'),
  ('88014', 'BANGLALINK'), ('88019', 'BANGLALINK'),
  ('88016', 'ROBI'), ('88018', 'ROBI'),
  ('88015', 'TELETALK');

-- Default routes and rates (replace or add per organization in production).
insert into sms_route (organization_id, operator, message_type, sender, channel, mno_user)
select null, op, mt, case mt when 'PROMOTIONAL' then 'HERALD' else '8809617000000' end,
       lower(op) || '-smpp-1', 'herald_' || lower(op)
  from unnest(array['GP', 'BANGLALINK', 'ROBI', 'TELETALK']) as op,
       unnest(array['PROMOTIONAL', 'TRANSACTIONAL']) as mt;

insert into sms_rate (organization_id, operator, message_type, rate)
select null, op, mt, case mt when 'PROMOTIONAL' then 0.3000 else 0.2500 end
  from unnest(array['GP', 'BANGLALINK', 'ROBI', 'TELETALK']) as op,
       unnest(array['PROMOTIONAL', 'TRANSACTIONAL']) as mt;

-- The billing ledger (the default billing port, seed 003's client-service): one balance per
-- organization and one entry per applied operation, unique by (organization, kind, key), so a
-- repeated deduct or refund with the same key is answered from its entry and applied once. Invariant:
-- balance = credits - deductions + refunds (checked by the row's constraint and by the entries).
create table billing_account (
  organization_id  text primary key,
  balance          numeric(18, 4) not null default 0 check (balance >= 0),
  credits          numeric(18, 4) not null default 0,
  deductions       numeric(18, 4) not null default 0,
  refunds          numeric(18, 4) not null default 0,
  updated_at       timestamptz not null default now(),
  check (balance = credits - deductions + refunds)
);

create table billing_entry (
  id               bigint generated always as identity primary key,
  organization_id  text not null references billing_account (organization_id),
  kind             text not null check (kind in ('credit', 'deduction', 'refund')),
  key              text not null,
  amount           numeric(18, 4) not null check (amount >= 0),
  balance_after    numeric(18, 4) not null,
  -- A refund that reversed a deduction that was never applied (an ambiguous outcome): it blocks a late
  -- arrival of that deduction.
  reversed_unapplied boolean not null default false,
  reason           text,
  created_at       timestamptz not null default now(),
  unique (organization_id, kind, key)
);
