/**
 * API keys (admin keys only): the organization's keys with their name, role, prefix, creation, last
 * use and revocation; create one (its secret is shown once, here, and never again: only its hash is
 * stored), revoke one behind a confirmation. The server refuses to revoke the organization's last
 * active admin key (409): the page says so before asking, and shows the refusal if it comes.
 */
import { useInfiniteQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api, type Schemas, unwrap, useSession } from '../api/client';
import {
  Card,
  type Column,
  CommandButton,
  DataTable,
  ErrorBanner,
  PageHeader,
  StatusBadge,
} from '../components';
import { formatRelative, formatTime } from '../format';
import './pages-c.css';

type ApiKey = Schemas['ApiKey'];
type Role = ApiKey['role'];
const ROLES: { role: Role; hint: string }[] = [
  { role: 'viewer', hint: 'reads only' },
  { role: 'operator', hint: 'reads and runs commands' },
  { role: 'admin', hint: 'also manages API keys' },
];

function CreateKey({ onCreated }: { onCreated(created: Schemas['CreatedApiKey']): void }) {
  const [role, setRole] = useState<Role>('operator');
  const [name, setName] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  async function submit(event: FormEvent) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const created = await unwrap(
        api.POST('/v1/api-keys', { body: { role, ...(name.trim() ? { name: name.trim() } : {}) } }),
      );
      setName('');
      onCreated(created);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }
  return (
    <form className="row" onSubmit={submit} aria-label="Create an API key">
      <div className="field">
        <label htmlFor="key-name">Name</label>
        <input
          id="key-name"
          placeholder="e.g. CI deploys"
          maxLength={200}
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
      </div>
      <div className="field">
        <label htmlFor="key-role">Role</label>
        <select id="key-role" value={role} onChange={(e) => setRole(e.target.value as Role)}>
          {ROLES.map((r) => (
            <option key={r.role} value={r.role}>
              {r.role} — {r.hint}
            </option>
          ))}
        </select>
      </div>
      <button type="submit" className="primary" disabled={busy}>
        {busy ? 'Creating…' : 'Create key'}
      </button>
      <ErrorBanner error={error} />
    </form>
  );
}

function NewSecret({ created, onDismiss }: { created: Schemas['CreatedApiKey']; onDismiss(): void }) {
  const [copied, setCopied] = useState(false);
  return (
    <div className="secret-box" role="status" data-testid="new-key-secret">
      <strong>
        Key “{created.apiKey.name}” ({created.apiKey.role}) created. Copy its secret now: it is shown this
        once and cannot be shown again.
      </strong>
      <code data-testid="new-key-value">{created.key}</code>
      <div className="row">
        <button
          type="button"
          className="small"
          onClick={() => {
            void navigator.clipboard
              ?.writeText(created.key)
              .then(() => setCopied(true))
              .catch(() => setCopied(false));
          }}
        >
          {copied ? 'Copied' : 'Copy'}
        </button>
        <button type="button" className="small" onClick={onDismiss}>
          I have saved it
        </button>
      </div>
    </div>
  );
}

export function ApiKeys() {
  const { isAdmin, session } = useSession();
  const client = useQueryClient();
  const [includeRevoked, setIncludeRevoked] = useState(false);
  const [created, setCreated] = useState<Schemas['CreatedApiKey'] | null>(null);
  const keys = useInfiniteQuery({
    queryKey: ['api-keys', includeRevoked],
    enabled: isAdmin,
    initialPageParam: undefined as string | undefined,
    queryFn: ({ pageParam }) =>
      unwrap(
        api.GET('/v1/api-keys', {
          params: {
            query: {
              limit: 100,
              includeRevoked,
              ...(pageParam ? { cursor: pageParam } : {}),
            },
          },
        }),
      ),
    getNextPageParam: (last) => last.nextCursor ?? undefined,
  });
  const refresh = () => void client.invalidateQueries({ queryKey: ['api-keys'] });

  if (!isAdmin) {
    return (
      <div className="page" data-testid="api-keys-page">
        <PageHeader title="API keys" />
        <p className="notice">
          Only admin keys can manage API keys. You are signed in with a {session?.role} key.
        </p>
      </div>
    );
  }

  const rows = keys.data?.pages.flatMap((p) => p.items) ?? [];
  const activeAdmins = rows.filter((k) => k.role === 'admin' && !k.revokedAt).length;
  const columns: Column<ApiKey>[] = [
    {
      key: 'name',
      header: 'Name',
      render: (k) => (
        <span>
          {k.name}
          {k.id === session?.keyId ? (
            <>
              {' '}
              <span className="tag">this session</span>
            </>
          ) : null}
        </span>
      ),
    },
    { key: 'role', header: 'Role', render: (k) => <span className={`role role-${k.role}`}>{k.role}</span> },
    { key: 'prefix', header: 'Prefix', mono: true },
    {
      key: 'createdAt',
      header: 'Created',
      className: 'nowrap',
      render: (k) => <span title={k.createdBy ?? undefined}>{formatTime(k.createdAt)}</span>,
    },
    {
      key: 'lastUsedAt',
      header: 'Last used',
      className: 'nowrap',
      render: (k) =>
        k.lastUsedAt ? (
          <span title={formatTime(k.lastUsedAt)}>{formatRelative(k.lastUsedAt)}</span>
        ) : (
          <span className="muted">never</span>
        ),
    },
    {
      key: 'status',
      header: 'Status',
      render: (k) =>
        k.revokedAt ? (
          <span>
            <StatusBadge status="revoked" />{' '}
            <span className="muted small-text">{formatTime(k.revokedAt)}</span>
          </span>
        ) : (
          <StatusBadge status="active" />
        ),
    },
    {
      key: 'commands',
      header: '',
      align: 'right',
      render: (k) =>
        k.revokedAt ? null : (
          <CommandButton
            small
            danger
            label="Revoke"
            title={`Revoke the key “${k.name}”`}
            description={
              <>
                <p>
                  Its next request is refused (401){k.id === session?.keyId ? ', and this session ends' : ''}.
                  A revoked key cannot be restored.
                </p>
                {k.role === 'admin' && activeAdmins <= 1 ? (
                  <p className="notice" data-testid="last-admin-warning">
                    This is the organization’s last active admin key: the server refuses to revoke it, since
                    nobody could manage the keys any more. Create another admin key first.
                  </p>
                ) : null}
              </>
            }
            confirmLabel="Revoke key"
            onConfirm={async () => {
              await unwrap(api.POST('/v1/api-keys/{id}/revoke', { params: { path: { id: k.id } } }));
              refresh();
            }}
          />
        ),
    },
  ];

  return (
    <div className="page" data-testid="api-keys-page">
      <PageHeader
        title="API keys"
        subtitle={`The keys of ${session?.organizationId ?? 'your organization'}: each acts with its role; secrets are never shown again after creation`}
      />
      <Card title="New key">
        <CreateKey
          onCreated={(c) => {
            setCreated(c);
            refresh();
          }}
        />
        {created ? <NewSecret created={created} onDismiss={() => setCreated(null)} /> : null}
      </Card>
      <Card
        title="Keys"
        actions={
          <label className="row small-text">
            <input
              type="checkbox"
              checked={includeRevoked}
              onChange={(e) => setIncludeRevoked(e.target.checked)}
            />{' '}
            show revoked keys
          </label>
        }
      >
        <ErrorBanner error={keys.error} />
        <DataTable
          label="api-keys"
          columns={columns}
          rows={rows}
          rowKey={(k) => k.id}
          loading={keys.isPending}
          empty="No keys."
          hasMore={keys.hasNextPage}
          loadingMore={keys.isFetchingNextPage}
          onLoadMore={() => void keys.fetchNextPage()}
          rowClassName={(k) => (k.revokedAt ? 'row-muted' : undefined)}
        />
      </Card>
    </div>
  );
}
