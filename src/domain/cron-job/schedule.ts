/**
 * Fire times of a cron schedule in an IANA time zone, with Herald's DST policy. Pure (every function takes
 * the instant it starts from), so the cron-job decider can call it (invariant 6). croner enumerates
 * wall-clock times at a fixed offset of 0; this module maps each to instants in the zone: a repeated wall
 * time fires `first`, `last` or `both`, a skipped one is `shift`ed forward by the gap or `skip`ped, and two
 * wall times on one instant fire once. Defaults follow cron tradition: a fixed-time job first and shift,
 * an interval job both and skip. ADR 0011.
 */
import { Cron, CronPattern } from 'croner';
import { ValidationError } from '../../errors.js';

export type AmbiguousTimePolicy = 'first' | 'last' | 'both';
export type MissingTimePolicy = 'shift' | 'skip';
export const AMBIGUOUS_TIME_POLICIES = ['first', 'last', 'both'] as const;
export const MISSING_TIME_POLICIES = ['shift', 'skip'] as const;

export interface DstPolicy {
  readonly ambiguous: AmbiguousTimePolicy;
  readonly missing: MissingTimePolicy;
}

export interface ScheduleSpec {
  /** 5 fields (minute precision) or 6 (seconds first). */
  readonly expression: string;
  /** IANA zone, e.g. Europe/Berlin. */
  readonly timezone: string;
  readonly dst: DstPolicy;
}

/** How an occurrence's wall time met the clock: an ordinary time, a pass of a repeated one, or a shifted gap time. */
export type OccurrenceKind = 'regular' | 'ambiguous-first' | 'ambiguous-second' | 'shifted';

export interface Occurrence {
  /** Epoch milliseconds. */
  readonly at: number;
  /** The wall-clock time the expression named, `YYYY-MM-DDTHH:mm:ss` in the zone. */
  readonly wall: string;
  readonly kind: OccurrenceKind;
}

const HOUR = 3_600_000;
/** Offsets are compared this far either side of an instant: no zone changes its offset twice within it. */
const TRANSITION_HORIZON = 4 * HOUR;
/** A schedule whose next wall time is further than this many steps away has none (e.g. `0 0 30 2 *`). */
const MAX_STEPS = 100_000;

const FIXED_OFFSET_ZONES = new Set([
  'UTC',
  'Etc/UTC',
  'GMT',
  'Etc/GMT',
  'Etc/UCT',
  'UCT',
  'Zulu',
  'Etc/Zulu',
]);

// ─── offsets ────────────────────────────────────────────────────────────────────────────────────────

const formatters = new Map<string, Intl.DateTimeFormat>();
const offsetCache = new Map<string, number>();
const OFFSET_CACHE_LIMIT = 50_000;

function formatter(timezone: string): Intl.DateTimeFormat {
  let f = formatters.get(timezone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formatters.set(timezone, f);
  }
  return f;
}

/** The zone's UTC offset (ms) at an instant. Offsets change on whole minutes, so they are cached per minute. */
export function offsetAt(timezone: string, instant: number): number {
  if (FIXED_OFFSET_ZONES.has(timezone)) return 0;
  const minute = Math.floor(instant / 60_000);
  const key = `${timezone}|${minute}`;
  const cached = offsetCache.get(key);
  if (cached !== undefined) return cached;
  const at = minute * 60_000;
  const parts = formatter(timezone).formatToParts(new Date(at));
  const field = (type: Intl.DateTimeFormatPartTypes) => Number(parts.find((p) => p.type === type)!.value);
  const wall = Date.UTC(
    field('year'),
    field('month') - 1,
    field('day'),
    field('hour'),
    field('minute'),
    field('second'),
  );
  const offset = wall - at;
  if (offsetCache.size >= OFFSET_CACHE_LIMIT) offsetCache.clear();
  offsetCache.set(key, offset);
  return offset;
}

/** The largest offset change within TRANSITION_HORIZON of an instant (0 almost always). */
function transitionAround(timezone: string, instant: number): number {
  if (FIXED_OFFSET_ZONES.has(timezone)) return 0;
  const here = offsetAt(timezone, instant);
  const before = offsetAt(timezone, instant - TRANSITION_HORIZON);
  const after = offsetAt(timezone, instant + TRANSITION_HORIZON);
  return Math.max(here, before, after) - Math.min(here, before, after);
}

export function isValidTimezone(timezone: string): boolean {
  if (FIXED_OFFSET_ZONES.has(timezone)) return true;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    return true;
  } catch {
    return false;
  }
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');
function wallText(wall: number): string {
  const d = new Date(wall);
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

// ─── expressions ────────────────────────────────────────────────────────────────────────────────────

/**
 * A fixed-time expression has one plain value in each of seconds, minutes and hours (croner's rule, so
 * `30 2 * * *` is fixed and `*∕5 * * * *`, `0 * * * *` or `0 30 1,2 * * *` are interval expressions).
 */
export function isFixedTime(expression: string): boolean {
  const fields = expression.trim().split(/\s+/);
  const [second, minute, hour] = fields.length === 6 ? fields : ['0', ...fields];
  return [second, minute, hour].every((f) => /^\d+$/.test(f ?? ''));
}

/** The DST policy a job gets when it names none (see the module comment). */
export function defaultDstPolicy(expression: string): DstPolicy {
  return isFixedTime(expression)
    ? { ambiguous: 'first', missing: 'shift' }
    : { ambiguous: 'both', missing: 'skip' };
}

/** Throws ValidationError unless the expression has 5 or 6 fields croner accepts and the zone is known. */
export function validateSchedule(expression: string, timezone: string): void {
  const fields = expression.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) {
    throw new ValidationError(
      `invalid cron expression '${expression}': 5 fields (minute hour day month weekday) or 6 (seconds first)`,
      { field: 'schedule', schedule: expression },
    );
  }
  let cron: Cron;
  try {
    cron = new Cron(expression, { utcOffset: 0, mode: '5-or-6-parts' });
  } catch (error) {
    throw new ValidationError(`invalid cron expression '${expression}': ${(error as Error).message}`, {
      field: 'schedule',
      schedule: expression,
    });
  }
  // A day that no month has (30 February, 31 April) parses but never fires: a job that looks active and
  // never runs. Without a year field, an expression that fires at all fires within 28 years of any instant.
  if (cron.nextRun(new Date(0)) === null) {
    throw new ValidationError(`cron expression '${expression}' never fires (no such day in any year)`, {
      field: 'schedule',
      schedule: expression,
    });
  }
  if (!isValidTimezone(timezone)) {
    throw new ValidationError(`unknown time zone '${timezone}' (an IANA name such as Europe/Berlin)`, {
      field: 'timezone',
      timezone,
    });
  }
}

// ─── the shortest interval ──────────────────────────────────────────────────────────────────────────

const DAY = 86_400;
const valuesOf = (flags: readonly number[]) => flags.flatMap((on, value) => (on ? [value] : []));

/** The smallest difference between two consecutive values (Infinity for fewer than two). */
function smallestStep(values: readonly number[]): number {
  let step = Number.POSITIVE_INFINITY;
  for (let i = 1; i < values.length; i++) step = Math.min(step, values[i]! - values[i - 1]!);
  return step;
}

/** Whether the expression's day fields (day of month, month, weekday) ever fire on two consecutive days. */
function firesOnConsecutiveDays(expression: string): boolean {
  const fields = expression.trim().split(/\s+/);
  const dayFields = fields.slice(fields.length === 6 ? 3 : 2);
  const days = new Cron(`0 0 0 ${dayFields.join(' ')}`, { utcOffset: 0, mode: '5-or-6-parts' });
  // Nine years from 2000 hold two leap days and every weekday on every date of the year: a pair of
  // consecutive days (31 December and 1 January, 29 February and 1 March, Sunday and Monday) shows by then.
  const start = Date.UTC(2000, 0, 1);
  const end = Date.UTC(2009, 0, 1);
  let previous: number | null = null;
  for (let step = 0, at = start - 1; step < 2_000; step++) {
    const next = days.nextRun(new Date(at));
    if (!next || next.getTime() > end) return false;
    if (previous !== null && next.getTime() - previous === DAY * 1000) return true;
    previous = next.getTime();
    at = previous;
  }
  return false;
}

const intervals = new Map<string, number>();

/**
 * The shortest interval (seconds) between two consecutive wall-clock times the expression names, exact
 * below `upTo` (default a day); `upTo` means at least that. Pure: from the expression's fields alone. Within a day the times are every hour × minute
 * × second of the fields, so the shortest step is within a minute (consecutive seconds), across a minute
 * boundary (the last second of one chosen minute to the first of the next), or across an hour boundary;
 * across midnight only if two consecutive days fire. A DST change can bring two occurrences closer in
 * real time (the quota is judged on wall-clock times).
 */
export function shortestInterval(expression: string, upTo = DAY): number {
  const key = `${upTo}|${expression}`;
  let found = intervals.get(key);
  if (found === undefined) {
    found = Math.min(upTo, shortestIntervalOf(expression, upTo));
    if (intervals.size >= SCHEDULE_CACHE_LIMIT) intervals.clear();
    intervals.set(key, found);
  }
  return found;
}

function shortestIntervalOf(expression: string, upTo: number): number {
  const pattern = new CronPattern(expression, undefined, { mode: '5-or-6-parts' });
  const seconds = valuesOf(pattern.second);
  const minutes = valuesOf(pattern.minute);
  const hours = valuesOf(pattern.hour);
  const secondSpan = seconds.at(-1)! - seconds[0]!;
  const hourSpan = minutes.at(-1)! * 60 + seconds.at(-1)! - (minutes[0]! * 60 + seconds[0]!);
  const daySpan =
    hours.at(-1)! * 3600 +
    minutes.at(-1)! * 60 +
    seconds.at(-1)! -
    (hours[0]! * 3600 + minutes[0]! * 60 + seconds[0]!);
  let shortest = Math.min(
    smallestStep(seconds),
    smallestStep(minutes) * 60 - secondSpan,
    smallestStep(hours) * 3600 - hourSpan,
  );
  // Across midnight: the day's last time to the next day's first, when two consecutive days fire.
  if (DAY - daySpan < Math.min(shortest, upTo) && firesOnConsecutiveDays(expression)) {
    shortest = DAY - daySpan;
  }
  return shortest;
}

// ─── the schedule ───────────────────────────────────────────────────────────────────────────────────

export class Schedule {
  private readonly cron: Cron;
  private readonly fixed: boolean;

  constructor(readonly spec: ScheduleSpec) {
    validateSchedule(spec.expression, spec.timezone);
    this.cron = new Cron(spec.expression, { utcOffset: 0, mode: '5-or-6-parts' });
    this.fixed = FIXED_OFFSET_ZONES.has(spec.timezone);
  }

  /** The instants a wall time fires at under the DST policy (none, one, or both passes of a repeated time). */
  resolve(wall: number): Occurrence[] {
    const { timezone, dst } = this.spec;
    const text = wallText(wall);
    if (this.fixed) return [{ at: wall, wall: text, kind: 'regular' }];
    const guess = wall - offsetAt(timezone, wall - offsetAt(timezone, wall));
    const before = offsetAt(timezone, guess - TRANSITION_HORIZON);
    const after = offsetAt(timezone, guess + TRANSITION_HORIZON);
    const candidates = [...new Set([wall - before, wall - after])]
      .filter((instant) => instant + offsetAt(timezone, instant) === wall)
      .sort((a, b) => a - b);
    if (candidates.length === 1) return [{ at: candidates[0]!, wall: text, kind: 'regular' }];
    if (candidates.length === 2) {
      const [first, second] = candidates as [number, number];
      if (dst.ambiguous === 'first') return [{ at: first, wall: text, kind: 'ambiguous-first' }];
      if (dst.ambiguous === 'last') return [{ at: second, wall: text, kind: 'ambiguous-second' }];
      return [
        { at: first, wall: text, kind: 'ambiguous-first' },
        { at: second, wall: text, kind: 'ambiguous-second' },
      ];
    }
    // In a gap: with the offset from before the gap the instant lands after it, moved by the gap's length.
    return dst.missing === 'shift'
      ? [{ at: wall - Math.min(before, after), wall: text, kind: 'shifted' }]
      : [];
  }

  /** The first occurrence strictly after `after` (epoch ms), or null when the expression never fires again. */
  next(after: number): Occurrence | null {
    const { timezone } = this.spec;
    if (this.fixed) {
      const next = this.cron.nextRun(new Date(after));
      return next ? { at: next.getTime(), wall: wallText(next.getTime()), kind: 'regular' } : null;
    }
    // Near a transition a wall time before `after`'s own can still fire after it (the second pass of a
    // repeated hour), and one after a shifted gap time can fire before it: widen the walk by the change.
    let cursor = after + offsetAt(timezone, after) - transitionAround(timezone, after);
    let best: Occurrence | null = null;
    for (let step = 0; step < MAX_STEPS; step++) {
      const wall = this.cron.nextRun(new Date(cursor));
      if (!wall) break;
      cursor = wall.getTime();
      for (const occurrence of this.resolve(cursor)) {
        if (occurrence.at > after && (best === null || occurrence.at < best.at)) best = occurrence;
      }
      if (best !== null) {
        // No later wall time can fire before `best` once the walk is past its wall time plus any change.
        const stopAt = best.at + offsetAt(timezone, best.at) + transitionAround(timezone, best.at);
        if (cursor >= stopAt) break;
      }
    }
    return best;
  }

  /** Up to `limit` occurrences in (after, until], in order. */
  between(after: number, until: number, limit: number): Occurrence[] {
    const found: Occurrence[] = [];
    let cursor = after;
    while (found.length < limit) {
      const next = this.next(cursor);
      if (!next || next.at > until) break;
      found.push(next);
      cursor = next.at;
    }
    return found;
  }

  /** The next `count` occurrences after `after`. */
  upcoming(after: number, count: number): Occurrence[] {
    return this.between(after, Number.MAX_SAFE_INTEGER, count);
  }
}

const schedules = new Map<string, Schedule>();
const SCHEDULE_CACHE_LIMIT = 20_000;

/** A (cached) schedule for a spec; throws ValidationError for an invalid expression or zone. */
export function scheduleFor(spec: ScheduleSpec): Schedule {
  const key = `${spec.expression}|${spec.timezone}|${spec.dst.ambiguous}|${spec.dst.missing}`;
  let schedule = schedules.get(key);
  if (!schedule) {
    schedule = new Schedule(spec);
    if (schedules.size >= SCHEDULE_CACHE_LIMIT) schedules.clear();
    schedules.set(key, schedule);
  }
  return schedule;
}
