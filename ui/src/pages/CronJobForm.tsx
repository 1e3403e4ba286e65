/**
 * Create or edit a cron job. The expression is checked as you type (debounced) by the server's own
 * schedule code (POST /v1/cron-jobs/preview), which also lists the next fire times in the job's zone with
 * the DST policy applied as the job will apply it — so the form never promises a time the job will not
 * fire at. On edit only what changed is sent (a webhook's signing secret is never read back, so an
 * unchanged payload keeps it).
 */
import { useQuery } from '@tanstack/react-query';
import { type FormEvent, useEffect, useMemo, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router-dom';
import { ApiError, api, type Schemas, unwrap, useLive, useSession } from '../api/client';
import { Card, ErrorBanner, PageHeader } from '../components';
import './pages-b.css';

type Job = Schemas['CronJob'];
type JobType = 'ping' | 'webhook' | 'slack' | 'email';
type Overlap = 'allow' | 'skip' | 'buffer-one';
type CatchUpMode = 'skip-missed' | 'run-latest' | 'run-all';
type Ambiguous = 'first' | 'last' | 'both';
type Missing = 'shift' | 'skip';

interface FormState {
  name: string;
  schedule: string;
  timezone: string;
  customDst: boolean;
  ambiguous: Ambiguous;
  missing: Missing;
  jobType: JobType;
  url: string;
  method: string;
  body: string;
  signingSecret: string;
  text: string;
  to: string;
  subject: string;
  timeoutSeconds: string;
  overlap: Overlap;
  catchUpMode: CatchUpMode;
  maxRetries: string;
  retryDelaySeconds: string;
  paused: boolean;
}

const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

const EMPTY: FormState = {
  name: '',
  schedule: '*/5 * * * *',
  timezone: browserZone,
  customDst: false,
  ambiguous: 'first',
  missing: 'shift',
  jobType: 'webhook',
  url: '',
  method: 'POST',
  body: '{}',
  signingSecret: '',
  text: '',
  to: '',
  subject: '',
  timeoutSeconds: '30',
  overlap: 'skip',
  catchUpMode: 'skip-missed',
  maxRetries: '3',
  retryDelaySeconds: '30',
  paused: false,
};

function fromJob(job: Job): FormState {
  const p = job.payload as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === 'string' ? v : '');
  return {
    ...EMPTY,
    name: job.name,
    schedule: job.schedule,
    timezone: job.timezone,
    ambiguous: job.dst.ambiguous,
    missing: job.dst.missing,
    jobType: job.jobType,
    url: str(p.url) || str(p.webhookUrl),
    method: str(p.method) || (job.jobType === 'ping' ? 'GET' : 'POST'),
    body: p.body === undefined ? '{}' : JSON.stringify(p.body, null, 2),
    text: str(p.text),
    to: Array.isArray(p.to) ? p.to.join(', ') : str(p.to),
    subject: str(p.subject),
    timeoutSeconds: String(job.timeoutMs / 1000),
    overlap: job.overlap,
    catchUpMode: job.catchUp.mode,
    maxRetries: String(job.retry.maxRetries),
    retryDelaySeconds: String(job.retry.delayMs / 1000),
  };
}

/** The payload the form describes, or a message naming the field that is wrong. */
function payloadOf(f: FormState, original?: Record<string, unknown>): { payload?: unknown; error?: string } {
  const extras = original?.headers ? { headers: original.headers } : {};
  switch (f.jobType) {
    case 'ping':
      return { payload: { url: f.url.trim(), method: f.method === 'HEAD' ? 'HEAD' : 'GET', ...extras } };
    case 'webhook': {
      let body: unknown;
      try {
        body = f.body.trim() === '' ? {} : JSON.parse(f.body);
      } catch (error) {
        return { error: `body: not JSON (${(error as Error).message})` };
      }
      return {
        payload: {
          url: f.url.trim(),
          method: ['PUT', 'PATCH'].includes(f.method) ? f.method : 'POST',
          body,
          ...extras,
          ...(f.signingSecret ? { signingSecret: f.signingSecret } : {}),
        },
      };
    }
    case 'slack':
      return { payload: { webhookUrl: f.url.trim(), text: f.text } };
    case 'email': {
      const to = f.to
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      return { payload: { to: to.length === 1 ? to[0] : to, subject: f.subject, text: f.text } };
    }
  }
}

function useDebounced<T>(value: T, ms: number): T {
  const [debounced, setDebounced] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setDebounced(value), ms);
    return () => clearTimeout(timer);
  }, [value, ms]);
  return debounced;
}

const zones = (() => {
  try {
    return (Intl as unknown as { supportedValuesOf(key: string): string[] }).supportedValuesOf('timeZone');
  } catch {
    return [] as string[];
  }
})();

const NOTE_TEXT: Record<string, string> = {
  'dst-shifted': 'DST gap: this wall time does not exist, shifted forward',
  'dst-repeated-first': 'DST repeat: first pass of the repeated hour',
  'dst-repeated-second': 'DST repeat: second pass of the repeated hour',
};

/** The schedule's next fire times as the server computes them, or its refusal naming the field. */
function SchedulePreview({
  expression,
  timezone,
  dst,
}: {
  expression: string;
  timezone: string;
  dst: { ambiguous: Ambiguous; missing: Missing } | undefined;
}) {
  const input = useDebounced({ expression: expression.trim(), timezone: timezone.trim(), dst }, 300);
  const preview = useQuery({
    queryKey: ['cron-preview', input],
    enabled: input.expression !== '' && input.timezone !== '',
    retry: false,
    staleTime: 30_000,
    queryFn: () =>
      unwrap(
        api.POST('/v1/cron-jobs/preview', {
          body: {
            expression: input.expression,
            timezone: input.timezone,
            count: 6,
            ...(input.dst ? { dst: input.dst } : {}),
          },
        }),
      ),
  });
  const typing = input.expression !== expression.trim() || input.timezone !== timezone.trim();
  if (!input.expression || !input.timezone)
    return <p className="muted">Enter an expression and a time zone.</p>;
  if (preview.error) {
    const problem = preview.error instanceof ApiError ? preview.error.problem : undefined;
    const messages = problem?.errors?.map((e) => `${e.field}: ${e.message}`) ?? [preview.error.message];
    return (
      <div className="preview-error" role="alert" data-testid="schedule-error">
        {messages.map((m) => (
          <div key={m}>{m}</div>
        ))}
      </div>
    );
  }
  if (!preview.data) return <p className="muted">Checking…</p>;
  const { next, dst: effective } = preview.data;
  return (
    <div data-testid="schedule-preview" className={typing || preview.isFetching ? 'stale' : undefined}>
      <p className="preview-ok">
        ✓ valid — DST policy: repeated times <strong>{effective.ambiguous}</strong>, skipped times{' '}
        <strong>{effective.missing}</strong>
      </p>
      {next.length === 0 ? (
        <p className="muted">This expression never fires again.</p>
      ) : (
        <ol className="occurrences">
          {next.map((o) => (
            <li key={`${o.at}-${o.kind}`} data-testid="preview-occurrence">
              <span className="mono">{o.local.replace('T', ' ')}</span>{' '}
              <span className="muted small-text mono">{o.at.replace('.000Z', 'Z')}</span>
              {o.note ? (
                <span className="dst-note" title={`named wall time ${o.wall}`}>
                  {NOTE_TEXT[o.note] ?? o.note}
                </span>
              ) : null}
            </li>
          ))}
        </ol>
      )}
      <p className="muted small-text">Times in {input.timezone}, then UTC.</p>
    </div>
  );
}

export function CronJobForm() {
  const { id } = useParams();
  const editing = id !== undefined;
  const navigate = useNavigate();
  const { canCommand } = useSession();
  const job = useQuery({
    queryKey: ['cron-jobs', id],
    enabled: editing,
    queryFn: () => unwrap(api.GET('/v1/cron-jobs/{id}', { params: { path: { id: id! } } })),
  });
  // The job as stored stays current (the form itself is not overwritten once loaded).
  useLive(['cron'], () => {
    if (editing) void job.refetch();
  });
  const initial = useMemo(() => (job.data ? fromJob(job.data) : EMPTY), [job.data]);
  const [form, setForm] = useState<FormState>(EMPTY);
  const [loadedFor, setLoadedFor] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [saving, setSaving] = useState(false);

  useEffect(() => {
    if (job.data && loadedFor !== job.data.jobId) {
      setForm(fromJob(job.data));
      setLoadedFor(job.data.jobId);
    }
  }, [job.data, loadedFor]);

  const set = <K extends keyof FormState>(key: K, value: FormState[K]) =>
    setForm((f) => ({ ...f, [key]: value }));
  const explicitDst = form.customDst ? { ambiguous: form.ambiguous, missing: form.missing } : undefined;
  // Unchanged expression on edit: the job keeps its policy; a new expression gets that expression's default.
  const previewDst =
    explicitDst ??
    (editing && job.data && form.schedule.trim() === job.data.schedule ? job.data.dst : undefined);

  async function submit(event: FormEvent) {
    event.preventDefault();
    setError(null);
    const original = job.data?.payload as Record<string, unknown> | undefined;
    const { payload, error: payloadError } = payloadOf(form, original);
    if (payloadError) {
      setError(new Error(payloadError));
      return;
    }
    const timeoutMs = Math.round(Number(form.timeoutSeconds) * 1000);
    const retry = {
      maxRetries: Number(form.maxRetries),
      delayMs: Math.round(Number(form.retryDelaySeconds) * 1000),
      maxDelayMs: Math.max(600_000, Math.round(Number(form.retryDelaySeconds) * 1000)),
    };
    const catchUp = {
      mode: form.catchUpMode,
      graceMs: job.data?.catchUp.graceMs ?? 60_000,
      windowMs: job.data?.catchUp.windowMs ?? 86_400_000,
      cap: job.data?.catchUp.cap ?? 10,
    };
    setSaving(true);
    try {
      if (!editing) {
        const created = await unwrap(
          api.POST('/v1/cron-jobs', {
            body: {
              name: form.name,
              schedule: form.schedule.trim(),
              timezone: form.timezone.trim(),
              ...(explicitDst ? { dst: explicitDst } : {}),
              jobType: form.jobType,
              payload,
              timeoutMs,
              overlap: form.overlap,
              catchUp,
              retry,
              paused: form.paused,
            },
          }),
        );
        navigate(`/cron/${created.jobId}`);
        return;
      }
      const before = initial;
      const changes: Schemas['CronJobChangesInput'] = {};
      if (form.name !== before.name) changes.name = form.name;
      if (form.schedule.trim() !== before.schedule) changes.schedule = form.schedule.trim();
      if (form.timezone.trim() !== before.timezone) changes.timezone = form.timezone.trim();
      if (explicitDst) changes.dst = explicitDst;
      const { payload: beforePayload } = payloadOf(before, original);
      if (form.jobType !== before.jobType) changes.jobType = form.jobType;
      if (
        form.jobType !== before.jobType ||
        JSON.stringify(payload) !== JSON.stringify(beforePayload) ||
        form.signingSecret
      ) {
        changes.payload = payload;
      }
      if (timeoutMs !== job.data!.timeoutMs) changes.timeoutMs = timeoutMs;
      if (form.overlap !== before.overlap) changes.overlap = form.overlap;
      if (form.catchUpMode !== before.catchUpMode) changes.catchUp = catchUp;
      if (form.maxRetries !== before.maxRetries || form.retryDelaySeconds !== before.retryDelaySeconds) {
        changes.retry = { ...job.data!.retry, maxRetries: retry.maxRetries, delayMs: retry.delayMs };
        if (changes.retry.maxDelayMs < changes.retry.delayMs)
          changes.retry.maxDelayMs = changes.retry.delayMs;
      }
      if (Object.keys(changes).length === 0) {
        navigate(`/cron/${id}`);
        return;
      }
      await unwrap(api.PATCH('/v1/cron-jobs/{id}', { params: { path: { id: id! } }, body: changes }));
      navigate(`/cron/${id}`);
    } catch (failure) {
      setError(failure);
    } finally {
      setSaving(false);
    }
  }

  if (!canCommand) {
    return (
      <div className="page">
        <PageHeader title={editing ? 'Edit cron job' : 'New cron job'} />
        <p className="muted">Your key's role may not change cron jobs.</p>
      </div>
    );
  }
  if (editing && job.isPending) return <p className="muted">Loading…</p>;

  const urlLabel = form.jobType === 'slack' ? 'Slack webhook URL' : 'URL';
  return (
    <div className="page" data-testid="cron-job-form">
      <PageHeader
        title={editing ? `Edit ${job.data?.name ?? 'cron job'}` : 'New cron job'}
        actions={<Link to={editing ? `/cron/${id}` : '/cron'}>Cancel</Link>}
      />
      <ErrorBanner error={job.error} />
      <form className="form-grid" onSubmit={submit}>
        <Card title="Schedule">
          <div className="field">
            <label htmlFor="cj-name">Name</label>
            <input id="cj-name" required value={form.name} onChange={(e) => set('name', e.target.value)} />
          </div>
          <div className="field-row">
            <div className="field">
              <label htmlFor="cj-schedule">Cron expression</label>
              <input
                id="cj-schedule"
                className="mono"
                required
                spellCheck={false}
                value={form.schedule}
                placeholder="*/5 * * * *"
                onChange={(e) => set('schedule', e.target.value)}
              />
              <span className="hint">5 fields (minute hour day month weekday) or 6 (seconds first)</span>
            </div>
            <div className="field">
              <label htmlFor="cj-timezone">Time zone</label>
              <input
                id="cj-timezone"
                list="cj-zones"
                required
                value={form.timezone}
                onChange={(e) => set('timezone', e.target.value)}
              />
              <datalist id="cj-zones">
                {zones.map((z) => (
                  <option key={z} value={z} />
                ))}
              </datalist>
            </div>
          </div>
          <div className="field">
            <label className="checkbox">
              <input
                type="checkbox"
                checked={form.customDst}
                onChange={(e) => set('customDst', e.target.checked)}
              />{' '}
              Choose the DST policy (otherwise: {editing ? "the job's, or " : ''}the default for the
              expression)
            </label>
          </div>
          {form.customDst ? (
            <div className="field-row">
              <div className="field">
                <label htmlFor="cj-ambiguous">Repeated wall time (clocks go back)</label>
                <select
                  id="cj-ambiguous"
                  value={form.ambiguous}
                  onChange={(e) => set('ambiguous', e.target.value as Ambiguous)}
                >
                  <option value="first">first pass only</option>
                  <option value="last">last pass only</option>
                  <option value="both">both passes</option>
                </select>
              </div>
              <div className="field">
                <label htmlFor="cj-missing">Skipped wall time (clocks go forward)</label>
                <select
                  id="cj-missing"
                  value={form.missing}
                  onChange={(e) => set('missing', e.target.value as Missing)}
                >
                  <option value="shift">shift forward by the gap</option>
                  <option value="skip">skip</option>
                </select>
              </div>
            </div>
          ) : null}
          <div className="preview-box">
            <h3>Next occurrences</h3>
            <SchedulePreview expression={form.schedule} timezone={form.timezone} dst={previewDst} />
          </div>
        </Card>

        <Card title="What it does">
          <div className="field-row">
            <div className="field">
              <label htmlFor="cj-type">Type</label>
              <select
                id="cj-type"
                value={form.jobType}
                onChange={(e) => set('jobType', e.target.value as JobType)}
              >
                <option value="webhook">webhook (HTTP request with a JSON body)</option>
                <option value="ping">ping (HTTP GET / HEAD)</option>
                <option value="slack">slack (incoming webhook)</option>
                <option value="email">email (SMTP)</option>
              </select>
            </div>
            {form.jobType === 'ping' || form.jobType === 'webhook' ? (
              <div className="field narrow">
                <label htmlFor="cj-method">Method</label>
                <select id="cj-method" value={form.method} onChange={(e) => set('method', e.target.value)}>
                  {(form.jobType === 'ping' ? ['GET', 'HEAD'] : ['POST', 'PUT', 'PATCH']).map((m) => (
                    <option key={m}>{m}</option>
                  ))}
                </select>
              </div>
            ) : null}
          </div>
          {form.jobType !== 'email' ? (
            <div className="field">
              <label htmlFor="cj-url">{urlLabel}</label>
              <input
                id="cj-url"
                type="url"
                required
                value={form.url}
                placeholder="https://example.com/hook"
                onChange={(e) => set('url', e.target.value)}
              />
            </div>
          ) : (
            <>
              <div className="field">
                <label htmlFor="cj-to">To (comma-separated)</label>
                <input id="cj-to" required value={form.to} onChange={(e) => set('to', e.target.value)} />
              </div>
              <div className="field">
                <label htmlFor="cj-subject">Subject</label>
                <input
                  id="cj-subject"
                  required
                  value={form.subject}
                  onChange={(e) => set('subject', e.target.value)}
                />
              </div>
            </>
          )}
          {form.jobType === 'webhook' ? (
            <>
              <div className="field">
                <label htmlFor="cj-body">JSON body</label>
                <textarea
                  id="cj-body"
                  className="mono"
                  rows={4}
                  value={form.body}
                  onChange={(e) => set('body', e.target.value)}
                />
              </div>
              <div className="field">
                <label htmlFor="cj-secret">Signing secret (optional, write-only)</label>
                <input
                  id="cj-secret"
                  type="password"
                  autoComplete="new-password"
                  value={form.signingSecret}
                  placeholder={editing ? 'unchanged unless you change the payload' : 'at least 16 characters'}
                  onChange={(e) => set('signingSecret', e.target.value)}
                />
              </div>
            </>
          ) : null}
          {form.jobType === 'slack' || form.jobType === 'email' ? (
            <div className="field">
              <label htmlFor="cj-text">Text</label>
              <textarea
                id="cj-text"
                rows={3}
                required
                value={form.text}
                onChange={(e) => set('text', e.target.value)}
              />
            </div>
          ) : null}
        </Card>

        <Card title="Policies">
          <div className="field-row">
            <div className="field">
              <label htmlFor="cj-overlap">When the previous run is still active</label>
              <select
                id="cj-overlap"
                value={form.overlap}
                onChange={(e) => set('overlap', e.target.value as Overlap)}
              >
                <option value="skip">skip the occurrence</option>
                <option value="buffer-one">buffer one, run it next</option>
                <option value="allow">run anyway</option>
              </select>
            </div>
            <div className="field">
              <label htmlFor="cj-catchup">Occurrences reached late (downtime)</label>
              <select
                id="cj-catchup"
                value={form.catchUpMode}
                onChange={(e) => set('catchUpMode', e.target.value as CatchUpMode)}
              >
                <option value="skip-missed">record them as missed</option>
                <option value="run-latest">run the latest one</option>
                <option value="run-all">run them all (up to the cap)</option>
              </select>
            </div>
          </div>
          <div className="field-row">
            <div className="field narrow">
              <label htmlFor="cj-timeout">Timeout (s)</label>
              <input
                id="cj-timeout"
                type="number"
                min={1}
                step="any"
                value={form.timeoutSeconds}
                onChange={(e) => set('timeoutSeconds', e.target.value)}
              />
            </div>
            <div className="field narrow">
              <label htmlFor="cj-retries">Retries</label>
              <input
                id="cj-retries"
                type="number"
                min={0}
                max={10}
                value={form.maxRetries}
                onChange={(e) => set('maxRetries', e.target.value)}
              />
            </div>
            <div className="field narrow">
              <label htmlFor="cj-delay">First retry after (s)</label>
              <input
                id="cj-delay"
                type="number"
                min={0.1}
                step="any"
                value={form.retryDelaySeconds}
                onChange={(e) => set('retryDelaySeconds', e.target.value)}
              />
            </div>
          </div>
          {!editing ? (
            <label className="checkbox">
              <input
                type="checkbox"
                checked={form.paused}
                onChange={(e) => set('paused', e.target.checked)}
              />{' '}
              Create paused (nothing fires until it is resumed)
            </label>
          ) : null}
        </Card>

        <ErrorBanner error={error} />
        <div className="form-actions">
          <button type="submit" className="primary" disabled={saving}>
            {saving ? 'Saving…' : editing ? 'Save changes' : 'Create job'}
          </button>
        </div>
      </form>
    </div>
  );
}
