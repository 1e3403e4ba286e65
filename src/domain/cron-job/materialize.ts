/**
 * The materializer's decision for one due job, pure: given the first unhandled occurrence, `now` and
 * the job's runs still active, which occurrences run, which wait (buffer-one), which are skipped for
 * overlap and which are missed — the catch-up policy first (by lateness), then the overlap policy (in
 * occurrence order). Occurrences a pass does not decide stay due (the job's next run is the first of
 * them), so every transaction is bounded however long the scanners were down.
 */
import type { CatchUpPolicy, OverlapPolicy } from './policies.js';
import type { Schedule } from './schedule.js';

/** Occurrences enumerated per pass at most (about 1 s of CPU): longer backlogs are decided over several passes. */
export const ENUMERATION_LIMIT = 100_000;

export interface PlannedOccurrence {
  at: number;
  fate: 'fired' | 'buffered' | 'skipped-overlap';
  late: boolean;
}

export interface MaterializePlan {
  occurrences: PlannedOccurrence[];
  missed: { first: number; last: number; count: number; reason: string } | null;
  nextRunAt: number | null;
}

export interface MaterializeInput {
  schedule: Schedule;
  /** The first occurrence not yet handled (≤ now). */
  nextRunAt: number;
  now: number;
  catchUp: CatchUpPolicy;
  overlap: OverlapPolicy;
  activeRuns: number;
  bufferedRuns: number;
  maxRuns: number;
  enumerationLimit?: number;
}

export function planMaterialization(input: MaterializeInput): MaterializePlan {
  const { schedule, now, catchUp } = input;
  const limit = Math.max(input.enumerationLimit ?? ENUMERATION_LIMIT, catchUp.cap + input.maxRuns + 1);
  const windowStart = now - catchUp.windowMs;
  const graceStart = now - catchUp.graceMs;
  const reasons = new Set<string>();
  let missedCount = 0;
  let missedFirst: number | null = null;
  let missedLast: number | null = null;
  const miss = (at: number, reason: string) => {
    missedFirst ??= at;
    missedLast = at;
    missedCount++;
    reasons.add(reason);
  };
  const done = (occurrences: PlannedOccurrence[], lastHandled: number | null): MaterializePlan => ({
    occurrences,
    missed:
      missedFirst === null || missedLast === null
        ? null
        : { first: missedFirst, last: missedLast, count: missedCount, reason: [...reasons].join('; ') },
    nextRunAt: lastHandled === null ? input.nextRunAt : (schedule.next(lastHandled)?.at ?? null),
  });

  // Occurrences older than the window are missed in every mode (counted, not kept).
  let cursor: number | null = input.nextRunAt;
  let enumerated = 0;
  while (cursor !== null && cursor < windowStart && cursor <= now) {
    if (enumerated >= limit) return done([], missedLast);
    miss(cursor, `more than ${catchUp.windowMs} ms late (catch-up window)`);
    enumerated++;
    cursor = schedule.next(cursor)?.at ?? null;
  }

  // The rest, up to now: late (after the grace) or on time.
  const late: number[] = [];
  const onTime: number[] = [];
  while (cursor !== null && cursor <= now) {
    if (enumerated >= limit) {
      // More are due than one pass enumerates: the oldest cannot be among the ones that run; decide
      // them as missed and leave the rest (and everything after) due for the next pass.
      const keep = catchUp.cap + input.maxRuns;
      const decided = late.splice(0, Math.max(0, late.length - keep));
      for (const at of decided) miss(at, `late (${catchUp.mode})`);
      return done([], missedLast);
    }
    (cursor < graceStart ? late : onTime).push(cursor);
    enumerated++;
    cursor = schedule.next(cursor)?.at ?? null;
  }

  let runs: number[];
  switch (catchUp.mode) {
    case 'skip-missed':
      for (const at of late) miss(at, 'late (skip-missed)');
      runs = onTime;
      break;
    case 'run-latest': {
      const latest = onTime.length === 0 ? late.pop() : undefined;
      for (const at of late)
        miss(at, onTime.length === 0 ? 'late (run-latest ran the latest)' : 'late (run-latest)');
      runs = latest === undefined ? onTime : [latest, ...onTime];
      break;
    }
    case 'run-all': {
      const over = late.splice(0, Math.max(0, late.length - catchUp.cap));
      for (const at of over) miss(at, `late beyond the catch-up cap (${catchUp.cap})`);
      runs = [...late, ...onTime];
      break;
    }
  }

  // At most maxRuns per pass; the others stay due.
  const taken = runs.slice(0, input.maxRuns);
  let active = input.activeRuns;
  let buffered = input.bufferedRuns;
  const occurrences = taken.map((at): PlannedOccurrence => {
    const isLate = at < graceStart;
    if (input.overlap === 'allow' || active === 0) {
      active++;
      return { at, fate: 'fired', late: isLate };
    }
    if (input.overlap === 'buffer-one' && buffered === 0) {
      buffered++;
      return { at, fate: 'buffered', late: isLate };
    }
    return { at, fate: 'skipped-overlap', late: isLate };
  });
  const lastHandled =
    taken.length < runs.length
      ? (taken.at(-1) ?? null)
      : Math.max(taken.at(-1) ?? -Infinity, missedLast ?? -Infinity);
  return done(occurrences, Number.isFinite(lastHandled) ? lastHandled : null);
}
