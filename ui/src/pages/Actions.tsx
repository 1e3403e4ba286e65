/**
 * Actions: scheduled actions by status (pending = waiting for their time or for a signal, with their
 * deadlines and the signal names they wait for), and the signals recorded for a correlation key. Fire
 * now, change the execute time or deadline (reschedule) and cancel, each behind a confirmation with a
 * reason. Live on the `actions` topic.
 */
import { useInfiniteQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link } from 'react-router-dom';
import { api, type Schemas, unwrap, useLive, useSession } from '../api/client';
import {
  Card,
  type Column,
  CommandButton,
  DataTable,
  ErrorBanner,
  PageHeader,
  StatusBadge,
} from '../components';
import { browserZone, excerpt, formatRelative, formatTime, fromZonedInput, toZonedInput } from '../format';
import { SignalLookup } from './SignalLookup';

type Action = Schemas['ScheduledAction'];
type StatusFilter = 'pending' | 'processing' | 'failed' | 'done' | 'cancelled' | 'all';

const FILTERS: { id: StatusFilter; label: string }[] = [
  { id: 'pending', label: 'Waiting & pending' },
  { id: 'processing', label: 'Processing' },
  { id: 'failed', label: 'Failed' },
  { id: 'done', label: 'Done' },
  { id: 'cancelled', label: 'Cancelled' },
  { id: 'all', label: 'All' },
];

/** The action's time that matters: a wait's deadline, else its execute time. */
const dueOf = (a: Action): string => (a.mode === 'waitForSignal' && a.expiresAt ? a.expiresAt : a.executeAt);

function Reschedule({ action, onDone }: { action: Action; onDone: () => void }) {
  const isWait = action.mode === 'waitForSignal';
  const [value, setValue] = useState(() => toZonedInput(Date.parse(dueOf(action)), browserZone(), true));
  const iso = fromZonedInput(value, browserZone());
  return (
    <CommandButton
      small
      label={isWait ? 'Change deadline' : 'Reschedule'}
      title={isWait ? 'Change the deadline' : 'Change the execute time'}
      description={
        isWait
          ? 'The wait expires at the new deadline unless a signal comes first.'
          : 'The action runs at the new time.'
      }
      confirmLabel="Save"
      requireReason
      confirmDisabled={!iso}
      onConfirm={async (reason) => {
        await unwrap(
          api.POST('/v1/actions/{id}/reschedule', {
            params: { path: { id: action.actionId } },
            body: isWait ? { expiresAt: iso!, reason } : { executeAt: iso!, reason },
          }),
        );
        onDone();
      }}
    >
      <div className="field">
        <label htmlFor={`due-${action.actionId}`}>
          {isWait ? 'New deadline' : 'New execute time'} ({browserZone()})
        </label>
        <input
          id={`due-${action.actionId}`}
          type="datetime-local"
          step={1}
          value={value}
          onChange={(e) => setValue(e.target.value)}
        />
      </div>
    </CommandButton>
  );
}

export function Actions() {
  const client = useQueryClient();
  const { canCommand } = useSession();
  const [filter, setFilter] = useState<StatusFilter>('pending');
  const [workflow, setWorkflow] = useState('');
  const [workflowInput, setWorkflowInput] = useState('');

  const list = useInfiniteQuery({
    queryKey: ['actions', filter, workflow],
    initialPageParam: undefined as string | undefined,
    queryFn: ({ pageParam }) =>
      unwrap(
        api.GET('/v1/actions', {
          params: {
            query: {
              limit: 100,
              ...(filter !== 'all' ? { status: filter } : {}),
              ...(workflow ? { workflowId: workflow } : {}),
              ...(pageParam ? { cursor: pageParam } : {}),
            },
          },
        }),
      ),
    getNextPageParam: (last) => last.nextCursor ?? undefined,
  });
  const refresh = () => void client.invalidateQueries({ queryKey: ['actions'] });
  useLive(['actions'], refresh);
  const rows = list.data?.pages.flatMap((p) => p.items) ?? [];

  const open = (a: Action) => a.status === 'pending';
  const columns: Column<Action>[] = [
    {
      key: 'actionId',
      header: 'Action',
      render: (a) => (
        <Link
          className="mono"
          to={`/actions/${a.actionId}`}
          title={`${a.actionId}: its timeline and what it executed`}
        >
          {a.actionId.slice(0, 8)}
        </Link>
      ),
    },
    { key: 'actionType', header: 'Type', render: (a) => <span className="mono">{a.actionType}</span> },
    {
      key: 'wait',
      header: 'Waits for',
      render: (a) =>
        a.wait ? (
          <div>
            <div>
              {a.wait.names.map((n) => (
                <span key={n} className="tag">
                  {n}
                </span>
              ))}
            </div>
            <div className="mono muted" title="correlation key">
              {a.wait.correlationKey}
            </div>
          </div>
        ) : (
          <span className="muted">its time</span>
        ),
    },
    {
      key: 'due',
      header: 'Execute at / deadline',
      className: 'nowrap',
      render: (a) => (
        <div>
          <div>{formatTime(dueOf(a))}</div>
          {open(a) ? <div className="muted">{formatRelative(dueOf(a))}</div> : null}
        </div>
      ),
    },
    {
      key: 'status',
      header: 'Status',
      render: (a) => (
        <div>
          <StatusBadge status={a.status === 'pending' && a.wait ? 'waiting' : a.status} />
          {a.unlockedBy ? <div className="muted">unlocked by {a.unlockedBy.name}</div> : null}
          {a.outcome ? <div className="muted">{a.outcome}</div> : null}
        </div>
      ),
    },
    {
      key: 'retries',
      header: 'Retries',
      align: 'right',
      render: (a) => `${a.retryCount}/${a.maxRetries}`,
    },
    {
      key: 'lastError',
      header: 'Last error / reason',
      render: (a) =>
        a.lastError ? (
          <span className="cell-error" title={a.lastError}>
            {excerpt(a.lastError, 100)}
          </span>
        ) : (
          <span className="muted">{excerpt(a.cancelReason, 100)}</span>
        ),
    },
    ...(canCommand
      ? [
          {
            key: 'commands',
            header: '',
            // The server says which commands the action's state allows (its operation catalogue).
            render: (a: Action) =>
              a.commands.length > 0 ? (
                <div className="row nowrap">
                  {a.commands.includes('fire') ? (
                    <CommandButton
                      small
                      label="Fire now"
                      title="Fire this action now"
                      description={
                        a.wait
                          ? 'Runs the action now without waiting for its signal.'
                          : 'Runs the action now instead of at its execute time.'
                      }
                      confirmLabel="Fire now"
                      requireReason
                      onConfirm={async (reason) => {
                        await unwrap(
                          api.POST('/v1/actions/{id}/fire', {
                            params: { path: { id: a.actionId } },
                            body: { reason },
                          }),
                        );
                        refresh();
                      }}
                    />
                  ) : null}
                  {a.commands.includes('reschedule') ? <Reschedule action={a} onDone={refresh} /> : null}
                  {a.commands.includes('cancel') ? (
                    <CommandButton
                      small
                      danger
                      label="Cancel"
                      title="Cancel this action"
                      description="The action will not run (nor its expiry branch)."
                      confirmLabel="Cancel action"
                      requireReason
                      onConfirm={async (reason) => {
                        await unwrap(
                          api.POST('/v1/actions/{id}/cancel', {
                            params: { path: { id: a.actionId } },
                            body: { reason },
                          }),
                        );
                        refresh();
                      }}
                    />
                  ) : null}
                </div>
              ) : null,
          },
        ]
      : []),
  ];

  const submitWorkflow = (event: FormEvent) => {
    event.preventDefault();
    setWorkflow(workflowInput.trim());
  };

  return (
    <>
      <PageHeader title="Actions" subtitle="Delayed actions and waits for signals, with their deadlines." />
      <Card
        title={
          <div className="tabs" role="tablist">
            {FILTERS.map((f) => (
              <button
                key={f.id}
                type="button"
                role="tab"
                aria-selected={filter === f.id}
                className={filter === f.id ? 'tab active' : 'tab'}
                onClick={() => setFilter(f.id)}
              >
                {f.label}
              </button>
            ))}
          </div>
        }
        actions={
          <form className="row" onSubmit={submitWorkflow}>
            <input
              aria-label="Workflow id"
              placeholder="workflow id"
              value={workflowInput}
              onChange={(e) => setWorkflowInput(e.target.value)}
            />
            <button type="submit" className="small">
              Filter
            </button>
          </form>
        }
      >
        <ErrorBanner error={list.error} />
        <DataTable
          label="actions"
          columns={columns}
          rows={rows}
          rowKey={(a) => a.actionId}
          loading={list.isPending}
          empty="No actions."
          hasMore={list.hasNextPage}
          loadingMore={list.isFetchingNextPage}
          onLoadMore={() => void list.fetchNextPage()}
        />
      </Card>
      <SignalLookup />
    </>
  );
}
