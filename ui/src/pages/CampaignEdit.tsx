/**
 * The CMS edit of a LINE campaign (seed 000, ADR 0021): name, cast type, audience, official account and
 * messages, sent as `PATCH /v1/campaigns/{id}` with only the fields that changed. Offered while the
 * campaign's view lists `edit` among its commands (DRAFT or SCHEDULED, before its first claim fixes the
 * plan); the server stays the judge: a 422 is shown at the field it names, a 409 (claimed meanwhile)
 * above the buttons. Text messages are edited here; the other kinds (images, stickers, templates, flex…)
 * are kept as they are — shown, reordered or removed, never rewritten.
 */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useEffect, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router-dom';
import { CAST_TYPES } from '../../../src/domain/campaign/status.js';
import { ApiError, api, type Schemas, unwrap, useLive, useSession } from '../api/client';
import { Card, ErrorBanner, PageHeader, StatusBadge } from '../components';
import { formatCount } from '../format';
import { type LineMessage, LineMessages } from './line';
import './pages-b.css';
import './line.css';

type Campaign = Schemas['Campaign'];
type CastType = (typeof CAST_TYPES)[number];
type Edit = Schemas['CampaignEditInput'];

/** LINE takes at most 5 message objects per call; a text at most 5,000 characters. */
const MAX_MESSAGES = 5;
const MAX_TEXT = 5000;

interface FormState {
  name: string;
  castType: CastType;
  audienceId: string;
  lineOaId: string;
  messages: LineMessage[];
}

function fromCampaign(c: Campaign): FormState {
  return {
    name: c.name,
    castType: c.castType ?? 'broadcast',
    audienceId: c.audienceId ?? '',
    lineOaId: c.lineOaId ?? '',
    messages: c.line?.messages ?? [],
  };
}

/** What changed, as the PATCH body; empty when nothing did. */
function changesOf(before: FormState, f: FormState): Edit {
  const changes: Edit = {};
  if (f.name.trim() !== before.name) changes.name = f.name.trim();
  if (f.castType !== before.castType) changes.castType = f.castType;
  // A broadcast goes to every friend: no audience.
  const audienceId = f.castType === 'broadcast' ? '' : f.audienceId.trim();
  if (audienceId !== before.audienceId) changes.audienceId = audienceId === '' ? null : audienceId;
  if (f.lineOaId.trim() !== before.lineOaId) changes.lineOaId = f.lineOaId.trim();
  if (JSON.stringify(f.messages) !== JSON.stringify(before.messages)) changes.messages = f.messages;
  return changes;
}

/** The server's field errors by the form's field (`body.messages.1.text` → `messages.1`). */
function fieldErrors(error: unknown): Map<string, string[]> {
  const out = new Map<string, string[]>();
  if (!(error instanceof ApiError)) return out;
  for (const e of error.problem.errors ?? []) {
    if (!e.field) continue;
    const path = e.field.replace(/^body\./, '').split('.');
    const key = path[0] === 'messages' && path[1] !== undefined ? `messages.${path[1]}` : (path[0] ?? '');
    out.set(key, [...(out.get(key) ?? []), e.message ?? 'invalid']);
  }
  return out;
}

function FieldError({ errors, field }: { errors: Map<string, string[]>; field: string }) {
  const list = errors.get(field);
  if (!list) return null;
  return (
    <span className="field-error" role="alert" data-testid={`field-error-${field}`}>
      {list.join('; ')}
    </span>
  );
}

function MessageEditor({
  index,
  message,
  count,
  errors,
  onChange,
  onMove,
  onRemove,
}: {
  index: number;
  message: LineMessage;
  count: number;
  errors: Map<string, string[]>;
  onChange(m: LineMessage): void;
  onMove(by: -1 | 1): void;
  onRemove(): void;
}) {
  const id = `ce-message-${index}`;
  const invalid = errors.has(`messages.${index}`);
  return (
    <li className="line-edit-message" data-testid="edit-message" data-kind={message.type}>
      <div className="line-edit-message-head">
        {message.type === 'text' ? (
          <label htmlFor={id}>Message {index + 1} · text</label>
        ) : (
          <strong>
            Message {index + 1} · {message.type} <span className="muted small-text">(kept as it is)</span>
          </strong>
        )}
        <span className="row-buttons">
          <button
            type="button"
            className="small"
            disabled={index === 0}
            onClick={() => onMove(-1)}
            aria-label={`Move message ${index + 1} up`}
          >
            ↑
          </button>
          <button
            type="button"
            className="small"
            disabled={index === count - 1}
            onClick={() => onMove(1)}
            aria-label={`Move message ${index + 1} down`}
          >
            ↓
          </button>
          <button
            type="button"
            className="small danger-outline"
            disabled={count === 1}
            onClick={onRemove}
            aria-label={`Remove message ${index + 1}`}
          >
            Remove
          </button>
        </span>
      </div>
      {message.type === 'text' ? (
        <>
          <textarea
            id={id}
            rows={3}
            required
            maxLength={MAX_TEXT}
            className={invalid ? 'invalid' : undefined}
            value={message.text}
            onChange={(e) => onChange({ type: 'text', text: e.target.value })}
          />
          <span className="hint">
            {formatCount(message.text.length)} / {formatCount(MAX_TEXT)} characters
          </span>
        </>
      ) : (
        <LineMessages messages={[message]} bare />
      )}
      <FieldError errors={errors} field={`messages.${index}`} />
    </li>
  );
}

export function CampaignEdit() {
  const { id } = useParams() as { id: string };
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const { canCommand } = useSession();
  const campaign = useQuery({
    queryKey: ['campaigns', id],
    queryFn: () => unwrap(api.GET('/v1/campaigns/{id}', { params: { path: { id } } })),
  });
  const channels = useQuery({
    queryKey: ['line', 'channels'],
    queryFn: () => unwrap(api.GET('/v1/line/channels')),
  });
  const audiences = useQuery({
    queryKey: ['line', 'audiences', 'list'],
    queryFn: () => unwrap(api.GET('/v1/line/audiences', { params: { query: { limit: 500 } } })),
  });
  // The campaign as stored stays current (its status, its commands); the form is not overwritten.
  useLive(['campaigns'], () => void campaign.refetch());
  const [before, setBefore] = useState<FormState | null>(null);
  const [form, setForm] = useState<FormState | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [saving, setSaving] = useState(false);
  const [unchanged, setUnchanged] = useState(false);

  useEffect(() => {
    if (campaign.data && before === null) {
      const initial = fromCampaign(campaign.data);
      setBefore(initial);
      setForm(initial);
    }
  }, [campaign.data, before]);

  if (campaign.error) return <ErrorBanner error={campaign.error} />;
  const c = campaign.data;
  if (!c || !form || !before) return <p className="muted">Loading…</p>;
  const offered = c.commands.includes('edit');
  const header = (
    <PageHeader
      title={
        <>
          Edit {c.name} <StatusBadge status={c.status} />
        </>
      }
      subtitle={
        <>
          <Link to="/campaigns">Campaigns</Link> · <Link to={`/campaigns/${id}`}>{c.name}</Link> ·{' '}
          <span className={`channel channel-${c.channel}`}>{c.channel}</span>
        </>
      }
      actions={<Link to={`/campaigns/${id}`}>Back to the campaign</Link>}
    />
  );
  if (!canCommand || c.channel !== 'line') {
    return (
      <div className="page">
        {header}
        <p className="muted">
          {canCommand ? 'Only LINE campaigns are edited here.' : "Your key's role may not edit campaigns."}
        </p>
      </div>
    );
  }

  const errors = fieldErrors(error);
  const set = <K extends keyof FormState>(key: K, value: FormState[K]) => {
    setUnchanged(false);
    setForm((f) => (f ? { ...f, [key]: value } : f));
  };
  const setMessages = (update: (messages: LineMessage[]) => LineMessage[]) =>
    set('messages', update([...form.messages]));

  async function submit(event: FormEvent) {
    event.preventDefault();
    if (!form || !before) return;
    setError(null);
    const changes = changesOf(before, form);
    if (Object.keys(changes).length === 0) {
      setUnchanged(true);
      return;
    }
    setSaving(true);
    try {
      const saved = await unwrap(
        api.PATCH('/v1/campaigns/{id}', { params: { path: { id } }, body: changes }),
      );
      // The campaign as saved, and its timeline (with the edit) fetched afresh on its page.
      queryClient.setQueryData(['campaigns', id], saved);
      await queryClient.invalidateQueries({ queryKey: ['campaigns', id, 'timeline'] });
      navigate(`/campaigns/${id}`);
    } catch (failure) {
      setError(failure);
    } finally {
      setSaving(false);
    }
  }

  const channelIds = channels.data?.items.map((ch) => ch.lineOaId) ?? [];
  const oaOptions =
    channelIds.includes(form.lineOaId) || !form.lineOaId ? channelIds : [form.lineOaId, ...channelIds];
  const audienceList = audiences.data?.items ?? [];
  const chosenAudience = audienceList.find((a) => a.audienceId === form.audienceId.trim());

  return (
    <div className="page" data-testid="campaign-edit">
      {header}
      {!offered ? (
        <div className="notice" role="status" data-testid="edit-not-offered">
          This campaign is {c.status.toLowerCase()} now
          {c.line?.plan ? ' and its delivery is planned' : ''}: its content can no longer be changed, and the
          server will refuse an edit.
        </div>
      ) : null}
      <div className="line-edit-layout">
        <form className="form-grid" onSubmit={submit} data-testid="campaign-edit-form">
          <Card title="Campaign">
            <div className="field">
              <label htmlFor="ce-name">Name</label>
              <input
                id="ce-name"
                required
                maxLength={200}
                className={errors.has('name') ? 'invalid' : undefined}
                value={form.name}
                onChange={(e) => set('name', e.target.value)}
              />
              <FieldError errors={errors} field="name" />
            </div>
            <div className="field-row">
              <div className="field">
                <label htmlFor="ce-oa">Official account</label>
                <select
                  id="ce-oa"
                  className={errors.has('lineOaId') ? 'invalid' : undefined}
                  value={form.lineOaId}
                  onChange={(e) => set('lineOaId', e.target.value)}
                >
                  {oaOptions.map((oa) => (
                    <option key={oa} value={oa}>
                      {oa}
                      {channelIds.includes(oa) ? '' : ' (no channel registered)'}
                    </option>
                  ))}
                </select>
                <FieldError errors={errors} field="lineOaId" />
              </div>
              <div className="field">
                <label htmlFor="ce-cast">Cast type</label>
                <select
                  id="ce-cast"
                  className={errors.has('castType') ? 'invalid' : undefined}
                  value={form.castType}
                  onChange={(e) => set('castType', e.target.value as CastType)}
                >
                  {CAST_TYPES.map((t) => (
                    <option key={t} value={t}>
                      {t === 'broadcast'
                        ? 'broadcast (every friend)'
                        : t === 'multicast'
                          ? 'multicast (a sealed audience)'
                          : 'narrowcast (a LINE audience group)'}
                    </option>
                  ))}
                </select>
                <FieldError errors={errors} field="castType" />
              </div>
            </div>
            {form.castType !== 'broadcast' ? (
              <div className="field">
                <label htmlFor="ce-audience">
                  {form.castType === 'multicast' ? 'Audience' : 'LINE audience group id'}
                </label>
                <input
                  id="ce-audience"
                  list={form.castType === 'multicast' ? 'ce-audiences' : undefined}
                  className={errors.has('audienceId') ? 'invalid mono' : 'mono'}
                  value={form.audienceId}
                  placeholder={form.castType === 'multicast' ? 'a sealed audience id' : 'digits'}
                  onChange={(e) => set('audienceId', e.target.value)}
                />
                {form.castType === 'multicast' ? (
                  <>
                    <datalist id="ce-audiences">
                      {audienceList.map((a) => (
                        <option key={a.audienceId} value={a.audienceId}>
                          {a.name} · {a.members} members{a.sealed ? '' : ' · not sealed'}
                        </option>
                      ))}
                    </datalist>
                    <span className="hint" data-testid="audience-hint">
                      {chosenAudience
                        ? `“${chosenAudience.name}”: ${formatCount(chosenAudience.members)} members, ${chosenAudience.sealed ? 'sealed' : 'not sealed yet (a multicast needs a sealed audience)'}`
                        : form.audienceId.trim()
                          ? 'not among the organization’s audiences'
                          : 'the sealed audience whose user ids receive it, in chunks of 500'}
                    </span>
                  </>
                ) : null}
                <FieldError errors={errors} field="audienceId" />
              </div>
            ) : null}
          </Card>

          <Card title={`Messages · ${form.messages.length} of ${MAX_MESSAGES}`}>
            <ol className="line-edit-messages">
              {form.messages.map((m, i) => (
                <MessageEditor
                  // biome-ignore lint/suspicious/noArrayIndexKey: a message's place is its identity here.
                  key={i}
                  index={i}
                  message={m}
                  count={form.messages.length}
                  errors={errors}
                  onChange={(next) => setMessages((list) => list.map((old, j) => (j === i ? next : old)))}
                  onMove={(by) =>
                    setMessages((list) => {
                      const [moved] = list.splice(i, 1);
                      list.splice(i + by, 0, moved!);
                      return list;
                    })
                  }
                  onRemove={() => setMessages((list) => list.filter((_, j) => j !== i))}
                />
              ))}
            </ol>
            <FieldError errors={errors} field="messages" />
            <button
              type="button"
              disabled={form.messages.length >= MAX_MESSAGES}
              onClick={() => setMessages((list) => [...list, { type: 'text', text: '' }])}
            >
              Add a text message
            </button>
          </Card>

          <div data-testid="edit-errors">
            <ErrorBanner error={error} onDismiss={() => setError(null)} />
            {unchanged ? (
              <p className="notice" role="status">
                Nothing changed.
              </p>
            ) : null}
          </div>
          <div className="form-actions">
            <button type="submit" className="primary" disabled={saving}>
              {saving ? 'Saving…' : 'Save changes'}
            </button>
            <Link to={`/campaigns/${id}`}>Cancel</Link>
          </div>
        </form>
        <Card title="Preview" className="line-edit-preview">
          <LineMessages messages={form.messages} />
          <p className="hint">What the friends of {form.lineOaId || 'the account'} see, in this order.</p>
        </Card>
      </div>
    </div>
  );
}
