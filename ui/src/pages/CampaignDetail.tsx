/**
 * One campaign: its progress (SMS: recipients by state, costs, deferred by send window — all from the
 * campaign's event-maintained counters, never counted on read; LINE: its official account and audience,
 * its content, its delivery plan's chunks and the last LINE calls, line.tsx), the timeline from its event history as
 * causal chains (command → events → outbox message → broker confirm → consumer, each event with its
 * actor), and the controls — pause, resume, reschedule, cancel, resend (with its preview when the server
 * offers one) — each behind a confirmation that asks for a reason — and, while the state allows it, a
 * link to the LINE edit form. Live on the `campaigns` topic. A viewer sees no command buttons.
 */
import { useQuery } from '@tanstack/react-query';
import { type ReactNode, useState } from 'react';
import { Link, useParams } from 'react-router-dom';
import { api, type Schemas, unwrap, useLive, useSession } from '../api/client';
import {
  ActorName,
  Card,
  CommandButton,
  ConfirmDialog,
  ErrorBanner,
  EventHead,
  PageHeader,
  Stat,
  StatusBadge,
} from '../components';
import { formatCount, formatRelative, formatTime } from '../format';
import { LineCampaignPanels } from './line';
import { type TimelineGroup, timelineItems } from './timeline-groups';
import './pages-b.css';
import './campaign-detail.css';

type Campaign = Schemas['Campaign'];
type Timeline = Schemas['CampaignTimeline'];
type TimelineEvent = Timeline['events'][number];
type Message = TimelineEvent['messages'][number];

interface Sms {
  recipients: number;
  segments: number;
  totalCost: string;
  actualCost?: string;
  failedCost?: string;
  refundedCost?: string;
  unconfirmedCost?: string;
  cancelledCost?: string;
  rejected: number;
  deferrals: number;
  submissions: number;
  messageType: string;
  sendWindow: unknown;
  progress: {
    pending: number;
    deferred: number;
    submitted: number;
    retryPending: number;
    delivered: number;
    failed: number;
    cancelled: number;
    unconfirmed: number;
    refunded: number;
  };
}

const str = (v: unknown): string =>
  typeof v === 'string' ? v : v === null || v === undefined ? '' : JSON.stringify(v);

/** The stacked progress bar of an SMS campaign's recipients. */
function ProgressBar({ sms }: { sms: Sms }) {
  const p = sms.progress;
  const total = Math.max(1, sms.recipients);
  const parts: [string, number, string][] = [
    ['delivered', p.delivered, 'seg-ok'],
    ['failed', p.failed, 'seg-bad'],
    ['cancelled', p.cancelled, 'seg-muted'],
    ['submitted', p.submitted, 'seg-run'],
    ['retry pending', p.retryPending, 'seg-warn'],
    ['deferred by window', p.deferred, 'seg-wait'],
    ['pending', p.pending, 'seg-pending'],
  ];
  return (
    <div>
      <div className="progress-bar" role="img" aria-label="recipients by state">
        {parts.map(([label, n, cls]) =>
          n > 0 ? (
            <span
              key={label}
              className={`progress-seg ${cls}`}
              style={{ width: `${(100 * n) / total}%` }}
              title={`${label}: ${n}`}
            />
          ) : null,
        )}
      </div>
      <div className="progress-legend">
        {parts.map(([label, n, cls]) => (
          <span key={label} className="legend-item">
            <span className={`legend-swatch ${cls}`} aria-hidden="true" />
            {label} <strong>{formatCount(n)}</strong>
          </span>
        ))}
      </div>
    </div>
  );
}

function SmsProgress({ sms }: { sms: Sms }) {
  const window = sms.sendWindow as { start?: string; end?: string; timezone?: string } | null;
  return (
    <>
      <div className="stats" data-testid="campaign-progress">
        <Stat
          label="Recipients"
          value={formatCount(sms.recipients)}
          hint={`${formatCount(sms.segments)} segments`}
        />
        <Stat label="Delivered" value={formatCount(sms.progress.delivered)} tone="ok" />
        <Stat
          label="Failed"
          value={formatCount(sms.progress.failed)}
          hint={`${formatCount(sms.progress.unconfirmed)} unconfirmed, ${formatCount(sms.progress.refunded)} refunded`}
          {...(sms.progress.failed > 0 ? { tone: 'bad' as const } : {})}
        />
        <Stat
          label="Deferred by window"
          value={formatCount(sms.progress.deferred)}
          hint={`${formatCount(sms.deferrals)} deferrals so far`}
          {...(sms.progress.deferred > 0 ? { tone: 'warn' as const } : {})}
          testId="deferred"
        />
        <Stat label="Charged" value={sms.totalCost} hint={`actual ${sms.actualCost ?? '—'}`} />
        <Stat
          label="Refunded"
          value={sms.refundedCost ?? '—'}
          hint={`failed ${sms.failedCost ?? '—'} · cancelled ${sms.cancelledCost ?? '—'}`}
        />
      </div>
      <ProgressBar sms={sms} />
      <p className="muted small-text">
        {sms.messageType.toLowerCase()} · {formatCount(sms.submissions)} submission chunks ·{' '}
        {sms.rejected > 0 ? (
          <a href="#rejected-rows">{formatCount(sms.rejected)} rows rejected</a>
        ) : (
          `${formatCount(sms.rejected)} rows rejected`
        )}
        {window ? ` · send window ${str(window.start)}–${str(window.end)} ${str(window.timezone)}` : ''}
      </p>
    </>
  );
}

type Upload = Schemas['SmsCampaignUpload'];

const REJECTION_LABELS: Record<string, string> = {
  'invalid-msisdn': 'not a valid number',
  duplicate: 'duplicate of an earlier row',
  'no-route': 'no route to its operator',
};

/**
 * A CSV campaign's file and build: status, attempts, rows read / accepted / rejected, why it failed (the
 * parser's message and line, the last attempt's error) or why its last attempt failed (retried), and the
 * rejected rows — counts by reason and the first 100 with their line and cell.
 */
function UploadPanel({ c }: { c: Campaign }) {
  const upload = useQuery({
    queryKey: ['campaigns', c.campaignId, 'upload', c.status, c.statusChangedAt],
    queryFn: () => unwrap(api.GET('/v1/campaigns/{id}/upload', { params: { path: { id: c.campaignId } } })),
  });
  useLive(['campaigns'], () => void upload.refetch());
  const u: Upload | undefined = upload.data;
  return (
    <Card title="Upload" actions={u ? <StatusBadge status={u.status} /> : null}>
      <ErrorBanner error={upload.error} />
      {u ? (
        <div data-testid="upload-panel">
          {u.error ? (
            <div
              className={u.status === 'FAILED' ? 'reason-banner error-banner' : 'reason-banner warn-banner'}
              role={u.status === 'FAILED' ? 'alert' : 'status'}
              data-testid="upload-error"
            >
              <span>
                <strong>
                  {u.status === 'FAILED'
                    ? c.status === 'CANCELLED'
                      ? 'The build was stopped: '
                      : 'The build failed: '
                    : u.status === 'CHARGING'
                      ? 'The charge waits: '
                      : 'The last build attempt failed: '}
                </strong>
                {u.error}
              </span>
            </div>
          ) : null}
          <dl className="kv">
            <dt>File</dt>
            <dd>
              {u.fileName ?? <span className="muted">unnamed</span>}{' '}
              <span className="muted small-text">{formatCount(u.sizeBytes)} bytes</span>
            </dd>
            <dt>Rows</dt>
            <dd>
              {formatCount(u.rowsRead)} read · {formatCount(u.acceptedCount)} accepted ·{' '}
              {formatCount(u.rejectedCount)} rejected
            </dd>
            <dt>Build attempts</dt>
            <dd>{formatCount(u.attempt)}</dd>
            {u.finishedAt ? (
              <>
                <dt>Finished</dt>
                <dd>{formatTime(u.finishedAt)}</dd>
              </>
            ) : null}
          </dl>
          {u.rejectedCount > 0 ? <RejectedRows u={u} /> : null}
        </div>
      ) : (
        <p className="muted">Loading…</p>
      )}
    </Card>
  );
}

function RejectedRows({ u }: { u: Upload }) {
  const reasons = Object.entries(u.rejectedByReason).sort((a, b) => b[1] - a[1]);
  return (
    <div id="rejected-rows" data-testid="rejected-rows">
      <h3 className="small-heading">
        {formatCount(u.rejectedCount)} rejected {u.rejectedCount === 1 ? 'row' : 'rows'}
      </h3>
      <ul className="reason-counts">
        {reasons.map(([reason, n]) => (
          <li key={reason}>
            <strong>{formatCount(n)}</strong> {REJECTION_LABELS[reason] ?? reason}{' '}
            <span className="mono muted small-text">{reason}</span>
          </li>
        ))}
      </ul>
      <table className="data-table compact rejected-table" aria-label="rejected rows">
        <thead>
          <tr>
            <th className="num">Line</th>
            <th>Value</th>
            <th>Reason</th>
          </tr>
        </thead>
        <tbody>
          {u.rejectedRows.map((r) => (
            <tr key={r.line} data-testid="rejected-row">
              <td className="num mono">{r.line}</td>
              <td className="mono">{r.value || <span className="muted">(empty)</span>}</td>
              <td>{REJECTION_LABELS[r.reason] ?? r.reason}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {u.rejectedCount > u.rejectedRows.length ? (
        <p className="muted small-text">
          The first {formatCount(u.rejectedRows.length)} of {formatCount(u.rejectedCount)} rejected rows.
        </p>
      ) : null}
    </div>
  );
}

/** One outbox message of an event: the row, its broker confirm(s), its consumers. */
function MessageChain({ m }: { m: Message }) {
  const outbox = m.outbox as Record<string, unknown> | null;
  return (
    <div className="chain-message" data-testid="timeline-message">
      <div className="chain-step">
        <span className="chain-kind">message</span>
        <span className="mono small-text">{m.messageId.slice(0, 8)}</span> → {m.sink}:{m.destination}
        {outbox ? (
          <>
            {' '}
            <StatusBadge status={str(outbox.status)} />
            {Number(outbox.attempts) > 0 ? (
              <span className="muted small-text"> {str(outbox.attempts)} attempt(s)</span>
            ) : null}
            {outbox.lastError ? (
              <span className="error-text small-text"> {str(outbox.lastError)}</span>
            ) : null}
          </>
        ) : (
          <span className="muted small-text"> (outbox row pruned)</span>
        )}
      </div>
      {m.receipts.map((r) => (
        <div className="chain-step" key={str(r.id)}>
          <span className="chain-kind">broker</span>
          <StatusBadge
            status={str(r.outcome) === 'sent' ? 'confirmed' : str(r.outcome)}
            tone={str(r.outcome) === 'sent' ? 'ok' : 'bad'}
          />
          {r.confirmedAt ? <span className="muted small-text"> {formatTime(str(r.confirmedAt))}</span> : null}
          {r.brokerRef ? <span className="mono small-text"> ref {str(r.brokerRef)}</span> : null}
          {r.error ? <span className="error-text small-text"> {str(r.error)}</span> : null}
        </div>
      ))}
      {m.inbox.map((i) => (
        <div className="chain-step" key={`${str(i.consumer)}-${str(i.receivedAt)}`}>
          <span className="chain-kind">consumer</span>
          <strong>{str(i.consumer)}</strong> <StatusBadge status={str(i.status)} />
          {Number(i.attempts) > 1 ? (
            <span className="muted small-text"> {str(i.attempts)} attempts</span>
          ) : null}
          {i.error ? <span className="error-text small-text"> {str(i.error)}</span> : null}
        </div>
      ))}
    </div>
  );
}

function summary(data: unknown): string {
  if (!data || typeof data !== 'object') return '';
  const d = data as Record<string, unknown>;
  const keys = [
    'reason',
    'startAt',
    'from',
    'to',
    'status',
    'epoch',
    'recipients',
    'delivered',
    'failed',
    'deferred',
    'amount',
    // LINE delivery steps (ADR 0021): the chunk, LINE's answer and its request id.
    'chunks',
    'chunk',
    'kind',
    'requestId',
    'acceptedRequestId',
    'message',
  ];
  const parts = keys
    .filter((k) => d[k] !== undefined && d[k] !== null && typeof d[k] !== 'object')
    .map((k) => `${k}: ${str(d[k])}`);
  // A CMS edit: which fields it changed.
  if (d.changes && typeof d.changes === 'object') {
    parts.unshift(`changed: ${Object.keys(d.changes).join(', ')}`);
  }
  return parts.join(' · ');
}

/** Messages shown before "show N more" (a dispatch batch has one per submission chunk). */
const MESSAGES_SHOWN = 2;

type CommandGroup = TimelineGroup<TimelineEvent>;

/** The numbers a bundle's events carry (recipients, delivered, failed, …), summed. */
function bundleTotals(groups: readonly CommandGroup[]): string {
  const totals = new Map<string, number>();
  for (const g of groups)
    for (const e of g.events) {
      const data = (e.data ?? {}) as Record<string, unknown>;
      for (const key of ['recipients', 'delivered', 'failed', 'refunded', 'submitted', 'released']) {
        const n = data[key];
        if (typeof n === 'number') totals.set(key, (totals.get(key) ?? 0) + n);
      }
    }
  return [...totals].map(([k, n]) => `${k}: ${formatCount(n)}`).join(' · ');
}

function TimelineBundle({
  type,
  groups,
  render,
}: {
  type: string;
  groups: CommandGroup[];
  render(g: CommandGroup): ReactNode;
}) {
  const [open, setOpen] = useState(false);
  const events = groups.flatMap((g) => g.events);
  const times = events.map((e) => e.recordedAt).sort();
  const actors = [...new Set(groups.map((g) => g.actor ?? null))];
  const totals = bundleTotals(groups);
  return (
    <li className="timeline-group" data-testid="timeline-bundle" data-type={type}>
      <div className="timeline-bundle">
        <div className="timeline-bundle-head">
          <strong>{type}</strong>
          <span>
            × {formatCount(events.length)} in {formatCount(groups.length)} commands
          </span>
          <span className="small-text">
            by{' '}
            {actors.map((actor, i) => (
              <span key={actor ?? 'unknown'}>
                {i > 0 ? ', ' : ''}
                <ActorName actor={actor} />
              </span>
            ))}
          </span>
          <span className="mono small-text muted">
            {formatTime(times[0]!)} – {formatTime(times.at(-1)!)}
          </span>
          <button type="button" className="link" aria-expanded={open} onClick={() => setOpen(!open)}>
            {open ? 'Hide them' : `Show all ${formatCount(events.length)}`}
          </button>
        </div>
        {totals ? <div className="small-text event-summary">{totals}</div> : null}
        {open ? <ol className="timeline">{groups.map(render)}</ol> : null}
      </div>
    </li>
  );
}

/** An event's outbox messages: the first few, the rest behind "show N more". */
function Messages({ messages }: { messages: readonly Message[] }) {
  const [all, setAll] = useState(false);
  const shown = all ? messages : messages.slice(0, MESSAGES_SHOWN);
  return (
    <>
      {shown.map((m) => (
        <MessageChain key={m.messageId} m={m} />
      ))}
      {messages.length > MESSAGES_SHOWN ? (
        <button type="button" className="link small-text more-messages" onClick={() => setAll(!all)}>
          {all
            ? 'Show fewer messages'
            : `Show ${formatCount(messages.length - MESSAGES_SHOWN)} more ${messages.length - MESSAGES_SHOWN === 1 ? 'message' : 'messages'}`}
        </button>
      ) : null}
    </>
  );
}

function CampaignTimeline({ timeline }: { timeline: Timeline }) {
  const [open, setOpen] = useState<number | null>(null);
  const messageEvents = new Map<string, TimelineEvent>();
  for (const e of timeline.events) for (const m of e.messages) messageEvents.set(m.messageId, e);
  const renderGroup = (g: CommandGroup) => (
    <li key={g.key} className="timeline-group">
      <div className="timeline-command">
        <span className="chain-kind">command</span>
        <span className="actor" data-testid="timeline-actor">
          <ActorName actor={g.actor} />
        </span>
        {g.correlationId ? (
          <span className="mono muted small-text"> correlation {g.correlationId}</span>
        ) : null}
      </div>
      {[...g.events].reverse().map((e) => {
        const cause = e.causationId ? messageEvents.get(e.causationId) : undefined;
        const text = summary(e.data);
        return (
          <div key={e.position} className="timeline-event" data-testid="timeline-event" data-type={e.type}>
            <div className="timeline-event-head">
              <EventHead
                event={e}
                actor={e.actor}
                onToggle={() => setOpen(open === e.position ? null : e.position)}
              />
              {cause ? (
                <span className="muted small-text">
                  {' '}
                  ← consumer of the message of {cause.type} (v{cause.version})
                </span>
              ) : null}
            </div>
            {text ? <div className="small-text event-summary">{text}</div> : null}
            {open === e.position ? <pre className="output">{JSON.stringify(e.data, null, 2)}</pre> : null}
            <Messages messages={e.messages} />
          </div>
        );
      })}
    </li>
  );
  return (
    <ol className="timeline" data-testid="timeline">
      {timeline.truncated ? <li className="muted small-text">Older events are not shown.</li> : null}
      {timelineItems(timeline.events).map((item) =>
        item.kind === 'group' ? (
          renderGroup(item.group)
        ) : item.groups.length === 1 ? (
          renderGroup(item.groups[0]!)
        ) : (
          <TimelineBundle
            key={`bundle-${item.type}`}
            type={item.type}
            groups={item.groups}
            render={renderGroup}
          />
        ),
      )}
    </ol>
  );
}

const localInput = (iso: string | null) => {
  const ms = iso ? Date.parse(iso) : Date.now() + 3_600_000;
  return new Date(ms - new Date(ms).getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};

function RescheduleButton({
  c,
  run,
}: {
  c: Campaign;
  run(startAt: string, reason: string): Promise<unknown>;
}) {
  const { canCommand } = useSession();
  const [open, setOpen] = useState(false);
  const [startAt, setStartAt] = useState('');
  if (!canCommand) return null;
  const valid = startAt !== '' && !Number.isNaN(Date.parse(startAt));
  return (
    <>
      <button
        type="button"
        onClick={() => {
          setStartAt(localInput(c.startAt));
          setOpen(true);
        }}
      >
        Reschedule
      </button>
      <ConfirmDialog
        open={open}
        title={`Reschedule ${c.name}`}
        description="Moves the start time (it must be in the future)."
        confirmLabel="Reschedule"
        dismissLabel="Keep start time"
        requireReason
        confirmDisabled={!valid}
        onClose={() => setOpen(false)}
        onConfirm={(reason) => run(new Date(startAt).toISOString(), reason)}
      >
        <div className="field">
          <label htmlFor="rs-start">New start (your time)</label>
          <input
            id="rs-start"
            type="datetime-local"
            value={startAt}
            onChange={(e) => setStartAt(e.target.value)}
          />
        </div>
      </ConfirmDialog>
    </>
  );
}

export function CampaignDetail() {
  const { id } = useParams() as { id: string };
  const { canCommand } = useSession();
  const campaign = useQuery({
    queryKey: ['campaigns', id],
    queryFn: () => unwrap(api.GET('/v1/campaigns/{id}', { params: { path: { id } } })),
  });
  const timeline = useQuery({
    queryKey: ['campaigns', id, 'timeline'],
    queryFn: () =>
      unwrap(api.GET('/v1/campaigns/{id}/timeline', { params: { path: { id }, query: { limit: 200 } } })),
  });
  useLive(['campaigns'], () => {
    void campaign.refetch();
    void timeline.refetch();
  });
  const refetch = async () => {
    await Promise.all([campaign.refetch(), timeline.refetch()]);
  };

  if (campaign.error) return <ErrorBanner error={campaign.error} />;
  if (!campaign.data) return <p className="muted">Loading…</p>;
  const c = campaign.data;
  const sms = c.sms as unknown as Sms | null;
  const csv = (c.sms as { source?: string } | null)?.source === 'csv';
  const path = { params: { path: { id } } };

  // The server says which commands this campaign's state allows (its operation catalogue).
  const allowed = new Set(c.commands);
  const controls: ReactNode[] = [];
  if (allowed.has('pause')) {
    controls.push(
      <CommandButton
        key="pause"
        label="Pause"
        title={`Pause ${c.name}`}
        description={`Stops dispatching; it resumes from ${c.status.toLowerCase()}.`}
        confirmLabel="Pause"
        dismissLabel="Keep running"
        requireReason
        onConfirm={async (reason) => {
          await unwrap(
            api.POST('/v1/campaigns/{id}/pause', {
              ...path,
              body: { reason },
            }),
          );
          await refetch();
        }}
      />,
    );
  }
  if (allowed.has('resume')) {
    controls.push(
      <CommandButton
        key="resume"
        label="Resume"
        title={`Resume ${c.name}`}
        description={`Back to ${c.pausedFrom?.toLowerCase() ?? 'where it was'}.`}
        confirmLabel="Resume"
        dismissLabel="Keep paused"
        requireReason
        onConfirm={async (reason) => {
          await unwrap(
            api.POST('/v1/campaigns/{id}/resume', {
              ...path,
              body: { reason },
            }),
          );
          await refetch();
        }}
      />,
    );
  }
  if (allowed.has('reschedule')) {
    controls.push(
      <RescheduleButton
        key="reschedule"
        c={c}
        run={async (startAt, reason) => {
          await unwrap(
            api.POST('/v1/campaigns/{id}/reschedule', {
              ...path,
              // An SMS campaign's new time is validated as at creation; its deadline follows the start.
              body: c.channel === 'sms' ? { scheduledAt: startAt, reason } : { startAt, reason },
            }),
          );
          await refetch();
        }}
      />,
    );
  }
  // An SMS campaign that failed before sending (a CSV build) has no failed recipient to resend.
  if (allowed.has('resend') && c.channel === 'sms' && (sms?.progress.failed ?? 0) > 0) {
    controls.push(<ResendButton key="resend" c={c} onDone={refetch} />);
  }
  if (allowed.has('resend') && c.channel === 'line') {
    controls.push(
      <CommandButton
        key="resend"
        label="Resend"
        title={`Resend ${c.name}`}
        description="Reopens the campaign (QUEUED) for the chunks LINE has not accepted, under their planned retry keys: a chunk LINE accepted is never sent again."
        confirmLabel="Resend"
        dismissLabel="Don't resend"
        requireReason
        onConfirm={async (reason) => {
          await unwrap(api.POST('/v1/campaigns/{id}/resend', { ...path, body: { reason } }));
          await refetch();
        }}
      />,
    );
  }
  if (allowed.has('edit') && c.channel === 'line' && canCommand) {
    controls.unshift(
      <Link key="edit" className="button" to={`/campaigns/${c.campaignId}/edit`}>
        Edit
      </Link>,
    );
  }
  if (allowed.has('cancel')) {
    controls.push(
      <CommandButton
        key="cancel"
        label="Cancel campaign"
        danger
        title={`Cancel ${c.name}`}
        description={
          c.status === 'BUILDING'
            ? 'Stops its build: nothing was charged and nothing is sent. This cannot be undone.'
            : 'Nothing more is sent; unsent recipients of an SMS campaign are refunded. This cannot be undone.'
        }
        confirmLabel="Cancel campaign"
        dismissLabel="Keep campaign"
        requireReason
        onConfirm={async (reason) => {
          await unwrap(api.POST('/v1/campaigns/{id}/cancel', { ...path, body: { reason } }));
          await refetch();
        }}
      />,
    );
  }

  return (
    <div className="page" data-testid="campaign-detail">
      <PageHeader
        title={
          <>
            {c.name} <StatusBadge status={c.status} />
          </>
        }
        subtitle={
          <>
            <Link to="/campaigns">Campaigns</Link> ·{' '}
            <span className={`channel channel-${c.channel}`}>{c.channel}</span> ·{' '}
            <span className="mono">{c.campaignId}</span> · created {formatTime(c.createdAt)} ·{' '}
            {c.status.toLowerCase()} since {formatRelative(c.statusChangedAt)}
            {c.status === 'PAUSED' && c.pausedFrom ? ` (from ${c.pausedFrom.toLowerCase()})` : ''}
          </>
        }
        actions={controls.length > 0 ? controls : null}
      />
      {c.status === 'FAILED' && c.failureReason && !csv ? (
        <div className="error-banner reason-banner" role="alert" data-testid="failure-reason">
          <span>
            <strong>Failed:</strong> {c.failureReason}
          </span>
        </div>
      ) : null}
      {csv ? <UploadPanel c={c} /> : null}
      {sms ? (
        <Card title="Progress">
          <SmsProgress sms={sms} />
        </Card>
      ) : (
        <LineCampaignPanels c={c} timeline={timeline.data} />
      )}
      <Card
        title="Timeline"
        actions={<span className="muted small-text">command → events → message → broker → consumer</span>}
      >
        <ErrorBanner error={timeline.error} />
        {timeline.data ? <CampaignTimeline timeline={timeline.data} /> : <p className="muted">Loading…</p>}
      </Card>
    </div>
  );
}

/** Resend of an SMS campaign's failed recipients: the server's preview (how many, the charge) first. */
function ResendButton({ c, onDone }: { c: Campaign; onDone(): Promise<void> }) {
  const { canCommand } = useSession();
  const [open, setOpen] = useState(false);
  const preview = useQuery({
    queryKey: ['campaigns', c.campaignId, 'resend-preview', c.resendAttempt, c.statusChangedAt],
    enabled: open,
    retry: false,
    staleTime: 0,
    queryFn: () =>
      unwrap(api.POST('/v1/campaigns/{id}/resend/preview', { params: { path: { id: c.campaignId } } })),
  });
  if (!canCommand || c.channel !== 'sms') return null;
  const p = preview.data;
  const blocked = !p || p.recipients === 0 || p.refundsPending > 0;
  return (
    <>
      <button type="button" onClick={() => setOpen(true)}>
        Resend failed
      </button>
      <ConfirmDialog
        open={open}
        title={`Resend the failed recipients of ${c.name}`}
        description="Reopens the campaign (QUEUED) for its failed recipients; they are charged again, once, with the resend's own key."
        confirmLabel={p ? `Resend ${formatCount(p.recipients)} for ${p.cost}` : 'Resend'}
        dismissLabel="Don't resend"
        requireReason
        confirmDisabled={blocked}
        onClose={() => setOpen(false)}
        onConfirm={async (reason) => {
          await unwrap(
            api.POST('/v1/campaigns/{id}/resend', {
              params: { path: { id: c.campaignId } },
              body: { reason },
            }),
          );
          await onDone();
        }}
      >
        <ErrorBanner error={preview.error} />
        {preview.isPending ? <p className="muted">Previewing…</p> : null}
        {p ? (
          <dl className="kv backfill-preview" data-testid="resend-preview">
            <dt>Recipients</dt>
            <dd>{formatCount(p.recipients)} failed</dd>
            <dt>Charge</dt>
            <dd className="mono">{p.cost}</dd>
            <dt>Resend</dt>
            <dd>
              #{p.nextResendAttempt} <span className="mono small-text">{p.chargeKey}</span>
            </dd>
            {p.refundsPending > 0 ? (
              <>
                <dt>Blocked</dt>
                <dd className="error-text">
                  {formatCount(p.refundsPending)} refund(s) still pending: try again once they are recorded
                </dd>
              </>
            ) : null}
          </dl>
        ) : null}
      </ConfirmDialog>
    </>
  );
}
