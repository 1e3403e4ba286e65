/**
 * The claim sweep's follow-up (src/scanner/sweeper.ts `followUp`, added for the cron materializer):
 * what it writes commits with the batch, and a follow-up that throws rolls the whole claim back — the
 * job's next occurrence is not advanced and no run exists (invariant 1). A sweep without a follow-up
 * behaves as before (the campaign sweeper's tests).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { materializeSweep } from '../../src/aggregates/cron/sweepers.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import { defineClaimSweeper } from '../../src/scanner/sweeper.js';
import { waitFor } from '../../src/testing/wait.js';
import { cronService, dbNowMs } from '../support/cron.js';
import { createTestDatabase, type TestDatabase } from '../support/services.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

describe('claim sweep follow-up', () => {
  it('commits with the batch, or rolls it back with it', async () => {
    const cron = cronService(t.db);
    const job = await cron.create({
      organizationId: 'org-1',
      name: 'every second',
      schedule: '* * * * * *',
      timezone: 'UTC',
      jobType: 'ping',
      payload: { url: 'https://example.com/' },
    });
    await waitFor(async () => (await dbNowMs(t.db)) >= Date.parse(job.nextRunAt!), {
      what: 'the first occurrence',
    });
    const deps = { db: t.db, handler: new CommandHandler({ db: t.db }), logger: silentLogger, batchSize: 10 };
    const definition = materializeSweep(deps);
    const failing = defineClaimSweeper(
      {
        ...definition,
        followUp: async (tx, results) => {
          await definition.followUp!(tx, results); // the runs are written…
          throw new Error('follow-up failed'); // …and rolled back with the job's event
        },
      },
      deps,
    );
    await expect(failing.sweep()).rejects.toThrow('follow-up failed');
    expect((await cron.get(job.jobId)).nextRunAt).toBe(job.nextRunAt);
    expect(await cron.runsOf(job.jobId)).toEqual([]);
    expect((await t.db.query<{ n: number }>('select count(*)::int as n from outbox')).rows[0]!.n).toBe(0);

    let signalled = 0;
    const counting = defineClaimSweeper(
      {
        ...definition,
        followUp: async (tx, results) => {
          const after = await definition.followUp!(tx, results);
          return () => {
            signalled++;
            after?.();
          };
        },
      },
      deps,
    );
    expect((await counting.sweep()).processed).toBe(1);
    expect(signalled).toBe(1); // after commit, once
    expect((await cron.runsOf(job.jobId)).length).toBeGreaterThanOrEqual(1);
    expect(Date.parse((await cron.get(job.jobId)).nextRunAt!)).toBeGreaterThan(Date.parse(job.nextRunAt!));
  });
});
