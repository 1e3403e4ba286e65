/**
 * The cron section of `npm run demo` (seed 004): on the demo's running relay, scanner and worker, a job
 * every 2 seconds pinging a local HTTP server, and a webhook to an endpoint that answers 503, triggered
 * once, going through its 3 retries to permanently_failed. Prints each run as it changes, then the
 * failing run's attempts and error, the heartbeat job's occurrence ledger and its upcoming fire times.
 * The targets are node:http servers this section starts on 127.0.0.1 (the demo's config allows
 * private targets). Returns whether everything ended as expected.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ExistingJobRun } from '../../domain/job-run.js';
import type { DemoContext, DemoStep } from '../../registry/demo.js';
import { CronService } from './service.js';
import type { CronConfig } from './settings.js';

const clock = (iso: string | null) => (iso ? iso.slice(11, 23) : '-');

/** The cron slice's demo step: its job targets are HTTP servers it starts on 127.0.0.1. */
export const cronDemo: DemoStep<CronConfig> = {
  env: { HERALD_CRON_ALLOW_PRIVATE_TARGETS: 'true' },
  run: runCronDemo,
};

async function runCronDemo({ runtime, config, out }: DemoContext<CronConfig>): Promise<boolean> {
  const server = createServer((req, res) => {
    const failing = req.url?.startsWith('/flaky');
    res.writeHead(failing ? 503 : 200, { 'content-type': 'text/plain' });
    res.end(failing ? 'upstream unavailable' : 'pong');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const cron = new CronService({
    db: runtime.db,
    handler: runtime.handler,
    settings: { defaultTimeoutMs: config.cron.defaultTimeoutMs, maxTimeoutMs: config.cron.maxTimeoutMs },
  });
  try {
    out();
    out(`cron jobs (seed 004): targets on ${base} (private targets allowed by the demo's configuration)`);
    const heartbeat = await cron.create(
      {
        organizationId: 'org-demo',
        name: 'heartbeat every 2 s',
        schedule: '*/2 * * * * *',
        timezone: 'Asia/Bangkok',
        jobType: 'ping',
        payload: { url: `${base}/health` },
        timeoutMs: 2_000,
      },
      { actor: 'demo' },
    );
    const flaky = await cron.create(
      {
        organizationId: 'org-demo',
        name: 'flaky webhook',
        schedule: '0 9 * * 1',
        timezone: 'Europe/Berlin',
        jobType: 'webhook',
        payload: { url: `${base}/flaky`, body: { report: 'weekly' }, signingSecret: 'demo-signing-secret' },
        retry: { maxRetries: 3, delayMs: 500, maxDelayMs: 1_000 },
        paused: true,
      },
      { actor: 'demo' },
    );
    out(
      `created "${heartbeat.name}" ('${heartbeat.schedule}' ${heartbeat.timezone}, next ${heartbeat.nextRunAt})`,
    );
    out(`created "${flaky.name}" (paused; its endpoint answers 503) and triggered it once`);
    const failing = await cron.trigger(flaky.jobId, 'demo', { actor: 'demo' });

    const seen = new Map<string, string>();
    const show = (run: ExistingJobRun, job: string) => {
      const line = `${run.status}/${run.attempts}`;
      if (seen.get(run.runId) === line) return;
      seen.set(run.runId, line);
      const result = run.responseStatus !== null ? ` HTTP ${run.responseStatus}` : '';
      const retry = run.status === 'retry_scheduled' ? ` retry at ${clock(run.nextAttemptAt)}` : '';
      out(
        `  [${clock(new Date().toISOString())}] ${job.padEnd(20)} ${clock(run.scheduledFor)} ${run.fate.padEnd(8)} ${run.status.padEnd(18)} attempt ${run.attempts}/${run.maxAttempts}${result}${retry}`,
      );
    };
    const deadline = Date.now() + 15_000;
    let completed = 0;
    let final: ExistingJobRun = failing;
    while (Date.now() < deadline) {
      const beats = await cron.runsOf(heartbeat.jobId);
      for (const run of beats) show(run, heartbeat.name);
      final = await cron.run(failing.runId);
      show(final, flaky.name);
      completed = beats.filter((r) => r.status === 'completed').length;
      if (completed >= 4 && final.status === 'permanently_failed') break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await cron.pause(heartbeat.jobId, 'demo over', 'demo', { actor: 'demo' });

    out();
    out(
      `"${flaky.name}": ${final.status} after ${final.attempts} attempts, last HTTP ${final.responseStatus}, error: ${final.error}`,
    );
    const attempts = (
      await runtime.db.query<{ type: string; at: string }>(
        `select type, coalesce(data->>'finishedAt', data->>'at') as at from event
          where stream_type = 'job_run' and stream_id = $1 order by version`,
        [failing.runId],
      )
    ).rows;
    out(`  its events: ${attempts.map((e) => `${e.type} ${clock(e.at)}`).join(', ')}`);
    out();
    out(`ledger of "${heartbeat.name}" (every occurrence and its fate):`);
    for (const e of await cron.ledger(heartbeat.jobId)) {
      out(`  ${e.scheduledFor}  ${e.fate.padEnd(8)} ${e.status.padEnd(10)} ${e.responseStatus ?? ''}`);
    }
    const upcoming = await cron.upcoming(heartbeat.jobId, 3);
    out(`upcoming once resumed: ${upcoming.map((o) => `${o.wall} ${heartbeat.timezone}`).join(', ')}`);
    const ok = completed >= 4 && final.status === 'permanently_failed' && final.attempts === 4;
    out(
      ok
        ? 'cron demo: runs completed on schedule, the failing run retried 3 times then gave up'
        : 'cron demo: did not finish as expected',
    );
    return ok;
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
