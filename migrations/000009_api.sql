-- The HTTP API (`herald api`, docs/decisions/0012-http-api.md): API keys, the organization of each outbox
-- row (tenancy of the outbox operations), and the indexes the API's cursor-paginated lists read.

-- API keys: one organization and one role each. Only the SHA-256 of the key is stored (the key is a
-- 256-bit random secret, shown once at creation); `prefix` is its non-secret head, shown in lists so a
-- key can be recognised. A revoked key stays (its id is the actor of the events it caused).
create table api_key (
  id               uuid primary key,
  organization_id  text not null check (organization_id <> ''),
  role             text not null check (role in ('viewer', 'operator', 'admin')),
  name             text not null,
  prefix           text not null,
  secret_hash      bytea not null,
  created_at       timestamptz not null default now(),
  created_by       text,
  revoked_at       timestamptz,
  last_used_at     timestamptz
);
-- Every request's authentication: one index probe by the key's hash.
create unique index api_key_secret_hash_idx on api_key (secret_hash);
-- An organization's keys, oldest first (the key list's cursor).
create index api_key_organization_idx on api_key (organization_id, created_at, id);

-- The organization an outbox row's event belongs to (written by the command handler from the
-- aggregate's state; null for rows of no organization, such as the per-minute tick). No default and
-- no rewrite: existing rows keep null. The API's outbox lists read only the rows of the caller's
-- organization, through these partial indexes (dead rows are rare; pending rows are a backlog).
alter table outbox add column organization_id text;
create index outbox_pending_organization_idx on outbox (organization_id, id)
  where status = 'pending' and organization_id is not null;
create index outbox_dead_organization_idx on outbox (organization_id, id)
  where status = 'dead' and organization_id is not null;

-- Campaign lists per organization, newest first, optionally by status (keyset on (created_at, id)).
create index campaign_organization_idx on campaign (organization_id, created_at, id);
create index campaign_organization_status_idx on campaign (organization_id, status, created_at, id);

-- Scheduled-action lists per organization by execute time (keyset on (execute_at, id)); the existing
-- scheduled_action_organization_idx (organization_id, status, execute_at) serves the status filter.
create index scheduled_action_organization_execute_idx on scheduled_action (organization_id, execute_at, id);
