/**
 * A LINE campaign on the dashboard (ADR 0021): its content rendered readably (text bubbles, image and
 * video thumbnails from their preview URLs, a compact summary of stickers, locations, templates and
 * flex messages), its official account and audience as the LINE directory knows them, and its delivery
 * (the plan's chunks accepted, failed, unconfirmed or still to go, recipients accepted, the last LINE
 * calls with their x-line-request-id from the campaign's events).
 */
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { isFinalStatus } from '../../../src/domain/campaign/status.js';
import { api, type Schemas, unwrap } from '../api/client';
import { Card, Stat } from '../components';
import { formatCount, formatRelative, formatTime } from '../format';
import './line.css';

type Campaign = Schemas['Campaign'];
export type LineFacts = NonNullable<Campaign['line']>;
export type LineMessage = LineFacts['messages'][number];
type Timeline = Schemas['CampaignTimeline'];

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
const fileOf = (url: string) => {
  try {
    return decodeURIComponent(new URL(url).pathname.split('/').pop() || url);
  } catch {
    return url;
  }
};

/** A short text of a message list: the list's column, the edit form's summaries. */
export function describeLineMessages(messages: readonly LineMessage[]): string {
  return messages
    .map((m) => {
      switch (m.type) {
        case 'text':
          return `“${clip(m.text, 40)}”`;
        case 'template':
        case 'flex':
          return `${m.type} “${clip(m.altText, 30)}”`;
        default:
          return m.type;
      }
    })
    .join(' · ');
}

type FlexNode = { type: string; text?: string; contents?: unknown; action?: { label?: string } } & Record<
  string,
  unknown
>;

/** The texts, buttons and images of a flex message, depth first. */
function flexParts(node: unknown, acc: { texts: string[]; buttons: string[]; images: number }) {
  if (!node || typeof node !== 'object') return acc;
  const n = node as FlexNode;
  if (n.type === 'text' && typeof n.text === 'string') acc.texts.push(n.text);
  if (n.type === 'button') acc.buttons.push(n.action?.label ?? 'button');
  if (n.type === 'image') acc.images += 1;
  for (const key of ['header', 'hero', 'body', 'footer']) flexParts(n[key], acc);
  if (Array.isArray(n.contents)) for (const child of n.contents) flexParts(child, acc);
  return acc;
}

type Action = { type: string; label?: string; uri?: string; text?: string; data?: string };
function ActionChips({ actions }: { actions: readonly Action[] }) {
  return (
    <span className="line-actions">
      {actions.map((a, i) => (
        <span
          // biome-ignore lint/suspicious/noArrayIndexKey: a template's actions are fixed content, in order.
          key={i}
          className="line-action"
          title={a.uri ?? a.text ?? a.data ?? a.type}
        >
          {a.label ?? a.text ?? a.type}
          {a.type === 'uri' ? ' ↗' : ''}
        </span>
      ))}
    </span>
  );
}

/** A thumbnail from a URL of the content (shown as the URL's file name when it does not load). */
function Thumbnail({ src, href, video }: { src: string; href: string; video?: boolean }) {
  const [broken, setBroken] = useState(false);
  return (
    <a className="line-media" href={href} target="_blank" rel="noreferrer" title={href}>
      {broken ? (
        <span className="line-media-missing">no preview</span>
      ) : (
        <img src={src} alt={fileOf(href)} referrerPolicy="no-referrer" onError={() => setBroken(true)} />
      )}
      {video ? (
        <span className="line-play" aria-hidden="true">
          ▶
        </span>
      ) : null}
      <span className="line-media-name mono">{fileOf(href)}</span>
    </a>
  );
}

function MessageBody({ m }: { m: LineMessage }) {
  switch (m.type) {
    case 'text':
      return <div className="line-bubble">{m.text}</div>;
    case 'image':
      return <Thumbnail src={m.previewImageUrl} href={m.originalContentUrl} />;
    case 'video':
      return <Thumbnail src={m.previewImageUrl} href={m.originalContentUrl} video />;
    case 'audio':
      return (
        <div className="line-card">
          ♪ audio · {Math.floor(m.duration / 60_000)}:
          {String(Math.round((m.duration % 60_000) / 1000)).padStart(2, '0')} ·{' '}
          <a href={m.originalContentUrl} target="_blank" rel="noreferrer" className="mono small-text">
            {fileOf(m.originalContentUrl)}
          </a>
        </div>
      );
    case 'sticker':
      return (
        <div className="line-card line-sticker">
          sticker <span className="mono">{m.packageId}</span> / <span className="mono">{m.stickerId}</span>
        </div>
      );
    case 'location':
      return (
        <div className="line-card">
          📍 <strong>{m.title}</strong> · {m.address}{' '}
          <span className="muted small-text mono">
            ({m.latitude}, {m.longitude})
          </span>
        </div>
      );
    case 'template': {
      const t = m.template;
      return (
        <div className="line-card">
          <div>
            <strong>{t.type} template</strong> <span className="muted">alt “{m.altText}”</span>
          </div>
          {t.type === 'carousel' ? (
            <div className="small-text">
              {t.columns.length} column(s): {t.columns.map((c) => c.title ?? clip(c.text, 24)).join(' · ')}
            </div>
          ) : (
            <div className="small-text">
              {'title' in t && t.title ? <strong>{t.title} — </strong> : null}
              {t.text} <ActionChips actions={t.actions} />
            </div>
          )}
        </div>
      );
    }
    case 'flex': {
      const parts = flexParts(m.contents, { texts: [], buttons: [], images: 0 });
      const shape =
        m.contents.type === 'carousel' ? `carousel of ${m.contents.contents.length} bubbles` : 'bubble';
      return (
        <div className="line-card">
          <div>
            <strong>flex {shape}</strong> <span className="muted">alt “{m.altText}”</span>
          </div>
          <div className="small-text">
            {parts.texts
              .slice(0, 3)
              .map((t) => clip(t, 60))
              .join(' / ')}
            {parts.texts.length > 3 ? ` (+${parts.texts.length - 3} texts)` : ''}
            {parts.images > 0 ? ` · ${parts.images} image(s)` : ''}
            {parts.buttons.length > 0 ? ` · buttons: ${parts.buttons.join(', ')}` : ''}
          </div>
        </div>
      );
    }
  }
}

/** The messages as LINE users see them, in order (`bare`: one message inside the edit form). */
export function LineMessages({ messages, bare }: { messages: readonly LineMessage[]; bare?: boolean }) {
  return (
    <ol className={bare ? 'line-messages bare' : 'line-messages'} data-testid="line-messages">
      {messages.map((m, i) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: the messages' order is their identity.
        <li key={i} className="line-message" data-kind={m.type} data-testid="line-message">
          <span className="line-kind">{m.type}</span>
          <MessageBody m={m} />
        </li>
      ))}
    </ol>
  );
}

/** The official account's channel and the multicast's audience, as the LINE directory has them. */
function Target({ c }: { c: Campaign }) {
  const channels = useQuery({
    queryKey: ['line', 'channels'],
    queryFn: () => unwrap(api.GET('/v1/line/channels')),
    staleTime: 30_000,
  });
  const multicast = c.castType === 'multicast' && c.audienceId !== null;
  const audience = useQuery({
    queryKey: ['line', 'audiences', c.audienceId],
    enabled: multicast,
    retry: false,
    staleTime: 30_000,
    queryFn: () =>
      unwrap(api.GET('/v1/line/audiences/{audienceId}', { params: { path: { audienceId: c.audienceId! } } })),
  });
  const channel = channels.data?.items.find((ch) => ch.lineOaId === c.lineOaId);
  return (
    <dl className="kv" data-testid="line-target">
      <dt>Official account</dt>
      <dd>
        <span className="mono">{c.lineOaId ?? '—'}</span>{' '}
        {channel ? (
          <span className="muted small-text">
            channel <span className="mono">{channel.channelId}</span> ·{' '}
            {channel.tokenKind === 'long_lived' ? 'long-lived token' : 'short-lived tokens'}
          </span>
        ) : channels.data ? (
          <span className="error-text small-text">no channel registered for it</span>
        ) : null}
      </dd>
      <dt>Cast</dt>
      <dd>
        {c.castType === 'broadcast'
          ? 'broadcast: every friend of the account'
          : c.castType === 'narrowcast'
            ? `narrowcast to LINE audience group ${c.audienceId ?? '—'}`
            : `multicast to audience ${c.audienceId ?? '—'}`}
        {multicast && audience.data ? (
          <span className="muted small-text">
            {' '}
            “{audience.data.name}” · {formatCount(audience.data.members)} members ·{' '}
            {audience.data.sealed ? 'sealed' : 'not sealed'}
          </span>
        ) : null}
        {multicast && audience.error ? (
          <span className="error-text small-text"> not in the LINE directory</span>
        ) : null}
      </dd>
      <dt>Start</dt>
      <dd>{c.startAt ? formatTime(c.startAt) : 'when sent'}</dd>
      <dt>Deadline</dt>
      <dd>{c.dispatchDeadline ? formatTime(c.dispatchDeadline) : '—'}</dd>
      <dt>Claim</dt>
      <dd>
        epoch {c.claimEpoch}
        {c.claimedAt ? ` · claimed ${formatRelative(c.claimedAt)}` : ''}
      </dd>
    </dl>
  );
}

/** One LINE call as the campaign's events record it. */
export interface LineCall {
  position: number;
  at: string;
  chunk: number;
  outcome: 'accepted' | 'duplicate' | 'unconfirmed' | 'throttled' | 'transient' | 'rejected' | 'quota';
  status: number | null;
  requestId: string | null;
  retryKey: string;
  recipients: number | null;
  message: string | null;
}

const LINE_EVENTS = new Set(['LineChunkAccepted', 'LineChunkUnconfirmed', 'LineCallFailed']);

/** The LINE calls in the timeline, newest first. */
export function lineCalls(timeline: Timeline | undefined): LineCall[] {
  if (!timeline) return [];
  const calls: LineCall[] = [];
  for (const e of timeline.events) {
    if (!LINE_EVENTS.has(e.type) || !e.data || typeof e.data !== 'object') continue;
    const d = e.data as Record<string, unknown>;
    const str = (k: string) => (typeof d[k] === 'string' ? (d[k] as string) : null);
    const num = (k: string) => (typeof d[k] === 'number' ? (d[k] as number) : null);
    const base = {
      position: e.position,
      at: str('at') ?? e.recordedAt,
      chunk: num('chunk') ?? 0,
      retryKey: str('retryKey') ?? '',
      recipients: num('recipients'),
    };
    if (e.type === 'LineChunkAccepted') {
      const accepted = str('acceptedRequestId');
      calls.push({
        ...base,
        outcome: str('requestId') === null && accepted !== null ? 'duplicate' : 'accepted',
        status: str('requestId') === null && accepted !== null ? 409 : 200,
        requestId: str('requestId') ?? accepted,
        message: null,
      });
    } else if (e.type === 'LineChunkUnconfirmed') {
      calls.push({ ...base, outcome: 'unconfirmed', status: null, requestId: null, message: null });
    } else {
      calls.push({
        ...base,
        outcome: (str('kind') ?? 'rejected') as LineCall['outcome'],
        status: num('status'),
        requestId: str('requestId'),
        message: str('message'),
      });
    }
  }
  return calls.reverse();
}

const OUTCOME_TONE: Record<LineCall['outcome'], string> = {
  accepted: 'badge-ok',
  duplicate: 'badge-ok',
  unconfirmed: 'badge-warn',
  throttled: 'badge-warn',
  transient: 'badge-warn',
  rejected: 'badge-bad',
  quota: 'badge-bad',
};

/** The last LINE calls, newest first: when, which chunk, LINE's answer, its request id, the retry key. */
function LineCalls({ calls }: { calls: LineCall[] }) {
  const shown = calls.slice(0, 10);
  if (shown.length === 0) return <p className="muted">No call to LINE yet.</p>;
  return (
    <div className="table-wrap">
      <table className="data-table compact" data-testid="line-calls">
        <thead>
          <tr>
            <th>Time</th>
            <th>Chunk</th>
            <th>Outcome</th>
            <th>x-line-request-id</th>
            <th>Retry key</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((call) => (
            <tr key={call.position} data-testid="line-call" data-request-id={call.requestId ?? ''}>
              <td className="nowrap mono small-text" title={formatTime(call.at)}>
                {formatTime(call.at).slice(11)}
              </td>
              <td className="nowrap">
                #{call.chunk}
                {call.recipients !== null ? (
                  <span className="muted small-text"> · {formatCount(call.recipients)} users</span>
                ) : null}
              </td>
              <td>
                <span className={`badge ${OUTCOME_TONE[call.outcome]}`}>
                  {call.outcome === 'duplicate' ? 'accepted earlier (409)' : call.outcome}
                </span>
                {call.status && call.outcome !== 'accepted' && call.outcome !== 'duplicate' ? (
                  <span className="muted small-text"> {call.status}</span>
                ) : null}
                {call.message ? <div className="error-text small-text">{call.message}</div> : null}
              </td>
              <td className="mono small-text nowrap" data-testid="line-request-id">
                {call.requestId ?? '—'}
              </td>
              <td className="mono small-text muted" title={`X-Line-Retry-Key ${call.retryKey}`}>
                {call.retryKey.slice(0, 8)}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The delivery: chunks by outcome, recipients, the failure, the last calls. */
function LineProgress({ c, line }: { c: Campaign; line: LineFacts }) {
  const { plan, progress: p } = line;
  const ended = isFinalStatus(c.status);
  const chunks = plan?.chunks ?? 0;
  const remaining = Math.max(0, chunks - p.chunksDone);
  // A delivery that ended before its last chunk: the refused chunk and those after it were not sent.
  const notSent = ended && c.status !== 'COMPLETED' ? remaining : 0;
  const pending = ended ? 0 : remaining;
  const parts: [string, number, string][] = [
    ['accepted', p.chunksAccepted, 'seg-ok'],
    ['failed / not sent', notSent, 'seg-bad'],
    ['unconfirmed', p.chunksUnconfirmed, 'seg-warn'],
    ['to send', pending, 'seg-pending'],
  ];
  // A PARTIAL LINE campaign records no reason: its given-up chunks are the reason (ADR 0021).
  const unconfirmed =
    p.chunksUnconfirmed > 0
      ? `${formatCount(p.chunksUnconfirmed)} chunk(s) (${formatCount(p.recipientsUnconfirmed)} recipients) unconfirmed: they may have reached LINE before a crash, and were not re-sent once their retry keys could have expired (LINE keeps a key 24 h)`
      : null;
  const failure =
    c.failureReason ??
    (c.status === 'PARTIAL'
      ? (unconfirmed ?? p.lastError?.message)
      : c.status === 'FAILED'
        ? p.lastError?.message
        : null);
  return (
    <>
      <div className="stats" data-testid="line-progress">
        <Stat
          label="Chunks planned"
          value={plan ? formatCount(plan.chunks) : '—'}
          hint={
            plan ? `plan epoch ${plan.epoch} · ${formatRelative(plan.plannedAt)}` : 'planned when first sent'
          }
          testId="line-chunks-planned"
        />
        <Stat
          label="Accepted"
          value={formatCount(p.chunksAccepted)}
          hint={`${formatCount(p.duplicates)} answered 409 (already accepted)`}
          {...(p.chunksAccepted > 0 ? { tone: 'ok' as const } : {})}
          testId="line-chunks-accepted"
        />
        <Stat
          label="Failed"
          value={formatCount(notSent)}
          hint={`${formatCount(p.failedCalls)} failed call(s)`}
          {...(notSent > 0 ? { tone: 'bad' as const } : {})}
          testId="line-chunks-failed"
        />
        <Stat
          label="Unconfirmed"
          value={formatCount(p.chunksUnconfirmed)}
          hint={`${formatCount(p.recipientsUnconfirmed)} recipients, not re-sent`}
          {...(p.chunksUnconfirmed > 0 ? { tone: 'warn' as const } : {})}
          testId="line-chunks-unconfirmed"
        />
        <Stat
          label="Recipients accepted"
          value={
            !plan
              ? '—'
              : plan.recipients === null
                ? 'all friends'
                : `${formatCount(p.recipientsAccepted)} / ${formatCount(plan.recipients)}`
          }
          hint={
            !plan
              ? 'not sent yet'
              : plan.recipients === null
                ? `one ${c.castType} call`
                : `${formatCount(p.recipientsUnconfirmed)} unconfirmed`
          }
          testId="line-recipients"
        />
      </div>
      {plan ? (
        <div className="progress-bar" role="img" aria-label="chunks by outcome">
          {parts.map(([label, n, cls]) =>
            n > 0 ? (
              <span
                key={label}
                className={`progress-seg ${cls}`}
                style={{ width: `${(100 * n) / Math.max(1, chunks)}%` }}
                title={`${label}: ${n}`}
              />
            ) : null,
          )}
        </div>
      ) : null}
      {failure ? (
        <div className="line-failure" data-testid="line-failure" role="status">
          <strong>{c.status === 'PARTIAL' ? 'Partly delivered' : 'Failed'}:</strong> {failure}
          {p.lastError ? (
            <div className="small-text muted">
              last LINE error: {p.lastError.kind}
              {p.lastError.status ? ` ${p.lastError.status}` : ''}
              {p.lastError.requestId ? (
                <>
                  {' '}
                  · request <span className="mono">{p.lastError.requestId}</span>
                </>
              ) : null}
            </div>
          ) : null}
        </div>
      ) : null}
      {p.lastRequestId ? (
        <p className="small-text">
          Last x-line-request-id{' '}
          <span className="mono" data-testid="line-last-request-id">
            {p.lastRequestId}
          </span>
        </p>
      ) : null}
    </>
  );
}

/** The LINE campaign's panels on its page: target, content, delivery. */
export function LineCampaignPanels({ c, timeline }: { c: Campaign; timeline?: Timeline | undefined }) {
  const calls = lineCalls(timeline);
  const shown = Math.min(10, calls.length);
  return (
    <>
      <Card title="Delivery">
        {c.line ? <LineProgress c={c} line={c.line} /> : <p className="muted">No delivery facts.</p>}
      </Card>
      <div className="grid grid-2 line-panels">
        <div className="stack">
          <Card title="Official account and audience">
            <Target c={c} />
          </Card>
          <Card
            title="LINE calls"
            actions={
              <span className="muted small-text">
                newest first{calls.length > shown ? `, the last ${shown} of ${calls.length}` : ''}
                {timeline?.truncated ? ' (older events not loaded)' : ''}
              </span>
            }
          >
            {timeline ? <LineCalls calls={calls} /> : <p className="muted">Loading…</p>}
          </Card>
        </div>
        <Card title={`Content${c.line ? ` · ${c.line.messages.length} message(s)` : ''}`}>
          {c.line ? (
            <LineMessages messages={c.line.messages} />
          ) : (
            <p className="muted">No content recorded (created before LINE content was kept).</p>
          )}
        </Card>
      </div>
    </>
  );
}
