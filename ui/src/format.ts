/**
 * Display helpers shared by the pages: times with their zone (the browser's, or a cron job's own), ages
 * and durations, counts. A time shown without its zone is ambiguous, so every instant goes through
 * `formatTime` (the browser's zone) or `formatZoned` (a given IANA zone), both of which name the zone.
 */

/** The browser's IANA zone (e.g. `Europe/Berlin`; `UTC` when the browser does not say). */
export function browserZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

/** The zone's short name at `date` (`UTC`, `CET`, `GMT+6`…), as Intl spells it in en-US. */
export function zoneAbbreviation(date: Date, timeZone: string): string {
  try {
    const part = new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'short' })
      .formatToParts(date)
      .find((p) => p.type === 'timeZoneName');
    return part?.value ?? timeZone;
  } catch {
    return timeZone;
  }
}

/** The wall-clock parts of `date` in `timeZone` (h23). */
function wallParts(date: Date, timeZone: string) {
  const parts = new Intl.DateTimeFormat('en-CA', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  }).formatToParts(date);
  const v = (t: string) => parts.find((p) => p.type === t)?.value ?? '';
  return {
    year: v('year'),
    month: v('month'),
    day: v('day'),
    hour: v('hour'),
    minute: v('minute'),
    second: v('second'),
  };
}

function toDate(value: string | number | Date): Date {
  return value instanceof Date ? value : new Date(value);
}

/**
 * `value` as `YYYY-MM-DD HH:mm:ss <zone>` in `timeZone` (default: the browser's), e.g.
 * `2026-12-06 14:05:00 UTC`; `—` for nothing. `{ zone: false }` leaves the zone out (where a column
 * header or the page already names it).
 */
export function formatZoned(
  value: string | number | Date | null | undefined,
  timeZone: string = browserZone(),
  options: { zone?: boolean } = {},
): string {
  if (value === null || value === undefined || value === '') return '—';
  const date = toDate(value);
  if (Number.isNaN(date.getTime())) return String(value);
  let p: ReturnType<typeof wallParts>;
  try {
    p = wallParts(date, timeZone);
  } catch {
    return formatZoned(value, 'UTC', options);
  }
  const text = `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second}`;
  return options.zone === false ? text : `${text} ${zoneAbbreviation(date, timeZone)}`;
}

/** `value` in the browser's zone, with the zone: `2026-12-06 14:05:00 CET`. */
export function formatTime(value: string | number | Date | null | undefined): string {
  return formatZoned(value, browserZone());
}

/** Milliseconds `timeZone` is ahead of UTC at `ms`. */
function zoneOffsetMs(ms: number, timeZone: string): number {
  const p = wallParts(new Date(ms), timeZone);
  const asUtc = Date.UTC(+p.year, +p.month - 1, +p.day, +p.hour, +p.minute, +p.second);
  return asUtc - Math.floor(ms / 1000) * 1000;
}

/** A `datetime-local` value (`YYYY-MM-DDTHH:mm`) for the instant `ms`, on the wall clock of `timeZone`. */
export function toZonedInput(ms: number, timeZone: string, seconds = false): string {
  const p = wallParts(new Date(ms), timeZone);
  return `${p.year}-${p.month}-${p.day}T${p.hour}:${p.minute}${seconds ? `:${p.second}` : ''}`;
}

/**
 * The instant (ISO, UTC) of a `datetime-local` value read on the wall clock of `timeZone`; null when it
 * is not a date. A wall time the zone skips (DST) is read with the offset before the change.
 */
export function fromZonedInput(value: string, timeZone: string): string | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(value);
  if (!m) return null;
  const wall = Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +(m[6] ?? 0));
  try {
    let at = wall - zoneOffsetMs(wall, timeZone);
    at = wall - zoneOffsetMs(at, timeZone);
    return new Date(at).toISOString();
  } catch {
    return null;
  }
}

/** A duration in seconds as `850 ms`, `12 s`, `4 m 10 s`, `3 h 5 m`, `2 d 4 h`. */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return '—';
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)} s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m} m ${Math.round(seconds % 60)} s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h} h ${m % 60} m`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** How long ago (or from now) `value` is, relative to `now`: `5 s ago`, `in 3 m 2 s`. */
export function formatRelative(value: string | Date | null | undefined, now = Date.now()): string {
  if (!value) return '—';
  const at = new Date(value).getTime();
  if (Number.isNaN(at)) return String(value);
  const seconds = (at - now) / 1000;
  return seconds >= 0 ? `in ${formatDuration(seconds)}` : `${formatDuration(-seconds)} ago`;
}

export function formatCount(value: number | null | undefined): string {
  if (value === null || value === undefined) return '—';
  return new Intl.NumberFormat('en-US').format(value);
}

/** A long text cut to `max` characters with an ellipsis (the full text goes in a title attribute). */
export function excerpt(text: string | null | undefined, max = 120): string {
  if (!text) return '';
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
