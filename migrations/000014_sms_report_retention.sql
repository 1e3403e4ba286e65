-- Delivery-report retention (maintenance task `sms-report-retention`): rolled-up reports older than
-- HERALD_SMS_REPORT_RETENTION_DAYS are deleted, found through this partial index on their roll-up time.
-- A report not rolled up yet is never deleted. The recipient row keeps the outcome, the inbox and the
-- roll-up's guard (only a SUBMITTED row with the report's submission id moves) keep a late copy harmless.
create index sms_delivery_report_rolled_up_idx on sms_delivery_report (rolled_up_at)
  where rolled_up_at is not null;
