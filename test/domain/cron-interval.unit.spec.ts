/**
 * The shortest interval between a cron expression's occurrences (src/domain/cron-job/schedule.ts, the
 * cron quota's minimum interval): exact within a minute, across minute, hour and midnight boundaries, and
 * checked against the occurrences croner itself enumerates.
 */
import { Cron } from 'croner';
import { describe, expect, it } from 'vitest';
import { shortestInterval } from '../../src/domain/cron-job/schedule.js';

const DAY = 86_400;

describe('shortestInterval', () => {
  it.each([
    ['* * * * * *', 1],
    ['*/5 * * * * *', 5],
    ['0,30 * * * * *', 30],
    ['10,15,45 * * * * *', 5],
    ['* * * * *', 60],
    ['0 */15 * * * *', 900],
    // Across a minute boundary: 0:00:59 → 0:01:00 would be 1 s, but only minute 0 fires: 59 s within it.
    ['0,59 0 * * * *', 59],
    // Across a minute boundary: second 59 of minute 0 → second 0 of minute 1.
    ['0,59 0,1 * * * *', 1],
    // Across an hour boundary: 00:59 → 01:00.
    ['0 0,59 * * * *', 60],
    // Across midnight: 23:59:59 → 00:00:00 the next day.
    ['0,59 0,59 0,23 * * *', 1],
    // The same on Mondays only: no two consecutive days fire, so midnight is not crossed.
    ['0,59 0,59 0,23 * * 1', 59],
    ['59 23,0 * * *', 3_600],
    ['0 0 0,23 * * 1', 82_800],
    ['0 0 0,23 * * 1,2', 3_600],
    // 31 December 23:30 → 1 January 00:30 (consecutive days across a year).
    ['30 0,23 31,1 * *', 3_600],
  ])('%s fires at most every %i s', (expression, expected) => {
    expect(shortestInterval(expression)).toBe(expected);
  });

  it('answers the bound (a day by default) for expressions that fire once a day or less', () => {
    expect(shortestInterval('30 2 * * *')).toBe(DAY);
    expect(shortestInterval('0 0 1 1 *')).toBe(DAY);
    expect(shortestInterval('0 0 L * *')).toBe(DAY);
    expect(shortestInterval('*/10 * * * * *', 5)).toBe(5);
  });

  it('agrees with the gaps between the occurrences croner enumerates', () => {
    const expressions = [
      '*/7 * * * * *',
      '0,20,21 */3 * * * *',
      '15 45 */5 * * *',
      '2,58 * * * *',
      '5,50 59 23 * * *',
      '0 0,30 8-17 * * 1-5',
    ];
    for (const expression of expressions) {
      const cron = new Cron(expression, { utcOffset: 0, mode: '5-or-6-parts' });
      let smallest = Number.POSITIVE_INFINITY;
      let previous = cron.nextRun(new Date(Date.UTC(2026, 0, 1)))!.getTime();
      for (let i = 0; i < 3_000; i++) {
        const next = cron.nextRun(new Date(previous))!.getTime();
        smallest = Math.min(smallest, (next - previous) / 1000);
        previous = next;
      }
      expect(shortestInterval(expression), expression).toBe(Math.min(smallest, DAY));
    }
  });
});
