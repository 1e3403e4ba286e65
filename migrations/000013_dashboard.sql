-- The dashboard (issue 14): sign-in sessions of the HTTP API, and the indexes its searches read.

-- A dashboard session: made by signing in with an API key (POST /v1/session), carried by an HttpOnly
-- cookie. Only the SHA-256 of the 256-bit random session id is stored (like api_key.secret_hash), with
-- the CSRF token every command of the session must echo in `x-csrf-token`. A session expires when it
-- has been idle for HERALD_API_SESSION_IDLE_MINUTES (expires_at, pushed forward on use, database clock)
-- and dies with its key: authentication joins api_key and refuses a revoked one.
create table api_session (
  id_hash       bytea primary key,
  key_id        uuid not null references api_key (id) on delete cascade,
  csrf_token    text not null,
  created_at    timestamptz not null default now(),
  last_seen_at  timestamptz not null default now(),
  expires_at    timestamptz not null
);
-- Revocation and pruning: a key's sessions, expired sessions.
create index api_session_key_idx on api_session (key_id);
create index api_session_expires_at_idx on api_session (expires_at);

-- Recipient search by phone number (normalized E.164, as stored) across campaigns, newest first.
create index campaign_recipient_msisdn_idx on campaign_recipient (msisdn, id);

-- Campaign search by name prefix, case-insensitive, within an organization (the list's `q`); the list
-- then sorts the (few) matches by (created_at, id). A uuid `q` is the primary key.
create index campaign_organization_name_idx on campaign (organization_id, lower(name) text_pattern_ops);

-- Campaign lists per organization and channel, newest first (the channel filter).
create index campaign_organization_channel_idx on campaign (organization_id, channel, created_at, id);

-- Consumer dead letters per consumer (the overview), without reading the processed inbox rows.
create index inbox_dead_idx on inbox (consumer) where status = 'dead';
