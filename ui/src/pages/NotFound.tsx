/** An address the dashboard does not know: says so, names it, and offers the way back (and home). */
import { Link, useLocation, useNavigate } from 'react-router-dom';
import { Card, PageHeader } from '../components';
import './pages-b.css';
import './pages-c.css';

export function NotFound() {
  const location = useLocation();
  const navigate = useNavigate();
  // A page opened directly (a typed or stale link) has no history in this tab to go back to.
  const canGoBack = typeof window !== 'undefined' && window.history.length > 1;
  return (
    <div className="page" data-testid="not-found">
      <PageHeader title="Page not found" subtitle={<span className="mono">/ui{location.pathname}</span>} />
      <Card>
        <p>
          There is no dashboard page at this address. It may have been mistyped, or the link is out of date.
        </p>
        <div className="row">
          <Link className="button primary" to="/">
            Go to the overview
          </Link>
          {canGoBack ? (
            <button type="button" onClick={() => navigate(-1)}>
              Go back
            </button>
          ) : null}
        </div>
      </Card>
    </div>
  );
}
