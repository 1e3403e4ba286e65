/** The `sms` section of loadConfig: documented defaults, and each invalid value naming its variable. */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

const base = { DATABASE_URL: 'postgres://herald@127.0.0.1:5432/herald' };

describe('sms settings', () => {
  it('defaults: Dhaka, the 09:00–21:00 promotional window, batches of 999, Kafka topics', () => {
    expect(loadConfig(base).sms).toEqual({
      zone: 'Asia/Dhaka',
      promotionalWindow: { start: '09:00', end: '21:00' },
      minLeadMs: 300_000,
      maxFutureMs: 30 * 86_400_000,
      bulkMaxRecipients: 1_000_000,
      bulkMaxBytes: 256 * 1024 * 1024,
      buildBatchSize: 1_000,
      buildStaleMs: 300_000,
      buildMaxAttempts: 3,
      dispatchBatchSize: 999,
      sink: 'kafka',
      submitTopic: 'sms.submit',
      dlrTopic: 'sms.dlr',
      dispatchDeadlineMs: 1_440 * 60_000,
      draftStaleMs: 10 * 60_000,
      buildingStaleMs: 60 * 60_000,
      dispatchingStaleMs: 30 * 60_000,
      cancellingStaleMs: 5 * 60_000,
      dlrTimeoutMs: 2_880 * 60_000,
      maxAttempts: 3,
      retryMs: 5 * 60_000,
      retryJitterMs: 30_000,
      retryableCodes: ['27', '31', '34'],
      refundRetryAfterMs: 60_000,
      rollupBatchSize: 2_000,
      leaseTtlMs: 30_000,
      reportRetentionDays: 90,
      simulator: {
        outcomes: [
          { outcome: 'DELIVERED', weight: 90 },
          { outcome: 'FAILED', weight: 4 },
          { outcome: 'EXPIRED', weight: 2 },
          { outcome: 'REJECTED', weight: 2 },
          { outcome: 'NOT_AVAILABLE', weight: 2 },
        ],
        latencyMs: { min: 20, max: 200 },
        failedCodes: ['1', '27', '31', '34', '36'],
        fixed: new Map(),
      },
    });
  });

  it('fixed simulator outcomes: msisdn=OUTCOME[:code], FAILED without a code gets code 1', () => {
    const fixed = loadConfig({
      ...base,
      HERALD_SMS_SIMULATOR_FIXED_OUTCOMES:
        '8801700000001=REJECTED,8801700000002=FAILED:27,8801700000003=FAILED',
    }).sms.simulator.fixed;
    expect([...fixed]).toEqual([
      ['8801700000001', { status: 'REJECTED', errorCode: null }],
      ['8801700000002', { status: 'FAILED', errorCode: '27' }],
      ['8801700000003', { status: 'FAILED', errorCode: '1' }],
    ]);
    expect(() => loadConfig({ ...base, HERALD_SMS_SIMULATOR_FIXED_OUTCOMES: '+880170=LOST' })).toThrow(
      /HERALD_SMS_SIMULATOR_FIXED_OUTCOMES/,
    );
  });

  it.each([
    ['HERALD_SMS_TIMEZONE', 'Asia/Nowhere'],
    ['HERALD_SMS_PROMOTIONAL_WINDOW', '21:00-09:00'],
    ['HERALD_SMS_PROMOTIONAL_WINDOW', '9-21'],
    ['HERALD_SMS_DISPATCH_BATCH_SIZE', '0'],
    ['HERALD_SMS_SINK', 'sqs'],
    ['HERALD_SMS_SUBMIT_TOPIC', 'sms submit'],
    ['HERALD_SMS_SIMULATOR_OUTCOMES', 'DELIVERED=90,LOST=10'],
    ['HERALD_SMS_SIMULATOR_OUTCOMES', 'DELIVERED=0'],
    ['HERALD_SMS_SIMULATOR_LATENCY_MS', '200-20'],
    ['HERALD_SMS_MAX_ATTEMPTS', '0'],
    ['HERALD_SMS_RETRY_MINUTES', '-1'],
    ['HERALD_SMS_RETRYABLE_CODES', '27,,31'],
    ['HERALD_SMS_ROLLUP_BATCH_SIZE', '0'],
    ['HERALD_SMS_LEASE_TTL_SECONDS', '0'],
  ])('%s=%s is refused, naming the variable', (variable, value) => {
    const error = (() => {
      try {
        loadConfig({ ...base, [variable]: value });
      } catch (e) {
        return e;
      }
      return null;
    })();
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).field).toBe(variable);
  });

  it('reads the window with seconds and a single latency', () => {
    const sms = loadConfig({
      ...base,
      HERALD_SMS_PROMOTIONAL_WINDOW: '08:30:15-20:00',
      HERALD_SMS_SIMULATOR_LATENCY_MS: '50',
    }).sms;
    expect(sms.promotionalWindow).toEqual({ start: '08:30:15', end: '20:00' });
    expect(sms.simulator.latencyMs).toEqual({ min: 50, max: 50 });
  });
});
