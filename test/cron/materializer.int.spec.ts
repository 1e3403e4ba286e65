/**
 * The materializer in `herald scanner` on real PostgreSQL, over a job every 5 seconds and a 6-field job
 * every second: exactly one run per occurrence (none missing, none doubled), each with its outbox
 * message in the same transaction.
 *  - in process: three scanners stopped and restarted in between, checked against outbox and verify;
 *  - the soak: three `herald scanner` processes for HERALD_CRON_SOAK_SECONDS of database clock (30 in
 *    `npm test`; `npm run soak:cron` runs 600, `HERALD_CRON_SOAK_SECONDS=3600 npm run soak:cron` an
 *    hour), one of them killed with SIGKILL and restarted every ninth of it (a pod lost mid-pass), all
 *    three at once twice.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { CronService } from '../../src/aggregates/cron/service.js';
import { cronJobSweeper, jobRunSweeper } from '../../src/aggregates/cron/sweepers.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import { verifyStates } from '../../src/projections/verify.js';
import { Scanner } from '../../src/scanner/scanner.js';
import { waitFor } from '../../src/testing/wait.js';
import { heraldArgs } from '../support/cli.js';
import { cronService, dbNowMs } from '../support/cron.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

const SOAK_MS = Number(process.env.HERALD_CRON_SOAK_SECONDS ?? 30) * 1000;

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

function scanner() {
  const handler = new CommandHandler({ db: t.db });
  return new Scanner({
    sweepers: [
      cronJobSweeper({ db: t.db, handler, logger: silentLogger, batchSize: 50 }),
      jobRunSweeper({ db: t.db, handler, logger: silentLogger, batchSize: 50 }),
    ],
    pollIntervalMs: 200,
    logger: silentLogger,
  });
}

type CreatedJob = Awaited<ReturnType<CronService['create']>>;

/** Each job has one fired run per occurrence from its creation up to `end`, in order, none twice. */
async function expectEveryOccurrenceOnce(cron: CronService, jobs: CreatedJob[], end: number) {
  for (const job of jobs) {
    const runs = await cron.runsOf(job.jobId, { to: new Date(end) });
    const times = runs.map((r) => Date.parse(r.scheduledFor));
    expect(new Set(times).size, 'no occurrence doubled').toBe(times.length);
    const period = job.schedule === '* * * * * *' ? 1_000 : 5_000;
    const first = Math.ceil((Date.parse(job.createdAt) + 1) / period) * period;
    const expected = [];
    for (let at = first; at <= end; at += period) expected.push(at);
    expect(times, `${job.name}: every occurrence, in order`).toEqual(expected);
    expect(runs.every((r) => r.status === 'queued' && r.fate === 'fired' && r.claimEpoch === 1)).toBe(true);
  }
}

/** Two jobs the materializer keeps busy: every second (6 fields, Berlin) and every 5 seconds (UTC). */
async function createJobs(cron: CronService): Promise<CreatedJob[]> {
  const target = { url: 'http://127.0.0.1:9/never-called' };
  // allow: every occurrence fires (no executor runs here, so runs stay queued and would count as active).
  const common = { organizationId: 'org-1', jobType: 'ping', payload: target, overlap: 'allow' } as const;
  return [
    await cron.create({
      ...common,
      name: 'every second',
      schedule: '* * * * * *',
      timezone: 'Europe/Berlin',
    }),
    await cron.create({ ...common, name: 'every five seconds', schedule: '*/5 * * * * *', timezone: 'UTC' }),
  ];
}

/** Waits until the database clock reaches `ms` (epoch). */
function untilDbClock(ms: number) {
  return waitFor(async () => (await dbNowMs(t.db)) >= ms, { timeoutMs: 60_000, what: 'the database clock' });
}

/** Waits until both jobs' next occurrence lies after `end`: every occurrence up to it materialized. */
function caughtUp(cron: CronService, jobs: CreatedJob[], end: number) {
  return waitFor(
    async () => {
      for (const job of jobs) {
        const next = (await cron.get(job.jobId)).nextRunAt;
        if (next === null || Date.parse(next) <= end) return false;
      }
      return true;
    },
    { what: 'the scanners to catch up', timeoutMs: 60_000 },
  );
}

describe('cron materializer', () => {
  it('three scanners, stopped and restarted: one run per occurrence, none missing, none doubled', async () => {
    const cron = cronService(t.db);
    const jobs = await createJobs(cron);
    const started = await dbNowMs(t.db);
    let scanners = [scanner(), scanner(), scanner()];
    for (const s of scanners) s.start();
    // Stop two, let one run alone, then none; restart all three.
    await untilDbClock(started + 3_000);
    await Promise.all(scanners.slice(0, 2).map((s) => s.stop()));
    await untilDbClock(started + 5_000);
    await scanners[2]!.stop();
    await untilDbClock(started + 7_000); // nobody scans for 2 s: the occurrences wait, on time (grace 60 s)
    scanners = [scanner(), scanner(), scanner()];
    for (const s of scanners) s.start();
    await untilDbClock(started + 12_000);
    const end = await dbNowMs(t.db);
    await caughtUp(cron, jobs, end);
    await Promise.all(scanners.map((s) => s.stop()));

    await expectEveryOccurrenceOnce(cron, jobs, end);
    expect((await cron.runsOf(jobs[0]!.jobId)).length).toBeGreaterThanOrEqual(11);

    // One outbox message per run, to cron_events, with the run's claim.
    const { rows } = await t.db.query<{
      runs: number;
      messages: number;
      distinct_runs: number;
      destinations: string[];
    }>(
      `select (select count(*)::int from job_run) as runs,
              (select count(*)::int from outbox) as messages,
              (select count(distinct payload->>'runId')::int from outbox) as distinct_runs,
              (select array_agg(distinct destination) from outbox) as destinations`,
    );
    expect(rows[0]!.messages).toBe(rows[0]!.runs);
    expect(rows[0]!.distinct_runs).toBe(rows[0]!.runs);
    expect(rows[0]!.destinations).toEqual(['cron_events']);

    const report = await verifyStates(t.db, heraldRegistry);
    expect(report.drifts).toEqual([]);
    expect(report.streamTypes).toEqual(expect.arrayContaining(['cron_job', 'job_run']));
  });

  describe('the soak', () => {
    const children = new Set<ChildProcess>();
    afterEach(async () => {
      await Promise.all([...children].map(kill));
    });

    const spawnScanner = () => {
      const child = spawn(process.execPath, heraldArgs(['scanner']), {
        env: {
          ...process.env,
          DATABASE_URL: t.url,
          HERALD_SCHEMA: t.schema,
          HERALD_LOG_LEVEL: 'silent',
        },
        stdio: 'ignore',
      });
      children.add(child);
      return child;
    };
    const kill = async (child: ChildProcess) => {
      children.delete(child);
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    };

    it(
      `three scanner processes for ${SOAK_MS / 1000} s, one SIGKILLed and restarted every ${Math.round(SOAK_MS / 9000)} s: every occurrence once`,
      async () => {
        const cron = cronService(t.db);
        const jobs = await createJobs(cron);
        const started = await dbNowMs(t.db);
        const scanners = [spawnScanner(), spawnScanner(), spawnScanner()];
        for (let round = 1; round <= 8; round++) {
          await untilDbClock(started + (round * SOAK_MS) / 9);
          if (round === 3 || round === 6) {
            // All three lost at once: the occurrences wait for the next scanner, none is skipped.
            await Promise.all(scanners.map(kill));
            for (let i = 0; i < scanners.length; i++) scanners[i] = spawnScanner();
          } else {
            const victim = round % scanners.length;
            await kill(scanners[victim]!);
            scanners[victim] = spawnScanner();
          }
        }
        await untilDbClock(started + SOAK_MS);
        const end = await dbNowMs(t.db);
        await caughtUp(cron, jobs, end);
        await Promise.all(scanners.map(kill));

        await expectEveryOccurrenceOnce(cron, jobs, end);
        const { rows } = await t.db.query<{ runs: number; messages: number }>(
          'select (select count(*)::int from job_run) as runs, (select count(*)::int from outbox) as messages',
        );
        // A job every second and one every 5 s.
        expect(rows[0]!.runs).toBeGreaterThanOrEqual(Math.floor(SOAK_MS / 1000) + Math.floor(SOAK_MS / 5000));
        expect(rows[0]!.messages).toBe(rows[0]!.runs);
      },
      SOAK_MS + 120_000,
    );
  });
});
