/** The HERALD_CRON_* settings: defaults, the allowlist, and the executor concurrency the pool must exceed. */
import { describe, expect, it } from 'vitest';
import { quotaOf } from '../../src/aggregates/cron/settings.js';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

const base = { DATABASE_URL: 'postgres://herald@127.0.0.1:5432/herald' };

describe('cron settings', () => {
  it('defaults: private targets refused, concurrency below the pool', () => {
    expect(loadConfig(base).cron).toMatchObject({
      allowPrivateTargets: false,
      allowedHosts: [],
      executorConcurrency: 8,
      defaultTimeoutMs: 30_000,
      maxTimeoutMs: 300_000,
      outputMaxBytes: 2_048,
      staleRunMs: 900_000,
      backfillMax: 1_000,
      smtpUrl: undefined,
    });
    expect(loadConfig({ ...base, HERALD_DB_POOL_SIZE: '4' }).cron.executorConcurrency).toBe(3);
  });

  it('quotas: one second and 1,000 active jobs by default; organizations with their own limits', () => {
    expect(loadConfig(base).cron.quotas).toEqual({
      defaults: { minIntervalSeconds: 1, maxActiveJobs: 1_000 },
      organizations: {},
    });
    const config = loadConfig({
      ...base,
      HERALD_CRON_MIN_INTERVAL_SECONDS: '60',
      HERALD_CRON_MAX_ACTIVE_JOBS: '20',
      HERALD_CRON_ORGANIZATION_LIMITS: '{"org-1":{"minIntervalSeconds":1},"org-2":{"maxActiveJobs":500}}',
    });
    expect(quotaOf(config.cron.quotas, 'org-1')).toEqual({ minIntervalSeconds: 1, maxActiveJobs: 20 });
    expect(quotaOf(config.cron.quotas, 'org-2')).toEqual({ minIntervalSeconds: 60, maxActiveJobs: 500 });
    expect(quotaOf(config.cron.quotas, 'org-3')).toEqual({ minIntervalSeconds: 60, maxActiveJobs: 20 });
    expect(quotaOf(config.cron.quotas, 'constructor')).toEqual({ minIntervalSeconds: 60, maxActiveJobs: 20 });
    for (const bad of ['not json', '{"org-1":{"minIntervalSeconds":0}}', '{"org-1":{"burst":3}}', '[1]']) {
      expect(() => loadConfig({ ...base, HERALD_CRON_ORGANIZATION_LIMITS: bad }), bad).toThrow(
        /HERALD_CRON_ORGANIZATION_LIMITS/,
      );
    }
    expect(() => loadConfig({ ...base, HERALD_CRON_MIN_INTERVAL_SECONDS: '86401' })).toThrow(
      /HERALD_CRON_MIN_INTERVAL_SECONDS/,
    );
  });

  it('the allowlist and SMTP settings', () => {
    const config = loadConfig({
      ...base,
      HERALD_CRON_ALLOW_PRIVATE_TARGETS: 'true',
      HERALD_CRON_ALLOWED_HOSTS: 'hooks.example.com,*.Slack.com',
      HERALD_SMTP_URL: 'smtp://user:pass@mail.example.com:587',
      HERALD_SMTP_FROM: 'herald@example.com',
    });
    expect(config.cron).toMatchObject({
      allowPrivateTargets: true,
      allowedHosts: ['hooks.example.com', '*.slack.com'],
      smtpUrl: 'smtp://user:pass@mail.example.com:587',
    });
  });

  it('a concurrency not below the pool, or a default timeout above the maximum, is refused naming both', () => {
    expect(() => loadConfig({ ...base, HERALD_CRON_EXECUTOR_CONCURRENCY: '10' })).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, HERALD_CRON_EXECUTOR_CONCURRENCY: '10' })).toThrow(
      /HERALD_DB_POOL_SIZE/,
    );
    expect(() => loadConfig({ ...base, HERALD_CRON_DEFAULT_TIMEOUT_MS: '400000' })).toThrow(
      /HERALD_CRON_MAX_TIMEOUT_MS/,
    );
    expect(() => loadConfig({ ...base, HERALD_SMTP_URL: 'http://mail' })).toThrow(/HERALD_SMTP_URL/);
  });
});
