/**
 * Sign-in in a real browser against `herald api` (ADR 0018): an API key becomes a server-side session
 * (HttpOnly, SameSite=Strict cookie; the key is not kept by the page), a wrong key is refused with the
 * server's problem, a viewer's pages show no command buttons, and the API refuses forged commands
 * anyway — a cookie-only request without the CSRF header (403) and a viewer session's command (403).
 */
import { describe, expect, it } from 'vitest';
import { useDashboard } from './support/browser.js';
import { lineCampaign } from './support/line.js';

const ui = useDashboard();

describe('sign-in', () => {
  it('an operator key signs in: session cookie, organization and role shown, sign out ends it', async () => {
    const key = await ui.dashboard.key('org-signin', 'operator');
    const p = await ui.page();
    await p.goto('/');
    // No session yet: every page sends the visitor to sign-in first.
    await p.page.waitForURL(/\/ui\/signin/);
    await p.signIn(key);
    await p.page.waitForURL((u) => /^\/ui\/?$/.test(u.pathname));
    await expect(p.page.getByTestId('session-org').textContent()).resolves.toBe('org-signin');
    await expect(p.page.getByTestId('session-role').textContent()).resolves.toBe('operator');

    const cookies = await p.context.cookies();
    const session = cookies.find((c) => c.name === 'herald_session');
    expect(session).toBeDefined();
    expect(session!.httpOnly).toBe(true);
    expect(session!.sameSite).toBe('Strict');
    // The key itself is kept nowhere in the page.
    const stored = await p.page.evaluate<string>('JSON.stringify({ ...localStorage, ...sessionStorage })');
    expect(stored).not.toContain(key);
    expect(await p.page.evaluate<string>('document.cookie')).not.toContain('herald_session');

    // A reload keeps the session (GET /v1/session).
    await p.page.reload();
    await p.page.getByTestId('session-role').waitFor();

    await p.page.getByRole('button', { name: 'Sign out' }).click();
    await p.page.waitForURL(/\/ui\/signin/);
    expect((await p.context.cookies()).find((c) => c.name === 'herald_session')).toBeUndefined();
    await p.goto('/outbox');
    await p.page.waitForURL(/\/ui\/signin\?next=%2Foutbox/);
  });

  it('a wrong key is refused with the problem detail, and no session is made', async () => {
    const p = await ui.page();
    p.allowHttp({ path: '/v1/session', status: 401 });
    await p.goto('/signin');
    await p.page.getByLabel('API key').fill('hk_00000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
    await p.page.getByRole('button', { name: 'Sign in' }).click();
    const alert = p.page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toMatch(/401/);
    expect(p.page.url()).toMatch(/\/ui\/signin/);
    expect((await p.context.cookies()).find((c) => c.name === 'herald_session')).toBeUndefined();

    // A revoked key is refused the same way.
    const made = await ui.dashboard.key('org-signin', 'operator');
    await ui.dashboard.t.db.query('update api_key set revoked_at = now() where prefix = $1', [
      made.split('_').slice(0, 2).join('_'),
    ]);
    await p.page.getByLabel('API key').fill(made);
    await p.page.getByRole('button', { name: 'Sign in' }).click();
    await p.page.getByRole('alert').filter({ hasText: '401' }).waitFor();
    expect((await p.context.cookies()).find((c) => c.name === 'herald_session')).toBeUndefined();
  });

  it('a viewer sees no command buttons on any page, and the API refuses its commands (403)', async () => {
    const operator = await ui.dashboard.key('org-viewer', 'operator');
    // Something to act on: a draft campaign, a pending action, a dead outbox row.
    const campaign = await ui.dashboard.request('POST', '/v1/campaigns', {
      key: operator,
      body: lineCampaign('viewer check'),
    });
    expect(campaign.status, campaign.text).toBe(201);
    // A draft: its state offers the edit, which a viewer is not shown.
    expect(campaign.body.commands).toContain('edit');
    const action = await ui.dashboard.request('POST', '/v1/actions', {
      key: operator,
      body: {
        mode: 'normal',
        actionType: 'send_message',
        actionConfig: { template: 'welcome' },
        delaySeconds: 3600,
      },
    });
    expect(action.status, action.text).toBe(201);

    const viewer = await ui.dashboard.key('org-viewer', 'viewer');
    const p = await ui.page();
    await p.signIn(viewer);
    await expect(p.page.getByTestId('session-role').textContent()).resolves.toBe('viewer');
    for (const path of [
      '/',
      '/actions',
      '/outbox',
      '/campaigns',
      `/campaigns/${campaign.body.campaignId}`,
      '/cron',
    ]) {
      await p.goto(path);
      await p.page.locator('main h1').first().waitFor();
      await p.page.waitForLoadState('networkidle');
      const commands = p.page.locator('main').getByRole('button', {
        name: /^(requeue|skip|fire now|reschedule|change deadline|cancel|pause|resume|send now|trigger|backfill|new|create|edit|delete)/i,
      });
      expect(await commands.count(), `command buttons on ${path}`).toBe(0);
      const edit = p.page.locator('main').getByRole('link', { name: 'Edit', exact: true });
      expect(await edit.count(), `edit links on ${path}`).toBe(0);
    }
    // The action is listed to the viewer, without its buttons.
    await p.goto('/actions');
    await p.page.getByRole('cell', { name: action.body.actionId.slice(0, 8) }).waitFor();

    // The viewer's own session, with its CSRF token, is still refused a command.
    p.allowHttp({ path: /\/v1\/actions\/.*\/cancel/, status: 403 });
    const refused = await p.page.evaluate(async (id) => {
      const session = (await (await fetch('/v1/session')).json()) as { csrfToken: string };
      const r = await fetch(`/v1/actions/${id}/cancel`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': session.csrfToken },
        body: JSON.stringify({ reason: 'viewer tries' }),
      });
      return { status: r.status, body: (await r.json()) as { status: number } };
    }, action.body.actionId);
    expect(refused.status).toBe(403);
    expect(refused.body.status).toBe(403);
  });

  it('a command with the session cookie but without the CSRF header is refused (403), with it accepted', async () => {
    const key = await ui.dashboard.key('org-csrf', 'operator');
    const made = await ui.dashboard.request('POST', '/v1/actions', {
      key,
      body: {
        mode: 'normal',
        actionType: 'send_message',
        actionConfig: { template: 'welcome' },
        delaySeconds: 3600,
      },
    });
    expect(made.status, made.text).toBe(201);
    const p = await ui.page();
    await p.signIn(key);
    p.allowHttp({ path: /\/v1\/actions\/.*\/cancel/, status: 403 });
    const forged = await p.page.evaluate(async (id) => {
      const r = await fetch(`/v1/actions/${id}/cancel`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ reason: 'forged' }),
      });
      return { status: r.status, body: await r.json() };
    }, made.body.actionId);
    expect(forged.status).toBe(403);
    expect(JSON.stringify(forged.body)).toMatch(/csrf/i);
    // A wrong token is no better.
    const wrong = await p.page.evaluate(async (id) => {
      const r = await fetch(`/v1/actions/${id}/cancel`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': 'not-the-token' },
        body: JSON.stringify({ reason: 'forged' }),
      });
      return r.status;
    }, made.body.actionId);
    expect(wrong).toBe(403);
    const still = await ui.dashboard.request('GET', `/v1/actions/${made.body.actionId}`, { key });
    expect(still.body.status).toBe('pending');

    // The page's own command (through ConfirmDialog, CSRF header added by the client) goes through.
    await p.goto('/actions');
    const row = p.page.locator(`tr:has-text("${made.body.actionId.slice(0, 8)}")`);
    await row.getByRole('button', { name: 'Cancel' }).click();
    const dialog = p.page.getByRole('dialog');
    await dialog.getByLabel('Reason').fill('customer asked');
    await dialog.getByRole('button', { name: 'Cancel action' }).click();
    await dialog.waitFor({ state: 'detached' });
    const cancelled = await ui.dashboard.request('GET', `/v1/actions/${made.body.actionId}`, { key });
    expect(cancelled.body).toMatchObject({ status: 'cancelled', cancelReason: 'customer asked' });
  });
});
