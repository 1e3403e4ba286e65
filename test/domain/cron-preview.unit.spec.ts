/**
 * The schedule preview (src/domain/cron-job/preview.ts), pure: local times with their offset (negative,
 * half-hour), the DST notes, the default policy per expression, an explicit policy winning, the parser's
 * refusal naming the field.
 */
import { describe, expect, it } from 'vitest';
import { localTime, previewSchedule } from '../../src/domain/cron-job/preview.js';
import { ValidationError } from '../../src/errors.js';

describe('localTime', () => {
  it('writes the wall time in the zone with its offset', () => {
    const at = Date.parse('2026-07-01T12:00:00Z');
    expect(localTime('UTC', at)).toBe('2026-07-01T12:00:00+00:00');
    expect(localTime('Asia/Kolkata', at)).toBe('2026-07-01T17:30:00+05:30');
    expect(localTime('America/St_Johns', at)).toBe('2026-07-01T09:30:00-02:30');
    expect(localTime('America/New_York', Date.parse('2026-01-15T12:00:00Z'))).toBe(
      '2026-01-15T07:00:00-05:00',
    );
  });
});

describe('previewSchedule', () => {
  it('given a fixed-time job in New York, when clocks go forward, then 02:30 is shifted to 03:30 and noted', () => {
    // 2026-03-08: 02:00 EST → 03:00 EDT.
    const { dst, next } = previewSchedule(
      { expression: '30 2 * * *', timezone: 'America/New_York' },
      Date.parse('2026-03-07T12:00:00Z'),
      2,
    );
    expect(dst).toEqual({ ambiguous: 'first', missing: 'shift' });
    expect(next.map((o) => [o.local, o.note])).toEqual([
      ['2026-03-08T03:30:00-04:00', 'dst-shifted'],
      ['2026-03-09T02:30:00-04:00', undefined],
    ]);
    expect(next[0]!.wall).toBe('2026-03-08T02:30:00');
  });

  it('given an explicit policy, then it wins over the default (the repeated hour fired on its last pass)', () => {
    // 2026-11-01: 02:00 EDT → 01:00 EST; 01:30 happens twice.
    const { dst, next } = previewSchedule(
      { expression: '30 1 * * *', timezone: 'America/New_York', dst: { ambiguous: 'last', missing: 'skip' } },
      Date.parse('2026-10-31T12:00:00Z'),
      1,
    );
    expect(dst).toEqual({ ambiguous: 'last', missing: 'skip' });
    expect(next).toEqual([
      {
        at: '2026-11-01T06:30:00.000Z',
        local: '2026-11-01T01:30:00-05:00',
        wall: '2026-11-01T01:30:00',
        kind: 'ambiguous-second',
        note: 'dst-repeated-second',
      },
    ]);
  });

  it('given an interval expression, then the default keeps both passes and skips the gap', () => {
    const { dst } = previewSchedule({ expression: '*/15 * * * *', timezone: 'Europe/Berlin' }, 0, 1);
    expect(dst).toEqual({ ambiguous: 'both', missing: 'skip' });
  });

  it('an expression that never fires (no such day) or a wrong one is refused naming the field', () => {
    for (const expression of ['0 0 30 2 *', '0 0 31 4 *', '0 0 0 31 11 *']) {
      try {
        previewSchedule({ expression, timezone: 'UTC' }, 0, 3);
        expect.unreachable(expression);
      } catch (error) {
        expect((error as ValidationError).details.field).toBe('schedule');
        expect((error as Error).message).toContain('never fires');
      }
    }
    // 29 February fires in leap years: valid.
    expect(previewSchedule({ expression: '0 0 29 2 *', timezone: 'UTC' }, 0, 1).next[0]?.at).toBe(
      '1972-02-29T00:00:00.000Z',
    );
    expect(() => previewSchedule({ expression: '0 25 * * *', timezone: 'UTC' }, 0, 3)).toThrow(
      ValidationError,
    );
    try {
      previewSchedule({ expression: '0 * * * *', timezone: 'Nowhere/Land' }, 0, 1);
      expect.unreachable();
    } catch (error) {
      expect((error as ValidationError).details.field).toBe('timezone');
    }
  });
});
