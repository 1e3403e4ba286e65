/**
 * Sign-in with an API key: POST /v1/session makes a server-side session (HttpOnly SameSite=Strict
 * cookie; the key itself is not kept in the browser). A refused key shows the server's problem. When an
 * OpenID Connect issuer is configured (ADR 0035), "Sign in with <issuer>" goes through the API's
 * authorization-code flow (GET /v1/session/oidc): it comes back with the same session cookie, or here
 * with `?error=` saying why not.
 */
import { type FormEvent, useEffect, useRef, useState } from 'react';
import { Navigate, useNavigate, useSearchParams } from 'react-router-dom';
import { useSession, useSignInOptions } from '../api/client';
import { ErrorBanner } from '../components';

export function SignIn() {
  const { session, loading, signIn, signInError, signingIn } = useSession();
  const [key, setKey] = useState('');
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.focus(), []);
  const [params] = useSearchParams();
  const navigate = useNavigate();
  const next = params.get('next');
  const target = next?.startsWith('/') && !next.startsWith('//') ? next : '/';
  const oidc = useSignInOptions();
  const oidcError = params.get('error');

  if (!loading && session) return <Navigate to={target} replace />;

  async function submit(event: FormEvent) {
    event.preventDefault();
    if (!key.trim()) return;
    try {
      await signIn(key.trim());
      setKey('');
      navigate(target, { replace: true });
    } catch {
      // shown by ErrorBanner from signInError
    }
  }

  return (
    <div className="signin-page">
      <form className="signin-card" onSubmit={submit} aria-label="Sign in">
        <div className="signin-brand">
          <span className="brand-mark" aria-hidden="true">
            H
          </span>
          <div>
            <h1>Herald</h1>
            <div className="subtitle">Operations dashboard</div>
          </div>
        </div>
        {oidc ? (
          <>
            <a
              className="signin-oidc"
              href={`${oidc.signInUrl}?next=${encodeURIComponent(target)}`}
              data-testid="signin-oidc"
            >
              Sign in with {oidc.displayName}
            </a>
            {oidcError ? <ErrorBanner error={new Error(oidcError)} /> : null}
            <div className="signin-or" aria-hidden="true">
              <span>or with an API key</span>
            </div>
          </>
        ) : null}
        <div className="field">
          <label htmlFor="api-key">API key</label>
          <input
            id="api-key"
            name="apiKey"
            type="password"
            autoComplete="off"
            spellCheck={false}
            placeholder="hk_…"
            value={key}
            onChange={(e) => setKey(e.target.value)}
            ref={input}
          />
          <div className="hint">
            Create one with <code>herald api-keys create --organization &lt;org&gt; --role operator</code>.
            The organization and role come from the key.
          </div>
        </div>
        <ErrorBanner error={signInError} />
        <button type="submit" className="primary wide" disabled={signingIn || !key.trim()}>
          {signingIn ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </div>
  );
}
