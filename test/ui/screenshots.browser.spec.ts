/**
 * The sign-in, Overview, Outbox and Actions pages with demo-like data, in a real browser against
 * `herald api` and the roles (ADR 0018): each page renders its data with no console error (the harness
 * fails the test on any), and with HERALD_UI_SCREENSHOTS=1 (`npm run ui:screenshots`) each is saved as
 * docs/screenshots/<page>.png for the dashboard guide (docs/guides/dashboard.md), the API's /docs page too (the campaign, recipient and cron
 * pages: screenshots-campaigns-cron.browser.spec.ts). The data is made the way an
 * operator's would be: LINE campaigns (content, a registered channel, a sealed audience) sent to the
 * dashboard's LINE test server, scheduled, paused and cancelled through the API; multicast
 * rows that really died (their queue deleted from RabbitMQ after the relay declared it, one attempt
 * allowed); actions waiting for signals, a signal received; cron jobs.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LINE_MULTICAST_QUEUE } from '../../src/domain/campaign.js';
import { waitFor } from '../../src/testing/wait.js';
import { type UiPage, useDashboard } from './support/browser.js';
import { lineCampaign } from './support/line.js';

const save = process.env.HERALD_UI_SCREENSHOTS === '1';
const dir = save ? undefined : mkdtempSync(join(tmpdir(), 'herald-screens-'));

const ui = useDashboard({
  roles: ['scanner', 'relay', 'worker', 'projector'],
  env: {
    HERALD_SCANNER_POLL_MS: '300',
    HERALD_RELAY_IDLE_POLL_MS: '300',
    HERALD_PROJECTOR_POLL_MS: '300',
    HERALD_RELAY_MAX_ATTEMPTS: '1',
    HERALD_RELAY_BACKOFF_BASE_MS: '50',
    HERALD_RELAY_BACKOFF_MAX_MS: '100',
  },
});

const ORG = 'org-demo';
let key: string;
let connection: ChannelModel;
let channel: Channel;

async function shoot(p: UiPage, name: string): Promise<void> {
  // Nothing still loading, charts drawn.
  await p.page.waitForLoadState('networkidle').catch(() => {});
  await p.page.waitForFunction("!document.body.textContent.includes('Loading…')", null, { timeout: 10_000 });
  if (save) await p.screenshot(name);
  else await p.page.screenshot({ path: join(dir!, `${name}.png`), fullPage: true });
}

const api = async (method: string, path: string, body?: unknown) => {
  const r = await ui.dashboard.request(method, path, { key, ...(body === undefined ? {} : { body }) });
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.text}`);
  return r.body;
};

const line = (name: string, castType: 'broadcast' | 'multicast' = 'broadcast') =>
  lineCampaign(name, {
    lineOaId: 'oa-main',
    castType,
    ...(castType === 'multicast' ? { audienceId: 'aud-vip' } : {}),
  });

beforeAll(async () => {
  key = await ui.dashboard.key(ORG, 'admin');
  await ui.dashboard.lineChannel(ORG, 'oa-main', { friends: 40 });
  await ui.dashboard.lineAudience(ORG, 'aud-vip', 120);
  connection = await amqp.connect(ui.dashboard.amqpUrl);
  channel = await connection.createChannel();
  await waitFor(async () => /queues declared/.test(ui.dashboard.roles.get('relay')!.output()), {
    what: 'the relay to declare its queues',
    timeoutMs: 60_000,
  });

  // Sent now, delivered end to end.
  const sent: string[] = [];
  for (const name of [
    'Spring sale: 20% off',
    'Restock alert: trail shoes',
    'Weekly digest #48',
    'Loyalty points reminder',
  ]) {
    const c = await api('POST', '/v1/campaigns', line(name));
    await api('POST', `/v1/campaigns/${c.campaignId}/send-now`);
    sent.push(c.campaignId);
  }
  // Scheduled for later, one paused, one cancelled.
  const at = (hours: number) => new Date(Date.now() + hours * 3_600_000).toISOString();
  await api('POST', '/v1/campaigns', { ...line('Black Friday early access'), startAt: at(20) });
  const paused = await api('POST', '/v1/campaigns', { ...line('Holiday gift guide'), startAt: at(48) });
  await api('POST', `/v1/campaigns/${paused.campaignId}/pause`, { reason: 'waiting for final prices' });
  const cancelled = await api('POST', '/v1/campaigns', { ...line('Flash sale (duplicate)'), startAt: at(6) });
  await api('POST', `/v1/campaigns/${cancelled.campaignId}/cancel`, { reason: 'duplicate of Spring sale' });
  await api('POST', '/v1/campaigns', line('New arrivals (draft)'));

  await waitFor(
    async () => {
      for (const id of sent)
        if ((await api('GET', `/v1/campaigns/${id}`)).status !== 'COMPLETED') return false;
      return true;
    },
    { what: 'the sent campaigns COMPLETED', timeoutMs: 60_000 },
  );

  // Multicasts whose queue is gone: unroutable, dead after one attempt. The worker is stopped first:
  // its consumer, cancelled by the deletion, would declare the queue again when it reconnects.
  await ui.dashboard.roles.get('worker')!.stop();
  await channel.deleteQueue(LINE_MULTICAST_QUEUE);
  for (const name of ['VIP preview: winter collection', 'VIP birthday coupons']) {
    const c = await api('POST', '/v1/campaigns', line(name, 'multicast'));
    await api('POST', `/v1/campaigns/${c.campaignId}/send-now`);
  }
  await waitFor(async () => ((await api('GET', '/v1/outbox/dead')).items.length === 2 ? true : undefined), {
    what: 'two dead multicast rows',
    timeoutMs: 30_000,
  }).catch(async (error: Error) => {
    const { rows } = await ui.dashboard.t.db.query(
      'select id, status, attempts, destination, last_error from outbox order by id',
    );
    throw new Error(`${error.message}\n${JSON.stringify(rows)}\n${ui.dashboard.output()}`);
  });

  // Actions: reminders and waits for signals; one signal unlocks a wait.
  const action = (body: Record<string, unknown>) => api('POST', '/v1/actions', body);
  await action({
    mode: 'normal',
    actionType: 'send_message',
    actionConfig: { template: 'cart-reminder' },
    delaySeconds: 1800,
  });
  await action({
    mode: 'normal',
    actionType: 'send_message',
    actionConfig: { template: 'review-request' },
    delaySeconds: 86_400,
  });
  for (const [order, names] of [
    ['order-1042', ['clicked', 'replied']],
    ['order-1043', ['delivered']],
    ['order-1044', ['paid']],
  ] as const) {
    await action({
      mode: 'waitForSignal',
      actionType: 'send_message',
      actionConfig: { template: 'thanks' },
      expiresSeconds: 7200,
      wait: { names, correlationKey: order },
      expiry: { actionType: 'send_message', actionConfig: { template: 'nudge' } },
    });
  }
  await api('POST', '/v1/signals', {
    correlationKey: 'order-1043',
    name: 'delivered',
    payload: { courier: 'kerry' },
  });

  // Cron jobs.
  await api('POST', '/v1/cron-jobs', {
    name: 'nightly report',
    schedule: '30 2 * * *',
    timezone: 'Asia/Bangkok',
    jobType: 'ping',
    payload: { url: 'https://reports.example.com/nightly' },
  });
  await api('POST', '/v1/cron-jobs', {
    name: 'hourly health ping',
    schedule: '0 * * * *',
    timezone: 'Europe/Berlin',
    jobType: 'ping',
    payload: { url: 'https://status.example.com/ping' },
  });

  // The overview has the dispatches (projector caught up).
  await waitFor(
    async () => {
      const o = await api('GET', '/v1/overview');
      return o.latency.reduce((n: number, r: { published: number }) => n + r.published, 0) >= 4;
    },
    { what: 'the overview to count the dispatches', timeoutMs: 60_000 },
  );
}, 240_000);

afterAll(async () => {
  // The spec's vhost goes with the dashboard (its seed queues with it).
  await connection?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('pages with demo data', () => {
  it('sign-in', async () => {
    const p = await ui.page();
    await p.goto('/signin');
    await p.page.getByLabel('API key').waitFor();
    await shoot(p, 'signin');
  });

  it('overview, outbox, actions', async () => {
    const p = await ui.page();
    await p.signIn(key);
    await p.page.getByTestId('stat-published').waitFor();
    await shoot(p, 'overview');

    await p.goto('/outbox');
    await p.page.getByTestId('dead-rows').locator('tbody tr[data-row-key]').nth(1).waitFor();
    await shoot(p, 'outbox');

    await p.goto('/actions');
    await p.page.getByTestId('actions').locator('tbody tr[data-row-key]').nth(3).waitFor();
    await p.page.getByLabel('Correlation key').fill('order-1043');
    await p.page.getByRole('button', { name: 'Look up' }).click();
    await p.page.getByTestId('signals').getByText('delivered').waitFor();
    await shoot(p, 'actions');
  });

  it('the API docs page', async () => {
    const p = await ui.page();
    await p.page.goto('/docs');
    await p.page.locator('.swagger-ui .info').waitFor();
    await p.page.locator('.opblock').first().waitFor();
    if (save) await p.screenshot('api-docs', { fullPage: false });
    expect(await p.page.locator('.opblock').count()).toBeGreaterThan(40);
  });
});
