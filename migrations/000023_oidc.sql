-- OpenID Connect sign-in beside API keys (issue 25 item 2, ADR 0035).

-- The subjects of an issuer's tokens, per organization, so `GET /v1/actors` can show the actor
-- `oidc:<sub>` of an event by the name its token carried. Written by the API on a token's use (an
-- upsert at most once a minute per subject and process, and whenever the name changed); nothing else
-- depends on it: an event's actor is the subject itself.
create table oidc_subject (
  organization_id  text not null check (organization_id <> ''),
  subject          text not null check (subject <> ''),
  name             text,
  role             text not null check (role in ('viewer', 'operator', 'admin')),
  first_seen_at    timestamptz not null default now(),
  last_seen_at     timestamptz not null default now(),
  primary key (organization_id, subject)
);

-- A dashboard session is now made by an API key (key_id, as before) or by a sign-in through the issuer:
-- then it holds the organization, role and subject the ID token's claims mapped to, and `not_after`,
-- when the issuer's token expires (the session ends then, whatever its idle expiry: the page signs in
-- again). The tokens themselves are not stored.
alter table api_session
  alter column key_id drop not null,
  add column organization_id text,
  add column role text check (role in ('viewer', 'operator', 'admin')),
  add column subject text,
  add column not_after timestamptz,
  add constraint api_session_credential check (
    (key_id is not null and subject is null)
    or (key_id is null and subject is not null and organization_id is not null and role is not null
        and not_after is not null)
  );
-- Pruning a subject's expired sessions at its sign-in.
create index api_session_subject_idx on api_session (subject) where subject is not null;
