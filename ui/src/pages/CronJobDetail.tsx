/**
 * One cron job: its definition and next fire times, the occurrence ledger as a timeline grid (one cell
 * per occurrence, colored by its fate — fired, skipped, missed, backfilled, paused, manual, buffered —
 * so what did *not* run is visible at a glance), its runs (status, duration, output excerpt, error,
 * attempts), live on the `cron` topic; trigger now, pause (with a reason) / resume, backfill (dry-run
 * preview first, then confirm), edit, delete. A viewer sees no command buttons.
 */
import { useQuery } from '@tanstack/react-query';
import { type ReactNode, useEffect, useMemo, useRef, useState } from 'react';
import { Link, useNavigate, useParams, useSearchParams } from 'react-router-dom';
import { api, type Schemas, unwrap, useLive, useSession } from '../api/client';
import {
  ActorName,
  Card,
  type Column,
  CommandButton,
  ConfirmDialog,
  DataTable,
  ErrorBanner,
  PageHeader,
  StatusBadge,
} from '../components';
import {
  browserZone,
  excerpt,
  formatDuration,
  formatRelative,
  formatTime,
  formatZoned,
  fromZonedInput,
  toZonedInput,
} from '../format';
import { neverFires, triggerRun } from './CronJobs';
import './pages-b.css';
import './pages-c.css';

type Job = Schemas['CronJob'];
type Run = Schemas['JobRun'];
type Entry = Schemas['LedgerEntry'];
type Fate = Entry['fate'] | 'upcoming';

const RANGES = [
  { label: '1 h', ms: 3_600_000 },
  { label: '6 h', ms: 6 * 3_600_000 },
  { label: '24 h', ms: 24 * 3_600_000 },
  { label: '7 d', ms: 7 * 24 * 3_600_000 },
] as const;

export const FATES: { fate: Fate; label: string; hint: string }[] = [
  { fate: 'fired', label: 'fired', hint: 'ran on schedule' },
  { fate: 'manual', label: 'manual', hint: 'triggered by hand' },
  { fate: 'backfilled', label: 'backfilled', hint: 'run later by a backfill' },
  { fate: 'buffered', label: 'buffered', hint: 'waited for the previous run (overlap: buffer-one)' },
  { fate: 'skipped-overlap', label: 'skipped', hint: 'the previous run was still active (overlap: skip)' },
  { fate: 'missed', label: 'missed', hint: 'reached too late (catch-up policy): never run' },
  { fate: 'paused', label: 'paused', hint: 'held back while the job was paused' },
  { fate: 'upcoming', label: 'upcoming', hint: 'next fire times' },
];

const ACTIVE = new Set(['queued', 'running', 'retry_scheduled', 'buffered']);
const FAILED = new Set(['failed', 'permanently_failed']);

/** `at` on the job's wall clock as `YYYY-MM-DD HH:mm:ss` (where the zone is named beside it). */
const zoned = (at: string, timezone: string): string => formatZoned(at, timezone, { zone: false });

interface Cell {
  key: string;
  at: string;
  fate: Fate;
  entry?: Entry;
}

/** Occurrences in rows of one hour (ranges up to a day) or one day, in the job's zone. */
function LedgerGrid({
  cells,
  timezone,
  byDay,
  selected,
  onSelect,
}: {
  cells: Cell[];
  timezone: string;
  byDay: boolean;
  selected: string | null;
  onSelect(cell: Cell): void;
}) {
  const rows = new Map<string, Cell[]>();
  for (const cell of cells) {
    const local = zoned(cell.at, timezone);
    const row = byDay ? local.slice(0, 10) : `${local.slice(0, 13)}:00`;
    const list = rows.get(row) ?? [];
    list.push(cell);
    rows.set(row, list);
  }
  if (rows.size === 0) return <p className="muted">No occurrences in this range.</p>;
  return (
    <div className="ledger" data-testid="ledger">
      {[...rows].map(([row, list]) => (
        <div className="ledger-row" key={row}>
          <div className="ledger-label mono">{row}</div>
          <div className="ledger-cells">
            {list.map((cell) => {
              const e = cell.entry;
              const failed = e && FAILED.has(e.status);
              const tip = [
                `${zoned(cell.at, timezone)} (${timezone})`,
                `fate: ${cell.fate}`,
                e ? `status: ${e.status}${e.attempts ? `, ${e.attempts} attempt(s)` : ''}` : null,
                e?.responseStatus ? `HTTP ${e.responseStatus}` : null,
                e?.reason ? `reason: ${e.reason}` : null,
                e?.error ? `error: ${e.error}` : null,
              ]
                .filter(Boolean)
                .join('\n');
              return (
                <button
                  type="button"
                  key={cell.key}
                  className={`ledger-cell fate-${cell.fate}${failed ? ' cell-failed' : ''}${
                    e && ACTIVE.has(e.status) ? ' cell-active' : ''
                  }${selected === cell.key ? ' cell-selected' : ''}`}
                  title={tip}
                  aria-label={tip}
                  data-fate={cell.fate}
                  data-status={e?.status ?? 'upcoming'}
                  data-at={cell.at}
                  onClick={() => onSelect(cell)}
                />
              );
            })}
          </div>
        </div>
      ))}
    </div>
  );
}

function Legend({ counts }: { counts: Map<Fate, number> }) {
  return (
    <div className="ledger-legend" data-testid="ledger-legend">
      {FATES.map((f) => (
        <span key={f.fate} className="legend-item" title={f.hint}>
          <span className={`ledger-cell static fate-${f.fate}`} aria-hidden="true" />
          {f.label} <span className="muted">{counts.get(f.fate) ?? 0}</span>
        </span>
      ))}
      <span className="legend-item" title="the run failed (after its retries) or its last attempt failed">
        <span className="ledger-cell static fate-fired cell-failed" aria-hidden="true" />
        failed run
      </span>
    </div>
  );
}

/** A run in full: what the ledger cell or the table row points at. */
function RunDetail({ runId, timezone }: { runId: string; timezone: string }) {
  const run = useQuery({
    queryKey: ['cron-runs', runId],
    queryFn: () => unwrap(api.GET('/v1/cron-runs/{id}', { params: { path: { id: runId } } })),
  });
  useLive(['cron'], () => void run.refetch());
  if (run.error) return <ErrorBanner error={run.error} />;
  if (!run.data) return <p className="muted">Loading…</p>;
  const r = run.data;
  return (
    <dl className="kv" data-testid="run-detail">
      <dt>Run</dt>
      <dd className="mono">{r.runId}</dd>
      <dt>Occurrence</dt>
      <dd>
        {formatZoned(r.scheduledFor, timezone)}{' '}
        <span className="muted">
          ({r.trigger}, {r.fate})
        </span>
      </dd>
      <dt>Status</dt>
      <dd>
        <StatusBadge status={r.status} /> attempt {r.attempts} of {r.maxAttempts}
        {r.nextAttemptAt && r.status === 'retry_scheduled'
          ? ` — next ${formatZoned(r.nextAttemptAt, timezone)} (${formatRelative(r.nextAttemptAt)})`
          : ''}
      </dd>
      <dt>Duration</dt>
      <dd>{r.durationMs === null ? '—' : formatDuration(r.durationMs / 1000)}</dd>
      <dt>Response</dt>
      <dd>{r.responseStatus ?? '—'}</dd>
      {r.reason ? (
        <>
          <dt>Reason</dt>
          <dd>{r.reason}</dd>
        </>
      ) : null}
      {r.error ? (
        <>
          <dt>Error</dt>
          <dd className="error-text">{r.error}</dd>
        </>
      ) : null}
      <dt>Output</dt>
      <dd>{r.output ? <pre className="output">{excerpt(r.output, 2000)}</pre> : '—'}</dd>
    </dl>
  );
}

function BackfillButton({ job, onDone }: { job: Job; onDone(): void }) {
  const { canCommand } = useSession();
  const [open, setOpen] = useState(false);
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const [preview, setPreview] = useState<{ key: string; result: Schemas['BackfillResult'] } | null>(null);
  const [previewError, setPreviewError] = useState<unknown>(null);
  const [previewing, setPreviewing] = useState(false);
  if (!canCommand || !job.commands.includes('backfill')) return null;
  const key = `${from}|${to}`;
  const current = preview && preview.key === key ? preview.result : null;
  // The range is read on the job's wall clock (its schedule's zone), whatever the browser's zone is.
  const tz = job.timezone;
  const fromIso = fromZonedInput(from, tz);
  const toIso = fromZonedInput(to, tz);
  const body = () => ({ from: fromIso!, to: toIso! });
  const elsewhere = browserZone() !== tz;

  async function runPreview() {
    setPreviewError(null);
    setPreviewing(true);
    try {
      const result = await unwrap(
        api.POST('/v1/cron-jobs/{id}/backfill', {
          params: { path: { id: job.jobId }, query: { dryRun: true } },
          body: body(),
        }),
      );
      setPreview({ key, result });
    } catch (error) {
      setPreviewError(error);
    } finally {
      setPreviewing(false);
    }
  }

  return (
    <>
      <button
        type="button"
        onClick={() => {
          const now = Date.now();
          setFrom(toZonedInput(now - 3_600_000, tz));
          setTo(toZonedInput(now, tz));
          setPreview(null);
          setPreviewError(null);
          setOpen(true);
        }}
      >
        Backfill…
      </button>
      <ConfirmDialog
        open={open}
        title={`Backfill ${job.name}`}
        description="Runs the occurrences of the range that have not run (missed, skipped, paused). Preview first: the backfill creates exactly the runs the preview lists."
        confirmLabel={current ? `Backfill ${current.runs.length} run(s)` : 'Backfill'}
        confirmDisabled={!current || current.runs.length === 0}
        onClose={() => setOpen(false)}
        onConfirm={async () => {
          await unwrap(
            api.POST('/v1/cron-jobs/{id}/backfill', {
              params: { path: { id: job.jobId }, query: { dryRun: false } },
              body: body(),
            }),
          );
          onDone();
        }}
      >
        <div className="field-row">
          <div className="field">
            <label htmlFor="bf-from">From ({tz})</label>
            <input
              id="bf-from"
              type="datetime-local"
              value={from}
              onChange={(e) => setFrom(e.target.value)}
            />
          </div>
          <div className="field">
            <label htmlFor="bf-to">To ({tz})</label>
            <input id="bf-to" type="datetime-local" value={to} onChange={(e) => setTo(e.target.value)} />
          </div>
        </div>
        <p className="hint" data-testid="backfill-zone">
          Times on the job’s clock ({tz},{' '}
          {formatZoned(fromIso ?? Date.now(), tz)
            .split(' ')
            .at(-1)}
          )
          {elsewhere && fromIso && toIso
            ? `: ${formatTime(fromIso)} to ${formatTime(toIso)} in your zone (${browserZone()})`
            : ''}
          .
        </p>
        <button type="button" onClick={() => void runPreview()} disabled={!fromIso || !toIso || previewing}>
          {previewing ? 'Previewing…' : 'Preview (dry run)'}
        </button>
        <ErrorBanner error={previewError} />
        {current ? (
          <div className="backfill-preview" data-testid="backfill-preview">
            <p>
              <strong>{current.runs.length}</strong> run(s) would be created
              {current.skipped.length > 0
                ? `, ${current.skipped.length} occurrence(s) left alone (already ran)`
                : ''}
              .
            </p>
            {current.runs.length > 0 ? (
              <ul className="compact-list">
                {current.runs.slice(0, 12).map((r) => (
                  <li key={r.runId} className="mono" data-testid="backfill-run">
                    {zoned(r.scheduledFor, job.timezone)}
                  </li>
                ))}
                {current.runs.length > 12 ? (
                  <li className="muted">… {current.runs.length - 12} more</li>
                ) : null}
              </ul>
            ) : null}
          </div>
        ) : null}
      </ConfirmDialog>
    </>
  );
}

function Definition({ job }: { job: Job }) {
  const payload = job.payload as Record<string, unknown>;
  const target = (payload.url ?? payload.webhookUrl ?? payload.to ?? '') as ReactNode;
  return (
    <dl className="kv">
      <dt>Schedule</dt>
      <dd>
        <code>{job.schedule}</code> in {job.timezone}
      </dd>
      <dt>DST</dt>
      <dd>
        repeated times: {job.dst.ambiguous}; skipped times: {job.dst.missing}
      </dd>
      <dt>Type</dt>
      <dd>
        {job.jobType} <span className="mono small-text">{String(target)}</span>
      </dd>
      <dt>Policies</dt>
      <dd>
        overlap {job.overlap}; catch-up {job.catchUp.mode}; {job.retry.maxRetries} retries from{' '}
        {formatDuration(job.retry.delayMs / 1000)}; timeout {formatDuration(job.timeoutMs / 1000)}
      </dd>
      {job.status === 'paused' ? (
        <>
          <dt>Paused</dt>
          <dd>
            {formatZoned(job.pausedAt, job.timezone)} by <ActorName actor={job.pausedBy} />: “
            {job.pausedReason}”
          </dd>
        </>
      ) : null}
    </dl>
  );
}

export function CronJobDetail() {
  const { id } = useParams() as { id: string };
  const navigate = useNavigate();
  const [rangeMs, setRangeMs] = useState<number>(RANGES[2].ms);
  // `?run=<id>` (a link from an outbox row) opens that run's detail.
  const [search] = useSearchParams();
  const [selected, setSelected] = useState<{ key: string; runId: string | null } | null>(() => {
    const run = search.get('run');
    return run ? { key: `run|${run}`, runId: run } : null;
  });
  // The range's start is computed at each fetch (the key holds the range only, so live refetches reuse one entry).
  const fromOf = (ms: number) => new Date(Date.now() - ms).toISOString();
  const job = useQuery({
    queryKey: ['cron-jobs', id],
    queryFn: () => unwrap(api.GET('/v1/cron-jobs/{id}', { params: { path: { id } } })),
  });
  const ledger = useQuery({
    queryKey: ['cron-jobs', id, 'ledger', rangeMs],
    queryFn: () =>
      unwrap(
        api.GET('/v1/cron-jobs/{id}/ledger', {
          params: { path: { id }, query: { from: fromOf(rangeMs), limit: 1000 } },
        }),
      ),
    placeholderData: (previous) => previous,
  });
  const upcoming = useQuery({
    queryKey: ['cron-jobs', id, 'upcoming'],
    queryFn: () =>
      unwrap(api.GET('/v1/cron-jobs/{id}/upcoming', { params: { path: { id }, query: { count: 5 } } })),
  });
  const runs = useQuery({
    queryKey: ['cron-jobs', id, 'runs', rangeMs],
    placeholderData: (previous) => previous,
    queryFn: async () => {
      const from = fromOf(rangeMs);
      // Runs come oldest first: read the range (at most two pages) and keep the newest.
      const all: Run[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 2; page++) {
        const result = await unwrap(
          api.GET('/v1/cron-jobs/{id}/runs', {
            params: { path: { id }, query: { from, limit: 500, ...(cursor ? { cursor } : {}) } },
          }),
        );
        all.push(...result.items);
        if (!result.nextCursor) break;
        cursor = result.nextCursor;
      }
      return all
        .sort(
          (a, b) =>
            Date.parse(b.scheduledFor) - Date.parse(a.scheduledFor) || b.createdAt.localeCompare(a.createdAt),
        )
        .slice(0, 50);
    },
  });
  const active = (runs.data ?? []).some((r) => ACTIVE.has(r.status));
  const refetchAll = () => {
    void ledger.refetch();
    void runs.refetch();
    void job.refetch();
    void upcoming.refetch();
  };
  useLive(['cron'], refetchAll);
  // A run in flight changes within seconds (attempts, retries): follow it closely until it settles.
  const latestRefetch = useRef(refetchAll);
  latestRefetch.current = refetchAll;
  useEffect(() => {
    if (!active) return;
    const timer = setInterval(() => latestRefetch.current(), 3_000);
    return () => clearInterval(timer);
  }, [active]);

  const cells: Cell[] = useMemo(() => {
    const list: Cell[] = (ledger.data?.entries ?? []).map((entry, i) => ({
      key: `${entry.scheduledFor}|${entry.runId ?? 'held'}|${i}`,
      at: entry.scheduledFor,
      fate: entry.fate,
      entry,
    }));
    if (job.data?.status === 'active') {
      for (const o of upcoming.data?.occurrences ?? []) {
        list.push({ key: `upcoming|${o.at}|${o.kind}`, at: o.at, fate: 'upcoming' });
      }
    }
    return list;
  }, [ledger.data, upcoming.data, job.data?.status]);
  const counts = useMemo(() => {
    const map = new Map<Fate, number>();
    for (const c of cells) map.set(c.fate, (map.get(c.fate) ?? 0) + 1);
    return map;
  }, [cells]);

  if (job.error) return <ErrorBanner error={job.error} />;
  if (!job.data) return <p className="muted">Loading…</p>;
  const j = job.data;
  const timezone = j.timezone;

  const columns: Column<Run>[] = [
    {
      key: 'scheduledFor',
      header: 'Occurrence',
      mono: true,
      render: (r) => <span title={r.scheduledFor}>{zoned(r.scheduledFor, timezone)}</span>,
    },
    { key: 'trigger', header: 'Trigger' },
    {
      key: 'fate',
      header: 'Fate',
      render: (r) => <span className={`fate-text fate-${r.fate}`}>{r.fate}</span>,
    },
    { key: 'status', header: 'Status', render: (r) => <StatusBadge status={r.status} /> },
    {
      key: 'attempts',
      header: 'Attempts',
      align: 'right',
      render: (r) => (
        <span
          title={
            r.nextAttemptAt && r.status === 'retry_scheduled'
              ? `next attempt ${formatZoned(r.nextAttemptAt, timezone)}`
              : undefined
          }
        >
          {r.attempts}/{r.maxAttempts}
        </span>
      ),
    },
    {
      key: 'duration',
      header: 'Duration',
      align: 'right',
      render: (r) => (r.durationMs === null ? '—' : formatDuration(r.durationMs / 1000)),
    },
    { key: 'responseStatus', header: 'HTTP', align: 'right', render: (r) => r.responseStatus ?? '—' },
    {
      key: 'output',
      header: 'Output / error',
      render: (r) =>
        r.error ? (
          <span className="error-text" title={r.error}>
            {excerpt(r.error, 80)}
          </span>
        ) : r.reason ? (
          <span className="muted" title={r.reason}>
            {excerpt(r.reason, 80)}
          </span>
        ) : (
          <span className="mono small-text" title={r.output ?? undefined}>
            {excerpt(r.output, 80) || '—'}
          </span>
        ),
    },
  ];

  return (
    <div className="page" data-testid="cron-job-detail">
      <PageHeader
        title={
          <>
            {j.name}{' '}
            {neverFires(j) ? (
              <StatusBadge
                status="never fires"
                tone="warn"
                title="active, but its schedule has no next run"
              />
            ) : (
              <StatusBadge status={j.status} />
            )}
          </>
        }
        subtitle={
          <>
            <Link to="/cron">Cron jobs</Link> ·{' '}
            {j.status === 'active' && j.nextRunAt
              ? `next run ${formatZoned(j.nextRunAt, timezone)} (${timezone}, ${formatRelative(j.nextRunAt)})`
              : neverFires(j)
                ? 'no next run'
                : j.status}
          </>
        }
        // The server says which commands the job's state allows (its operation catalogue).
        actions={
          j.commands.length === 0 ? null : (
            <>
              {j.commands.includes('trigger') ? (
                <CommandButton
                  label="Trigger now"
                  description="Creates a manual run now, whatever the schedule."
                  confirmLabel="Trigger"
                  onConfirm={async () => {
                    await triggerRun(j.jobId);
                    refetchAll();
                  }}
                />
              ) : null}
              {j.commands.includes('pause') ? (
                <CommandButton
                  label="Pause"
                  title={`Pause ${j.name}`}
                  description="Nothing fires until it is resumed; the occurrences it holds back are recorded as paused."
                  confirmLabel="Pause"
                  requireReason
                  onConfirm={async (reason) => {
                    await unwrap(
                      api.POST('/v1/cron-jobs/{id}/pause', { params: { path: { id } }, body: { reason } }),
                    );
                    refetchAll();
                  }}
                />
              ) : null}
              {j.commands.includes('resume') ? (
                <CommandButton
                  label="Resume"
                  title={`Resume ${j.name}`}
                  description="Occurrences held back by the pause are recorded as one paused run; the schedule continues from now."
                  confirmLabel="Resume"
                  onConfirm={async () => {
                    await unwrap(api.POST('/v1/cron-jobs/{id}/resume', { params: { path: { id } } }));
                    refetchAll();
                  }}
                />
              ) : null}
              <BackfillButton job={j} onDone={refetchAll} />
              {j.commands.includes('update') ? <CanEdit id={id} /> : null}
              {j.commands.includes('delete') ? (
                <CommandButton
                  label="Delete"
                  danger
                  title={`Delete ${j.name}`}
                  description="Nothing fires any more; queued runs are cancelled. The history stays."
                  confirmLabel="Delete"
                  onConfirm={async () => {
                    await unwrap(api.DELETE('/v1/cron-jobs/{id}', { params: { path: { id } } }));
                    navigate('/cron');
                  }}
                />
              ) : null}
            </>
          )
        }
      />
      {neverFires(j) ? (
        <div className="never-fires" role="alert" data-testid="never-fires">
          <strong>This job never fires.</strong> It is active, but its schedule <code>{j.schedule}</code> has
          no occurrence in {timezone}: no run will ever start. Edit the schedule, or delete the job.
        </div>
      ) : null}
      <div className="grid grid-2">
        <Card title="Definition">
          <Definition job={j} />
        </Card>
        <Card title={`Next fire times (${timezone})`}>
          <ErrorBanner error={upcoming.error} />
          <ol className="occurrences" data-testid="upcoming">
            {(upcoming.data?.occurrences ?? []).map((o) => (
              <li key={`${o.at}-${o.kind}`} className="mono">
                {zoned(o.at, timezone)}
                {o.kind !== 'regular' ? (
                  <span className="dst-note">{o.kind === 'shifted' ? 'DST: shifted' : `DST: ${o.kind}`}</span>
                ) : null}
              </li>
            ))}
            {upcoming.data && upcoming.data.occurrences.length === 0 ? (
              <li className="muted no-marker">none: the schedule never fires</li>
            ) : null}
          </ol>
        </Card>
      </div>
      <Card
        title="Occurrence ledger"
        actions={
          <div className="segmented">
            {RANGES.map((r) => (
              <button
                type="button"
                key={r.label}
                className={r.ms === rangeMs ? 'active' : undefined}
                onClick={() => setRangeMs(r.ms)}
              >
                {r.label}
              </button>
            ))}
          </div>
        }
      >
        <ErrorBanner error={ledger.error} />
        <Legend counts={counts} />
        <LedgerGrid
          cells={cells}
          timezone={timezone}
          byDay={rangeMs > 24 * 3_600_000}
          selected={selected?.key ?? null}
          onSelect={(cell) => setSelected({ key: cell.key, runId: cell.entry?.runId ?? null })}
        />
        {(ledger.data?.entries.length ?? 0) >= 1000 ? (
          <p className="muted small-text">
            The first 1,000 occurrences of the range; choose a shorter range.
          </p>
        ) : null}
        {selected?.runId ? (
          <div className="run-detail-box">
            <RunDetail runId={selected.runId} timezone={timezone} />
          </div>
        ) : null}
      </Card>
      <Card
        title="Runs"
        actions={<span className="muted small-text">newest first · times in {timezone}</span>}
      >
        <ErrorBanner error={runs.error} />
        <DataTable
          label="cron-runs"
          columns={columns}
          rows={runs.data}
          rowKey={(r) => r.runId}
          loading={runs.isPending}
          empty="No runs in this range."
          onRowClick={(r) => setSelected({ key: `run|${r.runId}`, runId: r.runId })}
          rowClassName={(r) => (FAILED.has(r.status) ? 'row-failed' : undefined)}
        />
      </Card>
    </div>
  );
}

function CanEdit({ id }: { id: string }) {
  const { canCommand } = useSession();
  return canCommand ? (
    <Link className="button" to={`/cron/${id}/edit`}>
      Edit
    </Link>
  ) : null;
}
