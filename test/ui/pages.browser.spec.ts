/**
 * The Overview and Actions pages in a real browser against `herald api` and the scanner, relay, worker
 * and projector roles on the real services (ADR 0018): campaigns dispatched end to end show up in the
 * overview's throughput and latency, leases and projections, and a new one is counted without a
 * reload; the Actions page lists waits with their signal names and deadlines, finds signals by
 * correlation key, fires an action now (seen done, live) and changes a wait's deadline. No console
 * error on any of it (the harness fails the test otherwise).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../src/testing/wait.js';
import { useDashboard } from './support/browser.js';
import { lineCampaign } from './support/line.js';

const ui = useDashboard({
  roles: ['scanner', 'relay', 'worker', 'projector'],
  env: {
    HERALD_SCANNER_POLL_MS: '300',
    HERALD_RELAY_IDLE_POLL_MS: '300',
    HERALD_PROJECTOR_POLL_MS: '300',
  },
});

const ORG = 'org-pages';

// The organization's LINE official account: its broadcasts go to the dashboard's LINE test server.
beforeAll(() => ui.dashboard.lineChannel(ORG, 'oa-1'));

async function dispatchCampaign(key: string, name: string): Promise<string> {
  const c = await ui.dashboard.request('POST', '/v1/campaigns', {
    key,
    body: lineCampaign(name),
  });
  expect(c.status, c.text).toBe(201);
  const sent = await ui.dashboard.request('POST', `/v1/campaigns/${c.body.campaignId}/send-now`, { key });
  expect(sent.status, sent.text).toBe(200);
  return c.body.campaignId;
}

async function completed(key: string, ids: string[]): Promise<void> {
  await waitFor(
    async () => {
      for (const id of ids) {
        const r = await ui.dashboard.request('GET', `/v1/campaigns/${id}`, { key });
        if (r.body.status !== 'COMPLETED') return false;
      }
      return true;
    },
    { what: `${ids.length} campaigns COMPLETED`, timeoutMs: 60_000 },
  ).catch((error: Error) => {
    throw new Error(`${error.message}\n${ui.dashboard.output()}`);
  });
}

const publishedLastHour = (overview: { latency: { published: number }[] }) =>
  overview.latency.reduce((n, r) => n + r.published, 0);

describe('overview page', () => {
  it('shows dispatch throughput, latency, leases and projections from the API, and counts a new dispatch live', async () => {
    const key = await ui.dashboard.key(ORG, 'operator');
    const ids: string[] = [];
    for (const name of ['spring sale', 'restock alert', 'weekly digest'])
      ids.push(await dispatchCampaign(key, name));
    await completed(key, ids);
    // The projector folded the receipts into dispatch_stats; the latency sample has the three publishes.
    const overview = await waitFor(
      async () => {
        const r = await ui.dashboard.request('GET', '/v1/overview', { key });
        const dispatched = r.body.dispatch.reduce(
          (n: number, d: { published: number }) => n + d.published,
          0,
        );
        return dispatched >= 3 && publishedLastHour(r.body) >= 3 ? r.body : undefined;
      },
      { what: 'the overview to count three publishes', timeoutMs: 60_000 },
    );

    const p = await ui.page();
    await p.signIn(key);
    await p.page.getByRole('heading', { name: 'Overview' }).waitFor();
    await p.page
      .getByTestId('stat-published')
      .getByText(String(publishedLastHour(overview)))
      .waitFor();
    // Both charts drew (chart.js canvases with a size).
    const charts = p.page.locator('.chart canvas');
    expect(await charts.count()).toBe(2);
    for (const canvas of await charts.all()) {
      const box = await canvas.boundingBox();
      expect(box?.width).toBeGreaterThan(100);
      expect(box?.height).toBeGreaterThan(100);
    }
    // The projector's lease and its projections, healthy.
    const leases = p.page.getByTestId('leases');
    await leases
      .getByText(/projector/)
      .first()
      .waitFor();
    const projections = p.page.getByTestId('projections');
    await projections.getByText('dispatch_stats').first().waitFor();
    expect(await p.page.getByTestId('stat-dead').textContent()).toContain('0');

    // One more dispatch while the page is open: counted without a reload (stream → refetch).
    await p.page.getByTestId('live-indicator').and(p.page.locator('[data-mode="live"]')).waitFor();
    const before = publishedLastHour(overview);
    await completed(key, [await dispatchCampaign(key, 'flash sale')]);
    await p.page
      .getByTestId('stat-published')
      .getByText(String(before + 1))
      .waitFor({ timeout: 30_000 });
  });
});

describe('live updates without the stream', () => {
  it('polls every 10 s when the stream is refused, and still shows a new dispatch without a reload', async () => {
    const key = await ui.dashboard.key(ORG, 'operator');
    const p = await ui.page();
    // The stream refused (as a full API process answers, 503): the page falls back to polling.
    p.allowHttp({ path: '/v1/stream', status: 503 });
    await p.page.route('**/v1/stream*', (route) =>
      route.fulfill({ status: 503, contentType: 'application/problem+json', body: '{"status":503}' }),
    );
    await p.signIn(key);
    await p.page.getByTestId('live-indicator').and(p.page.locator('[data-mode="polling"]')).waitFor();
    const shown = async () =>
      Number((await p.page.getByTestId('stat-published').textContent())?.replace(/\D+/g, ''));
    await expect.poll(shown, { timeout: 10_000 }).toBeGreaterThan(0);
    const before = await shown();
    await completed(key, [await dispatchCampaign(key, 'polled sale')]);
    await expect.poll(shown, { timeout: 30_000, interval: 500 }).toBe(before + 1);
  });
});

describe('actions page', () => {
  it('lists waits with signals and deadlines, looks up signals, fires now and changes a deadline', async () => {
    const key = await ui.dashboard.key(ORG, 'operator');
    const schedule = async (body: Record<string, unknown>) => {
      const r = await ui.dashboard.request('POST', '/v1/actions', { key, body });
      expect(r.status, r.text).toBe(201);
      return r.body as { actionId: string; expiresAt: string | null };
    };
    const reminder = await schedule({
      mode: 'normal',
      actionType: 'send_message',
      actionConfig: { template: 'reminder' },
      delaySeconds: 3600,
    });
    const wait = await schedule({
      mode: 'waitForSignal',
      actionType: 'send_message',
      actionConfig: { template: 'thanks' },
      expiresSeconds: 7200,
      wait: { names: ['clicked', 'replied'], correlationKey: 'order-1042' },
      expiry: { actionType: 'send_message', actionConfig: { template: 'nudge' } },
    });
    const unlocked = await schedule({
      mode: 'waitForSignal',
      actionType: 'send_message',
      actionConfig: { template: 'receipt' },
      expiresSeconds: 7200,
      wait: { names: ['delivered'], correlationKey: 'order-2001' },
    });
    const signal = await ui.dashboard.request('POST', '/v1/signals', {
      key,
      body: { correlationKey: 'order-2001', name: 'delivered', payload: { courier: 'kerry' } },
    });
    expect(signal.status, signal.text).toBe(200);
    expect(signal.body.unlocked).toEqual([unlocked.actionId]);

    const p = await ui.page();
    await p.signIn(key, '/actions');
    const table = p.page.getByTestId('actions');
    const waitRow = table.locator(`tr:has-text("${wait.actionId.slice(0, 8)}")`);
    await waitRow.waitFor();
    expect(await waitRow.textContent()).toContain('clicked');
    expect(await waitRow.textContent()).toContain('replied');
    expect(await waitRow.textContent()).toContain('order-1042');
    expect(await waitRow.getByText('waiting').count()).toBe(1);
    const reminderRow = table.locator(`tr:has-text("${reminder.actionId.slice(0, 8)}")`);
    await reminderRow.waitFor();

    // Signals by correlation key: the delivered signal and the wait it unlocked.
    await p.page.getByLabel('Correlation key').fill('order-2001');
    await p.page.getByRole('button', { name: 'Look up' }).click();
    const signals = p.page.getByTestId('signals');
    await signals.getByText('delivered').waitFor();
    expect(await signals.textContent()).toContain(unlocked.actionId.slice(0, 8));

    // Fire now: the worker runs it; the row leaves the pending list without a reload.
    await reminderRow.getByRole('button', { name: 'Fire now' }).click();
    let dialog = p.page.getByRole('dialog');
    await dialog.getByLabel('Reason').fill('customer called, send it now');
    await dialog.getByRole('button', { name: 'Fire now' }).click();
    await dialog.waitFor({ state: 'detached' });
    await reminderRow.waitFor({ state: 'detached', timeout: 30_000 });
    await waitFor(
      async () =>
        (await ui.dashboard.request('GET', `/v1/actions/${reminder.actionId}`, { key })).body.status ===
        'done',
      { what: 'the fired action done', timeoutMs: 30_000 },
    );
    await p.page.getByRole('tab', { name: 'Done' }).click();
    await table.locator(`tr:has-text("${reminder.actionId.slice(0, 8)}")`).waitFor();
    await p.page.getByRole('tab', { name: 'Waiting & pending' }).click();

    // Change the wait's deadline to a set local time (the page's zone is UTC).
    await waitRow.getByRole('button', { name: 'Change deadline' }).click();
    dialog = p.page.getByRole('dialog');
    const target = new Date(Date.now() + 3 * 86_400_000);
    target.setUTCHours(9, 30, 0, 0);
    await dialog.getByLabel(/New deadline/).fill(target.toISOString().slice(0, 19));
    await dialog.getByLabel('Reason').fill('customer is travelling');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'detached' });
    const moved = await ui.dashboard.request('GET', `/v1/actions/${wait.actionId}`, { key });
    expect(new Date(moved.body.expiresAt).toISOString()).toBe(target.toISOString());
    await waitRow.getByText(target.toISOString().slice(0, 10)).waitFor();
  });
});
