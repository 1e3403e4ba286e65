/**
 * The campaign, recipient and cron pages with demo-like data, in a real browser against `herald api`
 * and the roles (ADR 0018), the way screenshots.browser.spec.ts does the other pages: each renders its
 * data with no console error (the harness fails the test on any), and with HERALD_UI_SCREENSHOTS=1
 * (`npm run ui:screenshots`) each is saved as docs/screenshots/<page>.png. The data is made as an
 * operator's would be: LINE campaigns paused, resumed and sent end to end through the dashboard's LINE
 * test server (a multicast with every kind of content, one LINE refuses), a scheduled one in the edit
 * form, SMS campaigns charged with
 * their recipients, CSV campaigns (rejected rows, an unreadable file, a build retried after a database
 * error, with its cancel dialog open), cron jobs whose webhooks hit a real HTTP server on loopback (a slow target so
 * occurrences are skipped for overlap, a failing one that retries, a pause, a backfill, a manual run).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { waitFor } from '../../src/testing/wait.js';
import { startHttpServer, type TestHttpServer } from '../support/cron.js';
import { inlineRequest } from '../support/sms.js';
import { type UiPage, useDashboard } from './support/browser.js';
import { CONTENT_ORIGIN, image, lineCampaign, RICH_MESSAGES, text } from './support/line.js';

const save = process.env.HERALD_UI_SCREENSHOTS === '1';
const dir = save ? undefined : mkdtempSync(join(tmpdir(), 'herald-screens-b-'));

const ui = useDashboard({
  roles: ['scanner', 'relay', 'worker'],
  env: {
    HERALD_SCANNER_POLL_MS: '300',
    HERALD_RELAY_IDLE_POLL_MS: '300',
    HERALD_CONSUMER_RETRY_DELAY_MS: '200',
    HERALD_CRON_ALLOW_PRIVATE_TARGETS: 'true',
  },
});

const ORG = 'org-demo';
let key: string;
let http: TestHttpServer;
const ids: {
  line?: string;
  refused?: string;
  scheduled?: string;
  sms?: string;
  sync?: string;
  csv?: string;
  csvFailed?: string;
  csvRetrying?: string;
} = {};

async function shoot(p: UiPage, name: string): Promise<void> {
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

/** A CSV campaign (multipart, as the dashboard's users upload them); its id. */
async function bulk(name: string, rows: string[]): Promise<string> {
  const form = new FormData();
  form.append(
    'meta',
    JSON.stringify({
      name,
      messageType: 'PROMOTIONAL',
      lang: 'bn',
      campaignId: 'BTRC-2030-014',
      templateType: 'GENERIC',
      template: 'শুভ নববর্ষ! আজই ৩০% ছাড়।',
      fileName: `${name.split(' ')[0]!.toLowerCase()}.csv`,
    }),
  );
  form.append('file', new Blob([`${rows.join('\n')}\n`], { type: 'text/csv' }), 'numbers.csv');
  const response = await fetch(`${ui.dashboard.url}/v1/campaigns/bulk`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body: form,
  });
  const text = await response.text();
  if (response.status !== 202) throw new Error(`POST /v1/campaigns/bulk: ${response.status} ${text}`);
  return JSON.parse(text).campaign.campaignId as string;
}

const line = (name: string, extra: Parameters<typeof lineCampaign>[1] = {}) =>
  lineCampaign(name, { lineOaId: 'oa-main', ...extra });
const hours = (n: number) => new Date(Date.now() + n * 3_600_000).toISOString();

beforeAll(async () => {
  http = await startHttpServer();
  http.respond('/inventory', { status: 200, delayMs: 4_000, body: '{"synced":1284,"skus":"ok"}' });
  http.respond('/crm', { status: 503, body: '{"error":"crm maintenance window"}' });
  http.respond('/digest', { status: 200, body: 'queued digest for 312 subscribers' });
  key = await ui.dashboard.key(ORG, 'admin');
  await ui.dashboard.lineChannel(ORG, 'oa-main', { friends: 40 });
  await ui.dashboard.lineChannel(ORG, 'oa-outlet');
  await ui.dashboard.lineAudience(ORG, 'aud-members', 1_200);
  await waitFor(async () => /queues declared/.test(ui.dashboard.roles.get('relay')!.output()), {
    what: 'the relay to declare its queues',
    timeoutMs: 60_000,
  });

  // LINE: a multicast with every kind of content scheduled, edited, paused and resumed with reasons,
  // then sent end to end in three chunks; others around it.
  const spring = await api(
    'POST',
    '/v1/campaigns',
    line('Spring sale: 20% off', {
      castType: 'multicast',
      audienceId: 'aud-members',
      messages: [text('Spring sale starts now.'), ...RICH_MESSAGES.slice(1)],
      startAt: hours(2),
    }),
  );
  ids.line = spring.campaignId;
  await api('PATCH', `/v1/campaigns/${spring.campaignId}`, { messages: RICH_MESSAGES });
  await api('POST', `/v1/campaigns/${spring.campaignId}/pause`, { reason: 'waiting for legal sign-off' });
  await api('POST', `/v1/campaigns/${spring.campaignId}/resume`, { reason: 'legal approved the copy' });
  await api('POST', `/v1/campaigns/${spring.campaignId}/send-now`);
  for (const name of ['Restock alert: trail shoes', 'Weekly digest #48']) {
    const c = await api('POST', '/v1/campaigns', line(name));
    await api('POST', `/v1/campaigns/${c.campaignId}/send-now`);
  }
  // LINE refuses the outlet account's call: FAILED with LINE's message.
  ui.dashboard.line.behave('channel-oa-outlet', {
    kind: 'reject',
    status: 400,
    message: 'The request body has 1 error(s)',
    details: [{ message: 'The image could not be downloaded', property: 'messages[1].originalContentUrl' }],
  });
  const refused = await api(
    'POST',
    '/v1/campaigns',
    line('Outlet clearance', {
      lineOaId: 'oa-outlet',
      messages: [text('Outlet clearance: up to 70% off'), image('outlet.jpg')],
    }),
  );
  ids.refused = refused.campaignId;
  await api('POST', `/v1/campaigns/${refused.campaignId}/send-now`);
  const scheduled = await api(
    'POST',
    '/v1/campaigns',
    line('Black Friday early access', {
      messages: [
        text('Black Friday starts early for our members: 24 hours of first picks.'),
        image('black-friday.jpg'),
        RICH_MESSAGES[2]!,
      ],
      startAt: hours(20),
    }),
  );
  ids.scheduled = scheduled.campaignId;
  const paused = await api('POST', '/v1/campaigns', line('Holiday gift guide', { startAt: hours(48) }));
  await api('POST', `/v1/campaigns/${paused.campaignId}/pause`, { reason: 'waiting for final prices' });
  const cancelled = await api('POST', '/v1/campaigns', line('Flash sale (duplicate)', { startAt: hours(6) }));
  await api('POST', `/v1/campaigns/${cancelled.campaignId}/cancel`, { reason: 'duplicate of Spring sale' });

  // SMS: charged campaigns with their recipients (one number in two of them).
  await new PostgresLedger(ui.dashboard.t.db).credit({ organizationId: ORG, key: 'top-up', amount: '5000' });
  // CSV campaigns built by the worker: one with rejected rows, one the parser cannot read, one whose
  // attempts fail (a trigger raises a real PostgreSQL error on its recipient inserts) and waits to retry.
  await ui.dashboard.t.db.query(`
    create function demo_disk_full() returns trigger language plpgsql as $$
    begin
      if exists (select 1 from campaign_upload u where u.campaign_id = new.campaign_id
                  and u.meta->>'name' = 'Loyalty members (CRM export)') then
        raise exception 'could not extend file "base/16384/24576": No space left on device' using errcode = '53100';
      end if;
      return new;
    end $$;
    create trigger demo_disk_full before insert on campaign_recipient
      for each row execute function demo_disk_full();`);
  ids.csv = await bulk('Pohela Boishakh (CSV)', [
    'msisdn',
    '01712345601',
    '01812345602',
    'n/a',
    '01912345603',
    '+8801712345601',
    '0171234',
    '01512345604',
    '+447911123456',
    '01612345605',
  ]);
  ids.csvFailed = await bulk('Ramadan greetings (CSV)', [
    'msisdn',
    '01712345611',
    '01812345612',
    '"01912345613',
    '01612345614',
  ]);
  ids.csvRetrying = await bulk('Loyalty members (CRM export)', ['msisdn', '01712345621', '01812345622']);
  const eid = await api('POST', '/v1/campaigns', {
    channel: 'sms',
    ...inlineRequest({ name: 'Eid offer — Dhaka' }),
  });
  ids.sms = eid.campaignId;
  await api('POST', '/v1/campaigns', {
    channel: 'sms',
    ...inlineRequest({
      name: 'Winter data bundle',
      recipients: [
        { msisdn: '01812345678', tags: { name: 'Rahim', balance: '80.00' } },
        { msisdn: '01556677889', tags: { name: 'Karim', balance: '42.75' } },
      ],
    }),
  });

  // Cron: a slow target (occurrences skipped for overlap), paused a while, a manual run, a backfill.
  const sync = await api('POST', '/v1/cron-jobs', {
    name: 'sync inventory',
    schedule: '*/3 * * * * *',
    timezone: 'Europe/Berlin',
    jobType: 'webhook',
    payload: { url: `${http.url}/inventory`, body: { warehouse: 'berlin-1' } },
    overlap: 'skip',
  });
  ids.sync = sync.jobId;
  const crm = await api('POST', '/v1/cron-jobs', {
    name: 'push orders to CRM',
    schedule: '*/15 * * * *',
    timezone: 'America/New_York',
    jobType: 'webhook',
    payload: { url: `${http.url}/crm` },
    retry: { maxRetries: 2, delayMs: 300, maxDelayMs: 600 },
  });
  await api('POST', '/v1/cron-jobs', {
    name: 'weekly digest',
    schedule: '0 9 * * 1',
    timezone: 'Asia/Dhaka',
    jobType: 'webhook',
    payload: { url: `${http.url}/digest` },
  });
  await api('POST', '/v1/cron-jobs', {
    name: 'nightly report',
    schedule: '30 2 * * *',
    timezone: 'Asia/Bangkok',
    jobType: 'ping',
    payload: { url: `${http.url}/digest` },
    paused: true,
  });
  const before = await api('GET', `/v1/cron-jobs/${sync.jobId}`);
  const runsOf = async (jobId: string) =>
    (await api('GET', `/v1/cron-jobs/${jobId}/ledger`)).entries as { fate: string; status: string }[];
  await waitFor(
    async () => (await runsOf(sync.jobId)).filter((e) => e.fate === 'skipped-overlap').length >= 2,
    {
      what: 'overlap skips',
      timeoutMs: 40_000,
    },
  );
  await api('POST', `/v1/cron-jobs/${sync.jobId}/pause`, { reason: 'warehouse stocktake' });
  // A pause that holds a few occurrences back (recorded as paused on resume).
  await waitFor(async () => (await runsOf(sync.jobId)).filter((e) => e.fate === 'paused').length >= 2, {
    what: 'occurrences held back by the pause',
    timeoutMs: 20_000,
  });
  await api('POST', `/v1/cron-jobs/${sync.jobId}/resume`);
  await api('POST', `/v1/cron-jobs/${sync.jobId}/trigger`);
  const created = Date.parse(before.createdAt);
  await api('POST', `/v1/cron-jobs/${sync.jobId}/backfill`, {
    from: new Date(created - 20_000).toISOString(),
    to: new Date(created - 1_000).toISOString(),
  });
  await api('POST', `/v1/cron-jobs/${crm.jobId}/trigger`);
  await waitFor(async () => (await runsOf(crm.jobId)).some((e) => e.status === 'permanently_failed'), {
    what: 'the CRM run to fail for good',
    timeoutMs: 30_000,
  });
  await waitFor(async () => (await runsOf(sync.jobId)).filter((e) => e.status === 'completed').length >= 4, {
    what: 'completed sync runs',
    timeoutMs: 40_000,
  });
  await waitFor(async () => (await api('GET', `/v1/campaigns/${ids.line}`)).status === 'COMPLETED', {
    what: 'the spring sale COMPLETED',
    timeoutMs: 60_000,
  });
  await waitFor(async () => (await api('GET', `/v1/campaigns/${ids.refused}`)).status === 'FAILED', {
    what: 'the outlet clearance FAILED',
    timeoutMs: 60_000,
  });
  const upload = (id: string) => api('GET', `/v1/campaigns/${id}/upload`);
  await waitFor(async () => (await upload(ids.csv!)).status === 'DONE', { what: 'the CSV built' });
  await waitFor(async () => (await upload(ids.csvFailed!)).status === 'FAILED', {
    what: 'the unreadable CSV failed',
  });
  await waitFor(async () => (await upload(ids.csvRetrying!)).error !== null, {
    what: "the CRM export's first attempt failed",
  });
}, 300_000);

afterAll(async () => {
  await http?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('campaign, recipient and cron pages with demo data', () => {
  it('campaigns, a LINE campaign, its edit form, a failed one, an SMS campaign, recipients', async () => {
    const p = await ui.page();
    await p.serveImages(CONTENT_ORIGIN);
    await p.signIn(key);
    await p.goto('/campaigns');
    await p.page.getByTestId('campaigns').locator('tbody tr[data-row-key]').nth(7).waitFor();
    await shoot(p, 'campaigns');

    await p.goto(`/campaigns/${ids.line}`);
    await p.page
      .getByTestId('timeline-message')
      .getByText('line-delivery')
      .first()
      .waitFor({ timeout: 20_000 });
    await p.page.getByTestId('line-call').nth(2).waitFor();
    await shoot(p, 'campaign-detail');

    await p.goto(`/campaigns/${ids.refused}`);
    await p.page.getByTestId('line-failure').waitFor();
    await shoot(p, 'campaign-detail-line-failed');

    await p.goto(`/campaigns/${ids.scheduled}`);
    await p.page.getByRole('link', { name: 'Edit', exact: true }).click();
    const message = p.page.getByLabel('Message 1 · text');
    await message.fill('Black Friday starts early for members: 24 hours of first picks, from 8 am.');
    await p.page.getByLabel('Name').fill('Black Friday early access (members)');
    await shoot(p, 'campaign-edit');

    await p.goto(`/campaigns/${ids.sms}`);
    await p.page.getByTestId('campaign-progress').waitFor();
    await shoot(p, 'campaign-detail-sms');

    await p.goto(`/campaigns/${ids.csv}`);
    await p.page.getByTestId('rejected-row').nth(3).waitFor();
    await shoot(p, 'campaign-detail-csv');

    await p.goto(`/campaigns/${ids.csvFailed}`);
    await p.page.getByTestId('upload-error').getByText('the CSV cannot be read').waitFor();
    await shoot(p, 'campaign-detail-csv-failed');

    await p.goto(`/campaigns/${ids.csvRetrying}`);
    await p.page.getByTestId('upload-error').getByText('build attempt 1 of 3 failed').waitFor();
    await p.page.locator('.page-header').getByRole('button', { name: 'Cancel campaign' }).click();
    await p.page.getByRole('dialog').getByLabel('Reason').fill('the CRM export will be sent again tomorrow');
    await shoot(p, 'campaign-detail-csv-retrying');
    await p.page.getByRole('dialog').getByRole('button', { name: 'Keep campaign' }).click();

    await p.goto('/recipients');
    await p.page.getByLabel('Phone number').fill('+880 1812-345678');
    await p.page.getByRole('button', { name: 'Search', exact: true }).click();
    await p.page.getByTestId('recipient-hits').locator('tbody tr[data-row-key]').nth(1).waitFor();
    await shoot(p, 'recipients');
  });

  it('cron jobs, a cron job with its ledger and runs, the form', async () => {
    const p = await ui.page();
    await p.signIn(key);
    await p.goto('/cron');
    await p.page.getByTestId('cron-jobs').getByText('permanently failed').waitFor();
    await shoot(p, 'cron-jobs');

    // Paused for the detail shot, so it stops changing under the camera.
    await api('POST', `/v1/cron-jobs/${ids.sync}/pause`, { reason: 'inventory count in progress' });
    await p.goto(`/cron/${ids.sync}`);
    await p.page.locator('.ledger-cell[data-fate="backfilled"]').first().waitFor();
    await p.page.getByRole('button', { name: '1 h', exact: true }).click();
    await p.page.locator('.ledger-cell[data-status="completed"]').first().click();
    await p.page.getByTestId('run-detail').waitFor();
    await shoot(p, 'cron-job-detail');

    await p.goto('/cron/new');
    await p.page.getByLabel('Name').fill('weekly digest (Americas)');
    await p.page.getByLabel('Cron expression').fill('0 9 * * 1');
    await p.page.getByLabel('Time zone').fill('America/New_York');
    await p.page.getByLabel('URL').fill('https://hooks.example.com/digest');
    await p.page.getByLabel('JSON body').fill('{"list": "americas", "template": "digest-v3"}');
    // The preview of what was typed (not the one still shown while the debounce waits).
    await p.page
      .locator('[data-testid="schedule-preview"]:not(.stale)')
      .getByText('Times in America/New_York')
      .waitFor();
    await waitFor(async () => (await p.page.getByTestId('preview-occurrence').count()) === 6, {
      what: 'the previewed occurrences',
    });
    await shoot(p, 'cron-job-form');
  });
});
