/**
 * `herald cron …` run as the real CLI (node + tsx, as `npm run herald`) against a test database:
 * create (and an unknown type refused, exit 1), list, show with the upcoming fire times, pause and
 * resume, trigger (a manual run), runs, ledger, and backfill with --dry-run writing nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { herald } from '../support/cli.js';
import { cronService } from '../support/cron.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

describe('herald cron', () => {
  it('create, list, show, pause, resume, trigger, runs, ledger and backfill --dry-run', async () => {
    const created = await herald(t, [
      'cron',
      'create',
      '--org',
      'org-cli',
      '--name',
      'nightly report',
      '--schedule',
      '30 2 * * *',
      '--tz',
      'America/New_York',
      '--type',
      'webhook',
      '--payload',
      '{"url":"https://example.com/hook","body":{"report":"nightly"}}',
      '--overlap',
      'skip',
      '--catch-up',
      'run-latest',
      '--json',
    ]);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    const job = JSON.parse(created.stdout) as { jobId: string; dst: unknown; catchUp: { mode: string } };
    expect(job.dst).toEqual({ ambiguous: 'first', missing: 'shift' });
    expect(job.catchUp.mode).toBe('run-latest');

    const refused = await herald(t, [
      'cron',
      'create',
      '--org',
      'org-cli',
      '--name',
      'fax',
      '--schedule',
      '* * * * *',
      '--type',
      'fax',
      '--payload',
      '{}',
    ]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/unknown job type 'fax'/);

    const [list, show] = await Promise.all([
      herald(t, ['cron', 'list', '--org', 'org-cli']),
      herald(t, ['cron', 'show', 'nightly report', '--org', 'org-cli']),
    ]);
    expect(list.stdout).toMatch(/nightly report {2}'30 2 \* \* \*' America\/New_York {2}webhook {2}active/);
    expect(list.stdout).toMatch(/1 job\(s\)/);
    expect(show.stdout).toMatch(/upcoming: .*02:30:00 America\/New_York/);

    const paused = await herald(t, [
      'cron',
      'pause',
      job.jobId,
      '--reason',
      'vendor outage',
      '--by',
      'alice',
    ]);
    expect(paused.stdout).toMatch(/paused by alice: vendor outage/);
    const [resumed, triggered] = [
      await herald(t, ['cron', 'resume', job.jobId]),
      await herald(t, ['cron', 'trigger', job.jobId, '--by', 'bob']),
    ];
    expect(resumed.stdout).toMatch(/resumed .* active/);
    expect(triggered.stdout).toMatch(/triggered .* manual +queued/);

    const [runs, ledger, preview, usage] = await Promise.all([
      herald(t, ['cron', 'runs', job.jobId]),
      herald(t, ['cron', 'ledger', job.jobId]),
      herald(t, [
        'cron',
        'backfill',
        job.jobId,
        '--from',
        '2026-01-01T00:00:00Z',
        '--to',
        '2026-01-03T23:00:00Z',
        '--dry-run',
      ]),
      herald(t, ['cron', 'backfill', job.jobId, '--typo']),
    ]);
    expect(runs.stdout).toMatch(/1 run\(s\) of nightly report/);
    expect(ledger.stdout).toMatch(/manual +queued +manual/);
    expect(preview.stdout).toMatch(/would create {2}2026-01-01T07:30:00.000Z/);
    expect(preview.stdout).toMatch(/3 run\(s\) would create, 0 skipped as already run/);
    expect(usage.code).toBe(2);
    expect((await cronService(t.db).runsOf(job.jobId)).length).toBe(1); // the dry run wrote nothing
  });
});
