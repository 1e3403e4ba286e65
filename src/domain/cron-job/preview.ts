/**
 * The preview of a schedule a job would have: the next fire times of an expression in a time zone
 * under the DST policy the job would get (its own, or the default for the expression), computed by the
 * same Schedule the decider uses for `nextRunAt` and the materializer for occurrences, so the preview
 * never promises a time the job would not fire at. Pure: the caller passes the instant to start from
 * (the database time, invariant 6). Used by the dashboard's cron form (POST /v1/cron-jobs/preview).
 */
import { type DstPolicy, defaultDstPolicy, type OccurrenceKind, offsetAt, scheduleFor } from './schedule.js';

/** How an occurrence met a DST transition, in words a form can show (absent for an ordinary time). */
export type PreviewNote = 'dst-shifted' | 'dst-repeated-first' | 'dst-repeated-second';

export interface PreviewOccurrence {
  /** The instant, UTC ISO. */
  readonly at: string;
  /** The local time in the zone at that instant, `YYYY-MM-DDTHH:mm:ss±HH:MM`. */
  readonly local: string;
  /** The wall-clock time the expression named (differs from `local` for a time shifted out of a gap). */
  readonly wall: string;
  readonly kind: OccurrenceKind;
  readonly note?: PreviewNote;
}

export interface SchedulePreview {
  readonly dst: DstPolicy;
  readonly next: PreviewOccurrence[];
}

const NOTES: Record<OccurrenceKind, PreviewNote | undefined> = {
  regular: undefined,
  shifted: 'dst-shifted',
  'ambiguous-first': 'dst-repeated-first',
  'ambiguous-second': 'dst-repeated-second',
};

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

/** `at` as local time in the zone with its offset, e.g. `2026-03-29T03:30:00+02:00`. */
export function localTime(timezone: string, at: number): string {
  const offset = offsetAt(timezone, at);
  const d = new Date(at + offset);
  const sign = offset < 0 ? '-' : '+';
  const minutes = Math.abs(offset) / 60_000;
  return (
    `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}` +
    `T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}` +
    `${sign}${pad(Math.floor(minutes / 60))}:${pad(minutes % 60)}`
  );
}

/**
 * The next `count` occurrences strictly after `after` (epoch ms). Throws ValidationError (field
 * `schedule` or `timezone`) for an expression croner refuses or an unknown zone.
 */
export function previewSchedule(
  spec: { expression: string; timezone: string; dst?: DstPolicy | undefined },
  after: number,
  count: number,
): SchedulePreview {
  const dst = spec.dst ?? defaultDstPolicy(spec.expression);
  const schedule = scheduleFor({ expression: spec.expression.trim(), timezone: spec.timezone, dst });
  const next = schedule.upcoming(after, count).map((o) => {
    const note = NOTES[o.kind];
    return {
      at: new Date(o.at).toISOString(),
      local: localTime(spec.timezone, o.at),
      wall: o.wall,
      kind: o.kind,
      ...(note ? { note } : {}),
    };
  });
  return { dst, next };
}
