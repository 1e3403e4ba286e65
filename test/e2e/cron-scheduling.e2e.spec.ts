/**
 * Cron scheduling end to end (fixed seed queue `cron_events`, so serial): a failing, slow job beside a
 * healthy one never delays the healthy job's runs (seed 004's single consumer let a healthy job fall
 * 20 s behind); the overlap policies `skip` and `buffer-one` against a run that outlasts its period;
 * and two replicas (scanner + worker each, their own pools and pods) where deleting a job through one
 * and pausing another through the other stops exactly those jobs, on both, while a third keeps firing.
 * Times come from the database clock; the few seconds each test waits stand for the minutes of
 * production they model (a 1 s period instead of a minute).
 */
import amqp from 'amqplib';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { declareQueues } from '../../src/adapters/amqp/amqp-connection.js';
import type { CronService } from '../../src/aggregates/cron/service.js';
import { CRON_EVENTS_QUEUE } from '../../src/aggregates/cron/topology.js';
import type { ExistingJobRun } from '../../src/domain/job-run.js';
import { waitFor } from '../../src/testing/wait.js';
import { cronService, dbNowMs, startHttpServer, type TestHttpServer } from '../support/cron.js';
import { type RunningRoles, startRoles } from '../support/roles.js';
import { createTestDatabase, requireEnv, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
let http: TestHttpServer;
let connection: amqp.ChannelModel;
let channel: amqp.Channel;
const running: RunningRoles[] = [];
let cron: CronService;

const settings = {
  HERALD_RELAY_IDLE_POLL_MS: '200',
  HERALD_CONSUMER_RETRY_DELAY_MS: '200',
  HERALD_SCANNER_POLL_MS: '500',
  HERALD_CRON_ALLOW_PRIVATE_TARGETS: 'true',
};

beforeAll(async () => {
  connection = await amqp.connect(requireEnv('AMQP_URL'));
  connection.on('error', () => {});
  channel = await connection.createChannel();
  channel.on('error', () => {});
  await declareQueues(channel, [CRON_EVENTS_QUEUE], 'quorum');
  http = await startHttpServer();
});
afterAll(async () => {
  await http?.close();
  await connection?.close();
});
beforeEach(async () => {
  t = await createTestDatabase();
  await channel.purgeQueue(CRON_EVENTS_QUEUE);
  cron = cronService(t.db);
});
afterEach(async () => {
  while (running.length) await running.pop()!.stop();
  await t?.drop();
});

function start(roles: Parameters<typeof startRoles>[1], overrides: Record<string, string> = {}) {
  running.push(startRoles(t.config({ ...settings, ...overrides }), roles));
}

const until = (ms: number) =>
  waitFor(async () => (await dbNowMs(t.db)) >= ms, { timeoutMs: 40_000, what: 'the database clock' });

function job(name: string, schedule: string, path: string, extra: Record<string, unknown> = {}) {
  return cron.create({
    organizationId: 'org-1',
    name,
    schedule,
    timezone: 'UTC',
    jobType: 'ping',
    payload: { url: `${http.url}${path}` },
    ...extra,
  });
}

const lateness = (run: ExistingJobRun) => Date.parse(run.startedAt!) - Date.parse(run.scheduledFor);

describe('cron scheduling', () => {
  it('a job failing by timeout every 5 s never delays a healthy job: its runs start on time', async () => {
    http.respond('/slow', { delayMs: 1_500 });
    start({ relay: true, scanner: true, worker: true });
    const failing = await job('failing', '*/5 * * * * *', '/slow', {
      timeoutMs: 1_000,
      retry: { maxRetries: 3, delayMs: 300, maxDelayMs: 300 },
    });
    const healthy = await job('healthy', '* * * * * *', '/healthy');
    const from = await dbNowMs(t.db);
    await until(from + 9_000); // 9 occurrences of the healthy job, two of the failing one and their retries
    const runs = (await cron.runsOf(healthy.jobId, { to: new Date(from + 8_000) })).filter(
      (r) => Date.parse(r.scheduledFor) > from,
    );
    await waitFor(
      async () =>
        (await Promise.all(runs.map((r) => cron.run(r.runId)))).every((r) => r.status === 'completed'),
      {
        what: 'the healthy runs to complete',
      },
    );
    const done = await Promise.all(runs.map((r) => cron.run(r.runId)));
    expect(done.length).toBeGreaterThanOrEqual(7);
    const late = done.map(lateness);
    // On time: each healthy run started within its 1 s period (typically tens of ms), whatever the
    // failing job did; cronflow's single consumer let a healthy job fall 20 s behind.
    expect(Math.max(...late)).toBeLessThan(1_000);
    const failed = await cron.runsOf(failing.jobId);
    expect(failed.some((r) => r.attempts > 1 || r.status === 'retry_scheduled')).toBe(true);
    expect(failed.every((r) => r.error === null || /timed out after 1000 ms/.test(r.error))).toBe(true);
  });

  it('overlap: skip records the occurrences a long run overlaps; buffer-one runs one right after', async () => {
    http.respond('/long', { delayMs: 2_200 });
    start({ relay: true, scanner: true, worker: true });
    const skip = await job('skip', '* * * * * *', '/long', { overlap: 'skip' });
    const buffer = await job('buffer', '* * * * * *', '/long', { overlap: 'buffer-one' });
    const from = await dbNowMs(t.db);
    await until(from + 5_500);
    await cron.pause(skip.jobId, 'test over', 'test');
    await cron.pause(buffer.jobId, 'test over', 'test');
    const settled = async (jobId: string) =>
      waitFor(
        async () => {
          const runs = await cron.runsOf(jobId);
          return (
            runs.every((r) => !['queued', 'running', 'buffered', 'retry_scheduled'].includes(r.status)) &&
            runs
          );
        },
        { timeoutMs: 20_000, what: 'runs to settle' },
      );
    const skipped = await settled(skip.jobId);
    expect(skipped[0]!.fate).toBe('fired');
    // While the first (2.2 s) runs, the next occurrences are recorded as skipped, then one fires again.
    expect(skipped.slice(1, 3).map((r) => [r.fate, r.status])).toEqual([
      ['skipped-overlap', 'skipped'],
      ['skipped-overlap', 'skipped'],
    ]);
    expect(skipped.filter((r) => r.fate === 'fired').length).toBeGreaterThanOrEqual(2);
    for (const r of skipped.filter((r) => r.fate === 'fired')) expect(r.status).toBe('completed');

    const buffered = await settled(buffer.jobId);
    expect(buffered[0]!.fate).toBe('fired');
    expect(buffered[1]!.fate).toBe('buffered');
    expect(buffered[1]!.status).toBe('completed'); // it ran, after the first
    expect(Date.parse(buffered[1]!.startedAt!)).toBeGreaterThanOrEqual(
      Date.parse(buffered[0]!.finishedAt!) - 5,
    );
    expect(buffered[2]!.fate).toBe('skipped-overlap'); // one buffered at most
    const ledger = await cron.ledger(buffer.jobId);
    expect(ledger.slice(0, 3).map((e) => e.fate)).toEqual(['fired', 'buffered', 'skipped-overlap']);
  });

  it('deleting a job through one replica and pausing another through the other stops exactly those, everywhere', async () => {
    start({ relay: true });
    start({ scanner: true, worker: true }, { HERALD_POD: 'replica-1' });
    start({ scanner: true, worker: true }, { HERALD_POD: 'replica-2' });
    const replica1 = cronService(t.db);
    const other = await createTestDatabaseHandle();
    const replica2 = cronService(other);
    try {
      const a = await job('a', '* * * * * *', '/a');
      const b = await job('b', '* * * * * *', '/b');
      const c = await job('c', '* * * * * *', '/c');
      const from = await dbNowMs(t.db);
      await until(from + 3_000);
      const deleted = await replica1.delete(a.jobId, 'replica-1 operator');
      const paused = await replica2.pause(b.jobId, 'maintenance window', 'replica-2 operator');
      const stoppedAt = { a: Date.parse(deleted.updatedAt), b: Date.parse(paused.updatedAt) };
      await until(Math.max(stoppedAt.a, stoppedAt.b) + 3_000);
      const runsOf = async (jobId: string) => cron.runsOf(jobId);
      const [ra, rb, rc] = await Promise.all([runsOf(a.jobId), runsOf(b.jobId), runsOf(c.jobId)]);
      expect(ra.filter((r) => Date.parse(r.scheduledFor) > stoppedAt.a)).toEqual([]);
      expect(rb.filter((r) => Date.parse(r.scheduledFor) > stoppedAt.b)).toEqual([]);
      expect(
        rc.filter((r) => Date.parse(r.scheduledFor) > Math.max(stoppedAt.a, stoppedAt.b)).length,
      ).toBeGreaterThanOrEqual(2);
      expect(ra.length).toBeGreaterThanOrEqual(2);
      expect(rb.length).toBeGreaterThanOrEqual(2);
      // Both replicas do work: runs are materialized by both scanners' pods (job c keeps firing, so
      // on a loaded machine a scanner that started late still takes its share before the deadline).
      const pods = await waitFor(
        async () => {
          const { rows } = await t.db.query<{ pod: string }>(
            `select distinct meta->>'pod' as pod from event where type = 'CronOccurrencesMaterialized'`,
          );
          return rows.length === 2 ? rows.map((r) => r.pod).sort() : null;
        },
        { what: 'both replicas materializing occurrences' },
      );
      expect(pods).toEqual(['replica-1', 'replica-2']);
      expect((await cron.get(a.jobId)).status).toBe('deleted');
      expect((await cron.get(b.jobId)).status).toBe('paused');
      expect((await cron.get(b.jobId)).pausedBy).toBe('replica-2 operator');
    } finally {
      await other.close();
    }
  });
});

/** A second pool on the test database, as a second replica's service would have. */
async function createTestDatabaseHandle() {
  const { createDatabase } = await import('../../src/adapters/postgres/database.js');
  return createDatabase({ url: t.url, schema: t.schema, poolSize: 4, applicationName: 'replica-2' });
}
