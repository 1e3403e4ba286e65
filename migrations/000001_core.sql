-- Herald core: event log, transactional outbox, consumer inbox, leases, idempotency keys and
-- projection checkpoints. Applied by `herald migrate` with search_path set to the configured schema.

-- Invariant 1 and 8: the append-only event log. `tx` lets log followers read only below the
-- oldest running transaction (pg_snapshot_xmin), because identity values can commit out of order.
create table event (
  position     bigint generated always as identity primary key,
  tx           xid8 not null default pg_current_xact_id(),
  stream_type  text not null,
  stream_id    text not null,
  version      integer not null check (version > 0),
  type         text not null,
  data         jsonb not null,
  meta         jsonb not null default '{}'::jsonb,
  recorded_at  timestamptz not null default now(),
  constraint event_stream_version_unique unique (stream_type, stream_id, version)
);
create index event_tx_position_idx on event (tx, position);
create index event_recorded_at_idx on event (recorded_at);

-- Invariants 2–4: the transactional outbox. Rows are written in the same transaction as the event
-- that caused them (the foreign key makes "no outbox row without its event" structural) and only the
-- relay reads them. message_id is the stable identity every publish of the row carries.
create table outbox (
  id              bigint generated always as identity primary key,
  message_id      uuid not null unique,
  event_position  bigint not null references event (position),
  sink            text not null default 'amqp' check (sink in ('amqp', 'kafka')),
  destination     text not null check (destination <> ''),
  routing_key     text,
  partition_key   text,
  headers         jsonb not null default '{}'::jsonb,
  payload         jsonb not null,
  priority        smallint not null default 3 check (priority between 0 and 9),
  status          text not null default 'pending' check (status in ('pending', 'sent', 'dead')),
  attempts        integer not null default 0,
  next_attempt_at timestamptz not null default now(),
  locked_until    timestamptz,
  locked_by       text,
  last_error      text,
  created_at      timestamptz not null default now(),
  sent_at         timestamptz,
  dead_at         timestamptz,
  broker_ref      text,
  recovery_count  integer not null default 0
);
-- The relay's claim order. Claimed rows get next_attempt_at = locked_until, so rows in flight leave
-- the "due" prefix of this index and concurrent relays do not scan over each other's claims.
create index outbox_pending_claim_idx on outbox (priority, next_attempt_at, id) where status = 'pending';
create index outbox_dead_idx on outbox (dead_at) where status = 'dead';
create index outbox_sent_idx on outbox (sent_at) where status = 'sent';
create index outbox_event_position_idx on outbox (event_position);

-- Invariant 4: consumers de-duplicate by message id in the same transaction as their effects.
create table inbox (
  consumer      text not null,
  message_id    text not null,
  status        text not null default 'processed'
                check (status in ('processed', 'discarded', 'rejected', 'dead')),
  attempts      integer not null default 1,
  error         text,
  received_at   timestamptz not null default now(),
  processed_at  timestamptz not null default now(),
  primary key (consumer, message_id)
);

-- Invariant 7: leadership/leases timed by the database clock.
create table lease (
  name         text primary key,
  owner        text not null,
  term         bigint not null default 1,
  acquired_at  timestamptz not null default now(),
  renewed_at   timestamptz not null default now(),
  expires_at   timestamptz not null
);

create table idempotency_key (
  scope         text not null,
  key           text not null,
  request_hash  text not null,
  state         text not null default 'in_progress' check (state in ('in_progress', 'completed')),
  response      jsonb,
  created_at    timestamptz not null default now(),
  expires_at    timestamptz not null,
  primary key (scope, key)
);

create table projection_checkpoint (
  name          text primary key,
  last_tx       xid8 not null default '0'::xid8,
  last_position bigint not null default 0,
  updated_at    timestamptz not null default now()
);
