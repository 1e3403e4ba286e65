/**
 * LINE campaigns in a real browser (ADR 0018, ADR 0021) against `herald api`, `herald scanner`, `herald
 * relay` and `herald worker` as child processes, delivering to the LINE test server (every request
 * checked against LINE's OpenAPI document): a multicast sent through it shows its content, official
 * account and audience, its chunks accepted and its recipients, and the x-line-request-id of each call —
 * the ids the test server answered; a scheduled campaign's text is edited in the form (a 422 shown at the
 * field it names), the edit is accepted, and the edited text is what the test server receives
 * when it is sent; an edit sent once the campaign was claimed is refused (409, shown with the form); a
 * campaign LINE refuses shows FAILED with LINE's reason and is resent from its page. The harness fails
 * each test on any console error, failed load or off-origin request not declared.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { LineAcceptedCall } from '../../src/aggregates/campaign/line/simulator/server.js';
import { waitFor } from '../../src/testing/wait.js';
import { type UiPage, useDashboard } from './support/browser.js';
import { CONTENT_ORIGIN, image, lineCampaign, RICH_MESSAGES, text } from './support/line.js';

const ui = useDashboard({
  roles: ['scanner', 'relay', 'worker'],
  env: {
    HERALD_SCANNER_POLL_MS: '200',
    HERALD_RELAY_IDLE_POLL_MS: '200',
  },
});

const ORG = 'org-line-ui';
const OA = 'oa-line-ui';
const CHANNEL = `channel-${OA}`;
let key: string;
/** Every call the LINE test server accepted, with the messages it received. */
const received: LineAcceptedCall[] = [];

beforeAll(async () => {
  key = await ui.dashboard.key(ORG, 'operator');
  await ui.dashboard.lineChannel(ORG, OA, { friends: 25 });
  await ui.dashboard.lineAudience(ORG, 'aud-members', 1_200);
  ui.dashboard.line.beforeRespond((call) => {
    received.push(call);
  });
});

const api = async (method: string, path: string, body?: unknown) => {
  const r = await ui.dashboard.request(method, path, { key, ...(body === undefined ? {} : { body }) });
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.text}`);
  return r.body;
};
const hours = (n: number) => new Date(Date.now() + n * 3_600_000).toISOString();

const statusOf = (p: UiPage) =>
  p.page.getByTestId('campaign-detail').locator('h1 [data-status]').getAttribute('data-status');

async function reachStatus(p: UiPage, status: string, timeoutMs = 45_000) {
  await waitFor(async () => (await statusOf(p)) === status, {
    what: `${status} on the page`,
    timeoutMs,
  }).catch((error: Error) => {
    throw new Error(`${error.message}\n${ui.dashboard.output()}`);
  });
}

const statValue = async (p: UiPage, testId: string) =>
  (await p.page.getByTestId(testId).locator('.stat-value').textContent())?.trim();

describe('a LINE campaign delivered through the LINE test server', () => {
  it('shows its content, official account, audience, chunks and recipients accepted, and the request id of each LINE call', async () => {
    const created = await api(
      'POST',
      '/v1/campaigns',
      lineCampaign('Members: spring sale', {
        lineOaId: OA,
        castType: 'multicast',
        audienceId: 'aud-members',
        messages: RICH_MESSAGES,
      }),
    );
    const id = created.campaignId as string;
    await api('POST', `/v1/campaigns/${id}/send-now`);

    const p = await ui.page();
    await p.serveImages(CONTENT_ORIGIN);
    await p.signIn(key);
    await p.goto(`/campaigns/${id}`);
    // Live: claimed, planned (1,200 users: three chunks of up to 500), each chunk sent and recorded.
    await reachStatus(p, 'COMPLETED');
    await waitFor(async () => (await statValue(p, 'line-chunks-accepted')) === '3', {
      what: 'three chunks accepted on the page',
    });
    expect(await statValue(p, 'line-chunks-planned')).toBe('3');
    expect(await statValue(p, 'line-chunks-failed')).toBe('0');
    expect(await statValue(p, 'line-chunks-unconfirmed')).toBe('0');
    expect(await statValue(p, 'line-recipients')).toBe('1,200 / 1,200');

    // Each call's x-line-request-id is the one the LINE test server answered, newest first.
    const answered = ui.dashboard.line
      .stats(CHANNEL)
      .requests.filter((r) => r.status === 200 && r.endpoint === 'multicast')
      .map((r) => r.requestId);
    expect(answered).toHaveLength(3);
    const calls = p.page.getByTestId('line-call');
    await waitFor(async () => (await calls.count()) === 3, { what: 'three LINE calls listed' });
    const shown = await calls.evaluateAll((rows) => rows.map((r) => r.getAttribute('data-request-id')));
    expect(shown).toEqual([...answered].reverse());
    expect(await calls.first().textContent()).toMatch(/#2.*200 users.*accepted/);
    expect(await calls.last().textContent()).toMatch(/#0.*500 users.*accepted/);
    expect(await p.page.getByTestId('line-last-request-id').textContent()).toBe(answered[2]);

    // The target as the LINE directory has it.
    const target = await p.page.getByTestId('line-target').textContent();
    expect(target).toContain(OA);
    expect(target).toContain(`channel ${CHANNEL}`);
    expect(target).toMatch(/multicast to audience aud-members.*1,200 members · sealed/);

    // The content, readable: the text as a bubble, the image's thumbnail (loaded), the others summed up.
    const messages = p.page.getByTestId('line-message');
    expect(await messages.count()).toBe(RICH_MESSAGES.length);
    expect(await messages.nth(0).locator('.line-bubble').textContent()).toContain('Spring sale starts now');
    const thumbnail = messages.nth(1).locator('img');
    await waitFor(
      // The server's tsconfig has no DOM types: the element is described by what is read of it.
      async () =>
        thumbnail.evaluate((img) => {
          const i = img as unknown as { complete: boolean; naturalWidth: number };
          return i.complete && i.naturalWidth > 0;
        }),
      {
        what: 'the image thumbnail loaded',
      },
    );
    expect(await thumbnail.getAttribute('src')).toBe(`${CONTENT_ORIGIN}/line/preview/spring-sale.jpg`);
    expect(await messages.nth(2).textContent()).toMatch(/buttons template.*Shop online.*Remind me/);
    expect(await messages.nth(3).textContent()).toMatch(/flex bubble.*Your coupon.*SPRING20/);
    expect(await messages.nth(4).textContent()).toMatch(/sticker 446 \/ 1988/);

    // A sent campaign is not editable: no Edit link.
    expect(await p.page.getByRole('link', { name: 'Edit', exact: true }).count()).toBe(0);

    // The list says what it sent and how far it got.
    await p.goto('/campaigns');
    const row = p.page.getByTestId('campaigns').locator(`[data-row-key="${id}"]`);
    await row.waitFor();
    const rowText = await row.textContent();
    expect(rowText).toContain(OA);
    expect(rowText).toContain('“Spring sale starts now');
    expect(rowText).toContain('1,200');
    expect(rowText).toContain('3/3 chunks');
    expect(ui.dashboard.line.violationCount).toBe(0);
  });
});

describe('editing a LINE campaign', () => {
  it('a scheduled campaign: a 422 shown at the field it names, then the edited text accepted and what LINE receives', async () => {
    const created = await api(
      'POST',
      '/v1/campaigns',
      lineCampaign('Weekend digest', {
        lineOaId: OA,
        messages: [text('Weekend digest: draft copy'), image('digest.jpg')],
        startAt: hours(3),
      }),
    );
    const id = created.campaignId as string;
    expect(created.status).toBe('SCHEDULED');
    expect(created.commands).toContain('edit');

    const p = await ui.page();
    await p.serveImages(CONTENT_ORIGIN);
    await p.signIn(key);
    await p.goto(`/campaigns/${id}`);
    await p.page.getByRole('link', { name: 'Edit', exact: true }).click();
    await p.page.getByTestId('campaign-edit-form').waitFor();
    const message = p.page.getByLabel('Message 1 · text');
    expect(await message.inputValue()).toBe('Weekend digest: draft copy');
    // The image is kept as it is (shown, not rewritten).
    expect(await p.page.getByTestId('edit-message').nth(1).getAttribute('data-kind')).toBe('image');

    // A multicast without an audience: the server's 422 names the field, shown at it.
    p.allowHttp({ path: `/v1/campaigns/${id}`, status: 422 });
    await p.page.getByLabel('Cast type').selectOption('multicast');
    await p.page.getByRole('button', { name: 'Save changes' }).click();
    const fieldError = p.page.getByTestId('field-error-audienceId');
    await fieldError.waitFor();
    expect(await fieldError.textContent()).toContain('a multicast needs an audience');
    expect(await p.page.getByTestId('edit-errors').textContent()).toContain('(422)');
    await p.page.getByLabel('Cast type').selectOption('broadcast');

    const edited = 'Weekend digest: 30% off jackets, Saturday only';
    await message.fill(edited);
    await p.page.getByLabel('Name').fill('Weekend digest (final)');
    await p.page.getByRole('button', { name: 'Save changes' }).click();
    // Accepted: back on the campaign, which shows the new content.
    await p.page.getByTestId('campaign-detail').waitFor();
    expect(p.page.url()).toMatch(new RegExp(`/ui/campaigns/${id}$`));
    await p.page.getByTestId('line-message').first().getByText(edited).waitFor();
    expect(await p.page.locator('h1').textContent()).toContain('Weekend digest (final)');
    const event = p.page.locator('[data-testid="timeline-event"][data-type="CampaignEdited"]');
    await event.waitFor();
    // The actor by its key's name (the default 'operator key') and role, once the dashboard looked it up.
    await expect
      .poll(() => event.textContent(), { timeout: 15_000 })
      .toMatch(/by operator key \(operator\)changed: name, messages/);
    const history = await api('GET', `/v1/campaigns/${id}/history`);
    const change = (history.events as { type: string; data: { changes: Record<string, unknown> } }[]).find(
      (e) => e.type === 'CampaignEdited',
    );
    expect(change?.data.changes).toEqual({
      name: 'Weekend digest (final)',
      messages: [text(edited), image('digest.jpg')],
    });

    // Sent: what the LINE test server receives is the edited content.
    await api('POST', `/v1/campaigns/${id}/send-now`);
    await reachStatus(p, 'COMPLETED');
    const call = await waitFor(
      () => received.find((c) => c.endpoint === 'broadcast' && c.channelId === CHANNEL),
      {
        what: 'the broadcast at the LINE test server',
      },
    );
    expect(call.messages).toEqual([text(edited), image('digest.jpg')]);
    expect(call.recipients).toBe(25);
  });

  it('an edit sent once the campaign was claimed is refused (409), shown with the form; nothing changes', async () => {
    const created = await api(
      'POST',
      '/v1/campaigns',
      lineCampaign('Flash sale', { lineOaId: OA, messages: [text('Flash sale at noon')], startAt: hours(5) }),
    );
    const id = created.campaignId as string;

    const p = await ui.page();
    await p.signIn(key);
    await p.goto(`/campaigns/${id}/edit`);
    const message = p.page.getByLabel('Message 1 · text');
    await message.waitFor();
    await message.fill('Flash sale moved to 3 pm');

    // Meanwhile it is sent: claimed, its content fixed. The open form learns it live.
    await api('POST', `/v1/campaigns/${id}/send-now`);
    await p.page.getByTestId('edit-not-offered').waitFor();

    p.allowHttp({ path: `/v1/campaigns/${id}`, status: 409 });
    await p.page.getByRole('button', { name: 'Save changes' }).click();
    const banner = p.page.getByTestId('edit-errors').getByRole('alert');
    await banner.waitFor();
    const refusal = await banner.textContent();
    expect(refusal).toContain('(409)');
    expect(refusal).toMatch(/cannot EditCampaign campaign .* in status (DISPATCHING|COMPLETED)/);
    // Still on the form, with what was typed.
    expect(await message.inputValue()).toBe('Flash sale moved to 3 pm');
    const after = await api('GET', `/v1/campaigns/${id}`);
    expect(after.line.messages).toEqual([text('Flash sale at noon')]);
    expect(after.commands).not.toContain('edit');
  });
});

describe('a LINE campaign LINE refuses', () => {
  it('shows FAILED with LINE’s reason and the refused call; resent from its page, it completes', async () => {
    const oa = 'oa-refused';
    await ui.dashboard.lineChannel(ORG, oa);
    ui.dashboard.line.behave(`channel-${oa}`, {
      kind: 'reject',
      status: 400,
      message: 'The property, messages[0].text, is invalid for this account',
      calls: 1,
    });
    const created = await api('POST', '/v1/campaigns', lineCampaign('Loyalty reminder', { lineOaId: oa }));
    const id = created.campaignId as string;
    await api('POST', `/v1/campaigns/${id}/send-now`);

    const p = await ui.page();
    await p.signIn(key);
    await p.goto(`/campaigns/${id}`);
    await reachStatus(p, 'FAILED');
    const failure = p.page.getByTestId('line-failure');
    await failure.waitFor();
    expect(await failure.textContent()).toContain('is invalid for this account');
    expect(await statValue(p, 'line-chunks-failed')).toBe('1');
    expect(await p.page.getByTestId('line-call').first().textContent()).toMatch(/rejected\s*400/);

    // The behaviour was for one call: a resend goes through under the same retry key.
    await p.page.getByRole('button', { name: 'Resend', exact: true }).click();
    const dialog = p.page.getByRole('dialog');
    await dialog.getByLabel('Reason').fill('LINE fixed the account');
    await dialog.getByRole('button', { name: 'Resend', exact: true }).click();
    await dialog.waitFor({ state: 'detached' });
    await reachStatus(p, 'COMPLETED');
    await waitFor(async () => (await statValue(p, 'line-chunks-accepted')) === '1', {
      what: 'the chunk accepted on the page',
    });
    const rows = p.page.getByTestId('line-call');
    await waitFor(async () => (await rows.count()) === 2, { what: 'the refused call and the accepted one' });
    expect(await rows.first().textContent()).toMatch(/accepted/);
  });
});
