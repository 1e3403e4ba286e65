/**
 * Outbox: pending rows by destination (from the overview's counters, never a count of the table), the
 * dead rows with their last error and the parked ordered keys, each requeued or skipped (with a reason)
 * one at a time or as a selection (bulk routes, ≤ 500 ids, answered per id); each dead row links to what
 * it was written for (its campaign, action or cron run). Live on the `outbox` topic.
 */
import { useInfiniteQuery, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, type Schemas, unwrap, useLive, useSession } from '../api/client';
import {
  Card,
  type Column,
  CommandButton,
  ConfirmDialog,
  DataTable,
  ErrorBanner,
  PageHeader,
  Stat,
  StatusBadge,
} from '../components';
import { excerpt, formatCount, formatDuration, formatRelative, formatTime } from '../format';
import { SourceLink } from './outbox-source';
import { byDestination, DestinationTable, destinationColumn } from './outbox-summary';

type OutboxRow = Schemas['OutboxRow'];
type ParkedKey = Schemas['ParkedKey'];
type Tab = 'dead' | 'parked' | 'pending';

const PAGE = 100;
const MAX_BULK = 500;

function useOutboxList(status: 'dead' | 'pending') {
  return useInfiniteQuery({
    queryKey: ['outbox', status],
    initialPageParam: undefined as string | undefined,
    queryFn: ({ pageParam }) =>
      unwrap(
        api.GET(status === 'dead' ? '/v1/outbox/dead' : '/v1/outbox/pending', {
          params: { query: { limit: PAGE, ...(pageParam ? { cursor: pageParam } : {}) } },
        }),
      ),
    getNextPageParam: (last) => last.nextCursor ?? undefined,
  });
}

function useParked() {
  return useInfiniteQuery({
    queryKey: ['outbox', 'parked'],
    initialPageParam: undefined as string | undefined,
    queryFn: ({ pageParam }) =>
      unwrap(
        api.GET('/v1/outbox/parked', {
          params: { query: { limit: PAGE, ...(pageParam ? { cursor: pageParam } : {}) } },
        }),
      ),
    getNextPageParam: (last) => last.nextCursor ?? undefined,
  });
}

interface BulkOutcome {
  done: number;
  refused: { id: number; reason: string }[];
}

/** Requeue or skip `ids` with the bulk routes; answers which ones the server refused and why. */
async function bulk(action: 'requeue' | 'skip', ids: number[], reason: string): Promise<BulkOutcome> {
  const outcome: BulkOutcome = { done: 0, refused: [] };
  for (let i = 0; i < ids.length; i += MAX_BULK) {
    const chunk = ids.slice(i, i + MAX_BULK);
    const result =
      action === 'requeue'
        ? await unwrap(api.POST('/v1/outbox/requeue', { body: { ids: chunk } }))
        : await unwrap(api.POST('/v1/outbox/skip', { body: { ids: chunk, reason } }));
    for (const item of result.results) {
      if (item.outcome === 'requeued' || item.outcome === 'skipped') outcome.done++;
      else
        outcome.refused.push({
          id: item.id,
          reason: item.outcome === 'not-found' ? 'not found' : `not dead (${item.status ?? '?'})`,
        });
    }
  }
  return outcome;
}

/** One row, fetched by id and refetched live, so a requeued row is seen pending, then sent. */
function RowDetail({ id, onClose }: { id: number; onClose: () => void }) {
  const query = useQuery({
    queryKey: ['outbox', 'row', id],
    queryFn: () => unwrap(api.GET('/v1/outbox/{id}', { params: { path: { id } } })),
  });
  const row = query.data;
  return (
    <Card
      title={`Outbox row ${id}`}
      className="row-detail"
      actions={
        <button type="button" className="small" onClick={onClose}>
          Close
        </button>
      }
    >
      <ErrorBanner error={query.error} />
      {row ? <RowFields row={row} /> : <div className="muted">Loading…</div>}
    </Card>
  );
}

function RowFields({ row }: { row: OutboxRow }) {
  return (
    <div className="grid grid-2">
      <dl className="kv">
        <dt>status</dt>
        <dd>
          <StatusBadge status={row.status} />
        </dd>
        <dt>message id</dt>
        <dd className="mono">{row.messageId}</dd>
        <dt>sink · destination</dt>
        <dd className="mono">
          {row.sink} · {row.destination}
          {row.routingKey ? ` (${row.routingKey})` : ''}
        </dd>
        <dt>written for</dt>
        <dd>
          <SourceLink row={row} />
        </dd>
        <dt>ordered key</dt>
        <dd className="mono">{row.ordered ? (row.partitionKey ?? '—') : 'not ordered'}</dd>
        <dt>event position</dt>
        <dd className="mono">{row.eventPosition}</dd>
        <dt>attempts</dt>
        <dd>
          {row.attempts} (recovered {row.recoveryCount}×)
        </dd>
        <dt>created</dt>
        <dd>{formatTime(row.createdAt)}</dd>
        <dt>sent</dt>
        <dd>{formatTime(row.sentAt)}</dd>
        <dt>dead since</dt>
        <dd>{formatTime(row.deadAt)}</dd>
        <dt>skipped</dt>
        <dd>{formatTime(row.skippedAt)}</dd>
        <dt>last error</dt>
        <dd className="cell-error">{row.lastError ?? '—'}</dd>
      </dl>
      <div>
        <div className="hint">payload</div>
        <pre className="json">{JSON.stringify(row.payload, null, 2)}</pre>
        <div className="hint">headers</div>
        <pre className="json">{JSON.stringify(row.headers, null, 2)}</pre>
      </div>
    </div>
  );
}

export function Outbox() {
  const client = useQueryClient();
  const { canCommand } = useSession();
  const [tab, setTab] = useState<Tab>('dead');
  const [selected, setSelected] = useState<Set<number>>(new Set());
  const [detail, setDetail] = useState<number | null>(null);
  const [lookup, setLookup] = useState('');
  const [bulkAction, setBulkAction] = useState<'requeue' | 'skip' | null>(null);
  const [outcome, setOutcome] = useState<{ action: string; result: BulkOutcome } | null>(null);

  const overview = useQuery({ queryKey: ['overview'], queryFn: () => unwrap(api.GET('/v1/overview')) });
  const dead = useOutboxList('dead');
  const pending = useOutboxList('pending');
  const parked = useParked();

  const refresh = () => {
    void client.invalidateQueries({ queryKey: ['outbox'] });
    void client.invalidateQueries({ queryKey: ['overview'] });
  };
  useLive(['outbox'], refresh);

  const deadRows = dead.data?.pages.flatMap((p) => p.items) ?? [];
  const pendingRows = pending.data?.pages.flatMap((p) => p.items) ?? [];
  const parkedKeys = parked.data?.pages.flatMap((p) => p.items) ?? [];
  const deadIds = new Set(deadRows.map((r) => r.id));
  const chosen = [...selected].filter((id) => deadIds.has(id) || parkedKeys.some((p) => p.id === id));

  const runSingle = async (action: 'requeue' | 'skip', id: number, reason: string) => {
    const result = await bulk(action, [id], reason);
    const refused = result.refused[0];
    if (refused) throw new Error(`row ${id}: ${refused.reason}`);
    setSelected((s) => {
      const next = new Set(s);
      next.delete(id);
      return next;
    });
    refresh();
  };

  const rowActions = (id: number) => (
    <div className="row nowrap">
      <CommandButton
        small
        label="Requeue"
        title={`Requeue row ${id}`}
        description="The relay publishes it again (attempts start over)."
        confirmLabel="Requeue"
        onConfirm={() => runSingle('requeue', id, '')}
      />
      <CommandButton
        small
        danger
        label="Skip"
        title={`Skip row ${id}`}
        description="The row is given up on: never published. Its ordered key, if parked, moves on."
        confirmLabel="Skip"
        requireReason
        onConfirm={(reason) => runSingle('skip', id, reason)}
      />
    </div>
  );

  const deadColumns: Column<OutboxRow>[] = [
    { key: 'id', header: 'Row', mono: true, width: 70 },
    destinationColumn(),
    { key: 'source', header: 'Written for', render: (r) => <SourceLink row={r} /> },
    {
      key: 'partitionKey',
      header: 'Key',
      mono: true,
      render: (r) => (r.ordered ? (r.partitionKey ?? '—') : <span className="muted">—</span>),
    },
    { key: 'attempts', header: 'Attempts', align: 'right', width: 70 },
    {
      key: 'lastError',
      header: 'Last error',
      render: (r) => (
        <span className="cell-error" title={r.lastError ?? ''}>
          {excerpt(r.lastError, 140) || '—'}
        </span>
      ),
    },
    {
      key: 'deadAt',
      header: 'Dead since',
      className: 'nowrap',
      render: (r) => <span title={formatTime(r.deadAt)}>{formatRelative(r.deadAt)}</span>,
    },
    ...(canCommand ? [{ key: 'actions', header: '', render: (r: OutboxRow) => rowActions(r.id) }] : []),
  ];

  const parkedColumns: Column<ParkedKey>[] = [
    { key: 'id', header: 'Head row', mono: true, width: 80 },
    destinationColumn(),
    { key: 'partitionKey', header: 'Parked key', mono: true },
    { key: 'waiting', header: 'Waiting behind', align: 'right', render: (r) => formatCount(r.waiting) },
    { key: 'attempts', header: 'Attempts', align: 'right' },
    {
      key: 'lastError',
      header: 'Last error',
      render: (r) => <span className="cell-error">{excerpt(r.lastError, 140) || '—'}</span>,
    },
    { key: 'deadAt', header: 'Dead since', className: 'nowrap', render: (r) => formatRelative(r.deadAt) },
    ...(canCommand ? [{ key: 'actions', header: '', render: (r: ParkedKey) => rowActions(r.id) }] : []),
  ];

  const pendingColumns: Column<OutboxRow>[] = [
    { key: 'id', header: 'Row', mono: true, width: 70 },
    destinationColumn(),
    { key: 'attempts', header: 'Attempts', align: 'right' },
    {
      key: 'nextAttemptAt',
      header: 'Next attempt',
      className: 'nowrap',
      render: (r) => (r.nextAttemptAt === 'infinity' ? 'behind its key' : formatRelative(r.nextAttemptAt)),
    },
    {
      key: 'lastError',
      header: 'Last error',
      render: (r) => <span className="cell-error">{excerpt(r.lastError, 140)}</span>,
    },
    { key: 'createdAt', header: 'Created', className: 'nowrap', render: (r) => formatRelative(r.createdAt) },
  ];

  const o = overview.data?.outbox;
  const destinations = byDestination(o);
  const pendingTotal = o?.pending.reduce((n, d) => n + d.rows, 0);
  const oldest = o?.pending.reduce((max, d) => Math.max(max, d.oldestAgeSeconds), 0);
  const deadTotal = o?.dead.reduce((n, d) => n + d.rows, 0);
  const error = dead.error ?? parked.error ?? pending.error;

  return (
    <>
      <PageHeader
        title="Outbox"
        subtitle="Rows the relay publishes to the brokers; dead rows wait for an operator."
        actions={
          <form
            className="row"
            aria-label="Find a row"
            onSubmit={(e) => {
              e.preventDefault();
              const id = Number(lookup.trim());
              if (Number.isInteger(id) && id > 0) setDetail(id);
            }}
          >
            <input
              aria-label="Row id"
              placeholder="row id"
              inputMode="numeric"
              value={lookup}
              onChange={(e) => setLookup(e.target.value)}
              style={{ width: 110 }}
            />
            <button type="submit" className="small">
              Show row
            </button>
          </form>
        }
      />
      <div className="stats">
        <Stat
          label="Pending"
          value={`${formatCount(pendingTotal)}${o?.pendingCapped ? '+' : ''}`}
          testId="stat-pending"
        />
        <Stat
          label="Oldest pending"
          value={o && pendingTotal ? formatDuration(oldest) : '—'}
          tone={(oldest ?? 0) > 60 ? 'warn' : undefined}
        />
        <Stat
          label="Dead"
          value={`${formatCount(deadTotal)}${o?.deadCapped ? '+' : ''}`}
          tone={deadTotal ? 'bad' : 'ok'}
          testId="stat-dead"
        />
        <Stat
          label="Parked keys"
          value={formatCount(o?.parkedKeys)}
          tone={o?.parkedKeys ? 'warn' : 'ok'}
          testId="stat-parked"
        />
      </div>
      <ErrorBanner error={overview.error} />

      <Card title="By destination">
        <DestinationTable label="pending-by-destination" rows={destinations} loading={overview.isPending} />
      </Card>

      <Card
        title={
          <div className="tabs" role="tablist">
            {(
              [
                ['dead', `Dead rows (${deadRows.length}${dead.hasNextPage ? '+' : ''})`],
                ['parked', `Parked keys (${parkedKeys.length}${parked.hasNextPage ? '+' : ''})`],
                ['pending', 'Pending rows'],
              ] as const
            ).map(([id, label]) => (
              <button
                key={id}
                type="button"
                role="tab"
                aria-selected={tab === id}
                className={tab === id ? 'tab active' : 'tab'}
                onClick={() => {
                  setTab(id);
                  setSelected(new Set());
                }}
              >
                {label}
              </button>
            ))}
          </div>
        }
      >
        <ErrorBanner error={error} />
        {outcome ? (
          <div className="notice" role="status">
            {outcome.action}: {outcome.result.done} done
            {outcome.result.refused.length > 0
              ? `, ${outcome.result.refused.length} refused (${outcome.result.refused
                  .slice(0, 5)
                  .map((r) => `${r.id}: ${r.reason}`)
                  .join('; ')})`
              : ''}
            <button type="button" className="link" onClick={() => setOutcome(null)} aria-label="Dismiss">
              ×
            </button>
          </div>
        ) : null}
        {canCommand && tab !== 'pending' && chosen.length > 0 ? (
          <div className="bulk-bar" data-testid="bulk-bar">
            <span>{chosen.length} selected</span>
            <button type="button" className="primary small" onClick={() => setBulkAction('requeue')}>
              Requeue selected
            </button>
            <button type="button" className="danger-outline small" onClick={() => setBulkAction('skip')}>
              Skip selected…
            </button>
            <button type="button" className="link" onClick={() => setSelected(new Set())}>
              Clear
            </button>
          </div>
        ) : null}
        {tab === 'dead' ? (
          <DataTable
            label="dead-rows"
            columns={deadColumns}
            rows={deadRows}
            rowKey={(r) => r.id}
            loading={dead.isPending}
            empty="No dead rows."
            {...(canCommand ? { selected, onSelectedChange: setSelected } : {})}
            onRowClick={(r) => setDetail(r.id)}
            hasMore={dead.hasNextPage}
            loadingMore={dead.isFetchingNextPage}
            onLoadMore={() => void dead.fetchNextPage()}
          />
        ) : tab === 'parked' ? (
          <DataTable
            label="parked-keys"
            columns={parkedColumns}
            rows={parkedKeys}
            rowKey={(r) => r.id}
            loading={parked.isPending}
            empty="No parked keys."
            {...(canCommand ? { selected, onSelectedChange: setSelected } : {})}
            hasMore={parked.hasNextPage}
            loadingMore={parked.isFetchingNextPage}
            onLoadMore={() => void parked.fetchNextPage()}
          />
        ) : (
          <DataTable
            label="pending-rows"
            columns={pendingColumns}
            rows={pendingRows}
            rowKey={(r) => r.id}
            loading={pending.isPending}
            empty="Nothing pending."
            onRowClick={(r) => setDetail(r.id)}
            hasMore={pending.hasNextPage}
            loadingMore={pending.isFetchingNextPage}
            onLoadMore={() => void pending.fetchNextPage()}
          />
        )}
      </Card>
      {detail !== null ? <RowDetail key={detail} id={detail} onClose={() => setDetail(null)} /> : null}

      <ConfirmDialog
        open={bulkAction !== null}
        title={bulkAction === 'skip' ? `Skip ${chosen.length} rows` : `Requeue ${chosen.length} rows`}
        description={
          bulkAction === 'skip'
            ? 'These rows are given up on and never published. Each is checked on its own; rows no longer dead are refused.'
            : 'The relay publishes these rows again (attempts start over). Rows no longer dead are refused.'
        }
        confirmLabel={bulkAction === 'skip' ? 'Skip rows' : 'Requeue rows'}
        danger={bulkAction === 'skip'}
        requireReason={bulkAction === 'skip'}
        onClose={() => setBulkAction(null)}
        onConfirm={async (reason) => {
          const action = bulkAction!;
          const result = await bulk(action, chosen, reason);
          setOutcome({ action: action === 'skip' ? 'Skipped' : 'Requeued', result });
          setSelected(new Set());
          refresh();
        }}
      />
    </>
  );
}
