-- SMS controls and recovery (issue 13, the `sms:recovery` poller): recipients still SUBMITTED per
-- campaign by submission time, so the DLR-timeout step finds the ones whose gateway never answered
-- (HERALD_SMS_DLR_TIMEOUT_MINUTES) with an index range instead of reading the campaign's every row.
create index campaign_recipient_submitted_idx on campaign_recipient (campaign_id, submitted_at)
  where status = 'SUBMITTED';
