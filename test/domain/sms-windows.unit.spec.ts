/**
 * Local time for SMS campaigns: scheduledAt read as Dhaka local time (or with its offset), and
 * `nextAllowedAt` — per-recipient send windows and the promotional window — across zones and DST changes
 * (a window opening in a spring-forward gap, a repeated hour in autumn, a next opening across the change).
 */
import { describe, expect, it } from 'vitest';
import {
  isInsideWindow,
  nextAllowedAt,
  parseDailyWindow,
  parseScheduledAt,
  type SendWindowPolicy,
  sendWindowPolicySchema,
  wallToInstant,
} from '../../src/domain/sms/windows.js';

const t = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const daily: SendWindowPolicy = { start: '08:00', end: '21:00' };

describe('scheduledAt', () => {
  it('without an offset is Dhaka local time (UTC+6, no DST); with one it is that instant', () => {
    expect(iso(parseScheduledAt('2030-03-01T10:00:00', 'Asia/Dhaka'))).toBe('2030-03-01T04:00:00.000Z');
    expect(iso(parseScheduledAt('2030-03-01 10:00', 'Asia/Dhaka'))).toBe('2030-03-01T04:00:00.000Z');
    expect(iso(parseScheduledAt('2030-03-01T10:00:00+07:00', 'Asia/Dhaka'))).toBe('2030-03-01T03:00:00.000Z');
    expect(iso(parseScheduledAt('2030-03-01T10:00:00Z', 'Asia/Dhaka'))).toBe('2030-03-01T10:00:00.000Z');
  });

  it('another campaign zone reads wall times DST-correctly; nonsense is refused', () => {
    expect(iso(parseScheduledAt('2026-07-01T09:00', 'Europe/London'))).toBe('2026-07-01T08:00:00.000Z');
    expect(iso(parseScheduledAt('2026-01-01T09:00', 'Europe/London'))).toBe('2026-01-01T09:00:00.000Z');
    expect(parseScheduledAt('2030-02-30T10:00', 'Asia/Dhaka')).toBeNull();
    expect(parseScheduledAt('tomorrow', 'Asia/Dhaka')).toBeNull();
    expect(parseScheduledAt('2030-03-01T25:00', 'Asia/Dhaka')).toBeNull();
  });
});

describe('wall time → instant at DST changes', () => {
  it('a wall time in the spring-forward gap happens after the gap; a repeated one at its first pass', () => {
    // New York, 2026-03-08: 02:00 EST → 03:00 EDT. 02:30 does not exist → 03:30 EDT.
    expect(iso(wallToInstant('America/New_York', t('2026-03-08T02:30:00Z')))).toBe(
      '2026-03-08T07:30:00.000Z',
    );
    // London, 2026-10-25: 02:00 BST → 01:00 GMT. 01:30 happens twice → the first (BST).
    expect(iso(wallToInstant('Europe/London', t('2026-10-25T01:30:00Z')))).toBe('2026-10-25T00:30:00.000Z');
  });
});

describe('nextAllowedAt', () => {
  it("inside the window: now; before it: today's opening; after it: tomorrow's", () => {
    const zone = 'Asia/Dhaka';
    expect(iso(nextAllowedAt(t('2030-03-01T06:00:00Z'), zone, daily))).toBe('2030-03-01T06:00:00.000Z'); // 12:00
    expect(iso(nextAllowedAt(t('2030-03-01T01:00:00Z'), zone, daily))).toBe('2030-03-01T02:00:00.000Z'); // 07:00 → 08:00
    expect(iso(nextAllowedAt(t('2030-03-01T15:00:00Z'), zone, daily))).toBe('2030-03-02T02:00:00.000Z'); // 21:00 → next 08:00
    expect(isInsideWindow(t('2030-03-01T14:59:59Z'), zone, daily)).toBe(true); // 20:59:59
    expect(isInsideWindow(t('2030-03-01T15:00:00Z'), zone, daily)).toBe(false); // 21:00, end exclusive
  });

  it('the same instant in three zones: inside, before and after each local window', () => {
    const instant = t('2026-06-15T13:00:00Z'); // Mon: Dhaka 19:00, London 14:00, Los Angeles 06:00
    expect(iso(nextAllowedAt(instant, 'Asia/Dhaka', { start: '09:00', end: '18:00' }))).toBe(
      '2026-06-16T03:00:00.000Z',
    );
    expect(iso(nextAllowedAt(instant, 'Europe/London', { start: '09:00', end: '18:00' }))).toBe(
      '2026-06-15T13:00:00.000Z',
    );
    expect(iso(nextAllowedAt(instant, 'America/Los_Angeles', { start: '09:00', end: '18:00' }))).toBe(
      '2026-06-15T16:00:00.000Z',
    );
  });

  it('the next opening across a DST change keeps the local time (not the UTC offset of before)', () => {
    // New York, Saturday 2026-03-07 22:00 EST (after the window) → Sunday 08:00 EDT = 12:00Z, not 13:00Z.
    expect(iso(nextAllowedAt(t('2026-03-08T03:00:00Z'), 'America/New_York', daily))).toBe(
      '2026-03-08T12:00:00.000Z',
    );
    // London, Saturday 2026-03-28 22:00 GMT → Sunday 08:00 BST = 07:00Z.
    expect(iso(nextAllowedAt(t('2026-03-28T22:00:00Z'), 'Europe/London', daily))).toBe(
      '2026-03-29T07:00:00.000Z',
    );
    // Autumn: London Saturday 2026-10-24 22:00 BST → Sunday 08:00 GMT = 08:00Z.
    expect(iso(nextAllowedAt(t('2026-10-24T21:00:00Z'), 'Europe/London', daily))).toBe(
      '2026-10-25T08:00:00.000Z',
    );
  });

  it('a window opening inside the gap opens after it; one opening in the repeated hour at its first pass', () => {
    const gap: SendWindowPolicy = { start: '02:30', end: '05:00' };
    expect(iso(nextAllowedAt(t('2026-03-08T05:00:00Z'), 'America/New_York', gap))).toBe(
      '2026-03-08T07:30:00.000Z',
    );
    const repeated: SendWindowPolicy = { start: '01:30', end: '03:00' };
    expect(iso(nextAllowedAt(t('2026-10-24T22:00:00Z'), 'Europe/London', repeated))).toBe(
      '2026-10-25T00:30:00.000Z',
    );
  });

  it('per-weekday rules: a day off and a shorter day', () => {
    // Dhaka weekend: no sending on Friday, a short Saturday.
    const policy = sendWindowPolicySchema.parse({
      start: '09:00',
      end: '20:00',
      days: { fri: null, sat: { start: '10:00', end: '14:00' } },
    });
    // Thursday 2030-02-28 21:00 Dhaka → Friday is off → Saturday 10:00.
    expect(iso(nextAllowedAt(t('2030-02-28T15:00:00Z'), 'Asia/Dhaka', policy))).toBe(
      '2030-03-02T04:00:00.000Z',
    );
    // Saturday 15:00 → Sunday 09:00.
    expect(iso(nextAllowedAt(t('2030-03-02T09:00:00Z'), 'Asia/Dhaka', policy))).toBe(
      '2030-03-03T03:00:00.000Z',
    );
  });

  it('policies: start before end, HH:MM[:SS]; the promotional setting parses the same way', () => {
    expect(sendWindowPolicySchema.safeParse({ start: '21:00', end: '08:00' }).success).toBe(false);
    expect(sendWindowPolicySchema.safeParse({ start: '8:00', end: '21:00' }).success).toBe(false);
    expect(parseDailyWindow('09:00-21:00')).toEqual({ start: '09:00', end: '21:00' });
    expect(parseDailyWindow('09:00:30-09:00:45')).toEqual({ start: '09:00:30', end: '09:00:45' });
    expect(parseDailyWindow('21:00-09:00')).toBeNull();
    const allOff = sendWindowPolicySchema.parse({
      start: '09:00',
      end: '10:00',
      days: { sun: null, mon: null, tue: null, wed: null, thu: null, fri: null, sat: null },
    });
    expect(nextAllowedAt(t('2030-03-01T00:00:00Z'), 'Asia/Dhaka', allOff)).toBeNull();
  });
});
