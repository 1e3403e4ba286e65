/**
 * Local time for SMS campaigns, DST-correct through the runtime's IANA database. Pure: every function takes
 * the instant it starts from (the transaction's time: invariant 6). `scheduledAt` without an offset is a
 * wall time in the campaign zone (Dhaka). A window policy is a daily start–end with per-weekday overrides:
 * the BTRC window for promotional traffic is one in the campaign zone, a send window another in each
 * recipient's zone. `nextAllowedAt` is the instant itself inside a window, else the next opening; an
 * opening in a DST gap is shifted forward by the gap (02:30 opens at 03:30), a repeated one opens at its
 * first occurrence. ADR 0014.
 */
import { z } from 'zod';
import { isValidTimezone, offsetAt } from '../cron-job/schedule.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

export const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

const TIME_OF_DAY = /^([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?$/;

/** Seconds since midnight of `HH:MM[:SS]`; null when malformed. */
export function secondsOfDay(text: string): number | null {
  const m = TIME_OF_DAY.exec(text);
  if (!m) return null;
  return Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3] ?? 0);
}

const timeOfDay = z.string().regex(TIME_OF_DAY, 'expected HH:MM or HH:MM:SS (24-hour)');
const dailyWindow = z
  .strictObject({ start: timeOfDay, end: timeOfDay })
  .refine((w) => secondsOfDay(w.start)! < secondsOfDay(w.end)!, {
    message: 'start must be before end (a window does not cross midnight)',
  });

export const sendWindowPolicySchema = z
  .strictObject({
    start: timeOfDay,
    end: timeOfDay,
    /** Per-weekday overrides; null: no sending that day. */
    days: z.partialRecord(z.enum(WEEKDAYS), dailyWindow.nullable()).optional(),
  })
  .refine((w) => secondsOfDay(w.start)! < secondsOfDay(w.end)!, {
    message: 'start must be before end (a window does not cross midnight)',
    path: ['end'],
  });

export type SendWindowPolicy = z.infer<typeof sendWindowPolicySchema>;

export { isValidTimezone };

/** Local calendar fields of an instant in a zone. */
export interface LocalTime {
  readonly year: number;
  readonly month: number;
  readonly day: number;
  readonly weekday: Weekday;
  /** Seconds since local midnight (fractions of a second dropped). */
  readonly seconds: number;
  /** The wall time as if it were UTC (epoch ms): `instant + offset`. */
  readonly wall: number;
}

export function localTime(instant: number, zone: string): LocalTime {
  const wall = instant + offsetAt(zone, instant);
  const d = new Date(wall);
  return {
    year: d.getUTCFullYear(),
    month: d.getUTCMonth() + 1,
    day: d.getUTCDate(),
    weekday: WEEKDAYS[d.getUTCDay()]!,
    seconds: d.getUTCHours() * 3600 + d.getUTCMinutes() * 60 + d.getUTCSeconds(),
    wall,
  };
}

/** The instant a wall time (epoch ms read as UTC) happens in a zone: first occurrence; a gap time after the gap. */
export function wallToInstant(zone: string, wall: number): number {
  const guess = wall - offsetAt(zone, wall - offsetAt(zone, wall));
  const before = offsetAt(zone, guess - 4 * HOUR);
  const after = offsetAt(zone, guess + 4 * HOUR);
  const candidates = [...new Set([wall - before, wall - after])]
    .filter((instant) => instant + offsetAt(zone, instant) === wall)
    .sort((a, b) => a - b);
  if (candidates.length > 0) return candidates[0]!;
  return wall - Math.min(before, after);
}

function windowOn(policy: SendWindowPolicy, weekday: Weekday): { start: number; end: number } | null {
  const override = policy.days?.[weekday];
  if (override === null) return null;
  const w = override ?? policy;
  return { start: secondsOfDay(w.start)!, end: secondsOfDay(w.end)! };
}

/**
 * The instant itself when `instant` is inside the policy's window in `zone`, else the next opening;
 * null when the policy opens on no day of the coming week.
 */
export function nextAllowedAt(instant: number, zone: string, policy: SendWindowPolicy): number | null {
  const local = localTime(instant, zone);
  const midnight = Date.UTC(local.year, local.month - 1, local.day);
  for (let k = 0; k <= 7; k++) {
    const dayWall = midnight + k * DAY;
    const weekday = WEEKDAYS[new Date(dayWall).getUTCDay()]!;
    const window = windowOn(policy, weekday);
    if (!window) continue;
    const open = wallToInstant(zone, dayWall + window.start * 1000);
    const close = wallToInstant(zone, dayWall + window.end * 1000);
    if (instant < open) return open;
    if (instant < close) return instant;
  }
  return null;
}

export function isInsideWindow(instant: number, zone: string, policy: SendWindowPolicy): boolean {
  return nextAllowedAt(instant, zone, policy) === instant;
}

/** True when the policy opens on at least one weekday. */
export function opensSomeDay(policy: SendWindowPolicy): boolean {
  return WEEKDAYS.some((day) => windowOn(policy, day) !== null);
}

/** `HH:MM[:SS]-HH:MM[:SS]` (a daily window, e.g. the promotional window setting) → a policy; null if malformed. */
export function parseDailyWindow(text: string): SendWindowPolicy | null {
  const [start, end, extra] = text.split('-');
  if (extra !== undefined || start === undefined || end === undefined) return null;
  const parsed = sendWindowPolicySchema.safeParse({ start: start.trim(), end: end.trim() });
  return parsed.success ? parsed.data : null;
}

const LOCAL_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?$/;
const WITH_OFFSET = /(?:Z|[+-]\d{2}:?\d{2})$/i;

/**
 * A scheduledAt: with `Z` or an offset, that instant; without, a wall time in `zone` (DST-correct).
 * Null when it is neither.
 */
export function parseScheduledAt(text: string, zone: string): number | null {
  const trimmed = text.trim();
  if (WITH_OFFSET.test(trimmed)) {
    const parsed = z.iso.datetime({ offset: true }).safeParse(trimmed);
    return parsed.success ? Date.parse(trimmed) : null;
  }
  const m = LOCAL_DATE_TIME.exec(trimmed);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map((v) => Number(v ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const millis = Number((m[7] ?? '0').padEnd(3, '0'));
  const wall = Date.UTC(year, month - 1, day, hour, minute, second, millis);
  const check = new Date(wall);
  if (check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day || hour > 23) return null;
  return wallToInstant(zone, wall);
}

/** `HH:MM` local wall text of an instant (for messages). */
export function wallClock(instant: number, zone: string): string {
  const t = localTime(instant, zone);
  const hh = String(Math.floor(t.seconds / 3600)).padStart(2, '0');
  const mm = String(Math.floor((t.seconds % 3600) / 60)).padStart(2, '0');
  const date = `${t.year}-${String(t.month).padStart(2, '0')}-${String(t.day).padStart(2, '0')}`;
  return `${date} ${hh}:${mm}`;
}
