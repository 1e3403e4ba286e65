-- The SMPP gateway (`herald sms-gateway`, ADR 0022). A submission chunk consumed from the submit topic
-- becomes one row per recipient part; each part's life is recorded before and after it meets the SMSC:
--   queued → sending (recorded in its own transaction BEFORE the submit_sm is written: the intent)
--          → accepted (submit_sm_resp OK, with the SMSC's message id, stored before its receipt can be
--            matched) | queued again (ESME_RTHROTTLED or a retryable status: the SMSC proved it did
--            not take it) | failed (a permanent status, or retryable ones exhausted)
--          → unconfirmed (written, never answered: timeout, bind lost, gateway killed; never resent)
--   queued → withdrawn (never written: its campaign stopped sending, or its recipient already ended).
-- A recipient's one report (sms_gateway_report) is decided from its parts and written to the DLR topic as
-- an outbox row in the same transaction (invariants 1 and 2); the roll-up does the rest (ADR 0019).

create table sms_gateway_submission (
  submission_id     uuid primary key,
  campaign_id       uuid not null,
  organization_id   text not null,
  epoch             integer not null,
  smsc              text not null,
  operator          text not null,
  route_channel     text not null,
  mno_user          text not null,
  sender            text not null,
  encoding          text not null check (encoding in ('GSM7', 'UCS2')),
  segments          smallint not null check (segments between 1 and 10),
  content           text not null,
  message_type      text not null,
  received_at       timestamptz not null default now()
);
create index sms_gateway_submission_received_idx on sms_gateway_submission (received_at);

create table sms_gateway_part (
  id                bigint generated always as identity primary key,
  submission_id     uuid not null references sms_gateway_submission (submission_id) on delete cascade,
  recipient_id      bigint not null,
  campaign_id       uuid not null,
  msisdn            text not null,
  smsc              text not null,
  part_no           smallint not null,
  parts             smallint not null,
  state             text not null default 'queued'
                    check (state in ('queued', 'sending', 'accepted', 'failed', 'unconfirmed', 'withdrawn')),
  next_attempt_at   timestamptz not null default '-infinity',
  -- Sends the SMSC provably refused (ESME_RTHROTTLED, retryable statuses): each one safe to repeat.
  throttled         integer not null default 0,
  resubmits         integer not null default 0,
  owner             text,
  sending_at        timestamptz,
  resp_at           timestamptz,
  smsc_message_id   text,
  command_status    integer,
  withdrawn_reason  text,
  receipt_status    text,
  receipt_error     text,
  receipt_at        timestamptz,
  unique (submission_id, recipient_id, part_no)
);
-- A bind's claim: the SMSC's parts that may go now, oldest first.
create index sms_gateway_part_queued_idx on sms_gateway_part (smsc, next_attempt_at, id) where state = 'queued';
-- The unconfirmed sweep: parts written longer ago than the response window without an answer.
create index sms_gateway_part_sending_idx on sms_gateway_part (sending_at) where state = 'sending';
-- A receipt finds its part by the SMSC's message id.
create index sms_gateway_part_message_idx on sms_gateway_part (smsc, smsc_message_id)
  where smsc_message_id is not null;
create index sms_gateway_part_recipient_idx on sms_gateway_part (submission_id, recipient_id);

-- Every deliver_sm the gateway answered, recorded before its deliver_sm_resp: matched to a part, or kept
-- (a receipt that came before its submit_sm_resp was recorded, on another bind, is matched when it is;
-- one for a message id the gateway never learned — an answer lost — stays unmatched; a malformed one is
-- kept with the problem).
create table sms_gateway_receipt (
  id                bigint generated always as identity primary key,
  smsc              text not null,
  smsc_message_id   text,
  outcome           text,
  error_code        text,
  final             boolean not null default false,
  problem           text,
  raw               text not null,
  part_id           bigint,
  received_at       timestamptz not null default now()
);
create index sms_gateway_receipt_unmatched_idx on sms_gateway_receipt (smsc, smsc_message_id)
  where part_id is null and smsc_message_id is not null;

-- One report per recipient and submission, whatever path decided it (the outbox row's message id is the
-- report's dlrId, derived from the same pair).
create table sms_gateway_report (
  submission_id     uuid not null,
  recipient_id      bigint not null,
  status            text not null,
  error_code        text,
  reported_at       timestamptz not null default now(),
  primary key (submission_id, recipient_id)
);
