/**
 * Catch-up after downtime, the occurrence ledger, backfill with its dry run, and replay/verify of cron
 * streams through the registry, on real PostgreSQL. "Scanners down for N occurrences" is the database
 * clock running on while no sweep runs (five 1-second occurrences stand for five missed hours); then
 * one materializer pass decides them by each job's policy.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cronJobSweeper } from '../../src/aggregates/cron/sweepers.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import { replayStream } from '../../src/projections/replay.js';
import { verifyStates } from '../../src/projections/verify.js';
import { waitFor } from '../../src/testing/wait.js';
import { cronService, dbNowMs } from '../support/cron.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

// A database per test: a sweep takes every due job.
let t: TestDatabase;
beforeEach(async () => {
  t = await createTestDatabase();
});
afterEach(async () => t?.drop());

const until = (ms: number) =>
  waitFor(async () => (await dbNowMs(t.db)) >= ms, { what: 'the database clock' });
const sweeper = () =>
  cronJobSweeper({ db: t.db, handler: new CommandHandler({ db: t.db }), logger: silentLogger });
const target = { url: 'http://127.0.0.1:9/unused' };

async function counts() {
  const { rows } = await t.db.query<{ events: number; runs: number; outbox: number }>(
    `select (select count(*)::int from event) as events, (select count(*)::int from job_run) as runs,
            (select count(*)::int from outbox) as outbox`,
  );
  return rows[0]!;
}

describe('catch-up, ledger and backfill', () => {
  it('scanners down for 5 occurrences: each catch-up policy does what it says, the cap and window hold, the ledger shows the missed ones', async () => {
    const cron = cronService(t.db);
    const make = (name: string, catchUp: Record<string, unknown>) =>
      cron.create({
        organizationId: 'org-catch-up',
        name,
        schedule: '* * * * * *',
        timezone: 'Asia/Bangkok',
        jobType: 'ping',
        payload: target,
        overlap: 'allow',
        catchUp: { graceMs: 200, ...catchUp },
      });
    // Created early in one second, so all four get the same next occurrence (the second after it).
    await until(Math.ceil((await dbNowMs(t.db)) / 1000) * 1000 + 20);
    const skip = await make('skip-missed', { mode: 'skip-missed' });
    const latest = await make('run-latest', { mode: 'run-latest' });
    const all = await make('run-all cap 2', { mode: 'run-all', cap: 2 });
    const windowed = await make('run-all window 2.2 s', { mode: 'run-all', cap: 10, windowMs: 2_200 });
    const first = Date.parse(skip.nextRunAt!);
    for (const job of [latest, all, windowed]) expect(Date.parse(job.nextRunAt!)).toBe(first);
    // Five occurrences pass with no scanner; the sweep comes 0.45 s after the fifth (later than the grace).
    const fifth = first + 4_000;
    await until(fifth + 450);
    expect((await sweeper().sweep()).processed).toBe(4);

    const fates = async (jobId: string) =>
      (await cron.runsOf(jobId)).map((r) => [Date.parse(r.scheduledFor) - first, r.fate, r.spanCount]);
    expect(await fates(skip.jobId)).toEqual([[0, 'missed', 5]]);
    expect(await fates(latest.jobId)).toEqual([
      [0, 'missed', 4],
      [4_000, 'fired', null],
    ]);
    expect(await fates(all.jobId)).toEqual([
      [0, 'missed', 3],
      [3_000, 'fired', null],
      [4_000, 'fired', null],
    ]);
    // Older than the 2.2 s window: missed whatever the cap.
    expect(await fates(windowed.jobId)).toEqual([
      [0, 'missed', 3],
      [3_000, 'fired', null],
      [4_000, 'fired', null],
    ]);
    const [missed] = await cron.runsOf(windowed.jobId);
    expect(missed!.reason).toMatch(/catch-up window/);

    // The ledger lists every missed occurrence on its own.
    const ledger = await cron.ledger(latest.jobId, { to: new Date(fifth) });
    expect(ledger.map((e) => [Date.parse(e.scheduledFor) - first, e.fate])).toEqual([
      [0, 'missed'],
      [1_000, 'missed'],
      [2_000, 'missed'],
      [3_000, 'missed'],
      [4_000, 'fired'],
    ]);
    for (const job of [skip, latest, all, windowed]) {
      expect(Date.parse((await cron.get(job.jobId)).nextRunAt!)).toBe(fifth + 1_000);
    }

    // A backfill of the skipped stretch runs exactly the missed occurrences; the ledger shows both.
    const preview = await cron.backfill(skip.jobId, {
      from: new Date(first),
      to: new Date(fifth),
      dryRun: true,
      by: 'test',
    });
    expect(preview.runs.map((r) => Date.parse(r.scheduledFor) - first)).toEqual([
      0, 1_000, 2_000, 3_000, 4_000,
    ]);
    await cron.backfill(skip.jobId, { from: new Date(first), to: new Date(fifth), by: 'test' });
    const both = await cron.ledger(skip.jobId, { to: new Date(fifth) });
    expect(both.filter((e) => e.fate === 'missed')).toHaveLength(5);
    expect(both.filter((e) => e.fate === 'backfilled')).toHaveLength(5);

    const report = await verifyStates(t.db, heraldRegistry, { streamTypes: ['cron_job', 'job_run'] });
    expect(report.drifts).toEqual([]);
  });

  it('backfill: the dry run writes nothing, the real one creates exactly the previewed runs, a second identical one none', async () => {
    const cron = cronService(t.db);
    const job = await cron.create({
      organizationId: 'org-backfill',
      name: 'every second',
      schedule: '* * * * * *',
      timezone: 'UTC',
      jobType: 'webhook',
      payload: { url: 'http://127.0.0.1:9/unused', body: { report: 'daily' } },
      overlap: 'allow', // nothing executes here: each run stays queued (active)
    });
    const firstOccurrence = Date.parse(job.nextRunAt!);
    await until(firstOccurrence + 2_100);
    await sweeper().sweep(); // three occurrences ran on schedule (skip-missed, on time within the grace)
    const scheduled = (await cron.runsOf(job.jobId)).map((r) => Date.parse(r.scheduledFor));
    expect(scheduled).toEqual([firstOccurrence, firstOccurrence + 1_000, firstOccurrence + 2_000]);

    const range = {
      from: new Date(firstOccurrence - 5_000),
      to: new Date(firstOccurrence + 2_000),
      by: 'test',
    };
    const before = await counts();
    const preview = await cron.backfill(job.jobId, { ...range, dryRun: true });
    expect(await counts()).toEqual(before);
    expect(preview.dryRun).toBe(true);
    expect(preview.runs.map((r) => Date.parse(r.scheduledFor) - firstOccurrence)).toEqual([
      -5_000, -4_000, -3_000, -2_000, -1_000,
    ]);
    expect(preview.skipped.map((at) => Date.parse(at) - firstOccurrence)).toEqual([0, 1_000, 2_000]);

    const real = await cron.backfill(job.jobId, range);
    expect(real.runs).toEqual(preview.runs);
    expect(real.skipped).toEqual(preview.skipped);
    const created = (await cron.runsOf(job.jobId)).filter((r) => r.trigger === 'backfill');
    expect(created.map((r) => r.runId).sort()).toEqual(preview.runs.map((r) => r.runId).sort());
    expect(created.every((r) => r.status === 'queued' && r.fate === 'backfilled')).toBe(true);
    const after = await counts();
    expect(after.outbox - before.outbox).toBe(5); // one cron_events message per backfilled run

    const again = await cron.backfill(job.jobId, range);
    expect(again.runs).toEqual([]);
    expect(again.skipped).toHaveLength(8);
    expect((await counts()).runs).toBe(after.runs);

    // Replay covers the cron streams through the registry: history, causal chains, state.
    const replay = await replayStream(t.db, heraldRegistry, { streamType: 'cron_job', streamId: job.jobId });
    expect(replay.events.map((e) => e.type)).toEqual([
      'CronJobCreated',
      'CronOccurrencesMaterialized',
      'CronJobBackfilled',
      'CronJobBackfilled',
    ]);
    expect(replay.state).toMatchObject({ status: 'active', jobId: job.jobId });
    const run = await replayStream(t.db, heraldRegistry, {
      streamType: 'job_run',
      streamId: created[0]!.runId,
    });
    expect(run.events.map((e) => e.type)).toEqual(['JobRunCreated']);
    expect(run.commands[0]!.messages).toHaveLength(1);
    expect(
      (await verifyStates(t.db, heraldRegistry, { streamTypes: ['cron_job', 'job_run'] })).drifts,
    ).toEqual([]);
  });

  it('pause and resume: the occurrences held back are recorded as paused; the upcoming preview follows the schedule', async () => {
    const cron = cronService(t.db);
    const job = await cron.create({
      organizationId: 'org-pause',
      name: 'paused one',
      schedule: '* * * * * *',
      timezone: 'UTC',
      jobType: 'ping',
      payload: target,
    });
    const paused = await cron.pause(job.jobId, 'vendor outage', 'alice');
    expect(paused).toMatchObject({ status: 'paused', pausedReason: 'vendor outage', pausedBy: 'alice' });
    const held = Date.parse(job.nextRunAt!);
    await until(held + 2_300);
    expect((await sweeper().sweep()).processed).toBe(0); // a paused job is never due
    const whilePaused = await cron.ledger(job.jobId);
    expect(whilePaused.map((e) => [e.fate, e.runId])).toEqual([
      ['paused', null],
      ['paused', null],
      ['paused', null],
    ]);
    const resumed = await cron.resume(job.jobId, 'bob');
    expect(resumed.status).toBe('active');
    const [record] = await cron.runsOf(job.jobId);
    expect(record).toMatchObject({ fate: 'paused', status: 'paused', spanCount: 3 });
    expect((await cron.ledger(job.jobId, { to: new Date(held + 2_000) })).map((e) => e.fate)).toEqual([
      'paused',
      'paused',
      'paused',
    ]);
    const upcoming = await cron.upcoming(job.jobId, 3);
    expect(upcoming.map((o) => o.at - upcoming[0]!.at)).toEqual([0, 1_000, 2_000]);
    expect(upcoming[0]!.at).toBe(Date.parse(resumed.nextRunAt!));
  });

  it('a job of an unknown type, a bad expression or an unknown zone is refused when it is created', async () => {
    const cron = cronService(t.db);
    const base = {
      organizationId: 'org-x',
      name: 'bad',
      schedule: '* * * * *',
      timezone: 'UTC',
      payload: target,
    };
    await expect(cron.create({ ...base, jobType: 'fax' })).rejects.toThrow(/unknown job type 'fax'/);
    await expect(cron.create({ ...base, jobType: 'ping', schedule: '* * *' })).rejects.toThrow(
      /invalid cron expression/,
    );
    await expect(cron.create({ ...base, jobType: 'ping', timezone: 'Mars/Olympus' })).rejects.toThrow(
      /unknown time zone/,
    );
    await expect(cron.create({ ...base, jobType: 'ping', payload: { url: 'ftp://x' } })).rejects.toThrow(
      /http/,
    );
    expect((await cron.list({ organizationId: 'org-x' })).length).toBe(0);
  });
});
