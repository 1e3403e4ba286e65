-- Scheduled actions (seed 002, docs/decisions/0010-scheduled-actions.md): the state tables of the
-- 'scheduled_action' and 'action_signal' streams (inline projections, invariants 1 and 8), and the
-- subject table the default subject port reads at fire time.

create table scheduled_action (
  id                  uuid primary key,
  organization_id     text not null,
  mode                text not null check (mode in ('normal', 'waitForSignal')),
  action_type         text not null,
  action_config       jsonb not null,
  source_config       jsonb,
  workflow_id         text,
  workflow_node_path  text,
  subject_id          text,
  status              text not null check (status in ('pending', 'processing', 'done', 'failed', 'cancelled')),
  -- When it is next due (pending): now + delay, a wait's deadline, or now once a signal unlocked it.
  execute_at          timestamptz not null,
  expires_at          timestamptz,
  -- The wait: {names: [...], correlationKey}; correlation_key repeats the key for the signal look-up.
  wait                jsonb,
  correlation_key     text,
  expiry              jsonb,
  max_retries         integer not null,
  retry_count         integer not null,
  unlocked_by         jsonb,
  fired_now           boolean not null,
  expired             boolean not null,
  due_because         text not null,
  claim_epoch         integer not null,
  claimed_at          timestamptz,
  branch              text check (branch in ('main', 'expiry')),
  delivery            text check (delivery in ('queue', 'in-process')),
  last_error          text,
  cancel_reason       text,
  outcome             text check (outcome in ('executed', 'expired')),
  created_at          timestamptz not null,
  status_changed_at   timestamptz not null,
  version             integer not null
);
-- The claim (seed 002's claimBatch): pending actions in due order; a wait is due at its deadline.
create index scheduled_action_due_idx on scheduled_action (execute_at, id) where status = 'pending';
-- Stale recovery (seed 002's recoverStaleProcessing): live claims by age.
create index scheduled_action_processing_idx on scheduled_action (claimed_at) where status = 'processing';
-- A signal's look-up of the waits it may unlock.
create index scheduled_action_waiting_idx on scheduled_action (organization_id, correlation_key)
  where status = 'pending' and mode = 'waitForSignal';
-- Listing per organization.
create index scheduled_action_organization_idx on scheduled_action (organization_id, status, execute_at);

create table action_signal (
  id               uuid primary key,
  status           text not null check (status = 'received'),
  organization_id  text not null,
  correlation_key  text not null,
  name             text not null,
  payload          jsonb not null,
  unlocked         jsonb not null,
  refused          jsonb not null,
  unlocked_later   jsonb not null,
  received_at      timestamptz not null,
  version          integer not null
);
-- The lookback: the latest signal of a name for a correlation key.
create index action_signal_lookback_idx on action_signal (organization_id, correlation_key, name, received_at desc);

-- Subjects (the seed's line_user): the attributes conditions are evaluated against at fire time,
-- upserted through the library and `herald actions subject`.
create table subject (
  organization_id  text not null,
  id               text not null,
  attributes       jsonb not null,
  updated_at       timestamptz not null default now(),
  primary key (organization_id, id)
);
