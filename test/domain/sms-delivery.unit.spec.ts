/**
 * The failure classifier and the roll-up's per-report decision (src/domain/sms/delivery.ts): every
 * report status, retryable codes, attempts left or exhausted, the campaign statuses that still retry,
 * and the retry time's bounds (delay + jitter) with an injected random.
 */
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_RETRYABLE_CODES,
  decideReport,
  isTemporaryFailure,
  nextRetryAt,
  type ReportStatus,
} from '../../src/domain/sms/delivery.js';

const policy = {
  maxAttempts: 3,
  retryMs: 5 * 60_000,
  jitterMs: 30_000,
  retryableCodes: [...DEFAULT_RETRYABLE_CODES],
};
const NOW = Date.parse('2030-01-01T10:00:00Z');
const decide = (
  status: ReportStatus,
  errorCode: string | null = null,
  attempts = 1,
  campaignStatus = 'DISPATCHING',
  random = () => 0.5,
) => decideReport({ status, errorCode }, { attempts }, campaignStatus, policy, NOW, random);

describe('isTemporaryFailure', () => {
  it('SEND_FAILED and EXPIRED are temporary; REJECTED, DELIVERED and NOT_AVAILABLE are not', () => {
    expect(isTemporaryFailure('SEND_FAILED', null, [])).toBe(true);
    expect(isTemporaryFailure('EXPIRED', null, [])).toBe(true);
    expect(isTemporaryFailure('REJECTED', '27', ['27'])).toBe(false);
    expect(isTemporaryFailure('DELIVERED', null, ['27'])).toBe(false);
    expect(isTemporaryFailure('NOT_AVAILABLE', 'DLR_TIMEOUT', [])).toBe(false);
  });

  it('FAILED is temporary for a configured code and for codes naming timeouts, connections, 5xx', () => {
    for (const code of ['27', '31', '34'])
      expect(isTemporaryFailure('FAILED', code, policy.retryableCodes)).toBe(true);
    for (const code of ['1', '36', 'UNKNOWN_SUBSCRIBER']) {
      expect(isTemporaryFailure('FAILED', code, policy.retryableCodes)).toBe(false);
    }
    for (const code of ['TIMEOUT', 'read_timed_out', 'CONNECTION_RESET', 'ECONNREFUSED', '503', 'HTTP_502']) {
      expect(isTemporaryFailure('FAILED', code, [])).toBe(true);
    }
    expect(isTemporaryFailure('FAILED', null, policy.retryableCodes)).toBe(false);
    expect(isTemporaryFailure('FAILED', '404', [])).toBe(false);
  });
});

describe('decideReport: every mapping', () => {
  it('DELIVERED → DELIVERED', () => {
    expect(decide('DELIVERED')).toEqual({ status: 'DELIVERED' });
  });

  it('NOT_AVAILABLE → FAILED, unconfirmed, no refund, whatever the attempts or campaign', () => {
    const unconfirmed = {
      status: 'FAILED',
      failureClass: 'UNCONFIRMED',
      unconfirmed: true,
      refundRequired: false,
    };
    expect(decide('NOT_AVAILABLE')).toEqual(unconfirmed);
    expect(decide('NOT_AVAILABLE', 'DLR_TIMEOUT', 3, 'CANCELLED')).toEqual(unconfirmed);
  });

  it('REJECTED and FAILED with a permanent code → FAILED PERMANENT with a refund, even with attempts left', () => {
    const permanent = {
      status: 'FAILED',
      failureClass: 'PERMANENT',
      unconfirmed: false,
      refundRequired: true,
    };
    expect(decide('REJECTED')).toEqual(permanent);
    expect(decide('FAILED', '1')).toEqual(permanent);
    expect(decide('FAILED', '36', 1, 'CANCELLING')).toEqual(permanent);
  });

  it('a temporary failure with attempts left → RETRY_PENDING at now + delay + jitter', () => {
    expect(decide('FAILED', '27', 1)).toEqual({
      status: 'RETRY_PENDING',
      failureClass: 'TEMPORARY',
      nextRetryAt: NOW + 5 * 60_000 + 15_000,
    });
    expect(decide('EXPIRED', null, 2)).toMatchObject({ status: 'RETRY_PENDING', failureClass: 'TEMPORARY' });
    expect(decide('SEND_FAILED', 'broker down', 2)).toMatchObject({
      status: 'RETRY_PENDING',
      failureClass: 'SEND_FAILED',
    });
  });

  it('attempts count only submissions: at maxAttempts the temporary failure is final (EXHAUSTED, refunded)', () => {
    const exhausted = {
      status: 'FAILED',
      failureClass: 'EXHAUSTED',
      unconfirmed: false,
      refundRequired: true,
    };
    expect(decide('FAILED', '34', 3)).toEqual(exhausted);
    expect(decide('EXPIRED', null, 4)).toEqual(exhausted);
    expect(decide('SEND_FAILED', null, 3)).toEqual(exhausted);
    expect(decide('FAILED', '34', 2)).toMatchObject({ status: 'RETRY_PENDING' });
  });

  it('a campaign that no longer sends (CANCELLING, CANCELLED, EXPIRED, final) makes it LATE: failed and refunded', () => {
    const late = { status: 'FAILED', failureClass: 'LATE', unconfirmed: false, refundRequired: true };
    for (const status of ['CANCELLING', 'CANCELLED', 'EXPIRED', 'COMPLETED', 'PARTIAL', 'FAILED']) {
      expect(decide('FAILED', '27', 1, status)).toEqual(late);
    }
    for (const status of ['DISPATCHING', 'QUEUED', 'SCHEDULED', 'PAUSED']) {
      expect(decide('FAILED', '27', 1, status)).toMatchObject({ status: 'RETRY_PENDING' });
    }
  });
});

describe('nextRetryAt: delay plus a random 0..jitter', () => {
  it('is bounded by [now + delay, now + delay + jitter] for random in [0, 1)', () => {
    expect(nextRetryAt(NOW, policy, () => 0)).toBe(NOW + policy.retryMs);
    expect(nextRetryAt(NOW, policy, () => 0.999_999_999)).toBe(NOW + policy.retryMs + policy.jitterMs);
    // A misbehaving random source cannot leave the bounds.
    expect(nextRetryAt(NOW, policy, () => 1)).toBe(NOW + policy.retryMs + policy.jitterMs);
    expect(nextRetryAt(NOW, policy, () => -3)).toBe(NOW + policy.retryMs);
    for (let i = 0; i < 1_000; i++) {
      const at = nextRetryAt(NOW, policy, Math.random);
      expect(at).toBeGreaterThanOrEqual(NOW + policy.retryMs);
      expect(at).toBeLessThanOrEqual(NOW + policy.retryMs + policy.jitterMs);
    }
  });

  it('no delay and no jitter: due at once', () => {
    expect(nextRetryAt(NOW, { ...policy, retryMs: 0, jitterMs: 0 }, () => 0.7)).toBe(NOW);
  });
});
