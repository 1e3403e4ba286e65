import { describe, expect, it } from 'vitest';
import { type BackoffSettings, backoffCeilingMs, retryDelayMs } from '../../src/runtime/backoff.js';

const settings = (jitter: BackoffSettings['jitter']): BackoffSettings => ({
  baseMs: 100,
  maxMs: 5_000,
  jitter,
});
const constant = (value: number) => () => value;

describe('backoffCeilingMs', () => {
  it('doubles from the base per attempt and stops at the cap', () => {
    const ceilings = [1, 2, 3, 4, 5, 6, 7, 8].map((attempt) => backoffCeilingMs(attempt, settings('full')));
    expect(ceilings).toEqual([100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000]);
  });

  it('stays finite and capped for huge attempt counts and sane for attempt 0', () => {
    expect(backoffCeilingMs(10_000, settings('full'))).toBe(5_000);
    expect(backoffCeilingMs(0, settings('full'))).toBe(100);
  });
});

describe('retryDelayMs', () => {
  it('full jitter spans [0, ceiling] by the random source', () => {
    expect(retryDelayMs(3, settings('full'), constant(0))).toBe(0);
    expect(retryDelayMs(3, settings('full'), constant(0.5))).toBe(200);
    expect(retryDelayMs(3, settings('full'), constant(0.999999))).toBe(400);
  });

  it('equal jitter spans [ceiling/2, ceiling], so a row never waits less than after its previous attempt', () => {
    expect(retryDelayMs(3, settings('equal'), constant(0))).toBe(200);
    expect(retryDelayMs(3, settings('equal'), constant(0.999999))).toBe(400);
    // Below the cap (at the cap the range is [maxMs/2, maxMs] for every attempt).
    for (let attempt = 1; backoffCeilingMs(attempt + 1, settings('equal')) < 5_000; attempt++) {
      const worstNext = retryDelayMs(attempt + 1, settings('equal'), constant(0));
      const bestThis = retryDelayMs(attempt, settings('equal'), constant(0.999999));
      expect(worstNext).toBeGreaterThanOrEqual(bestThis);
    }
  });

  it('decorrelated jitter spans [base, 3 × previous delay], capped', () => {
    expect(retryDelayMs(2, settings('decorrelated'), constant(0), 300)).toBe(100);
    expect(retryDelayMs(2, settings('decorrelated'), constant(0.5), 300)).toBe(500);
    expect(retryDelayMs(2, settings('decorrelated'), constant(0.999999), 3_000)).toBe(5_000);
  });

  it('decorrelated jitter without a previous delay uses the previous attempt ceiling', () => {
    // attempt 4: previous ceiling is 400 → range [100, 1200]
    expect(retryDelayMs(4, settings('decorrelated'), constant(0.999999))).toBe(1_200);
    expect(retryDelayMs(1, settings('decorrelated'), constant(0.999999))).toBe(300);
  });

  it('never leaves [0, maxMs], whatever the random source returns', () => {
    const wild = [-1, Number.NaN, 1, 2, Number.POSITIVE_INFINITY, 0.3];
    for (const jitter of ['full', 'equal', 'decorrelated'] as const) {
      for (const value of wild) {
        for (const attempt of [1, 5, 50]) {
          const delay = retryDelayMs(attempt, settings(jitter), constant(value));
          expect(delay).toBeGreaterThanOrEqual(0);
          expect(delay).toBeLessThanOrEqual(5_000);
          expect(Number.isInteger(delay)).toBe(true);
        }
      }
    }
  });

  it('spreads a batch that failed together (full jitter with a seeded source)', () => {
    let seed = 42;
    const lcg = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const delays = Array.from({ length: 1_000 }, () => retryDelayMs(5, settings('full'), lcg));
    const buckets = new Set(delays.map((d) => Math.floor(d / 160)));
    expect(buckets.size).toBeGreaterThanOrEqual(10); // all ten 10% slices of [0, 1600] are used
  });
});
