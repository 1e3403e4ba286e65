/**
 * The dashboard's time formatting (ui/src/format.ts): every instant is shown with its zone, and a
 * cron job's wall-clock input is read in the job's zone (DST included), not the browser's.
 */
import { describe, expect, it } from 'vitest';
import { formatZoned, fromZonedInput, toZonedInput, zoneAbbreviation } from '../../ui/src/format.js';

describe('formatZoned', () => {
  it('names the zone of the time it shows', () => {
    expect(formatZoned('2026-07-01T12:00:00Z', 'UTC')).toBe('2026-07-01 12:00:00 UTC');
    expect(formatZoned('2026-07-01T12:00:00Z', 'America/New_York')).toBe('2026-07-01 08:00:00 EDT');
    expect(formatZoned('2026-01-01T12:00:00Z', 'America/New_York')).toBe('2026-01-01 07:00:00 EST');
    expect(formatZoned('2026-01-01T12:00:00Z', 'Asia/Dhaka', { zone: false })).toBe('2026-01-01 18:00:00');
    expect(zoneAbbreviation(new Date('2026-01-01T00:00:00Z'), 'Asia/Dhaka')).toBe('GMT+6');
    expect(formatZoned(null, 'UTC')).toBe('—');
  });
});

describe('zoned datetime-local inputs', () => {
  it('reads a wall time in the given zone, across DST', () => {
    expect(fromZonedInput('2026-01-15T09:30', 'America/New_York')).toBe('2026-01-15T14:30:00.000Z');
    expect(fromZonedInput('2026-07-15T09:30', 'America/New_York')).toBe('2026-07-15T13:30:00.000Z');
    expect(fromZonedInput('2026-07-15T09:30:15', 'Asia/Dhaka')).toBe('2026-07-15T03:30:15.000Z');
    expect(fromZonedInput('not a date', 'UTC')).toBeNull();
  });

  it('round-trips an instant through the zone wall clock', () => {
    const at = Date.parse('2026-03-08T15:45:00Z');
    for (const zone of ['UTC', 'America/New_York', 'Europe/Berlin', 'Asia/Kolkata', 'Pacific/Auckland']) {
      const input = toZonedInput(at, zone);
      expect(fromZonedInput(input, zone), zone).toBe(new Date(at).toISOString());
    }
  });
});
