/**
 * The signed-in frame: the navigation, the organization and role of the session's key, the live
 * indicator (stream connected, or polling), sign out. Pages render inside it through <Outlet/>; without a
 * session every page redirects to /signin (and comes back after).
 */
import type { ReactNode } from 'react';
import { Navigate, NavLink, Outlet, useLocation, useNavigate } from 'react-router-dom';
import { useLiveMode, useSession } from '../api/client';

const NAV: { to: string; label: string; end?: boolean; admin?: boolean }[] = [
  { to: '/', label: 'Overview', end: true },
  { to: '/campaigns', label: 'Campaigns' },
  { to: '/recipients', label: 'Recipients' },
  { to: '/actions', label: 'Actions' },
  { to: '/cron', label: 'Cron jobs' },
  { to: '/outbox', label: 'Outbox' },
  { to: '/api-keys', label: 'API keys', admin: true },
];

function LiveIndicator() {
  const mode = useLiveMode();
  const text = mode === 'live' ? 'live' : mode === 'polling' ? 'polling every 10 s' : 'connecting';
  return (
    <span className={`live live-${mode}`} data-testid="live-indicator" data-mode={mode}>
      <span className="live-dot" aria-hidden="true" />
      {text}
    </span>
  );
}

export function Layout() {
  const { session, loading, signOut, isAdmin } = useSession();
  const location = useLocation();
  const navigate = useNavigate();
  if (loading) return <div className="page-loading">Loading…</div>;
  if (!session) {
    const next = `${location.pathname}${location.search}`;
    return (
      <Navigate to={`/signin${next && next !== '/' ? `?next=${encodeURIComponent(next)}` : ''}`} replace />
    );
  }
  return (
    <div className="app">
      <header className="topbar">
        <div className="brand">
          <span className="brand-mark" aria-hidden="true">
            H
          </span>
          Herald
        </div>
        <nav className="nav" aria-label="Main">
          {NAV.filter((item) => !item.admin || isAdmin).map((item) => (
            <NavLink key={item.to} to={item.to} end={item.end ?? false}>
              {item.label}
            </NavLink>
          ))}
        </nav>
        <div className="session-info">
          <LiveIndicator />
          <span className="org" title="organization" data-testid="session-org">
            {session.organizationId}
          </span>
          <span className={`role role-${session.role}`} data-testid="session-role">
            {session.role}
          </span>
          <button
            type="button"
            className="small"
            onClick={async () => {
              await signOut();
              navigate('/signin', { replace: true });
            }}
          >
            Sign out
          </button>
        </div>
      </header>
      <main className="content">
        <Outlet />
      </main>
    </div>
  );
}

/** A page's title row: the title, an optional subtitle, and the page's actions on the right. */
export function PageHeader({
  title,
  subtitle,
  actions,
}: {
  title: ReactNode;
  subtitle?: ReactNode;
  actions?: ReactNode;
}) {
  return (
    <div className="page-header">
      <div>
        <h1>{title}</h1>
        {subtitle ? <div className="subtitle">{subtitle}</div> : null}
      </div>
      {actions ? <div className="page-actions">{actions}</div> : null}
    </div>
  );
}

/** A titled panel. */
export function Card({
  title,
  actions,
  children,
  className,
}: {
  title?: ReactNode;
  actions?: ReactNode;
  children: ReactNode;
  className?: string;
}) {
  return (
    <section className={`card ${className ?? ''}`.trim()}>
      {title || actions ? (
        <div className="card-header">
          {title ? <h2>{title}</h2> : <span />}
          {actions ? <div className="card-actions">{actions}</div> : null}
        </div>
      ) : null}
      <div className="card-body">{children}</div>
    </section>
  );
}

/** A figure with its label (and a tone when it needs attention). */
export function Stat({
  label,
  value,
  hint,
  tone,
  testId,
}: {
  label: ReactNode;
  value: ReactNode;
  hint?: ReactNode;
  tone?: 'ok' | 'warn' | 'bad';
  testId?: string;
}) {
  return (
    <div className={`stat ${tone ? `stat-${tone}` : ''}`.trim()} data-testid={testId}>
      <div className="stat-label">{label}</div>
      <div className="stat-value">{value}</div>
      {hint ? <div className="stat-hint">{hint}</div> : null}
    </div>
  );
}
