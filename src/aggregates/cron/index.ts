/**
 * The cron aggregates' registrations (seed 004): `cron_job` (the schedule; its materializer sweep in
 * `herald scanner`, the cron_events queue its runs' messages go to) and `job_run` (one run per
 * occurrence and trigger; its sweeps — retries, buffer releases, cancellations, stale recovery — and
 * the executors in `herald worker`, with the side stream of their destination re-check's discards).
 */

import { UndiciHttpClient } from '../../adapters/http/undici-http-client.js';
import { NodemailerMailer } from '../../adapters/smtp/nodemailer-mailer.js';
import { defineAggregate, defineConsumer } from '../../eventstore/registry.js';
import { cronExecutor } from './executors.js';
import { cronJobAggregate } from './job-descriptor.js';
import { jobRunAggregate } from './run-descriptor.js';
import { runExecutionHandler, runMessagePayload } from './run-execution.js';
import { cronJobSweeper, jobRunSweeper } from './sweepers.js';
import { CRON_DELIVERY_STREAM_TYPE, CRON_EVENTS_QUEUE, CRON_EXECUTOR_CONSUMER } from './topology.js';

export const cronJobRegistration = defineAggregate({
  aggregate: cronJobAggregate,
  topology: { amqpQueues: [CRON_EVENTS_QUEUE] },
  sweepers: ({ config, db, handler, logger, wakeups }) => [
    cronJobSweeper({ db, handler, logger, wakeups, batchSize: config.scanner.batchSize }),
  ],
});

export const jobRunRegistration = defineAggregate({
  aggregate: jobRunAggregate,
  sideStreams: [
    {
      streamType: CRON_DELIVERY_STREAM_TYPE,
      description:
        'JobRunMessageDiscarded: a cron_events message the destination re-check refused (stale epoch, run no longer queued)',
      effectsOfMessages: true,
    },
  ],
  sweepers: ({ config, db, handler, logger, wakeups }) => [
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
  consumers: ({ config, handler, logger }) => {
    const executor = cronExecutor({
      http: new UndiciHttpClient({
        allowPrivateTargets: config.cron.allowPrivateTargets,
        allowedHosts: config.cron.allowedHosts,
      }),
      mailer: config.cron.smtpUrl ? new NodemailerMailer(config.cron.smtpUrl) : undefined,
      mailFrom: config.cron.smtpFrom,
      outputMaxBytes: config.cron.outputMaxBytes,
    });
    return [
      defineConsumer({
        consumer: CRON_EXECUTOR_CONSUMER,
        transport: 'amqp',
        sources: [CRON_EVENTS_QUEUE],
        parse: (payload) => runMessagePayload.parse(payload),
        handler: runExecutionHandler({
          handler,
          logger,
          executor,
          maxTimeoutMs: config.cron.maxTimeoutMs,
          // Refreshes the claim of a long job well within the stale-run window.
          heartbeatMs: Math.min(config.scanner.heartbeatMs, Math.floor(config.cron.staleRunMs / 3)),
        }),
        prefetch: config.cron.executorConcurrency,
      }),
    ];
  },
});

/** Both, in registry order. */
export const cronRegistrations = [cronJobRegistration, jobRunRegistration] as const;

export { CronService, type CronServiceDeps, type CronServiceSettings, type NewCronJob } from './service.js';
