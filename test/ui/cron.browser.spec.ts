/**
 * Cron jobs in a real browser (ADR 0018) against `herald api`, `herald scanner`, `herald relay` and
 * `herald worker` as child processes on the real services, the jobs' webhooks aimed at a real HTTP
 * server on loopback: a job created from the form (the expression checked as you type, the next fire
 * times previewed) runs and its runs appear without a reload; an occurrence skipped by the overlap
 * policy shows in the ledger; a failing target's run shows its retries and the error; a backfill is
 * previewed (dry run) and then confirmed, and its runs show in the ledger; pause asks for a reason; an
 * edit saves only what changed (a webhook's signing secret, never shown, stays); a viewer sees no
 * command buttons. The harness fails each test on any console error or failed load
 * not declared expected.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../src/testing/wait.js';
import { startHttpServer, type TestHttpServer } from '../support/cron.js';
import { useDashboard } from './support/browser.js';

let http: TestHttpServer;
beforeAll(async () => {
  http = await startHttpServer();
  http.respond('/slow', { status: 200, delayMs: 2_500, body: '{"ok":true,"slow":true}' });
  http.respond('/fail', { status: 500, body: 'upstream exploded' });
  http.respond('/ok', { status: 200, body: 'fine' });
});
afterAll(async () => {
  await http?.close();
});

const ui = useDashboard({
  roles: ['scanner', 'relay', 'worker'],
  env: {
    HERALD_CRON_ALLOW_PRIVATE_TARGETS: 'true',
    HERALD_SCANNER_POLL_MS: '200',
    HERALD_RELAY_IDLE_POLL_MS: '200',
    HERALD_CONSUMER_RETRY_DELAY_MS: '200',
  },
});

const ORG = 'org-cron-ui';

describe('cron jobs in the browser', () => {
  it('creates a job from the form; its runs arrive live, an overlap skip shows in the ledger; pause asks a reason', async () => {
    const key = await ui.dashboard.key(ORG, 'operator');
    const p = await ui.page();
    await p.signIn(key);
    await p.goto('/cron');
    await p.page.getByRole('link', { name: 'New job' }).click();
    await p.page.getByTestId('cron-job-form').waitFor();

    // As you type: a wrong expression is refused with the parser's message (the 422 is expected) …
    p.allowHttp({ path: '/v1/cron-jobs/preview', status: 422 });
    const expression = p.page.getByLabel('Cron expression');
    await expression.fill('61 * * * *');
    await expect(p.page.getByTestId('schedule-error').textContent()).resolves.toMatch(
      /expression: invalid cron expression '61 \* \* \* \*'/,
    );
    // … and a right one lists its next fire times in the job's zone.
    await p.page.getByLabel('Name').fill('every second, slow target');
    await expression.fill('* * * * * *');
    await p.page.getByLabel('Time zone').fill('UTC');
    // The preview of what was typed (the previous one stays, dimmed, while the debounce waits).
    const preview = p.page.locator('[data-testid="schedule-preview"]:not(.stale)');
    await waitFor(async () => (await preview.getByTestId('preview-occurrence').count()) === 6, {
      what: 'six previewed occurrences',
    });
    const times = (await preview.getByTestId('preview-occurrence').allTextContents()).map((t) =>
      t.slice(0, 25),
    );
    // Every second, in the job's zone (UTC here): consecutive seconds.
    for (const t of times) expect(t).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00$/);
    const instants = times.map((t) => Date.parse(t.replace(' ', 'T')));
    expect(instants.slice(1).map((at, i) => at - instants[i]!)).toEqual([1000, 1000, 1000, 1000, 1000]);

    await p.page.getByLabel('Type').selectOption('webhook');
    await p.page.getByLabel('URL').fill(`${http.url}/slow`);
    await p.page.getByLabel('JSON body').fill('{"report": "daily"}');
    await p.page.getByLabel('When the previous run is still active').selectOption('skip');
    await p.page.getByRole('button', { name: 'Create job', exact: true }).click();
    await p.page.getByTestId('cron-job-detail').waitFor();
    const jobId = p.page.url().split('/').at(-1)!;
    expect(jobId).toMatch(/^[0-9a-f-]{36}$/);
    const made = await ui.dashboard.request('GET', `/v1/cron-jobs/${jobId}`, { key });
    expect(made.body).toMatchObject({
      name: 'every second, slow target',
      schedule: '* * * * * *',
      timezone: 'UTC',
      jobType: 'webhook',
      overlap: 'skip',
      payload: { url: `${http.url}/slow`, method: 'POST', body: { report: 'daily' } },
    });

    // No reload from here on: runs and ledger cells arrive through the live stream.
    const runs = p.page.getByTestId('cron-runs');
    await runs.locator('[data-status="completed"]').first().waitFor({ timeout: 30_000 });
    await p.page.locator('.ledger-cell[data-fate="skipped-overlap"]').first().waitFor({ timeout: 30_000 });
    await p.page.locator('.ledger-cell[data-fate="fired"]').first().waitFor();
    const skippedTip = await p.page
      .locator('.ledger-cell[data-fate="skipped-overlap"]')
      .first()
      .getAttribute('title');
    expect(skippedTip).toMatch(/fate: skipped-overlap/);
    expect(http.to('/slow').length).toBeGreaterThan(0);
    expect(JSON.parse(http.to('/slow')[0]!.body)).toEqual({ report: 'daily' });

    // Pause asks for a reason; the job records it and the page shows it.
    await p.page.getByRole('button', { name: 'Pause', exact: true }).click();
    const dialog = p.page.getByRole('dialog');
    await expect(dialog.getByRole('button', { name: 'Pause', exact: true }).isDisabled()).resolves.toBe(true);
    await dialog.getByLabel('Reason').fill('target under maintenance');
    await dialog.getByRole('button', { name: 'Pause', exact: true }).click();
    await dialog.waitFor({ state: 'detached' });
    await p.page.getByText('“target under maintenance”').waitFor();
    const paused = await ui.dashboard.request('GET', `/v1/cron-jobs/${jobId}`, { key });
    expect(paused.body).toMatchObject({ status: 'paused', pausedReason: 'target under maintenance' });
    expect(paused.body.pausedBy).toMatch(/^api-key:/);
  });

  it("a failing target's run shows its retries and the error", async () => {
    const key = await ui.dashboard.key(ORG, 'operator');
    const created = await ui.dashboard.request('POST', '/v1/cron-jobs', {
      key,
      body: {
        name: 'failing hook',
        schedule: '0 3 * * *',
        timezone: 'Europe/Berlin',
        jobType: 'webhook',
        payload: { url: `${http.url}/fail` },
        retry: { maxRetries: 2, delayMs: 200, maxDelayMs: 400 },
        paused: true,
      },
    });
    expect(created.status, created.text).toBe(201);
    const jobId = created.body.jobId as string;
    const p = await ui.page();
    await p.signIn(key);
    await p.goto(`/cron/${jobId}`);
    await p.page.getByRole('button', { name: 'Trigger now', exact: true }).click();
    await p.page.getByRole('dialog').getByRole('button', { name: 'Trigger', exact: true }).click();
    await p.page.getByRole('dialog').waitFor({ state: 'detached' });

    const row = p.page.getByTestId('cron-runs').locator('tbody tr').first();
    await row.locator('[data-status="permanently_failed"]').waitFor({ timeout: 30_000 });
    expect(await row.textContent()).toContain('3/3');
    expect(await row.textContent()).toContain('500');
    expect(await row.locator('.error-text').textContent()).toMatch(/HTTP 500/);
    expect(http.to('/fail').length).toBeGreaterThanOrEqual(3);

    // The run in full: every attempt counted, the error and the target's answer.
    await row.click();
    const detail = p.page.getByTestId('run-detail');
    await detail.waitFor();
    expect(await detail.textContent()).toMatch(/attempt 3 of 3/);
    expect(await detail.textContent()).toMatch(/HTTP 500/);
    expect(await detail.textContent()).toContain('upstream exploded');
    // The ledger shows the manual run, marked failed.
    await p.page.locator('.ledger-cell.cell-failed[data-fate="manual"]').waitFor();
  });

  it('backfill: the dry-run preview lists the runs, the confirmed backfill creates exactly them', async () => {
    const key = await ui.dashboard.key(ORG, 'operator');
    const created = await ui.dashboard.request('POST', '/v1/cron-jobs', {
      key,
      body: {
        name: 'ten-minute sync',
        schedule: '*/10 * * * *',
        timezone: 'UTC',
        jobType: 'webhook',
        payload: { url: `${http.url}/ok` },
      },
    });
    expect(created.status, created.text).toBe(201);
    const jobId = created.body.jobId as string;
    const p = await ui.page();
    await p.signIn(key);
    await p.goto(`/cron/${jobId}`);
    await p.page.getByRole('button', { name: 'Backfill…', exact: true }).click();
    const dialog = p.page.getByRole('dialog');
    // Nothing can be confirmed before the preview.
    await expect(dialog.getByRole('button', { name: /^Backfill/ }).isDisabled()).resolves.toBe(true);
    await dialog.getByRole('button', { name: 'Preview (dry run)', exact: true }).click();
    const preview = dialog.getByTestId('backfill-preview');
    await preview.waitFor();
    const listed = await dialog.getByTestId('backfill-run').allTextContents();
    // The range is the last hour, both ends on whole minutes and both included: six ten-minute
    // occurrences, seven when the ends fall on a tenth minute, one fewer when the job fired one
    // (a mark passed while the test ran): those are skipped as already run. Ten minutes apart.
    expect(listed.length).toBeGreaterThanOrEqual(5);
    expect(listed.length).toBeLessThanOrEqual(7);
    const instants = listed.map((at) => Date.parse(`${at.replace(' ', 'T')}Z`));
    for (let i = 1; i < instants.length; i++)
      expect(instants[i]! - instants[i - 1]!).toBeGreaterThanOrEqual(600_000);
    for (const at of listed) expect(at).toMatch(/^\d{4}-\d\d-\d\d \d\d:[0-5]0:00$/);
    // A dry run writes nothing.
    const before = await ui.dashboard.request('GET', `/v1/cron-jobs/${jobId}/runs`, { key });
    expect((before.body.items as { trigger: string }[]).filter((r) => r.trigger === 'backfill')).toEqual([]);

    await dialog.getByRole('button', { name: `Backfill ${listed.length} run(s)` }).click();
    await dialog.waitFor({ state: 'detached' });
    await waitFor(
      async () => (await p.page.locator('.ledger-cell[data-fate="backfilled"]').count()) === listed.length,
      { what: 'the backfilled occurrences in the ledger', timeoutMs: 20_000 },
    );
    const after = await ui.dashboard.request('GET', `/v1/cron-jobs/${jobId}/runs`, { key });
    const backfilled = (after.body.items as { trigger: string; scheduledFor: string }[]).filter(
      (r) => r.trigger === 'backfill',
    );
    expect(backfilled.map((r) => r.scheduledFor.slice(0, 19).replace('T', ' '))).toEqual(listed);
    // … and they run against the target.
    await waitFor(async () => http.to('/ok').length >= listed.length, {
      what: 'the backfilled runs',
      timeoutMs: 30_000,
    });
  });

  it('edits a job: the preview follows the new expression, only what changed is saved, the signing secret stays', async () => {
    const key = await ui.dashboard.key(ORG, 'operator');
    const created = await ui.dashboard.request('POST', '/v1/cron-jobs', {
      key,
      body: {
        name: 'signed hook',
        schedule: '0 6 * * *',
        timezone: 'Asia/Tokyo',
        jobType: 'webhook',
        payload: { url: `${http.url}/ok`, body: { a: 1 }, signingSecret: 'a-very-long-signing-secret' },
      },
    });
    expect(created.status, created.text).toBe(201);
    const jobId = created.body.jobId as string;
    const p = await ui.page();
    await p.signIn(key);
    await p.goto(`/cron/${jobId}`);
    await p.page.getByRole('link', { name: 'Edit', exact: true }).click();
    await p.page.getByTestId('cron-job-form').waitFor();
    expect(await p.page.getByLabel('Cron expression').inputValue()).toBe('0 6 * * *');
    expect(await p.page.getByLabel('Time zone').inputValue()).toBe('Asia/Tokyo');
    await p.page.getByLabel('Name').fill('signed hook (twice a day)');
    await p.page.getByLabel('Cron expression').fill('0 6,18 * * *');
    const preview = p.page.locator('[data-testid="schedule-preview"]:not(.stale)');
    await waitFor(
      async () => {
        const times = await preview.getByTestId('preview-occurrence').allTextContents();
        return times.length === 6 && times.every((t) => /^\d{4}-\d\d-\d\d (06|18):00:00\+09:00/.test(t));
      },
      { what: 'the preview of 06:00 and 18:00 Tokyo time' },
    );
    await p.page.getByRole('button', { name: 'Save changes', exact: true }).click();
    await p.page.getByTestId('cron-job-detail').waitFor();
    const after = await ui.dashboard.request('GET', `/v1/cron-jobs/${jobId}`, { key });
    expect(after.body).toMatchObject({
      name: 'signed hook (twice a day)',
      schedule: '0 6,18 * * *',
      timezone: 'Asia/Tokyo',
      payload: { url: `${http.url}/ok`, body: { a: 1 } },
    });
    // The payload was not sent (unchanged), so the secret the page never saw is still there.
    const { rows } = await ui.dashboard.t.db.query<{ secret: string | null }>(
      "select payload->>'signingSecret' as secret from cron_job where id = $1",
      [jobId],
    );
    expect(rows[0]!.secret).toBe('a-very-long-signing-secret');
  });

  it('a viewer sees the job, its ledger and runs, and no command buttons', async () => {
    const operator = await ui.dashboard.key(ORG, 'operator');
    const made = await ui.dashboard.request('POST', '/v1/cron-jobs', {
      key: operator,
      body: {
        name: 'viewer visible',
        schedule: '0 4 * * *',
        timezone: 'UTC',
        jobType: 'webhook',
        payload: { url: `${http.url}/ok` },
        paused: true,
      },
    });
    expect(made.status, made.text).toBe(201);
    const job = made.body as { jobId: string };
    const run = await ui.dashboard.request('POST', `/v1/cron-jobs/${job.jobId}/trigger`, { key: operator });
    expect(run.status, run.text).toBe(201);
    const viewer = await ui.dashboard.key(ORG, 'viewer');
    const p = await ui.page();
    await p.signIn(viewer);
    await p.goto('/cron');
    await p.page.getByRole('link', { name: 'viewer visible' }).waitFor();
    expect(await p.page.getByRole('link', { name: 'New job' }).count()).toBe(0);
    await p.goto(`/cron/${job.jobId}`);
    await p.page.locator('.ledger-cell[data-fate="manual"]').first().waitFor();
    const commands = p.page
      .locator('main')
      .getByRole('button', { name: /^(trigger|pause|resume|backfill|delete)/i });
    expect(await commands.count()).toBe(0);
    expect(await p.page.getByRole('link', { name: 'Edit' }).count()).toBe(0);
  });
});
