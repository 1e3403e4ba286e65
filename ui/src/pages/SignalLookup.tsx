/**
 * Signals by correlation key (GET /v1/signals): what was received for a key, when, and which waits each
 * signal unlocked or was refused by — the "why didn't my wait fire?" question.
 */
import { useInfiniteQuery } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api, type Schemas, unwrap } from '../api/client';
import { Card, DataTable, ErrorBanner } from '../components';
import { formatRelative, formatTime } from '../format';

type Signal = Schemas['Signal'];

const ids = (value: unknown): string[] =>
  Array.isArray(value)
    ? value.map((v) =>
        typeof v === 'string'
          ? v
          : typeof v === 'object' && v
            ? String((v as { actionId?: unknown }).actionId ?? JSON.stringify(v))
            : String(v),
      )
    : [];

export function SignalLookup() {
  const [input, setInput] = useState('');
  const [key, setKey] = useState('');
  const signals = useInfiniteQuery({
    queryKey: ['actions', 'signals', key],
    enabled: key !== '',
    initialPageParam: undefined as string | undefined,
    queryFn: ({ pageParam }) =>
      unwrap(
        api.GET('/v1/signals', {
          params: { query: { correlationKey: key, limit: 50, ...(pageParam ? { cursor: pageParam } : {}) } },
        }),
      ),
    getNextPageParam: (last) => last.nextCursor ?? undefined,
  });
  const rows = signals.data?.pages.flatMap((p) => p.items) ?? [];
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setKey(input.trim());
  };
  return (
    <Card
      title="Signals by correlation key"
      actions={
        <form className="row" onSubmit={submit} aria-label="Signal lookup">
          <input
            aria-label="Correlation key"
            placeholder="correlation key, e.g. order-1042"
            value={input}
            onChange={(e) => setInput(e.target.value)}
            className="wide-input"
          />
          <button type="submit" className="small primary" disabled={!input.trim()}>
            Look up
          </button>
        </form>
      }
    >
      <ErrorBanner error={signals.error} />
      {key === '' ? (
        <div className="muted">Enter a correlation key to see the signals received for it.</div>
      ) : (
        <DataTable<Signal, string>
          label="signals"
          rows={rows}
          rowKey={(s) => s.signalId}
          loading={signals.isFetching && rows.length === 0}
          empty={`No signal for ${key}.`}
          hasMore={signals.hasNextPage}
          loadingMore={signals.isFetchingNextPage}
          onLoadMore={() => void signals.fetchNextPage()}
          columns={[
            { key: 'name', header: 'Signal', render: (s) => <span className="tag">{s.name}</span> },
            { key: 'correlationKey', header: 'Correlation key', mono: true },
            {
              key: 'receivedAt',
              header: 'Received',
              className: 'nowrap',
              render: (s) => <span title={formatTime(s.receivedAt)}>{formatRelative(s.receivedAt)}</span>,
            },
            {
              key: 'unlocked',
              header: 'Unlocked',
              render: (s) => {
                const list = [...ids(s.unlocked), ...ids(s.unlockedLater)];
                return list.length ? (
                  <span className="mono">{list.map((id) => id.slice(0, 8)).join(', ')}</span>
                ) : (
                  <span className="muted">none</span>
                );
              },
            },
            {
              key: 'refused',
              header: 'Refused by',
              render: (s) => {
                const list = ids(s.refused);
                return list.length ? (
                  <span className="mono">{list.map((id) => id.slice(0, 8)).join(', ')}</span>
                ) : (
                  '—'
                );
              },
            },
            {
              key: 'payload',
              header: 'Payload',
              render: (s) => <code className="payload">{JSON.stringify(s.payload)}</code>,
            },
          ]}
        />
      )}
    </Card>
  );
}
