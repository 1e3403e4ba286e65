/**
 * One scheduled action (`/actions/:id`): its definition and state, its timeline (every event of its
 * stream, oldest first, with who caused it — an API key by its name — and what changed), and what it
 * executed: each message its events wrote (the `action_execute` to the trigger engine, an expiry
 * branch's), with the outbox row's status and error, the broker's confirm and the consumers that took
 * it. Fire now and cancel when its state allows them. From GET /v1/actions/{id} and its history; live
 * on the `actions` topic.
 */
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useParams } from 'react-router-dom';
import { api, type Schemas, unwrap, useLive } from '../api/client';
import { Card, CommandButton, ErrorBanner, EventHead, PageHeader, StatusBadge } from '../components';
import { excerpt, formatRelative, formatTime } from '../format';
import './pages-c.css';

type Action = Schemas['ScheduledAction'];
type Replay = Schemas['StreamReplay'];
type Message = Replay['commands'][number]['messages'][number];

const str = (value: unknown): string => (typeof value === 'string' ? value : JSON.stringify(value));

/** An event's data in one line: its scalar fields (objects are in the expanded JSON). */
function summary(data: unknown): string {
  if (!data || typeof data !== 'object') return '';
  return Object.entries(data as Record<string, unknown>)
    .filter(([k, v]) => v !== null && v !== undefined && typeof v !== 'object' && k !== 'organizationId')
    .map(([k, v]) => `${k}: ${excerpt(str(v), 80)}`)
    .join(' · ');
}

function Definition({ a }: { a: Action }) {
  const wait = a.mode === 'waitForSignal';
  return (
    <dl className="kv" data-testid="action-definition">
      <dt>Action</dt>
      <dd className="mono">{a.actionId}</dd>
      <dt>Type</dt>
      <dd className="mono">{a.actionType}</dd>
      <dt>Mode</dt>
      <dd>{wait ? 'waits for a signal' : 'runs at its time'}</dd>
      <dt>{wait ? 'Deadline' : 'Execute at'}</dt>
      <dd>
        {formatTime(wait && a.expiresAt ? a.expiresAt : a.executeAt)}{' '}
        {a.status === 'pending' ? (
          <span className="muted">({formatRelative(wait && a.expiresAt ? a.expiresAt : a.executeAt)})</span>
        ) : null}
      </dd>
      {a.wait ? (
        <>
          <dt>Waits for</dt>
          <dd>
            {a.wait.names.map((n) => (
              <span key={n} className="tag">
                {n}
              </span>
            ))}{' '}
            <span className="mono muted" title="correlation key">
              {a.wait.correlationKey}
            </span>
          </dd>
        </>
      ) : null}
      {a.unlockedBy ? (
        <>
          <dt>Unlocked by</dt>
          <dd>
            signal {a.unlockedBy.name} at {formatTime(a.unlockedBy.receivedAt)}
          </dd>
        </>
      ) : null}
      {a.expiry ? (
        <>
          <dt>On expiry</dt>
          <dd className="mono">{a.expiry.actionType}</dd>
        </>
      ) : null}
      <dt>Workflow</dt>
      <dd className="mono">
        {a.workflowId ?? '—'}
        {a.workflowNodePath ? ` · ${a.workflowNodePath}` : ''}
      </dd>
      <dt>Subject</dt>
      <dd className="mono">{a.subjectId ?? '—'}</dd>
      <dt>Retries</dt>
      <dd>
        {a.retryCount} of {a.maxRetries}
      </dd>
      <dt>Outcome</dt>
      <dd>
        {a.outcome ?? '—'}
        {a.branch ? <span className="muted"> (branch {a.branch})</span> : null}
        {a.firedNow ? <span className="muted"> · fired by hand</span> : null}
      </dd>
      {a.lastError ? (
        <>
          <dt>Last error</dt>
          <dd className="error-text">{a.lastError}</dd>
        </>
      ) : null}
      {a.cancelReason ? (
        <>
          <dt>Reason</dt>
          <dd>{a.cancelReason}</dd>
        </>
      ) : null}
      <dt>Created</dt>
      <dd>{formatTime(a.createdAt)}</dd>
      <dt>Status since</dt>
      <dd>{formatTime(a.statusChangedAt)}</dd>
    </dl>
  );
}

function Timeline({ replay }: { replay: Replay }) {
  const [open, setOpen] = useState<number | null>(null);
  const commandOf = new Map<number, Replay['commands'][number]>();
  for (const c of replay.commands) for (const v of c.versions) commandOf.set(v, c);
  return (
    <ol className="action-timeline" data-testid="action-timeline">
      {replay.events.map((e) => {
        const command = commandOf.get(e.version);
        const actor = command?.actor ?? (typeof e.meta.actor === 'string' ? e.meta.actor : null);
        const text = summary(e.data);
        return (
          <li key={e.position} data-testid="action-event" data-type={e.type}>
            <div className="timeline-event-head">
              <EventHead
                event={e}
                actor={actor}
                onToggle={() => setOpen(open === e.position ? null : e.position)}
              />
            </div>
            {text ? <div className="small-text event-summary">{text}</div> : null}
            {open === e.position ? <pre className="output">{JSON.stringify(e.data, null, 2)}</pre> : null}
          </li>
        );
      })}
    </ol>
  );
}

const field = (record: Record<string, unknown> | null | undefined, name: string): unknown => record?.[name];

function Execution({ m, eventType }: { m: Message; eventType: string }) {
  const outbox = m.outbox;
  const status = str(
    field(outbox, 'status') ?? (m.receipts.length > 0 ? m.receipts.at(-1)!.outcome : 'gone'),
  );
  const lastError = field(outbox, 'lastError');
  return (
    <li className="execution" data-testid="action-execution" data-destination={m.destination}>
      <div className="execution-head">
        <span className="mono">{m.destination}</span> <span className="muted small-text">({m.sink})</span>{' '}
        <StatusBadge status={status} />{' '}
        <span className="muted small-text">
          written by {eventType} (v{m.eventVersion})
        </span>
      </div>
      <dl className="kv compact">
        <dt>message</dt>
        <dd className="mono small-text">{m.messageId}</dd>
        {outbox ? (
          <>
            <dt>outbox row</dt>
            <dd>
              <span className="mono">{str(field(outbox, 'id'))}</span> · {str(field(outbox, 'attempts'))}{' '}
              attempt(s)
              {field(outbox, 'sentAt') ? ` · sent ${formatTime(str(field(outbox, 'sentAt')))}` : ''}
            </dd>
          </>
        ) : (
          <>
            <dt>outbox row</dt>
            <dd className="muted">removed by retention</dd>
          </>
        )}
        {lastError ? (
          <>
            <dt>last error</dt>
            <dd className="error-text">{str(lastError)}</dd>
          </>
        ) : null}
        <dt>broker</dt>
        <dd>
          {m.receipts.length === 0 ? (
            <span className="muted">no confirm yet</span>
          ) : (
            m.receipts.map((r) => (
              <div key={`${r.outcome}-${r.recordedAt}`}>
                {r.outcome} at {formatTime(r.recordedAt)}
              </div>
            ))
          )}
        </dd>
        <dt>consumers</dt>
        <dd>
          {m.inbox.length === 0 ? (
            <span className="muted">none recorded</span>
          ) : (
            m.inbox.map((i) => (
              <div key={str(i.consumer)}>
                <span className="mono">{str(i.consumer)}</span> <StatusBadge status={str(i.status)} />
                {i.error ? (
                  <span className="error-text small-text"> {excerpt(str(i.error), 120)}</span>
                ) : null}
              </div>
            ))
          )}
        </dd>
        {m.effects.length > 0 ? (
          <>
            <dt>effects</dt>
            <dd>
              {m.effects.map((e) => (
                <div key={str(e.position)} className="small-text">
                  {str(e.type)} <span className="muted">on {str(e.streamType)}</span>
                </div>
              ))}
            </dd>
          </>
        ) : null}
      </dl>
    </li>
  );
}

export function ActionDetail() {
  const { id } = useParams() as { id: string };
  const action = useQuery({
    queryKey: ['actions', 'one', id],
    queryFn: () => unwrap(api.GET('/v1/actions/{id}', { params: { path: { id } } })),
  });
  const history = useQuery({
    queryKey: ['actions', 'one', id, 'history'],
    queryFn: () => unwrap(api.GET('/v1/actions/{id}/history', { params: { path: { id } } })),
  });
  const refetch = () => {
    void action.refetch();
    void history.refetch();
  };
  useLive(['actions'], refetch);
  if (action.error) return <ErrorBanner error={action.error} />;
  if (!action.data) return <p className="muted">Loading…</p>;
  const a = action.data;
  const typeOf = new Map((history.data?.events ?? []).map((e) => [e.version, e.type]));
  const messages = (history.data?.commands ?? []).flatMap((c) => c.messages);
  return (
    <div className="page" data-testid="action-detail">
      <PageHeader
        title={
          <>
            <span className="mono">{a.actionType}</span>{' '}
            <StatusBadge status={a.status === 'pending' && a.wait ? 'waiting' : a.status} />
          </>
        }
        subtitle={
          <>
            <Link to="/actions">Actions</Link> · <span className="mono">{a.actionId}</span>
          </>
        }
        // The server says which commands the action's state allows (its operation catalogue).
        actions={
          <>
            {a.commands.includes('fire') ? (
              <CommandButton
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
                    api.POST('/v1/actions/{id}/fire', { params: { path: { id } }, body: { reason } }),
                  );
                  refetch();
                }}
              />
            ) : null}
            {a.commands.includes('cancel') ? (
              <CommandButton
                danger
                label="Cancel action"
                title="Cancel this action"
                description="The action will not run (nor its expiry branch)."
                confirmLabel="Cancel action"
                requireReason
                onConfirm={async (reason) => {
                  await unwrap(
                    api.POST('/v1/actions/{id}/cancel', { params: { path: { id } }, body: { reason } }),
                  );
                  refetch();
                }}
              />
            ) : null}
          </>
        }
      />
      <div className="grid grid-2">
        <Card title="Definition">
          <Definition a={a} />
          <div className="hint">action config</div>
          <pre className="json">{JSON.stringify(a.actionConfig, null, 2)}</pre>
        </Card>
        <Card title="What it executed">
          <ErrorBanner error={history.error} />
          {messages.length === 0 ? (
            <p className="muted" data-testid="no-executions">
              {a.status === 'pending' ? 'Nothing yet: the action has not run.' : 'It wrote no messages.'}
            </p>
          ) : (
            <ol className="executions">
              {messages.map((m) => (
                <Execution key={m.messageId} m={m} eventType={typeOf.get(m.eventVersion) ?? 'an event'} />
              ))}
            </ol>
          )}
        </Card>
      </div>
      <Card title="Timeline" actions={<span className="muted small-text">oldest first</span>}>
        <ErrorBanner error={history.error} />
        {history.data ? <Timeline replay={history.data} /> : <p className="muted">Loading…</p>}
      </Card>
    </div>
  );
}
