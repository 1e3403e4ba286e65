/**
 * The cron slice's settings (seed 004, ADR 0011): the executors' outbound allowlist and limits, the
 * SMTP server of `email` jobs, stale-run recovery and backfill bounds, and each organization's quotas (the
 * shortest interval between a job's occurrences, the most active jobs; issue 23, ADR 0029). Composed into
 * the configuration by the slice's registration (`config.cron`).
 */
import { z } from 'zod';
import { ConfigError } from '../../errors.js';
import { urlPasswords } from '../../settings/connections.js';
import type { HeraldConfig } from '../../settings/core.js';
import { describeSetting as d, defineSettings, type SettingsOf } from '../../settings/fragment.js';
import { flag, positiveInt, url } from '../../settings/validators.js';

/** One organization's cron quotas. */
export interface CronQuota {
  /** The shortest interval between two occurrences of one job's schedule (seconds). */
  readonly minIntervalSeconds: number;
  /** The most jobs the organization may have active (paused and deleted jobs do not count). */
  readonly maxActiveJobs: number;
}

/** Quotas per organization: its own where configured, else the defaults. */
export interface CronQuotas {
  readonly defaults: CronQuota;
  readonly organizations: Readonly<Record<string, Partial<CronQuota>>>;
}

/** The quota of one organization (its overrides over the defaults). */
export function quotaOf(quotas: CronQuotas, organizationId: string): CronQuota {
  const own = Object.hasOwn(quotas.organizations, organizationId)
    ? quotas.organizations[organizationId]
    : undefined;
  return { ...quotas.defaults, ...own };
}

const DAY_SECONDS = 86_400;
const minInterval = positiveInt.max(DAY_SECONDS);
const maxActive = positiveInt.max(1_000_000);

const organizationLimits = z
  .string()
  .transform((text, ctx) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON object' });
      return z.NEVER;
    }
  })
  .pipe(
    z.record(
      z.string().min(1).max(200),
      z.strictObject({ minIntervalSeconds: minInterval.optional(), maxActiveJobs: maxActive.optional() }),
    ),
  );

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
  /** Per organization: the shortest interval between occurrences, the most active jobs. */
  readonly quotas: CronQuotas;
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
    HERALD_CRON_MIN_INTERVAL_SECONDS: d(
      minInterval.default(1),
      "the shortest interval between two occurrences of a job's schedule, per organization (wall-clock times; up to 86400): a schedule that can fire sooner after a previous occurrence is refused with 422 naming `schedule` (`1`: every second-level schedule is allowed)",
    ),
    HERALD_CRON_MAX_ACTIVE_JOBS: d(
      maxActive.default(1_000),
      'the most active cron jobs one organization may have (paused and deleted ones do not count): one more create or resume is refused with 409 naming this limit',
    ),
    HERALD_CRON_ORGANIZATION_LIMITS: d(
      organizationLimits.optional(),
      'organizations with their own quotas, as JSON: `{"org-1":{"minIntervalSeconds":60,"maxActiveJobs":20}}` (a missing member takes the default above)',
    ),
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
      quotas: {
        defaults: {
          minIntervalSeconds: e.HERALD_CRON_MIN_INTERVAL_SECONDS,
          maxActiveJobs: e.HERALD_CRON_MAX_ACTIVE_JOBS,
        },
        organizations: e.HERALD_CRON_ORGANIZATION_LIMITS ?? {},
      },
    };
  },
});

/** The configuration the cron slice runs with. */
export type CronConfig = HeraldConfig & SettingsOf<typeof cronSettings>;
