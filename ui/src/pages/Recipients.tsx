/**
 * Recipient search: one phone number, in any common spelling (+880…, 01…, 00…), across every campaign of
 * the organization (GET /v1/recipients, normalized and indexed server-side), newest first with a
 * cursor; each hit links to its campaign. The number lives in the URL (?msisdn=).
 */
import { useInfiniteQuery } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link, useNavigate, useSearchParams } from 'react-router-dom';
import { api, type Schemas, unwrap, useLive } from '../api/client';
import { type Column, DataTable, ErrorBanner, PageHeader, StatusBadge } from '../components';
import { formatCount, formatTime } from '../format';
import './pages-b.css';

type Hit = Schemas['RecipientHit'];

export function Recipients() {
  const [params, setParams] = useSearchParams();
  const navigate = useNavigate();
  const msisdn = params.get('msisdn') ?? '';
  const [input, setInput] = useState(msisdn);

  const hits = useInfiniteQuery({
    queryKey: ['recipients', msisdn],
    enabled: msisdn !== '',
    retry: false,
    initialPageParam: undefined as string | undefined,
    queryFn: ({ pageParam }) =>
      unwrap(
        api.GET('/v1/recipients', {
          params: { query: { msisdn, limit: 50, ...(pageParam ? { cursor: pageParam } : {}) } },
        }),
      ),
    getNextPageParam: (last) => last.nextCursor ?? undefined,
  });
  // Recipients move as their campaigns do (submitted, delivered, failed): refetch what is shown.
  useLive(['campaigns'], () => {
    if (msisdn) void hits.refetch();
  });
  const rows = hits.data?.pages.flatMap((p) => p.items);

  function submit(event: FormEvent) {
    event.preventDefault();
    const value = input.trim();
    setParams(value ? { msisdn: value } : {}, { replace: false });
  }

  const columns: Column<Hit>[] = [
    {
      key: 'campaign',
      header: 'Campaign',
      render: (h) => (
        <div>
          <Link to={`/campaigns/${h.campaignId}`} onClick={(e) => e.stopPropagation()}>
            {h.campaignName}
          </Link>{' '}
          <StatusBadge status={h.campaignStatus} />
          <div className="mono muted small-text">{h.campaignId}</div>
        </div>
      ),
    },
    { key: 'msisdn', header: 'Number', mono: true, render: (h) => `+${h.msisdn}` },
    { key: 'status', header: 'Recipient status', render: (h) => <StatusBadge status={h.status} /> },
    { key: 'operator', header: 'Operator' },
    { key: 'segments', header: 'Segments', align: 'right', render: (h) => formatCount(h.segments) },
    { key: 'cost', header: 'Cost', align: 'right', mono: true, render: (h) => h.cost.toFixed(4) },
    {
      key: 'attempts',
      header: 'Attempts',
      align: 'right',
      render: (h) => (
        <span title={h.deferrals ? `deferred ${h.deferrals}× by the send window` : undefined}>
          {h.attempts}
          {h.deferrals ? <span className="muted small-text"> ({h.deferrals} deferred)</span> : null}
        </span>
      ),
    },
    {
      key: 'submittedAt',
      header: 'Submitted',
      render: (h) =>
        h.submittedAt ? (
          <span title={h.submissionId ?? undefined}>{formatTime(h.submittedAt)}</span>
        ) : h.nextAllowedAt ? (
          <span className="muted">window opens {formatTime(h.nextAllowedAt)}</span>
        ) : (
          <span className="muted">—</span>
        ),
    },
  ];

  return (
    <div className="page" data-testid="recipients-page">
      <PageHeader title="Recipients" subtitle="Find a phone number in every campaign" />
      <form className="toolbar" aria-label="Search" onSubmit={submit}>
        <input
          type="search"
          inputMode="tel"
          aria-label="Phone number"
          placeholder="+8801712345678 or 01712345678"
          value={input}
          onChange={(e) => setInput(e.target.value)}
          className="filter-search"
        />
        <button type="submit" className="primary" disabled={!input.trim()}>
          Search
        </button>
      </form>
      <ErrorBanner error={hits.error} />
      {msisdn ? (
        <DataTable
          label="recipient-hits"
          columns={columns}
          rows={rows}
          rowKey={(h) => h.recipientId}
          loading={hits.isPending}
          empty={`No campaign has ${msisdn} as a recipient.`}
          onRowClick={(h) => navigate(`/campaigns/${h.campaignId}`)}
          hasMore={hits.hasNextPage}
          loadingMore={hits.isFetchingNextPage}
          onLoadMore={() => void hits.fetchNextPage()}
        />
      ) : (
        <p className="muted">Enter a number: the search covers every campaign of your organization.</p>
      )}
    </div>
  );
}
