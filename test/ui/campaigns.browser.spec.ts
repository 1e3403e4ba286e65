/**
 * Campaigns in a real browser (ADR 0018) against `herald api`, `herald scanner`, `herald relay`,
 * `herald worker` and `herald sms-simulator` as child processes on the real services: the list finds a
 * campaign by name and by id and filters by status; on its page an operator pauses, resumes and cancels
 * it, each confirmation asking for a reason, and the timeline shows each event with its actor (the key)
 * and reason, recorded in the campaign's history; a sent campaign's timeline follows the command to its
 * outbox message, the broker confirm and the consumer; an SMS campaign the (simulated) network failed is
 * resent from its page after the server's preview of the recipients and the charge, with a reason. The
 * harness fails each test on any console error or failed load.
 */
import { describe, expect, it } from 'vitest';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { waitFor } from '../../src/testing/wait.js';
import { inlineRequest } from '../support/sms.js';
import { type UiPage, useDashboard } from './support/browser.js';
import { lineCampaign } from './support/line.js';

const ui = useDashboard({
  roles: ['scanner', 'relay', 'worker', 'sms-simulator'],
  env: {
    HERALD_SCANNER_POLL_MS: '200',
    HERALD_RELAY_IDLE_POLL_MS: '200',
    HERALD_SMS_SIMULATOR_OUTCOMES: 'REJECTED=1',
    HERALD_SMS_SIMULATOR_LATENCY_MS: '10',
  },
});

const ORG = 'org-campaigns-ui';

/** Opens the page's control, fills the reason and confirms; waits for the dialog to close. */
async function command(p: UiPage, button: string, confirm: string, reason: string) {
  await p.page.getByRole('button', { name: button, exact: true }).click();
  const dialog = p.page.getByRole('dialog');
  // No reason, no command.
  expect(await dialog.getByRole('button', { name: confirm, exact: true }).isDisabled()).toBe(true);
  await dialog.getByLabel('Reason').fill(reason);
  await dialog.getByRole('button', { name: confirm, exact: true }).click();
  await dialog.waitFor({ state: 'detached' });
}

const statusOf = (p: UiPage) =>
  p.page.getByTestId('campaign-detail').locator('h1 [data-status]').getAttribute('data-status');

describe('campaigns in the browser', () => {
  it('pause, resume and cancel from the page, each with a reason; the timeline shows the events with the actor', async () => {
    const key = await ui.dashboard.key(ORG, 'operator');
    const startAt = new Date(Date.now() + 3 * 3_600_000).toISOString();
    await ui.dashboard.lineChannel(ORG, 'oa-spring');
    const created = await ui.dashboard.request('POST', '/v1/campaigns', {
      key,
      body: lineCampaign('Spring sale — LINE broadcast', { lineOaId: 'oa-spring', startAt }),
    });
    expect(created.status, created.text).toBe(201);
    const id = created.body.campaignId as string;
    expect(created.body.status).toBe('SCHEDULED');
    const keyId = (
      await ui.dashboard.t.db.query<{ id: string }>('select id from api_key where organization_id = $1', [
        ORG,
      ])
    ).rows[0]!.id;
    const actor = `api-key:${keyId}`;

    const p = await ui.page();
    await p.signIn(key);
    // Found by the start of its name, opened from the list.
    await p.goto('/campaigns');
    await p.page.getByLabel('Search campaigns').fill('spring');
    await p.page.getByRole('link', { name: 'Spring sale — LINE broadcast' }).click();
    await p.page.getByTestId('campaign-detail').waitFor();
    expect(p.page.url()).toContain(`/ui/campaigns/${id}`);
    expect(await statusOf(p)).toBe('SCHEDULED');

    await command(p, 'Pause', 'Pause', 'holiday freeze');
    await waitFor(async () => (await statusOf(p)) === 'PAUSED', { what: 'PAUSED on the page' });
    await command(p, 'Resume', 'Resume', 'freeze lifted');
    await waitFor(async () => (await statusOf(p)) === 'SCHEDULED', { what: 'SCHEDULED again' });
    await command(p, 'Cancel campaign', 'Cancel campaign', 'client withdrew the offer');
    await waitFor(async () => (await statusOf(p)) === 'CANCELLED', { what: 'CANCELLED on the page' });
    // A cancelled campaign offers no controls.
    expect(await p.page.locator('.page-header').getByRole('button').count()).toBe(0);

    // The timeline (newest first): every event with its actor, the reasons with them.
    const timeline = p.page.getByTestId('timeline');
    const event = (type: string) => timeline.locator(`[data-testid="timeline-event"][data-type="${type}"]`);
    await event('CampaignCancelled').waitFor();
    // Actors by the key's name and role (the raw actor on hover), once the dashboard looked it up.
    const byKey = 'by operator key (operator)';
    for (const [type, reason] of [
      ['CampaignPaused', 'holiday freeze'],
      ['CampaignResumed', 'freeze lifted'],
      ['CampaignCancellationRequested', 'client withdrew the offer'],
    ] as const) {
      await expect.poll(() => event(type).textContent(), { message: type }).toContain(byKey);
      expect(await event(type).textContent(), type).toContain(`reason: ${reason}`);
      expect(await event(type).getByTestId('actor-name').getAttribute('title')).toBe(actor);
    }
    await expect.poll(() => event('CampaignScheduled').textContent()).toContain(byKey);
    const types = await timeline
      .locator('[data-testid="timeline-event"]')
      .evaluateAll((els) => els.map((e) => e.getAttribute('data-type')));
    // Commands newest first; each command's events in the order they happened.
    expect(types).toEqual([
      'CampaignCancellationRequested',
      'CampaignCancelled',
      'CampaignResumed',
      'CampaignPaused',
      'CampaignCreated',
      'CampaignScheduled',
    ]);
    // The commands were grouped under their actor, shown by the key's name (the default 'operator key')
    // with its id on hover.
    const actorName = timeline.getByTestId('timeline-actor').first().getByTestId('actor-name');
    await actorName.getByText('operator key').waitFor();
    expect(await actorName.getAttribute('title')).toBe(actor);

    // What the page showed is what the history holds.
    const history = await ui.dashboard.request('GET', `/v1/campaigns/${id}/history`, { key });
    expect(history.status).toBe(200);
    const events = (history.body.events as { type: string; data: { reason?: string } }[]).map((e) => [
      e.type,
      e.data.reason ?? null,
    ]);
    expect(events).toEqual(
      expect.arrayContaining([
        ['CampaignPaused', 'holiday freeze'],
        ['CampaignResumed', 'freeze lifted'],
        ['CampaignCancellationRequested', 'client withdrew the offer'],
      ]),
    );

    // The list: found by its id, and under the cancelled filter.
    await p.goto('/campaigns');
    await p.page.getByLabel('Search campaigns').fill(id);
    await p.page.getByTestId('campaigns').locator(`[data-row-key="${id}"]`).waitFor();
    await p.page.getByLabel('Search campaigns').fill('');
    await p.page.getByLabel('Status').selectOption('SCHEDULED');
    await p.page.getByText('No campaign matches.').waitFor();
    await p.page.getByLabel('Status').selectOption('CANCELLED');
    await p.page.getByTestId('campaigns').locator(`[data-row-key="${id}"]`).waitFor();
  });

  it("a sent campaign's timeline follows the command to its message, the broker confirm and the consumer", async () => {
    const key = await ui.dashboard.key(ORG, 'operator');
    await ui.dashboard.lineChannel(ORG, 'oa-flash');
    await ui.dashboard.lineAudience(ORG, 'aud-vip', 3);
    const created = await ui.dashboard.request('POST', '/v1/campaigns', {
      key,
      body: lineCampaign('Flash deal — multicast', {
        lineOaId: 'oa-flash',
        castType: 'multicast',
        audienceId: 'aud-vip',
      }),
    });
    expect(created.status, created.text).toBe(201);
    const id = created.body.campaignId as string;
    const activated = await ui.dashboard.request('POST', `/v1/campaigns/${id}/activate`, { key });
    expect(activated.status, activated.text).toBe(200);

    const p = await ui.page();
    await p.signIn(key);
    await p.goto(`/campaigns/${id}`);
    // Live: the scanner claims it, the relay publishes, the worker delivers — no reload.
    await waitFor(async () => (await statusOf(p)) === 'COMPLETED', {
      what: 'the campaign COMPLETED on the page',
      timeoutMs: 45_000,
    });
    const message = p.page.getByTestId('timeline-message').first();
    await message.getByText('confirmed').waitFor({ timeout: 20_000 });
    await message.getByText('line-delivery').waitFor({ timeout: 20_000 });
    const text = await message.textContent();
    expect(text).toMatch(/message\s*[0-9a-f]{8} → amqp:line_multicast_rich_message\s*sent/);
    expect(text).toMatch(/broker\s*confirmed/);
    expect(text).toMatch(/consumer\s*line-delivery/);
    // The chain around it: the key's activation, the scanner's claim, the completion.
    const event = (type: string) => p.page.locator(`[data-testid="timeline-event"][data-type="${type}"]`);
    await expect.poll(() => event('CampaignActivated').textContent()).toMatch(/by operator key \(operator\)/);
    await event('CampaignClaimed').waitFor();
    await event('CampaignCompleted').waitFor();
  });
});

describe('an SMS timeline in the browser', () => {
  it('six recipients: repeated recipient events fold into one group per type, an event shows two messages until asked', async () => {
    const key = await ui.dashboard.key(ORG, 'operator');
    await new PostgresLedger(ui.dashboard.t.db).credit({ organizationId: ORG, key: 'top-up', amount: '100' });
    const names = ['Amina', 'Rahim', 'Nusrat', 'Karim', 'Sadia', 'Tanvir'];
    const created = await ui.dashboard.request('POST', '/v1/campaigns', {
      key,
      body: {
        channel: 'sms',
        ...inlineRequest({
          name: 'Six recipients',
          messageType: 'TRANSACTIONAL',
          campaignId: undefined,
          recipients: names.map((name, i) => ({
            msisdn: `0171234560${i}`,
            tags: { name, balance: `${100 + i}.00` },
          })),
        }),
      },
    });
    expect(created.status, created.text).toBe(201);
    const id = created.body.campaignId as string;
    const p = await ui.page();
    await p.signIn(key);
    await p.goto(`/campaigns/${id}`);
    // The simulated network rejects every message: each report rolled up, each failure refunded.
    await waitFor(async () => (await statusOf(p)) === 'FAILED', {
      what: 'FAILED on the page',
      timeoutMs: 60_000,
    });
    const { rows } = await ui.dashboard.t.db.query<{ type: string; n: number }>(
      `select type, count(*)::int as n from event where stream_id = $1 group by type`,
      [id],
    );
    const recorded = Object.fromEntries(rows.map((r) => [r.type, r.n]));
    await p.page.reload();
    const timeline = p.page.getByTestId('timeline');
    await timeline.locator('[data-testid="timeline-event"][data-type="CampaignFailed"]').waitFor();
    // No event shows more than two messages until asked.
    for (const event of await timeline.locator('[data-testid="timeline-event"]').all()) {
      expect(await event.getByTestId('timeline-message').count()).toBeLessThanOrEqual(2);
    }
    // Each recipient event type recorded more than once by commands of its own is one group, saying how many.
    for (const type of ['CampaignDeliveryReported', 'CampaignRecipientsRefunded']) {
      const bundles = timeline.locator(`[data-testid="timeline-bundle"][data-type="${type}"]`);
      expect(await bundles.count(), type).toBeLessThanOrEqual(1);
      if ((await bundles.count()) === 1) {
        // A run of consecutive commands of the type is one bundle (an event of another kind between
        // two runs, e.g. the failure after the last report, leaves the later one outside it).
        const head = (await bundles.textContent()) ?? '';
        const n = Number(/× (\d+) in/.exec(head)?.[1]);
        expect(n, head).toBeGreaterThanOrEqual(2);
        expect(n, head).toBeLessThanOrEqual(recorded[type]!);
        expect(await bundles.getByTestId('timeline-event').count()).toBe(0);
        await bundles.getByRole('button', { name: `Show all ${n}` }).click();
        expect(await bundles.getByTestId('timeline-event').count()).toBe(n);
        await bundles.getByRole('button', { name: 'Hide them' }).click();
      }
    }
    // Dispatch messages beyond the second behind a button that shows them.
    const dispatched = timeline.locator(
      '[data-testid="timeline-event"][data-type="CampaignRecipientsDispatched"]',
    );
    const more = dispatched.getByRole('button', { name: /^Show \d+ more messages?$/ });
    if ((await more.count()) > 0) {
      await more.first().click();
      expect(await dispatched.first().getByTestId('timeline-message').count()).toBeGreaterThan(2);
    }
    // The whole page stays short: it was 4,000 px for six recipients.
    const box = await timeline.boundingBox();
    expect(box!.height).toBeLessThan(2_000);
  });
});

describe('resend in the browser', () => {
  it('a failed SMS campaign: the resend preview shows the recipients and the charge, the confirmed resend reopens it', async () => {
    const key = await ui.dashboard.key(ORG, 'operator');
    await new PostgresLedger(ui.dashboard.t.db).credit({ organizationId: ORG, key: 'top-up', amount: '100' });
    const created = await ui.dashboard.request('POST', '/v1/campaigns', {
      key,
      body: {
        channel: 'sms',
        ...inlineRequest({ name: 'OTP notice', messageType: 'TRANSACTIONAL', campaignId: undefined }),
      },
    });
    expect(created.status, created.text).toBe(201);
    const id = created.body.campaignId as string;
    const p = await ui.page();
    await p.signIn(key);
    await p.goto(`/campaigns/${id}`);
    // The simulated network rejects every message: the campaign fails, its recipients are refunded.
    await waitFor(async () => (await statusOf(p)) === 'FAILED', {
      what: 'FAILED on the page',
      timeoutMs: 60_000,
    });
    await p.page.getByRole('button', { name: 'Resend failed', exact: true }).click();
    const dialog = p.page.getByRole('dialog');
    const preview = dialog.getByTestId('resend-preview');
    await preview.waitFor();
    expect(await preview.textContent()).toMatch(/3 failed/);
    await dialog.getByLabel('Reason').fill('operator fixed the sender id');
    await dialog.getByRole('button', { name: /^Resend 3 for / }).click();
    await dialog.waitFor({ state: 'detached' });
    await waitFor(async () => (await statusOf(p)) !== 'FAILED', { what: 'the campaign reopened' });
    const history = await ui.dashboard.request('GET', `/v1/campaigns/${id}/history`, { key });
    const resend = (history.body.events as { type: string; data: { reason?: string } }[]).find(
      (e) => e.type === 'CampaignResendRequested',
    );
    expect(resend?.data.reason).toBe('operator fixed the sender id');
  });
});
