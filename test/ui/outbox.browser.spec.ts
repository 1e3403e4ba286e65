/**
 * The Outbox page in a real browser against `herald api` + `herald relay` on the real services
 * (ADR 0018: "requeue a dead outbox row and see it sent"). The rows die for real: the campaign queue is deleted
 * from the spec's RabbitMQ vhost after the relay declared it, so the relay's mandatory publishes come back unroutable and
 * (with one attempt allowed) the rows go dead. The page, open all along, shows them appear with their
 * error without a reload; the queue is declared again, two are requeued as a selection and seen sent
 * (live), the third is skipped with a reason. Each dead row links to the campaign it was written for.
 */
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LINE_BROADCAST_QUEUE } from '../../src/domain/campaign.js';
import { waitFor } from '../../src/testing/wait.js';
import { useDashboard } from './support/browser.js';
import { lineCampaign } from './support/line.js';

const ui = useDashboard({
  roles: ['relay'],
  env: {
    HERALD_RELAY_MAX_ATTEMPTS: '1',
    HERALD_RELAY_IDLE_POLL_MS: '200',
    HERALD_RELAY_BACKOFF_BASE_MS: '50',
    HERALD_RELAY_BACKOFF_MAX_MS: '100',
  },
});

const QUEUE = LINE_BROADCAST_QUEUE;
let connection: ChannelModel;
let channel: Channel;

beforeAll(async () => {
  connection = await amqp.connect(ui.dashboard.amqpUrl);
  channel = await connection.createChannel();
  await waitFor(async () => /queues declared/.test(ui.dashboard.roles.get('relay')!.output()), {
    what: 'the relay to declare its queues',
    timeoutMs: 60_000,
  }).catch((error: Error) => {
    throw new Error(`${error.message}\n${ui.dashboard.output()}`);
  });
  await channel.deleteQueue(QUEUE);
});
afterAll(async () => {
  // The spec's vhost goes with the dashboard (its seed queues with it).
  await connection?.close();
});

describe('outbox page', () => {
  it('dead rows appear live with their error; requeued as a selection they are sent; one skipped with a reason', async () => {
    const key = await ui.dashboard.key('org-outbox', 'operator');
    await ui.dashboard.lineChannel('org-outbox', 'oa-1');
    const p = await ui.page();
    await p.signIn(key, '/outbox');
    await p.page.getByRole('tab', { name: /Dead rows/ }).waitFor();
    await p.page.getByTestId('live-indicator').and(p.page.locator('[data-mode="live"]')).waitFor();
    // Loaded and empty (the list renders after its first fetch).
    await p.page.getByTestId('dead-rows').getByText('No dead rows.').waitFor();

    // Three campaigns sent now: each claim's outbox row is published to the missing queue and dies.
    const campaigns: string[] = [];
    for (const name of ['spring sale', 'restock alert', 'weekly digest']) {
      const c = await ui.dashboard.request('POST', '/v1/campaigns', {
        key,
        body: lineCampaign(name),
      });
      expect(c.status, c.text).toBe(201);
      const sent = await ui.dashboard.request('POST', `/v1/campaigns/${c.body.campaignId}/send-now`, { key });
      expect(sent.status, sent.text).toBe(200);
      campaigns.push(c.body.campaignId);
    }
    const dead = async () =>
      (await ui.dashboard.request('GET', '/v1/outbox/dead', { key })).body.items as {
        id: number;
        lastError: string;
        payload: { campaignId: string };
      }[];
    const rows = await waitFor(
      async () => {
        const items = await dead();
        return items.length === 3 ? items : undefined;
      },
      { what: 'three dead rows', timeoutMs: 30_000 },
    ).catch(async (error: Error) => {
      const { rows: outbox } = await ui.dashboard.t.db.query(
        'select id, status, attempts, destination, last_error from outbox order by id',
      );
      throw new Error(`${error.message}\n${JSON.stringify(outbox)}\n${ui.dashboard.output()}`);
    });
    expect(rows.map((r) => r.payload.campaignId).sort()).toEqual([...campaigns].sort());

    // Without a reload, the page lists them with the relay's error.
    const table = p.page.getByTestId('dead-rows');
    for (const row of rows) await table.locator(`tr[data-row-key="${row.id}"]`).waitFor();
    expect(await table.locator('tbody tr').count()).toBe(3);
    expect(await table.locator(`tr[data-row-key="${rows[0]!.id}"] .cell-error`).textContent()).toMatch(
      /unroutable|NO_ROUTE|returned/i,
    );
    await p.page.getByTestId('stat-dead').getByText('3').waitFor();
    // Each dead row links to the campaign it was written for (its origin stream, from its headers).
    for (const row of rows) {
      const source = table.locator(`tr[data-row-key="${row.id}"]`).getByTestId('row-source');
      expect(await source.getAttribute('href')).toBe(`/ui/campaigns/${row.payload.campaignId}`);
      expect(await source.textContent()).toBe(`campaign ${row.payload.campaignId.slice(0, 8)}`);
    }

    // The broker is fixed: the queue exists again.
    await channel.assertQueue(QUEUE, {
      durable: true,
      arguments: { 'x-queue-type': process.env.HERALD_AMQP_QUEUE_TYPE ?? 'quorum' },
    });

    // Open the first row's detail (it follows the row live), select the first two, requeue them.
    const [a, b, c] = rows as [(typeof rows)[0], (typeof rows)[0], (typeof rows)[0]];
    await table.locator(`tr[data-row-key="${a.id}"] td`).nth(1).click();
    const detail = p.page.locator('.row-detail');
    await detail.locator('[data-status="dead"]').waitFor();
    await table.getByLabel(`Select ${a.id}`).check();
    await table.getByLabel(`Select ${b.id}`).check();
    await p.page.getByTestId('bulk-bar').getByText('2 selected').waitFor();
    await p.page.getByRole('button', { name: 'Requeue selected' }).click();
    const dialog = p.page.getByRole('dialog');
    await dialog.getByRole('heading', { name: 'Requeue 2 rows' }).waitFor();
    await dialog.getByRole('button', { name: 'Requeue rows' }).click();
    await dialog.waitFor({ state: 'detached' });
    await p.page.getByRole('status').getByText('Requeued: 2 done').waitFor();

    // Sent, seen on the page without a reload: the detail shows it, the dead list lost both rows.
    // The status badge (the detail also has a `sent` time label once it is sent).
    await detail.locator('[data-status="sent"]').waitFor({ timeout: 30_000 });
    await table.locator(`tr[data-row-key="${a.id}"]`).waitFor({ state: 'detached' });
    await table.locator(`tr[data-row-key="${b.id}"]`).waitFor({ state: 'detached' });
    for (const id of [a.id, b.id]) {
      const row = await ui.dashboard.request('GET', `/v1/outbox/${id}`, { key });
      expect(row.body).toMatchObject({ status: 'sent' });
      expect(row.body.sentAt).not.toBeNull();
    }
    // The broker has them (exactly the two requeued messages, confirmed before marked sent).
    const check = await channel.checkQueue(QUEUE);
    expect(check.messageCount).toBe(2);

    // The third: skipped from its row, with a reason.
    const third = table.locator(`tr[data-row-key="${c.id}"]`);
    await third.getByRole('button', { name: 'Skip' }).click();
    const skip = p.page.getByRole('dialog');
    const confirm = skip.getByRole('button', { name: 'Skip', exact: true });
    expect(await confirm.isDisabled()).toBe(true); // a reason is required
    await skip.getByLabel('Reason').fill('campaign superseded by the restock alert');
    await confirm.click();
    await skip.waitFor({ state: 'detached' });
    await third.waitFor({ state: 'detached' });
    await table.getByText('No dead rows.').waitFor();
    const skipped = await ui.dashboard.request('GET', `/v1/outbox/${c.id}`, { key });
    expect(skipped.body).toMatchObject({ status: 'skipped' });
    expect(skipped.body.skippedAt).not.toBeNull();
    await p.page.getByTestId('stat-dead').getByText('0').waitFor();

    // The skipped row's detail still says what it was written for, and the link opens that campaign.
    await p.page.getByLabel('Row id').fill(String(c.id));
    await p.page.getByRole('button', { name: 'Show row' }).click();
    await detail.locator('[data-status="skipped"]').waitFor();
    await detail.getByTestId('row-source').click();
    await p.page.waitForURL(new RegExp(`/ui/campaigns/${c.payload.campaignId}$`));
    const name = ['spring sale', 'restock alert', 'weekly digest'][campaigns.indexOf(c.payload.campaignId)]!;
    await p.page.locator('main h1').filter({ hasText: name }).waitFor();
  });
});
