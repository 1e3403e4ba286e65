/**
 * Cron jobs: every job of the organization with its schedule, next run and last outcome, live (the
 * `cron` topic refetches the list and the outcomes); trigger a run now. A viewer sees the list only.
 * Next runs are shown on the job's own clock (its zone named); an active job whose schedule has no next
 * run is flagged "never fires" rather than looking healthy.
 */
import { useInfiniteQuery, useQuery } from '@tanstack/react-query';
import { Link } from 'react-router-dom';
import { api, type Schemas, unwrap, useLive, useSession } from '../api/client';
import { type Column, CommandButton, DataTable, ErrorBanner, PageHeader, StatusBadge } from '../components';
import { excerpt, formatRelative, formatZoned } from '../format';
import './pages-b.css';
import './pages-c.css';

type Job = Schemas['CronJob'];
type Run = Schemas['JobRun'];

/** The latest run of a job: its runs from the last occurrence on (manual runs may follow it). */
export function useLastRun(job: Pick<Job, 'jobId' | 'lastOccurrenceAt' | 'createdAt'>) {
  const from = job.lastOccurrenceAt ?? job.createdAt;
  return useQuery({
    queryKey: ['cron-jobs', job.jobId, 'last-run', from],
    queryFn: () =>
      unwrap(
        api.GET('/v1/cron-jobs/{id}/runs', {
          params: { path: { id: job.jobId }, query: { from, limit: 100 } },
        }),
      ),
    select: (page): Run | null =>
      [...page.items].sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt)).at(-1) ?? null,
  });
}

/** A run's outcome in a word (and the error on hover). */
export function RunOutcome({ run }: { run: Run | null | undefined }) {
  if (!run) return <span className="muted">no runs yet</span>;
  const word =
    run.fate === 'fired' || run.fate === 'manual' || run.fate === 'backfilled' ? run.status : run.fate;
  return (
    <span className="outcome" title={run.error ?? run.reason ?? undefined}>
      <StatusBadge status={word} tone={outcomeTone(run)} />
      <span className="muted small-text"> {formatRelative(run.finishedAt ?? run.scheduledFor)}</span>
      {run.error ? <span className="error-text small-text"> {excerpt(run.error, 60)}</span> : null}
    </span>
  );
}

function outcomeTone(run: Run) {
  if (run.status === 'completed') return 'ok' as const;
  if (run.status === 'permanently_failed' || run.status === 'failed' || run.fate === 'missed')
    return 'bad' as const;
  if (run.status === 'retry_scheduled' || run.fate === 'skipped-overlap') return 'warn' as const;
  if (run.status === 'running' || run.status === 'queued') return 'run' as const;
  return undefined;
}

function LastOutcome({ job }: { job: Job }) {
  const last = useLastRun(job);
  if (last.isPending) return <span className="muted">…</span>;
  return <RunOutcome run={last.data} />;
}

/** An active job with no next run: its schedule never fires (e.g. `0 0 30 2 *`). */
export const neverFires = (job: Pick<Job, 'status' | 'nextRunAt'>): boolean =>
  job.status === 'active' && !job.nextRunAt;

export function triggerRun(jobId: string) {
  return unwrap(api.POST('/v1/cron-jobs/{id}/trigger', { params: { path: { id: jobId } } }));
}

export function CronJobs() {
  const { canCommand } = useSession();
  const jobs = useInfiniteQuery({
    queryKey: ['cron-jobs', 'list'],
    initialPageParam: undefined as string | undefined,
    queryFn: ({ pageParam }) =>
      unwrap(
        api.GET('/v1/cron-jobs', {
          params: { query: { limit: 50, ...(pageParam ? { cursor: pageParam } : {}) } },
        }),
      ),
    getNextPageParam: (last) => last.nextCursor ?? undefined,
  });
  useLive(['cron'], () => void jobs.refetch());
  const rows = jobs.data?.pages.flatMap((p) => p.items);

  const columns: Column<Job>[] = [
    {
      key: 'name',
      header: 'Name',
      render: (j) => <Link to={`/cron/${j.jobId}`}>{j.name}</Link>,
    },
    {
      key: 'schedule',
      header: 'Schedule',
      render: (j) => (
        <span>
          <code>{j.schedule}</code> <span className="muted small-text">{j.timezone}</span>
        </span>
      ),
    },
    { key: 'jobType', header: 'Type' },
    {
      key: 'status',
      header: 'Status',
      render: (j) =>
        neverFires(j) ? (
          <StatusBadge status="never fires" tone="warn" title="active, but its schedule has no next run" />
        ) : (
          <StatusBadge status={j.status} title={j.pausedReason ?? undefined} />
        ),
    },
    {
      key: 'next',
      header: 'Next run',
      render: (j) =>
        j.status === 'active' && j.nextRunAt ? (
          <span title={j.nextRunAt}>
            {formatZoned(j.nextRunAt, j.timezone)}{' '}
            <span className="muted small-text">{formatRelative(j.nextRunAt)}</span>
          </span>
        ) : neverFires(j) ? (
          <span className="warn-text" data-testid="never-fires">
            never: no occurrence
          </span>
        ) : (
          <span className="muted">{j.status === 'paused' ? 'paused' : '—'}</span>
        ),
    },
    { key: 'last', header: 'Last outcome', render: (j) => <LastOutcome job={j} /> },
    ...(canCommand
      ? [
          {
            key: 'actions',
            header: '',
            align: 'right' as const,
            render: (j: Job) =>
              !j.commands.includes('trigger') ? null : (
                <CommandButton
                  small
                  label="Trigger now"
                  title={`Trigger ${j.name} now`}
                  description="Creates a manual run now, whatever the schedule (the overlap policy does not apply to manual runs)."
                  confirmLabel="Trigger"
                  onConfirm={async () => {
                    await triggerRun(j.jobId);
                    await jobs.refetch();
                  }}
                />
              ),
          },
        ]
      : []),
  ];

  return (
    <div className="page" data-testid="cron-jobs-page">
      <PageHeader
        title="Cron jobs"
        subtitle="Schedules in their own time zones; every occurrence's fate is in a job's ledger"
        actions={
          canCommand ? (
            <Link className="button primary" to="/cron/new">
              New job
            </Link>
          ) : null
        }
      />
      <ErrorBanner error={jobs.error} />
      <DataTable
        label="cron-jobs"
        columns={columns}
        rows={rows}
        rowKey={(j) => j.jobId}
        loading={jobs.isPending}
        empty="No cron jobs yet."
        hasMore={jobs.hasNextPage}
        loadingMore={jobs.isFetchingNextPage}
        onLoadMore={() => void jobs.fetchNextPage()}
      />
    </div>
  );
}
