-- Real LINE delivery (issue 20, ADR 0021).
-- A LINE campaign's content and delivery progress (plan, accepted chunks, cursor) live in `line`, a
-- field of the decider's state like `sms`; narrowcast joins the cast types.
alter table campaign add column line jsonb;
alter table campaign drop constraint campaign_cast_type_check;
alter table campaign add constraint campaign_cast_type_check
  check (cast_type in ('broadcast', 'multicast', 'narrowcast'));

-- The recording port's table is gone: deliveries are LINE calls now, each an event with its request id.
drop table line_delivery;

-- A multicast audience: LINE user ids, uploaded in pages, then sealed. A sealed audience never changes,
-- so chunk k of a campaign (the 500 ids after the cursor chunk k-1 ended at) is the same on every
-- attempt, and a re-sent chunk carries the same recipients under the same retry key.
create table line_audience (
  audience_id      text primary key,
  organization_id  text not null,
  name             text not null,
  members          integer not null default 0 check (members >= 0),
  sealed_at        timestamptz,
  created_at       timestamptz not null default now(),
  check (sealed_at is null or members > 0)
);

-- Keyset pages in byte order (collate "C"): the order the cursor compares in, whatever the locale.
create table line_audience_member (
  audience_id  text not null references line_audience (audience_id) on delete cascade,
  user_id      text collate "C" not null check (user_id ~ '^U[0-9a-f]{32}$'),
  primary key (audience_id, user_id)
);

-- A LINE official account's channel: its long-lived token, or the client id and secret Herald issues
-- short-lived tokens with (cached here until shortly before expiry). Secrets are AES-256-GCM sealed
-- (`v1:<key id>:<iv>:<tag>:<ciphertext>`), never stored or returned in clear.
create table line_channel (
  line_oa_id            text primary key,
  organization_id       text not null,
  channel_id            text not null,
  token_kind            text not null check (token_kind in ('long_lived', 'short_lived')),
  sealed_token          text,
  client_id             text,
  sealed_client_secret  text,
  sealed_issued_token   text,
  issued_expires_at     timestamptz,
  created_at            timestamptz not null default now(),
  updated_at            timestamptz not null default now(),
  check ((token_kind = 'long_lived' and sealed_token is not null)
      or (token_kind = 'short_lived' and client_id is not null and sealed_client_secret is not null))
);
