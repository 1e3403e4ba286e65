-- Cron quotas (issue 23, ADR 0029): a create of an active job and a resume count the organization's
-- active jobs under its quota lock; this index keeps that count to the organization's active rows.
create index cron_job_active_organization_idx on cron_job (organization_id) where status = 'active';
