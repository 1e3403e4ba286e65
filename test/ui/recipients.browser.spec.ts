/**
 * Recipient search in a real browser (ADR 0018) against `herald api` on the real services: a phone
 * number typed in another spelling than the one the campaigns were created with finds it in every
 * campaign of the organization (and in no other organization's), the hit opens its campaign; a number in
 * no campaign shows the empty state; a string that is no phone number is refused with the server's
 * problem. The harness fails each test on any console error or failed load not declared expected.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { inlineRequest } from '../support/sms.js';
import { useDashboard } from './support/browser.js';

const ui = useDashboard();
const ORG = 'org-recipients-ui';
let key: string;
const ids: Record<string, string> = {};

beforeAll(async () => {
  const ledger = new PostgresLedger(ui.dashboard.t.db);
  await ledger.credit({ organizationId: ORG, key: 'top-up', amount: '1000' });
  await ledger.credit({ organizationId: 'org-other', key: 'top-up', amount: '1000' });
  key = await ui.dashboard.key(ORG, 'operator');
  const other = await ui.dashboard.key('org-other', 'operator');
  const create = async (name: string, as: string) => {
    const r = await ui.dashboard.request('POST', '/v1/campaigns', {
      key: as,
      body: { channel: 'sms', ...inlineRequest({ name }) },
    });
    expect(r.status, r.text).toBe(201);
    return r.body.campaignId as string;
  };
  // inlineRequest's recipients: 01712345678, 8801812345678, +8801912345678.
  ids.eid = await create('Eid offer — Dhaka', key);
  ids.winter = await create('Winter bundle', key);
  ids.foreign = await create('Someone else’s campaign', other);
});

describe('recipient search', () => {
  it('finds a phone number in every campaign of the organization, in any spelling, and opens its campaign', async () => {
    const p = await ui.page();
    await p.signIn(key);
    await p.goto('/recipients');
    // Saved as 8801812345678; searched with the national spelling and separators.
    await p.page.getByLabel('Phone number').fill('018-1234 5678');
    await p.page.getByRole('button', { name: 'Search', exact: true }).click();
    const hits = p.page.getByTestId('recipient-hits');
    await hits.locator('tbody tr[data-row-key]').first().waitFor();
    await expect(hits.locator('tbody tr[data-row-key]').count()).resolves.toBe(2);
    const text = await hits.textContent();
    expect(text).toContain('Eid offer — Dhaka');
    expect(text).toContain('Winter bundle');
    expect(text).not.toContain('Someone else');
    expect(text).toContain('+8801812345678');
    expect(p.page.url()).toContain('msisdn=018-1234');

    await hits.getByRole('link', { name: 'Eid offer — Dhaka' }).click();
    await p.page.getByTestId('campaign-detail').waitFor();
    expect(p.page.url()).toContain(`/ui/campaigns/${ids.eid}`);
    await expect(p.page.getByTestId('campaign-progress').textContent()).resolves.toMatch(/Recipients3/);

    // Back to the search: the number is still in the URL and the box.
    await p.page.goBack();
    await hits.locator('tbody tr[data-row-key]').first().waitFor();
    await expect(p.page.getByLabel('Phone number').inputValue()).resolves.toBe('018-1234 5678');
  });

  it('a number in no campaign shows the empty state; a string that is no number is refused', async () => {
    const p = await ui.page();
    await p.signIn(key);
    await p.goto('/recipients?msisdn=%2B8801700000000');
    await p.page.getByText('No campaign has +8801700000000 as a recipient.').waitFor();

    p.allowHttp({ path: '/v1/recipients', status: 422 });
    await p.page.getByLabel('Phone number').fill('not-a-number');
    await p.page.getByRole('button', { name: 'Search', exact: true }).click();
    const alert = p.page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toMatch(/422/);
    expect(await alert.textContent()).toMatch(/msisdn/);
  });
});
