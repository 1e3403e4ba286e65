import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

const base = { DATABASE_URL: 'postgres://herald@127.0.0.1:5432/herald' };

describe('loadConfig', () => {
  it('applies defaults and freezes the result', () => {
    const config = loadConfig(base);
    expect(config.schema).toBe('herald');
    expect(config.relay.maxAttempts).toBe(5);
    expect(config.amqpQueueType).toBe('quorum');
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.relay)).toBe(true);
  });

  it.each([
    [{}, 'DATABASE_URL', /required/],
    [{ ...base, DATABASE_URL: 'mysql://x' }, 'DATABASE_URL', /postgres/],
    [{ ...base, HERALD_SCHEMA: 'Bad-Name' }, 'HERALD_SCHEMA', /identifier/],
    [{ ...base, HERALD_RELAY_BATCH_SIZE: 'lots' }, 'HERALD_RELAY_BATCH_SIZE', /number/],
    [{ ...base, HERALD_RELAY_MAX_ATTEMPTS: '0' }, 'HERALD_RELAY_MAX_ATTEMPTS', /./],
    [{ ...base, AMQP_URL: 'http://x' }, 'AMQP_URL', /amqp/],
    [{ ...base, HERALD_AMQP_QUEUE_TYPE: 'stream' }, 'HERALD_AMQP_QUEUE_TYPE', /./],
    [{ ...base, KAFKA_BROKERS: 'nohost' }, 'KAFKA_BROKERS', /host:port/],
    [
      { ...base, HERALD_RELAY_BACKOFF_BASE_MS: '5000', HERALD_RELAY_BACKOFF_MAX_MS: '10' },
      'HERALD_RELAY_BACKOFF_MAX_MS',
      />=/,
    ],
  ])('rejects %j naming %s', (env, field, reason) => {
    try {
      loadConfig(env);
      expect.unreachable('should have thrown');
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field).toBe(field);
      expect((error as ConfigError).message).toContain(field);
      expect((error as ConfigError).message).toMatch(reason);
    }
  });

  it.each([
    [
      { HERALD_RELAY_LOCK_SECONDS: '30', HERALD_CAMPAIGN_STALE_CLAIM_SECONDS: '20' },
      'HERALD_RELAY_LOCK_SECONDS',
      'HERALD_CAMPAIGN_STALE_CLAIM_SECONDS',
    ],
    [
      { HERALD_DELIVERY_HEARTBEAT_SECONDS: '900', HERALD_CAMPAIGN_STALE_CLAIM_SECONDS: '900' },
      'HERALD_DELIVERY_HEARTBEAT_SECONDS',
      'HERALD_CAMPAIGN_STALE_CLAIM_SECONDS',
    ],
    [
      { HERALD_PROJECTOR_POLL_MS: '30000', HERALD_PROJECTOR_LEASE_SECONDS: '30' },
      'HERALD_PROJECTOR_POLL_MS',
      'HERALD_PROJECTOR_LEASE_SECONDS',
    ],
  ])('refuses contradicting settings %j, naming both', (env, field, other) => {
    try {
      loadConfig({ ...base, ...env });
      expect.unreachable('should have thrown');
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field).toBe(field);
      expect((error as ConfigError).message).toContain(field);
      expect((error as ConfigError).message).toContain(other);
    }
  });

  it('warns (naming both) about settings that work but weaken a guarantee', () => {
    expect(loadConfig(base).warnings).toEqual([
      'HERALD_LINE_CREDENTIALS_KEY is unset: LINE channel credentials are sealed with the development key',
    ]);
    const keyed = { ...base, HERALD_LINE_CREDENTIALS_KEY: Buffer.alloc(32, 1).toString('base64') };
    expect(loadConfig(keyed).warnings).toEqual([]);
    const config = loadConfig({
      ...keyed,
      HERALD_RELAY_RETENTION_HOURS: '1',
      HERALD_MESSAGE_LOST_AFTER_SECONDS: '7200',
    });
    expect(config.warnings).toHaveLength(1);
    expect(config.warnings[0]).toMatch(/HERALD_MESSAGE_LOST_AFTER_SECONDS.*HERALD_RELAY_RETENTION_HOURS/);
  });

  it('treats empty strings as unset', () => {
    expect(loadConfig({ ...base, AMQP_URL: '' }).amqpUrl).toBeUndefined();
  });
});
