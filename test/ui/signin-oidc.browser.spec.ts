/**
 * The dashboard's sign-in through an OpenID Connect issuer in a real browser (ADR 0035): `herald api`
 * configured with the test issuer (test/support/oidc-issuer.ts, a real socket) offers "Sign in with
 * <issuer>" beside the key form; the browser goes through the issuer's authorization endpoint (PKCE S256,
 * state, nonce) and comes back signed in with the HttpOnly session cookie, the claims' organization and
 * role shown, the code exchanged by the API (the page never holds a token); a person whose token maps to
 * no Herald role comes back to the sign-in page with the reason. With HERALD_UI_SCREENSHOTS=1 the sign-in
 * page is saved as docs/screenshots/signin-oidc.png.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestIssuer, type TestIssuer } from '../support/oidc-issuer.js';
import { useDashboard } from './support/browser.js';

let issuer: TestIssuer;
beforeAll(async () => {
  issuer = await startTestIssuer({ clientId: 'herald-dashboard', audience: 'herald-api' });
});
afterAll(async () => issuer?.close());

const ui = useDashboard({
  ownBroker: false,
  env: () => ({
    HERALD_API_OIDC_ISSUER: issuer.url,
    HERALD_API_OIDC_AUDIENCE: 'herald-api',
    HERALD_API_OIDC_CLIENT_ID: 'herald-dashboard',
    HERALD_API_OIDC_DISPLAY_NAME: 'Example SSO',
  }),
});

const ORG = 'org-oidc-ui';

describe('sign-in through the OpenID Connect issuer', () => {
  it('signs in with PKCE: the session cookie, the claims’ organization and role, no token in the page', async () => {
    issuer.user = {
      sub: 'ada',
      claims: { herald_organization: ORG, herald_roles: ['operator'], name: 'Ada Lovelace' },
    };
    const p = await ui.page();
    p.allowOrigin(issuer.url);
    await p.goto('/outbox');
    await p.page.waitForURL(/\/ui\/signin\?next=%2Foutbox/);
    const button = p.page.getByRole('link', { name: 'Sign in with Example SSO' });
    await button.waitFor();
    // The key form is still there.
    await p.page.getByLabel('API key').waitFor();
    if (process.env.HERALD_UI_SCREENSHOTS === '1') await p.screenshot('signin-oidc', { fullPage: false });

    await button.click();
    await p.page.waitForURL((u) => u.pathname === '/ui/outbox');
    await expect(p.page.getByTestId('session-org').textContent()).resolves.toBe(ORG);
    await expect(p.page.getByTestId('session-role').textContent()).resolves.toBe('operator');
    // The browser went to /authorize; the API, not the page, exchanged the code.
    expect(issuer.requests).toContain('GET /authorize');
    expect(issuer.requests).toContain('POST /token');

    const cookies = await p.context.cookies();
    const session = cookies.find((c) => c.name === 'herald_session');
    expect(session?.httpOnly).toBe(true);
    expect(cookies.find((c) => c.name === 'herald_oidc_login')).toBeUndefined();
    const stored = await p.page.evaluate<string>(
      'JSON.stringify({ ...localStorage, ...sessionStorage }) + document.cookie',
    );
    expect(stored).not.toContain('eyJ'); // no JWT anywhere the page's script can read
    const status = await p.page.evaluate<{ session: { subject: string; keyId: string | null } }>(
      "fetch('/v1/session/status').then((r) => r.json())",
    );
    expect(status.session).toMatchObject({ subject: 'ada', keyId: null });

    await p.page.getByRole('button', { name: 'Sign out' }).click();
    await p.page.waitForURL(/\/ui\/signin/);
    expect((await p.context.cookies()).find((c) => c.name === 'herald_session')).toBeUndefined();
  });

  it('a person whose token maps to no Herald role comes back to sign-in with the reason, no session', async () => {
    issuer.user = { sub: 'guest', claims: { herald_organization: ORG, herald_roles: ['guest'] } };
    const p = await ui.page();
    p.allowOrigin(issuer.url);
    await p.goto('/signin');
    await p.page.getByRole('link', { name: 'Sign in with Example SSO' }).click();
    await p.page.waitForURL(/\/ui\/signin\?error=/);
    const alert = p.page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toContain('herald_roles');
    expect((await p.context.cookies()).find((c) => c.name === 'herald_session')).toBeUndefined();
  });
});
