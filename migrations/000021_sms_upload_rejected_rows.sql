-- The rows a CSV build rejected, so the dashboard and the API can say which (issue 23, item 8): the first
-- 100 rejected rows as [{ "line": n, "value": "…", "reason": "invalid-msisdn" }], line being the file's
-- line (1-based, as csv-parse counts it) and value the row's MSISDN cell as written (at most 64 characters).
-- The counts by reason stay in rejected_by_reason; a build that rejects more rows lists only the first 100.
alter table campaign_upload add column rejected_rows jsonb not null default '[]'::jsonb;
