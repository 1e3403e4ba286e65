/**
 * Campaigns: search by id or name, filter by status, channel and creation time, newest first with a
 * cursor ("Load more" — never an offset or a count of everything), live on the `campaigns` topic. The
 * filters live in the URL, so a filtered list can be shared and survives a reload. Each row says what
 * goes out (a LINE campaign's messages, an SMS campaign's kind), to how many (SMS recipients; a LINE
 * campaign's planned recipients once planned), when it starts (a draft: not scheduled) and how far it got (SMS delivered and failed;
 * LINE chunks accepted of those planned), all from the campaign's own facts.
 */
import { useInfiniteQuery } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { Link, useNavigate, useSearchParams } from 'react-router-dom';
// The one list of statuses: pure data shared with the server's decider.
import { CAMPAIGN_STATUSES } from '../../../src/domain/campaign/status.js';
import { api, type Schemas, unwrap, useLive } from '../api/client';
import type { paths } from '../api/schema';
import { type Column, DataTable, ErrorBanner, PageHeader, StatusBadge } from '../components';
import { formatCount, formatRelative, formatTime } from '../format';
import { describeLineMessages } from './line';
import './pages-b.css';

type Campaign = Schemas['Campaign'];
type ListQuery = NonNullable<paths['/v1/campaigns']['get']['parameters']['query']>;

/** A date input (YYYY-MM-DD, browser time) as the instant it starts, or ends (exclusive: next midnight). */
function dayBound(value: string, end: boolean): string | undefined {
  if (!value) return undefined;
  const d = new Date(`${value}T00:00:00`);
  if (Number.isNaN(d.getTime())) return undefined;
  if (end) d.setDate(d.getDate() + 1);
  return d.toISOString();
}

/** Recipients and cost of an SMS campaign, from its facts (no count on read). */
export function smsFacts(c: Campaign): {
  recipients: number;
  totalCost: string;
  progress: Record<string, number>;
  deferrals: number;
} | null {
  const sms = c.sms as Record<string, unknown> | null;
  if (!sms) return null;
  return {
    recipients: Number(sms.recipients ?? 0),
    totalCost: String(sms.totalCost ?? '0'),
    progress: (sms.progress ?? {}) as Record<string, number>,
    deferrals: Number(sms.deferrals ?? 0),
  };
}

/** What a campaign sends, in one line (a LINE campaign's messages; an SMS campaign's kind). */
function contentOf(c: Campaign): string {
  if (c.line) return describeLineMessages(c.line.messages);
  const type = (c.sms as Record<string, unknown> | null)?.messageType;
  return typeof type === 'string' ? `${type.toLowerCase()} SMS` : '';
}

/**
 * To whom, as a count: an SMS campaign's saved recipients, a LINE campaign's planned recipients once its
 * delivery is planned (before that, a dash saying when it is counted — never the cast type as a count).
 */
function Recipients({ c }: { c: Campaign }) {
  const sms = smsFacts(c);
  if (sms) {
    if (c.status === 'BUILDING' && sms.recipients === 0) return <span className="muted">building…</span>;
    return <>{formatCount(sms.recipients)}</>;
  }
  const planned = c.line?.plan?.recipients;
  if (planned != null) return <>{formatCount(planned)}</>;
  // A broadcast's plan does not count its friends: those LINE accepted it for, once sent.
  const accepted = c.line?.progress?.recipientsAccepted;
  if (accepted) return <span title="recipients LINE accepted">{formatCount(accepted)}</span>;
  return (
    <span className="muted" title={`${c.castType}: counted when its delivery is planned`}>
      —
    </span>
  );
}

/** When it starts: its start time, or what it waits for (a draft is not scheduled at all). */
export function StartCell({ c }: { c: Pick<Campaign, 'startAt' | 'status'> }) {
  if (c.startAt) {
    return (
      <span className="nowrap" title={c.startAt}>
        {formatTime(c.startAt)}
      </span>
    );
  }
  switch (c.status) {
    case 'DRAFT':
      return <span className="muted">not scheduled</span>;
    case 'BUILDING':
      return <span className="muted">once built</span>;
    default:
      return <span className="muted">on activation</span>;
  }
}

/** How far it got: SMS delivered and failed; LINE chunks accepted of those planned (and unconfirmed). */
function Delivery({ c }: { c: Campaign }) {
  const sms = smsFacts(c);
  if (sms) {
    const failed = sms.progress.failed ?? 0;
    return (
      <span>
        {formatCount(sms.progress.delivered ?? 0)} delivered
        {failed > 0 ? <span className="error-text"> · {formatCount(failed)} failed</span> : null}
      </span>
    );
  }
  const plan = c.line?.plan;
  const p = c.line?.progress;
  if (!plan || !p) return <span className="muted">not sent yet</span>;
  return (
    <span title={`${p.recipientsAccepted} recipients accepted by LINE`}>
      {formatCount(p.chunksAccepted)}/{formatCount(plan.chunks)} chunks
      {p.chunksUnconfirmed > 0 ? (
        <span className="text-warn"> · {formatCount(p.chunksUnconfirmed)} unconfirmed</span>
      ) : null}
    </span>
  );
}

export function Campaigns() {
  const [params, setParams] = useSearchParams();
  const navigate = useNavigate();
  const [search, setSearch] = useState(params.get('q') ?? '');
  const status = params.get('status') ?? '';
  const channel = params.get('channel') ?? '';
  const from = params.get('from') ?? '';
  const to = params.get('to') ?? '';
  const q = params.get('q') ?? '';

  // The search box updates the URL 300 ms after the last keystroke.
  useEffect(() => {
    const timer = setTimeout(() => {
      if (search.trim() === q) return;
      setParams(
        (p) => {
          const next = new URLSearchParams(p);
          if (search.trim()) next.set('q', search.trim());
          else next.delete('q');
          return next;
        },
        { replace: true },
      );
    }, 300);
    return () => clearTimeout(timer);
  }, [search, q, setParams]);

  const setFilter = (key: string, value: string) =>
    setParams(
      (p) => {
        const next = new URLSearchParams(p);
        if (value) next.set(key, value);
        else next.delete(key);
        return next;
      },
      { replace: true },
    );

  const query: ListQuery = {
    limit: 50,
    ...(q ? { q } : {}),
    ...(status ? { status: status as Campaign['status'] } : {}),
    ...(channel ? { channel: channel as Campaign['channel'] } : {}),
    ...(dayBound(from, false) ? { createdFrom: dayBound(from, false) } : {}),
    ...(dayBound(to, true) ? { createdTo: dayBound(to, true) } : {}),
  };
  const campaigns = useInfiniteQuery({
    queryKey: ['campaigns', 'list', query],
    initialPageParam: undefined as string | undefined,
    queryFn: ({ pageParam }) =>
      unwrap(
        api.GET('/v1/campaigns', {
          params: { query: { ...query, ...(pageParam ? { cursor: pageParam } : {}) } },
        }),
      ),
    getNextPageParam: (last) => last.nextCursor ?? undefined,
    placeholderData: (previous) => previous,
  });
  // Live: refetch the pages already shown (the first page carries new campaigns).
  useLive(['campaigns'], () => void campaigns.refetch());
  const rows = campaigns.data?.pages.flatMap((p) => p.items);

  const columns: Column<Campaign>[] = [
    {
      key: 'name',
      header: 'Campaign',
      render: (c) => (
        <div>
          <Link to={`/campaigns/${c.campaignId}`} onClick={(e) => e.stopPropagation()}>
            {c.name}
          </Link>
          <div className="mono muted small-text nowrap">{c.campaignId}</div>
        </div>
      ),
    },
    {
      key: 'channel',
      header: 'Channel',
      render: (c) => (
        <div>
          <span className={`channel channel-${c.channel}`}>{c.channel}</span>
          {c.lineOaId ? (
            <div className="mono muted small-text" title="official account">
              {c.lineOaId}
            </div>
          ) : null}
        </div>
      ),
    },
    {
      key: 'content',
      header: 'Content',
      render: (c) => {
        const text = contentOf(c);
        return (
          <span className="content-cell" title={text}>
            {text || <span className="muted">—</span>}
          </span>
        );
      },
    },
    {
      key: 'status',
      header: 'Status',
      render: (c) => (
        <span title={`since ${formatTime(c.statusChangedAt)}`}>
          <StatusBadge status={c.status} />
          {c.status === 'PAUSED' && c.pausedFrom ? (
            <span className="muted small-text"> from {c.pausedFrom}</span>
          ) : null}
        </span>
      ),
    },
    {
      key: 'recipients',
      header: 'Recipients',
      align: 'right',
      render: (c) => <Recipients c={c} />,
    },
    {
      key: 'delivery',
      header: 'Delivery',
      render: (c) => (
        <span className="nowrap">
          <Delivery c={c} />
        </span>
      ),
    },
    {
      key: 'cost',
      header: 'Cost',
      align: 'right',
      mono: true,
      render: (c) => smsFacts(c)?.totalCost ?? <span className="muted">—</span>,
    },
    {
      key: 'startAt',
      header: 'Start',
      render: (c) => <StartCell c={c} />,
    },
    {
      key: 'createdAt',
      header: 'Created',
      render: (c) => <span title={formatTime(c.createdAt)}>{formatRelative(c.createdAt)}</span>,
    },
  ];

  const filtered = Boolean(q || status || channel || from || to);
  return (
    <div className="page" data-testid="campaigns-page">
      <PageHeader title="Campaigns" subtitle="Newest first; search by id or name" />
      <div className="toolbar">
        <input
          type="search"
          aria-label="Search campaigns"
          placeholder="Campaign id or name…"
          value={search}
          onChange={(e) => setSearch(e.target.value)}
          className="filter-search"
        />
        <select aria-label="Status" value={status} onChange={(e) => setFilter('status', e.target.value)}>
          <option value="">any status</option>
          {CAMPAIGN_STATUSES.map((s) => (
            <option key={s} value={s}>
              {s.toLowerCase()}
            </option>
          ))}
        </select>
        <select aria-label="Channel" value={channel} onChange={(e) => setFilter('channel', e.target.value)}>
          <option value="">any channel</option>
          <option value="sms">sms</option>
          <option value="line">line</option>
        </select>
        <label className="inline-label">
          created from
          <input
            type="date"
            aria-label="Created from"
            value={from}
            onChange={(e) => setFilter('from', e.target.value)}
          />
        </label>
        <label className="inline-label">
          to
          <input
            type="date"
            aria-label="Created to"
            value={to}
            onChange={(e) => setFilter('to', e.target.value)}
          />
        </label>
        {filtered ? (
          <button
            type="button"
            className="link"
            onClick={() => {
              setSearch('');
              setParams(new URLSearchParams(), { replace: true });
            }}
          >
            clear
          </button>
        ) : null}
      </div>
      <ErrorBanner error={campaigns.error} />
      <DataTable
        label="campaigns"
        columns={columns}
        rows={rows}
        rowKey={(c) => c.campaignId}
        loading={campaigns.isPending}
        empty={filtered ? 'No campaign matches.' : 'No campaigns yet.'}
        onRowClick={(c) => navigate(`/campaigns/${c.campaignId}`)}
        hasMore={campaigns.hasNextPage}
        loadingMore={campaigns.isFetchingNextPage}
        onLoadMore={() => void campaigns.fetchNextPage()}
      />
    </div>
  );
}
