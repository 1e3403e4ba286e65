/**
 * The cron slice's settings (seed 004, ADR 0011): the executors' outbound allowlist and limits, the
 * SMTP server of `email` jobs, stale-run recovery and backfill bounds. Composed into the configuration
 * by the slice's registration (`config.cron`).
 */
import { z } from 'zod';
import { ConfigError } from '../../errors.js';
import { urlPasswords } from '../../settings/connections.js';
import type { HeraldConfig } from '../../settings/core.js';
import { describeSetting as d, defineSettings, type SettingsOf } from '../../settings/fragment.js';
import { flag, positiveInt, url } from '../../settings/validators.js';

/** Cron jobs (ADR 0011): the executors' outbound allowlist and limits, and the SMTP server of `email` jobs. */
export interface CronSettings {
  /** Private, loopback and link-local targets (after DNS resolution) are refused unless this is set. */
  readonly allowPrivateTargets: boolean;
  /** When non-empty, the only hosts jobs may target (`*.example.com` matches subdomains). */
  readonly allowedHosts: readonly string[];
  /** Runs one worker executes at once (the cron_events consumer's prefetch); below HERALD_DB_POOL_SIZE. */
  readonly executorConcurrency: number;
  /** A job's timeout when it names none, and the longest one it may name. */
  readonly defaultTimeoutMs: number;
  readonly maxTimeoutMs: number;
  /** Bytes of a response (or SMTP reply) kept on the run. */
  readonly outputMaxBytes: number;
  /** A queued or running run without a sign of life this long whose message is no longer in flight is reclaimed. */
  readonly staleRunMs: number;
  /** Most runs one backfill may create. */
  readonly backfillMax: number;
  /** SMTP server of `email` jobs (smtp:// or smtps://, credentials in the URL); unset: email jobs fail. */
  readonly smtpUrl: string | undefined;
  readonly smtpFrom: string | undefined;
}

export const cronSettings = defineSettings({
  key: 'cron',
  title: 'Cron jobs',
  env: {
    HERALD_CRON_ALLOW_PRIVATE_TARGETS: d(
      flag('false'),
      'let cron jobs target private, loopback and link-local addresses (after DNS resolution)',
    ),
    HERALD_CRON_ALLOWED_HOSTS: d(
      z
        .string()
        .regex(/^[a-z0-9.*:-]+(,[a-z0-9.*:-]+)*$/i, 'must be host[,host…] (a leading *. matches subdomains)')
        .optional(),
      '`host[,*.domain…]`: the only hosts cron jobs may target (unset: any public host)',
    ),
    HERALD_CRON_EXECUTOR_CONCURRENCY: d(
      positiveInt.max(1_000).optional(),
      'runs one worker executes at once (`cron_events` prefetch); must be below `HERALD_DB_POOL_SIZE`',
      'min(8, pool − 1)',
    ),
    HERALD_CRON_DEFAULT_TIMEOUT_MS: d(positiveInt.default(30_000), "a job's timeout when it names none"),
    HERALD_CRON_MAX_TIMEOUT_MS: d(positiveInt.default(300_000), 'the longest timeout a job may name'),
    HERALD_CRON_OUTPUT_MAX_BYTES: d(
      positiveInt.max(1_000_000).default(2_048),
      'response (or SMTP reply) bytes kept on a run',
    ),
    HERALD_CRON_STALE_RUN_SECONDS: d(
      positiveInt.default(900),
      'a queued or running run without a sign of life this long whose message is no longer in flight is reclaimed (the attempt counts as failed)',
    ),
    HERALD_CRON_BACKFILL_MAX: d(positiveInt.max(100_000).default(1_000), 'most runs one backfill creates'),
    HERALD_SMTP_URL: d(
      url(['smtp', 'smtps']).optional(),
      'SMTP server of `email` jobs (`smtp://user:pass@host:port`, `smtps://…`)',
    ),
    HERALD_SMTP_FROM: d(z.string().min(3).optional(), 'the default sender of `email` jobs'),
  },
  secretVariables: ['HERALD_SMTP_URL'],
  secrets: (e) => urlPasswords(e.HERALD_SMTP_URL),
  map(e, base): CronSettings {
    // Every run in flight holds a pooled connection (the fenced handler's inbox transaction) and briefly
    // needs a second one (the run's start marker): the pool must have room for both.
    const concurrency = e.HERALD_CRON_EXECUTOR_CONCURRENCY ?? Math.max(1, Math.min(8, base.dbPoolSize - 1));
    if (e.HERALD_CRON_EXECUTOR_CONCURRENCY !== undefined && concurrency >= base.dbPoolSize) {
      throw new ConfigError(
        'HERALD_CRON_EXECUTOR_CONCURRENCY',
        `(${e.HERALD_CRON_EXECUTOR_CONCURRENCY}) must be below HERALD_DB_POOL_SIZE (${base.dbPoolSize}): ` +
          'each run in flight holds one connection and needs another to record its start',
      );
    }
    if (e.HERALD_CRON_DEFAULT_TIMEOUT_MS > e.HERALD_CRON_MAX_TIMEOUT_MS) {
      throw new ConfigError('HERALD_CRON_DEFAULT_TIMEOUT_MS', 'must be <= HERALD_CRON_MAX_TIMEOUT_MS');
    }
    return {
      allowPrivateTargets: e.HERALD_CRON_ALLOW_PRIVATE_TARGETS,
      allowedHosts: e.HERALD_CRON_ALLOWED_HOSTS ? e.HERALD_CRON_ALLOWED_HOSTS.toLowerCase().split(',') : [],
      executorConcurrency: concurrency,
      defaultTimeoutMs: e.HERALD_CRON_DEFAULT_TIMEOUT_MS,
      maxTimeoutMs: e.HERALD_CRON_MAX_TIMEOUT_MS,
      outputMaxBytes: e.HERALD_CRON_OUTPUT_MAX_BYTES,
      staleRunMs: e.HERALD_CRON_STALE_RUN_SECONDS * 1000,
      backfillMax: e.HERALD_CRON_BACKFILL_MAX,
      smtpUrl: e.HERALD_SMTP_URL,
      smtpFrom: e.HERALD_SMTP_FROM,
    };
  },
});

/** The configuration the cron slice runs with. */
export type CronConfig = HeraldConfig & SettingsOf<typeof cronSettings>;
