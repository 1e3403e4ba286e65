/**
 * A CSV campaign's build on its page (issue 23, items 3 and 8), against `herald api` and `herald worker`
 * as child processes: a file the parser cannot read shows the build's failure with the parser's message
 * and line; a build whose attempts fail (a real PostgreSQL error a trigger raises on its recipient
 * inserts) shows the last attempt's error while it is retried and offers a cancel whose dialog names
 * both buttons ("Keep campaign" keeps it, "Cancel campaign" cancels it with nothing charged); rejected
 * rows are listed with their line, cell and reason; the list shows recipients as a count and a draft's
 * start as "not scheduled".
 */
import { describe, expect, it } from 'vitest';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { waitFor } from '../../src/testing/wait.js';
import { type UiPage, useDashboard } from './support/browser.js';
import { lineCampaign } from './support/line.js';

const ui = useDashboard({ roles: ['worker'], env: { HERALD_SMS_BUILD_MAX_ATTEMPTS: '3' } });

const ORG = 'org-campaign-build-ui';

const meta = (name: string) => ({
  name,
  messageType: 'PROMOTIONAL',
  lang: 'bn',
  campaignId: 'BTRC-2030-123',
  templateType: 'GENERIC',
  template: 'পহেলা বৈশাখে ৩০% ছাড়!',
  fileName: `${name.toLowerCase().replaceAll(' ', '-')}.csv`,
});

async function upload(key: string, name: string, csv: string): Promise<string> {
  const form = new FormData();
  form.append('meta', JSON.stringify(meta(name)));
  form.append('file', new Blob([csv], { type: 'text/csv' }), 'numbers.csv');
  const response = await fetch(`${ui.dashboard.url}/v1/campaigns/bulk`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body: form,
  });
  const text = await response.text();
  expect(response.status, text).toBe(202);
  return JSON.parse(text).campaign.campaignId as string;
}

const statusOf = (p: UiPage) =>
  p.page.getByTestId('campaign-detail').locator('h1 [data-status]').getAttribute('data-status');

async function uploadStatus(id: string): Promise<{ status: string; error: string | null; attempt: number }> {
  const { rows } = await ui.dashboard.t.db.query<{ status: string; error: string | null; attempt: number }>(
    'select status, error, attempt from campaign_upload where campaign_id = $1',
    [id],
  );
  return rows[0]!;
}

describe('a CSV build on the campaign page', () => {
  it('an unreadable file: the build failed with the parser message and line; nothing to cancel or resend', async () => {
    const key = await ui.dashboard.key(ORG, 'operator');
    const rows = Array.from({ length: 4 }, (_, i) => `0171234567${i}`).join('\n');
    const id = await upload(key, 'Broken quote', `msisdn\n${rows}\n"01712345678\n01812345678\n`);
    await waitFor(async () => (await uploadStatus(id)).status === 'FAILED' || undefined, {
      what: 'the worker failed the build',
    });

    const p = await ui.page();
    await p.signIn(key);
    await p.goto(`/campaigns/${id}`);
    const error = p.page.getByTestId('upload-error');
    await error.waitFor();
    const text = (await error.textContent()) ?? '';
    expect(text).toMatch(/^The build failed: the CSV cannot be read: .*line [67]\b/);
    expect(await statusOf(p)).toBe('FAILED');
    // Nothing to cancel (FAILED is final) and no failed recipient to resend: no command at all.
    expect(await p.page.locator('.page-header').getByRole('button').count()).toBe(0);
  });

  it('attempts failing for a transient reason: the last error shown while retried; "Keep campaign" keeps it, "Cancel campaign" cancels it, nothing charged', async () => {
    const db = ui.dashboard.t.db;
    // Every recipient insert of a campaign named in test_build_fault fails (disk full), as a real
    // PostgreSQL error: the worker's attempt fails and waits HERALD_SMS_BUILD_STALE_SECONDS to retry.
    await db.query(`
      create table test_build_fault (campaign_id uuid primary key);
      create function test_build_fault() returns trigger language plpgsql as $$
      begin
        if exists (select 1 from test_build_fault where campaign_id = new.campaign_id) then
          raise exception 'could not extend file: No space left on device' using errcode = '53100';
        end if;
        return new;
      end $$;
      create trigger test_build_fault before insert on campaign_recipient
        for each row execute function test_build_fault();
      create function test_build_fault_arm() returns trigger language plpgsql as $$
      begin
        if new.meta->>'name' = 'Disk full' then
          insert into test_build_fault values (new.campaign_id);
        end if;
        return new;
      end $$;
      create trigger test_build_fault_arm after insert on campaign_upload
        for each row execute function test_build_fault_arm();`);
    const key = await ui.dashboard.key(ORG, 'operator');
    const id = await upload(key, 'Disk full', 'msisdn\n01712345601\n01712345602\n');
    await waitFor(
      async () => (await uploadStatus(id)).error?.startsWith('build attempt 1 of 3 failed') || undefined,
      {
        what: 'the first attempt failed',
      },
    );

    const p = await ui.page();
    await p.signIn(key);
    await p.goto(`/campaigns/${id}`);
    const error = p.page.getByTestId('upload-error');
    await error.waitFor();
    expect(await error.textContent()).toMatch(
      /^The last build attempt failed: build attempt 1 of 3 failed: could not extend file: No space left on device; retried/,
    );
    expect(await statusOf(p)).toBe('BUILDING');

    // The page's red button and the dialog's two buttons each say what they do.
    const header = p.page.locator('.page-header');
    await header.getByRole('button', { name: 'Cancel campaign', exact: true }).click();
    const dialog = p.page.getByRole('dialog');
    expect(await dialog.getByRole('button').allTextContents()).toEqual(['Keep campaign', 'Cancel campaign']);
    expect(await dialog.textContent()).toContain('nothing was charged');
    await dialog.getByRole('button', { name: 'Keep campaign' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect(await statusOf(p)).toBe('BUILDING');

    await header.getByRole('button', { name: 'Cancel campaign', exact: true }).click();
    await dialog.getByLabel('Reason').fill('the disk will not be fixed today');
    await dialog.getByRole('button', { name: 'Cancel campaign', exact: true }).click();
    await dialog.waitFor({ state: 'detached' });
    await waitFor(async () => (await statusOf(p)) === 'CANCELLED', { what: 'CANCELLED on the page' });
    await waitFor(
      async () =>
        (await p.page.getByTestId('upload-error').textContent()) ===
          'The build was stopped: cancelled during its build: the disk will not be fixed today' || undefined,
      { what: 'the stopped build on the page' },
    );
    expect(await uploadStatus(id)).toMatchObject({ status: 'FAILED' });
    const { rows } = await db.query('select 1 from billing_entry where key = $1', [`campaign:${id}`]);
    expect(rows).toEqual([]);
  });

  it('rejected rows listed with line, cell and reason; the list shows recipients as a count and a draft as not scheduled', async () => {
    const key = await ui.dashboard.key(ORG, 'operator');
    await new PostgresLedger(ui.dashboard.t.db).credit({ organizationId: ORG, key: 'top-up', amount: '100' });
    const csv = ['msisdn', '01712345611', 'not-a-number', '01712345612', '+8801712345611', '0171'].join('\n');
    const id = await upload(key, 'Rejected rows', csv);
    await waitFor(async () => (await uploadStatus(id)).status === 'DONE' || undefined, { what: 'built' });
    // A LINE draft (no start) beside it in the list.
    await ui.dashboard.lineChannel(ORG, 'oa-build');
    const draft = await ui.dashboard.request('POST', '/v1/campaigns', {
      key,
      body: lineCampaign('Draft broadcast', { lineOaId: 'oa-build' }),
    });
    expect(draft.status, draft.text).toBe(201);
    expect(draft.body.status).toBe('DRAFT');

    const p = await ui.page();
    await p.signIn(key);
    await p.goto(`/campaigns/${id}`);
    await p.page.getByRole('link', { name: '3 rows rejected' }).click();
    const rejected = p.page.getByTestId('rejected-rows');
    await rejected.waitFor();
    expect(await rejected.locator('li').allTextContents()).toEqual([
      '2 not a valid number invalid-msisdn',
      '1 duplicate of an earlier row duplicate',
    ]);
    const cells = await rejected
      .getByTestId('rejected-row')
      .evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)));
    expect(cells).toEqual([
      ['3', 'not-a-number', 'not a valid number'],
      ['5', '+8801712345611', 'duplicate of an earlier row'],
      ['6', '0171', 'not a valid number'],
    ]);

    await p.goto('/campaigns');
    const table = p.page.getByTestId('campaigns');
    const cellOf = async (campaignId: string, column: number) =>
      (await table.locator(`[data-row-key="${campaignId}"] td`).nth(column).textContent())?.trim();
    await table.locator(`[data-row-key="${id}"]`).waitFor();
    const headers = await table.locator('th').allTextContents();
    const recipients = headers.indexOf('Recipients');
    const start = headers.indexOf('Start');
    expect(await cellOf(id, recipients)).toBe('2');
    expect(await cellOf(draft.body.campaignId, recipients)).toBe('—');
    expect(await cellOf(draft.body.campaignId, start)).toBe('not scheduled');
  });
});
