/**
 * The cron slice's registration (seed 004, ADR 0011, ADR 0020): `cron_job` (the schedule; its
 * materializer sweep in `herald scanner`, the cron_events queue its runs' messages go to) and
 * `job_run` (one run per occurrence and trigger, its claim fenced at the executors; its sweeps —
 * retries, buffer releases, cancellations, stale recovery — and the executors in `herald worker`),
 * with its settings, ports (the HTTP client and mailer the executors use), service, routes,
 * live-stream topic, CLI verb and demo.
 */
import { UndiciHttpClient } from '../../adapters/http/undici-http-client.js';
import { NodemailerMailer } from '../../adapters/smtp/nodemailer-mailer.js';
import type { HttpClient, Mailer } from '../../ports/job-executor.js';
import { defineModule } from '../../registry/module.js';
import { defineConsumer } from '../../worker/consumer-definition.js';
import { DEFAULT_HEARTBEAT_MS } from '../../worker/fenced-handler.js';
import { cronRoles } from './cli.js';
import { cronDemo } from './demo.js';
import { cronExecutor } from './executors.js';
import { cronJobAggregate } from './job-descriptor.js';
import { type CronServices, cronRoutes } from './routes.js';
import { jobRunAggregate } from './run-descriptor.js';
import { runExecutionHandler, runMessagePayload } from './run-execution.js';
import { CronService } from './service.js';
import { type CronConfig, cronSettings } from './settings.js';
import { cronJobSweeper, jobRunSweeper } from './sweepers.js';
import { CRON_EVENTS_QUEUE, CRON_EXECUTOR_CONSUMER } from './topology.js';

export const cronRegistration = defineModule({
  name: 'cron',
  aggregates: [cronJobAggregate, jobRunAggregate],
  settings: [cronSettings],
  ports: {
    http: ({ config }: { config: CronConfig }): HttpClient =>
      new UndiciHttpClient({
        allowPrivateTargets: config.cron.allowPrivateTargets,
        allowedHosts: config.cron.allowedHosts,
      }),
    /** Unset HERALD_SMTP_URL: email jobs fail permanently. */
    mailer: ({ config }: { config: CronConfig }): Mailer | undefined =>
      config.cron.smtpUrl ? new NodemailerMailer(config.cron.smtpUrl) : undefined,
  },
  topology: { amqpQueues: [CRON_EVENTS_QUEUE] },
  sweepers: ({ config, db, handler, logger, wakeups }) => [
    cronJobSweeper({ db, handler, logger, wakeups, batchSize: config.scanner.batchSize }),
    jobRunSweeper({
      db,
      handler,
      logger,
      wakeups,
      batchSize: config.scanner.batchSize,
      staleRunMs: config.cron.staleRunMs,
      messageLostAfterMs: config.scanner.messageLostAfterMs,
      maxReclaimsPerPass: config.scanner.maxReclaimsPerPass,
    }),
  ],
  consumers: ({ config, handler, logger, ports }) => [
    defineConsumer({
      consumer: CRON_EXECUTOR_CONSUMER,
      transport: 'amqp',
      sources: [CRON_EVENTS_QUEUE],
      parse: (payload) => runMessagePayload.parse(payload),
      handler: runExecutionHandler({
        handler,
        logger,
        executor: cronExecutor({
          http: ports.http,
          mailer: ports.mailer,
          mailFrom: config.cron.smtpFrom,
          outputMaxBytes: config.cron.outputMaxBytes,
        }),
        maxTimeoutMs: config.cron.maxTimeoutMs,
        // Refreshes the claim of a long job well within the stale-run window.
        heartbeatMs: Math.min(DEFAULT_HEARTBEAT_MS, Math.floor(config.cron.staleRunMs / 3)),
      }),
      prefetch: config.cron.executorConcurrency,
    }),
  ],
  service: ({ config, db, handler }): CronServices => ({
    cron: new CronService({
      db,
      handler,
      settings: {
        defaultTimeoutMs: config.cron.defaultTimeoutMs,
        maxTimeoutMs: config.cron.maxTimeoutMs,
        backfillMax: config.cron.backfillMax,
        quotas: config.cron.quotas,
      },
    }),
  }),
  api: {
    routes: cronRoutes,
    topics: { cron: [cronJobAggregate.streamType, jobRunAggregate.streamType] },
  },
  cli: cronRoles,
  demo: cronDemo,
});

// The slice's public surface (re-exported by the package's root entry).
export {
  CRON_JOB_OPERATIONS,
  type CronJobCommand,
  type CronJobEvent,
  type CronJobState,
  type ExistingCronJob,
  type JobType,
  type OverlapPolicy,
} from '../../domain/cron-job.js';
export type { ExistingJobRun, JobRunState, RunStatus } from '../../domain/job-run.js';
export type { HttpClient, Mailer } from '../../ports/job-executor.js';
export type { LedgerEntry } from './ledger.js';
export type { CronServices } from './routes.js';
export {
  type BackfillResult,
  CronService,
  type CronServiceDeps,
  type CronServiceSettings,
  type NewCronJob,
} from './service.js';
export { type CronConfig, type CronSettings, cronSettings } from './settings.js';
