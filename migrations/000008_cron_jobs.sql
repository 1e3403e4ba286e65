-- Cron jobs (seed 004) and their runs: the inline projections of the 'cron_job' and 'job_run' event
-- streams (invariants 1 and 8). Every column is a field of its decider's state; `version` is the
-- stream version the row reflects. ADR 0011.
create table cron_job (
  id                  uuid primary key,
  organization_id     text not null,
  name                text not null,
  schedule            text not null,
  timezone            text not null,
  dst                 jsonb not null,
  job_type            text not null check (job_type in ('ping', 'webhook', 'slack', 'email')),
  payload             jsonb not null,
  timeout_ms          integer not null,
  overlap             text not null check (overlap in ('allow', 'skip', 'buffer-one')),
  catch_up            jsonb not null,
  retry               jsonb not null,
  status              text not null check (status in ('active', 'paused', 'deleted')),
  next_run_at         timestamptz,
  last_occurrence_at  timestamptz,
  paused_at           timestamptz,
  paused_reason       text,
  paused_by           text,
  created_at          timestamptz not null,
  updated_at          timestamptz not null,
  deleted_at          timestamptz,
  version             integer not null
);
-- The materializer's claim: active jobs in due order.
create index cron_job_due_idx on cron_job (next_run_at, id) where status = 'active' and next_run_at is not null;
create index cron_job_organization_idx on cron_job (organization_id, name);

create table job_run (
  id                uuid primary key,
  job_id            uuid not null,
  organization_id   text not null,
  job_type          text not null,
  scheduled_for     timestamptz not null,
  trigger           text not null check (trigger in ('schedule', 'manual', 'backfill')),
  trigger_key       text not null,
  fate              text not null check (fate in ('fired', 'buffered', 'skipped-overlap', 'missed', 'paused',
                      'backfilled', 'manual')),
  span_last         timestamptz,
  span_count        integer,
  reason            text,
  status            text not null check (status in ('buffered', 'queued', 'running', 'retry_scheduled',
                      'completed', 'failed', 'permanently_failed', 'skipped', 'missed', 'paused', 'cancelled')),
  attempts          integer not null,
  max_attempts      integer not null,
  retry             jsonb not null,
  overlap           text not null,
  claim_epoch       integer not null,
  claimed_at        timestamptz,
  next_attempt_at   timestamptz,
  started_at        timestamptz,
  finished_at       timestamptz,
  response_status   integer,
  output            text,
  error             text,
  duration_ms       integer,
  created_at        timestamptz not null,
  updated_at        timestamptz not null,
  version           integer not null
);
-- Structural: one run per occurrence and trigger, however many scanners materialize at once. Manual runs
-- have a key of their own ('manual:<run id>').
create unique index job_run_occurrence_idx on job_run (job_id, scheduled_for, trigger_key);
-- The overlap policy: a job's runs still active or buffered.
create index job_run_active_idx on job_run (job_id) where status in ('queued', 'running', 'retry_scheduled', 'buffered');
-- The retry sweep: due retries in due order.
create index job_run_retry_due_idx on job_run (next_attempt_at, id) where status = 'retry_scheduled';
-- Stale recovery: live claims by age.
create index job_run_claimed_idx on job_run (claimed_at) where status in ('queued', 'running');
-- The ledger: records that cover several occurrences, by their last one.
create index job_run_span_idx on job_run (job_id, span_last) where span_last is not null;
