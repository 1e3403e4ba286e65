-- Per-recipient SMS campaigns, part 2 (issue 13): delivery reports, failure classification, retries and
-- refunds. A recipient's row carries its delivery outcome and its refund; reports are stored as they
-- arrive (the DLR consumer, idempotent by dlr_id) and copied onto the rows by the roll-up poller.

-- Recipient statuses: PENDING / DEFERRED → SUBMITTED → DELIVERED | FAILED | RETRY_PENDING (→ PENDING
-- when released by the retry dispatcher), and CANCELLED (withdrawn unsent: cancellation or expiry).
alter table campaign_recipient drop constraint campaign_recipient_status_check;
alter table campaign_recipient add constraint campaign_recipient_status_check
  check (status in ('PENDING', 'DEFERRED', 'SUBMITTED', 'DELIVERED', 'FAILED', 'RETRY_PENDING', 'CANCELLED'));

alter table campaign_recipient
  -- The campaign's resendAttempt when this delivery cycle began (part of the refund key).
  add column resend_attempt  integer not null default 0,
  -- The last terminal report applied to the row.
  add column dlr_status      text,
  add column dlr_code        text,
  add column dlr_at          timestamptz,
  add column failure_class   text check (failure_class in ('TEMPORARY', 'PERMANENT', 'EXHAUSTED', 'UNCONFIRMED', 'SEND_FAILED', 'LATE')),
  -- FAILED but maybe delivered (NOT_AVAILABLE, DLR timeout): never refunded.
  add column unconfirmed     boolean not null default false,
  -- RETRY_PENDING: when the retry dispatcher may release it.
  add column next_retry_at   timestamptz,
  -- When it became DELIVERED, FAILED or CANCELLED.
  add column final_at        timestamptz,
  add column refund_required boolean not null default false,
  -- recipient:{id}:{resend_attempt}
  add column refund_key      text,
  add column refunded_at     timestamptz,
  add column refund_reason   text,
  add column refund_attempts integer not null default 0,
  add column refund_error    text,
  -- The last refund attempt that billing did not accept (the retry poller waits from here).
  add column refund_tried_at timestamptz;

-- The retry dispatcher's claim: RETRY_PENDING rows in release order.
create index campaign_recipient_retry_idx on campaign_recipient (next_retry_at) where status = 'RETRY_PENDING';
-- …and one campaign's due retries.
create index campaign_recipient_campaign_retry_idx on campaign_recipient (campaign_id, next_retry_at)
  where status = 'RETRY_PENDING';
-- Refunds still owed (the roll-up's after-commit refunds and the refund retry poller).
create index campaign_recipient_refund_idx on campaign_recipient (final_at)
  where refund_required and refunded_at is null;

-- Delivery reports as received (from the DLR topic, and synthetic ones: 'send-failed:…' when a
-- submission's outbox row went dead, 'dlr-timeout:…' from stale recovery). The roll-up applies a report
-- only to the row with id = recipient_id, submission_id = submission_id and status SUBMITTED; anything
-- else is marked rolled up with outcome 'ignored', so a duplicate or stale report changes nothing.
create table sms_delivery_report (
  dlr_id        text primary key,
  submission_id uuid not null,
  campaign_id   uuid not null,
  recipient_id  bigint not null,
  status        text not null check (status in ('DELIVERED', 'FAILED', 'EXPIRED', 'REJECTED', 'NOT_AVAILABLE', 'SEND_FAILED')),
  error_code    text,
  epoch         integer,
  done_at       timestamptz,
  received_at   timestamptz not null default now(),
  rolled_up_at  timestamptz,
  -- What the roll-up did with it: DELIVERED, FAILED, RETRY_PENDING or ignored.
  outcome       text
);
-- The roll-up's claim: reports not rolled up yet, in arrival order.
create index sms_delivery_report_unrolled_idx on sms_delivery_report (received_at) where rolled_up_at is null;
-- …one campaign's unrolled reports (the roll-up's per-campaign batch).
create index sms_delivery_report_campaign_unrolled_idx on sms_delivery_report (campaign_id, received_at)
  where rolled_up_at is null;
-- A campaign's latest rolled-up reports (auto-pause's "last N reports").
create index sms_delivery_report_campaign_idx on sms_delivery_report (campaign_id, rolled_up_at desc);

-- The campaign state row gains why a PAUSED campaign was paused (an operator's reason or the measured
-- failure rate of an auto-pause); null outside PAUSED (the decider's `pauseReason`, S1).
alter table campaign add column pause_reason text;
