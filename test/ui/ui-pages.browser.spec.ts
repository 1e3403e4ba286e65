/**
 * The dashboard's rough edges a new user met (issue 23, item 8), in a real browser against `herald api`
 * and the scanner, relay and worker roles on the real services (ADR 0018):
 * - a signed-out visit fails no request and logs nothing (the harness fails the test on any console
 *   error or failed load); an unknown address has a way back and home;
 * - the API keys page (admin only): the secret shown once, revoke behind a confirmation, the last admin
 *   key's refusal (409) said plainly;
 * - cron times on the job's own clock with the zone named, the backfill form read in the job's zone,
 *   a never-firing job flagged;
 * - an action's detail page (from the Actions list): its timeline with the key's name as the actor, and
 *   what it executed (its message, published, confirmed by the broker);
 * - actors by key name (a pause on the cron page).
 * With HERALD_UI_SCREENSHOTS=1 (`npm run ui:screenshots`) the pages are saved in docs/screenshots/.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/api/auth.js';
import { waitFor } from '../../src/testing/wait.js';
import { type UiPage, useDashboard } from './support/browser.js';

const save = process.env.HERALD_UI_SCREENSHOTS === '1';
const dir = save ? undefined : mkdtempSync(join(tmpdir(), 'herald-screens-'));

const ui = useDashboard({
  roles: ['scanner', 'relay', 'worker'],
  env: { HERALD_SCANNER_POLL_MS: '300', HERALD_RELAY_IDLE_POLL_MS: '300' },
});

async function shoot(p: UiPage, name: string): Promise<void> {
  await p.page.waitForLoadState('networkidle').catch(() => {});
  await p.page.waitForFunction("!document.body.textContent.includes('Loading…')", null, { timeout: 10_000 });
  if (save) await p.screenshot(name);
  else await p.page.screenshot({ path: join(dir!, `${name}.png`), fullPage: true });
}

/** A key with a name, made as `herald api-keys create --name` makes it. */
async function namedKey(organizationId: string, role: 'viewer' | 'operator' | 'admin', name: string) {
  return createApiKey(ui.dashboard.t.db, { organizationId, role, name, createdBy: 'browser-test' });
}

describe('signed out, and unknown addresses', () => {
  it('a signed-out visit fails no request; an unknown page offers the way back and home', async () => {
    const p = await ui.page();
    const failed: string[] = [];
    p.page.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${new URL(r.url()).pathname}`);
    });
    await p.goto('/campaigns');
    await p.page.waitForURL(/\/ui\/signin\?next=%2Fcampaigns/);
    await p.page.getByLabel('API key').waitFor();
    await p.page.waitForLoadState('networkidle');
    expect(failed).toEqual([]);
    expect(p.problems).toEqual([]);

    const key = await ui.dashboard.key('org-pages-c', 'viewer');
    await p.signIn(key, '/cron');
    await p.page.getByTestId('cron-jobs-page').waitFor();
    await p.goto('/no/such/page');
    const notFound = p.page.getByTestId('not-found');
    await notFound.waitFor();
    expect(await notFound.textContent()).toContain('/ui/no/such/page');
    await shoot(p, 'not-found');
    await notFound.getByRole('button', { name: 'Go back' }).click();
    await p.page.waitForURL(/\/ui\/cron$/);
    await p.goto('/nothing-here');
    await p.page.getByRole('link', { name: 'Go to the overview' }).click();
    await p.page.getByRole('heading', { name: 'Overview' }).waitFor();
    // The charts' hour labels name their zone (the browser's: UTC here).
    await p.page.getByText('hours in UTC').waitFor();
    expect(new URL(p.page.url()).pathname).toMatch(/^\/ui\/?$/);
    expect(failed).toEqual([]);
  });
});

describe('API keys page', () => {
  it('an admin creates a key (secret shown once), revokes it, and is told why the last admin key stays', async () => {
    const ORG = 'org-keys';
    const admin = await namedKey(ORG, 'admin', 'founding admin');
    const p = await ui.page();
    await p.signIn(admin.key);
    await p.page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API keys' }).click();
    const table = p.page.getByTestId('api-keys');
    const adminRow = table.locator(`tr[data-row-key="${admin.record.id}"]`);
    await adminRow.waitFor();
    expect(await adminRow.textContent()).toContain('founding admin');
    expect(await adminRow.textContent()).toContain('this session');
    expect(await adminRow.textContent()).toContain(admin.record.prefix);

    // Create: the secret is shown once, and it works.
    await p.page.getByLabel('Name').fill('CI deploys');
    await p.page.getByLabel('Role').selectOption('operator');
    await p.page.getByRole('button', { name: 'Create key' }).click();
    const secret = (await p.page.getByTestId('new-key-value').textContent()) ?? '';
    expect(secret).toMatch(/^hk_[0-9a-f]{8}_[A-Za-z0-9_-]{43}$/);
    const works = await ui.dashboard.request('GET', '/v1/campaigns', { key: secret });
    expect(works.status, works.text).toBe(200);
    const ci = table.locator('tr', { hasText: 'CI deploys' });
    await ci.waitFor();
    expect(await ci.textContent()).toContain(secret.slice(0, 11));
    expect(await ci.textContent()).toContain('operator');
    await shoot(p, 'api-keys');
    await p.page.getByRole('button', { name: 'I have saved it' }).click();
    expect(await p.page.getByTestId('new-key-value').count()).toBe(0);
    // Nowhere else: the list never carries a secret.
    expect(await p.page.locator('main').textContent()).not.toContain(secret);

    // Revoke it behind a confirmation: gone from the list, refused by the API.
    await ci.getByRole('button', { name: 'Revoke' }).click();
    let dialog = p.page.getByRole('dialog');
    await dialog.getByRole('heading', { name: 'Revoke the key “CI deploys”' }).waitFor();
    expect(await dialog.getByTestId('last-admin-warning').count()).toBe(0);
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    await dialog.waitFor({ state: 'detached' });
    await ci.waitFor({ state: 'detached' });
    expect((await ui.dashboard.request('GET', '/v1/campaigns', { key: secret })).status).toBe(401);
    await p.page.getByLabel('show revoked keys').check();
    await table.locator('tr', { hasText: 'CI deploys' }).locator('[data-status="revoked"]').waitFor();

    // The last active admin key: the dialog says it will be refused, and the server's 409 is shown.
    p.allowHttp({ path: `/v1/api-keys/${admin.record.id}/revoke`, status: 409 });
    await adminRow.getByRole('button', { name: 'Revoke' }).click();
    dialog = p.page.getByRole('dialog');
    await dialog.getByTestId('last-admin-warning').waitFor();
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    const refusal = dialog.getByRole('alert');
    await refusal.waitFor();
    expect(await refusal.textContent()).toContain('409');
    expect(await refusal.textContent()).toContain('last active admin key');
    await shoot(p, 'api-keys-last-admin');
    await p.page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    const still = await ui.dashboard.request('GET', '/v1/api-keys', { key: admin.key });
    expect(still.status).toBe(200);

    // An operator has no such page: no nav entry, and the address says why.
    const operator = await ui.dashboard.key(ORG, 'operator');
    const q = await ui.page();
    await q.signIn(operator);
    expect(
      await q.page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API keys' }).count(),
    ).toBe(0);
    await q.goto('/api-keys');
    await q.page.getByText('Only admin keys can manage API keys').waitFor();
  });
});

describe('cron pages', () => {
  it("show times on the job's clock with its zone, read the backfill range there, flag a job that never fires", async () => {
    const ORG = 'org-cron-zones';
    const operator = await namedKey(ORG, 'operator', 'night operator');
    const api = async (method: string, path: string, body?: unknown) => {
      const r = await ui.dashboard.request(method, path, { key: operator.key, ...(body ? { body } : {}) });
      expect(r.status, `${method} ${path}: ${r.text}`).toBeLessThan(300);
      return r.body;
    };
    const job = await api('POST', '/v1/cron-jobs', {
      name: 'Americas digest',
      schedule: '0 9 * * *',
      timezone: 'America/New_York',
      jobType: 'webhook',
      payload: { url: 'http://127.0.0.1:9/digest' },
    });
    // A job stored before the API refused schedules that never fire (`0 0 30 2 *`, 6d62a9d): active,
    // no next run. The API no longer makes one, so the page is shown such a job's answer.
    const legacy = await api('POST', '/v1/cron-jobs', {
      name: 'legacy: 30 February',
      schedule: '0 0 28 2 *',
      timezone: 'UTC',
      jobType: 'webhook',
      payload: { url: 'http://127.0.0.1:9/legacy' },
    });
    const p = await ui.page();
    const asNeverFiring = (job: Record<string, unknown>) =>
      job.jobId === legacy.jobId ? { ...job, schedule: '0 0 30 2 *', nextRunAt: null } : job;
    await p.page.route(/\/v1\/cron-jobs(\/[^/?]+)?(\/upcoming)?(\?.*)?$/, async (route) => {
      const response = await route.fetch();
      const url = new URL(route.request().url());
      let body = await response.json();
      if (url.pathname === '/v1/cron-jobs') body = { ...body, items: body.items.map(asNeverFiring) };
      else if (url.pathname === `/v1/cron-jobs/${legacy.jobId}`) body = asNeverFiring(body);
      else if (url.pathname === `/v1/cron-jobs/${legacy.jobId}/upcoming`) body = { ...body, occurrences: [] };
      await route.fulfill({ response, json: body });
    });
    await p.signIn(operator.key, '/cron');

    // The list: the next run at 09:00 New York time, named as such (the browser is in UTC).
    const row = p.page.getByTestId('cron-jobs').locator(`tr[data-row-key="${job.jobId}"]`);
    await row.waitFor();
    expect(await row.textContent()).toMatch(/ 09:00:00 E[SD]T/);
    const legacyRow = p.page.getByTestId('cron-jobs').locator(`tr[data-row-key="${legacy.jobId}"]`);
    await legacyRow.locator('[data-status="never fires"]').waitFor();
    expect(await legacyRow.getByTestId('never-fires').textContent()).toContain('never');
    await shoot(p, 'cron-jobs-zones');

    // The detail of the job that never fires says so.
    await legacyRow.getByRole('link', { name: 'legacy: 30 February' }).click();
    await p.page.getByTestId('never-fires').filter({ hasText: 'This job never fires' }).waitFor();
    await p.page.getByTestId('upcoming').getByText('none: the schedule never fires').waitFor();
    await shoot(p, 'cron-job-never-fires');

    // Paused by a key: the page names the key, not its id.
    await api('POST', `/v1/cron-jobs/${job.jobId}/pause`, { reason: 'holiday week' });
    await p.goto(`/cron/${job.jobId}`);
    const definition = p.page.locator('.kv').first();
    await definition.getByText('night operator').waitFor();
    expect(await definition.textContent()).not.toContain(operator.record.id);
    await api('POST', `/v1/cron-jobs/${job.jobId}/resume`);
    await p.page.locator('[data-status="active"]').first().waitFor();
    const subtitle = p.page.locator('.subtitle').first();
    await subtitle.getByText(/America\/New_York/).waitFor();
    expect(await subtitle.textContent()).toMatch(/next run \d{4}-\d\d-\d\d 09:00:00 E[SD]T/);

    // Backfill: the range is read on New York's clock. 08:30–09:30 there holds the 09:00 occurrence;
    // read as UTC (the old "your time"), it would hold none.
    const day = new Date(Date.now() - 3 * 86_400_000).toISOString().slice(0, 10);
    await p.page.getByRole('button', { name: 'Backfill…', exact: true }).click();
    const dialog = p.page.getByRole('dialog');
    await dialog.getByLabel('From (America/New_York)').fill(`${day}T08:30`);
    await dialog.getByLabel('To (America/New_York)').fill(`${day}T09:30`);
    expect(await dialog.getByTestId('backfill-zone').textContent()).toMatch(/in your zone \(UTC\)/);
    await dialog.getByRole('button', { name: 'Preview (dry run)', exact: true }).click();
    await dialog.getByTestId('backfill-preview').waitFor();
    expect(await dialog.getByTestId('backfill-run').allTextContents()).toEqual([`${day} 09:00:00`]);
    await shoot(p, 'cron-backfill-zone');
    await p.page.keyboard.press('Escape');
  });
});

describe('action detail page', () => {
  it('opens from the Actions list: its timeline with the key by name, and what it executed', async () => {
    const ORG = 'org-action-detail';
    const operator = await namedKey(ORG, 'operator', 'support desk');
    const scheduled = await ui.dashboard.request('POST', '/v1/actions', {
      key: operator.key,
      body: {
        mode: 'normal',
        actionType: 'send_message',
        actionConfig: { template: 'welcome', to: 'user-42' },
        delaySeconds: 1,
      },
    });
    expect(scheduled.status, scheduled.text).toBe(201);
    const id = scheduled.body.actionId as string;
    await waitFor(
      async () => {
        const history = await ui.dashboard.request('GET', `/v1/actions/${id}/history`, { key: operator.key });
        const messages = (history.body.commands ?? []).flatMap(
          (c: { messages: { receipts: unknown[] }[] }) => c.messages,
        );
        return (
          history.body.state?.status === 'done' &&
          messages.some((m: { receipts: unknown[] }) => m.receipts.length > 0)
        );
      },
      { what: 'the action done and its message confirmed', timeoutMs: 45_000 },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${ui.dashboard.output()}`);
    });

    const p = await ui.page();
    await p.signIn(operator.key, '/actions');
    await p.page.getByRole('tab', { name: 'Done' }).click();
    await p.page
      .getByTestId('actions')
      .getByRole('link', { name: id.slice(0, 8) })
      .click();
    await p.page.waitForURL(new RegExp(`/ui/actions/${id}$`));
    const detail = p.page.getByTestId('action-detail');
    await detail.getByTestId('action-definition').getByText(id).waitFor();

    // The timeline: scheduled by the key (by name), then the scanner's and worker's steps to done.
    const events = detail.getByTestId('action-event');
    await events.first().waitFor();
    const first = events.first();
    expect(await first.getAttribute('data-type')).toMatch(/Scheduled/);
    await first.getByTestId('actor-name').getByText('support desk').waitFor();
    expect(await detail.getByTestId('action-timeline').textContent()).not.toContain(
      `api-key:${operator.record.id}`,
    );
    expect(await events.count()).toBeGreaterThanOrEqual(2);
    // Every time names its zone.
    expect(await first.textContent()).toMatch(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);

    // What it executed: its message, published and confirmed by the broker.
    const execution = detail.getByTestId('action-execution').first();
    await execution.waitFor();
    await execution.locator('[data-status="sent"]').waitFor();
    expect(await execution.textContent()).toMatch(/at \d{4}-\d\d-\d\d/);
    await shoot(p, 'action-detail');
    // Done: nothing left to command.
    expect(await detail.getByRole('button', { name: /Fire now|Cancel action/ }).count()).toBe(0);

    // A pending action: nothing executed yet; cancelled from its page, the timeline shows who did it.
    const later = await ui.dashboard.request('POST', '/v1/actions', {
      key: operator.key,
      body: {
        mode: 'normal',
        actionType: 'send_message',
        actionConfig: { template: 'later' },
        delaySeconds: 3600,
      },
    });
    expect(later.status, later.text).toBe(201);
    await p.goto(`/actions/${later.body.actionId}`);
    await detail.getByTestId('no-executions').getByText('Nothing yet').waitFor();
    await detail.getByRole('button', { name: 'Cancel action' }).click();
    const dialog = p.page.getByRole('dialog');
    await dialog.getByLabel('Reason').fill('customer unsubscribed');
    await dialog.getByRole('button', { name: 'Cancel action' }).click();
    await dialog.waitFor({ state: 'detached' });
    await detail.locator('h1 [data-status="cancelled"]').waitFor();
    const cancelled = detail.locator('[data-testid="action-event"][data-type="ActionCancelled"]');
    await cancelled.getByText('support desk').waitFor();
    expect(await cancelled.textContent()).toContain('customer unsubscribed');
  });
});
