/**
 * The one backoff function: every retry in Herald waits `retryDelayMs(attempt, settings)` — outbox rows
 * whose publish failed (invariant 2: the pending row with a later `next_attempt_at` is the retry), service
 * loops after a failed round, reconnects, consumer copies. Pure: the random source is injected. The ceiling
 * for attempt n is `min(maxMs, baseMs * 2^(n-1))`; jitter spreads a batch that failed together: `full` in
 * [0, ceiling], `equal` in [ceiling/2, ceiling] (a row's delay never shrinks: the relay's default),
 * `decorrelated` in [baseMs, 3 × previous delay], the previous ceiling standing in when none is given.
 * ADR 0004, ADR 0009.
 */
export type JitterMode = 'full' | 'equal' | 'decorrelated';

export interface BackoffSettings {
  readonly baseMs: number;
  readonly maxMs: number;
  readonly jitter: JitterMode;
}

/** A source of uniform numbers in [0, 1), like Math.random. */
export type RandomSource = () => number;

/** 2^exponent would overflow to Infinity beyond ~1023; anything above 2^52 × base is capped anyway. */
const MAX_EXPONENT = 52;

/** The exponential ceiling for `attempt` (1-based), before jitter. */
export function backoffCeilingMs(
  attempt: number,
  settings: Pick<BackoffSettings, 'baseMs' | 'maxMs'>,
): number {
  const exponent = Math.min(MAX_EXPONENT, Math.max(0, Math.floor(attempt) - 1));
  return Math.min(settings.maxMs, settings.baseMs * 2 ** exponent);
}

/**
 * The delay before the next attempt, after attempt number `attempt` (1-based) failed. Always within
 * [0, maxMs], and an integer number of milliseconds.
 */
export function retryDelayMs(
  attempt: number,
  settings: BackoffSettings,
  random: RandomSource = Math.random,
  previousDelayMs?: number,
): number {
  const r = clampUnit(random());
  const ceiling = backoffCeilingMs(attempt, settings);
  switch (settings.jitter) {
    case 'full':
      return Math.round(r * ceiling);
    case 'equal':
      return Math.round(ceiling / 2 + (r * ceiling) / 2);
    case 'decorrelated': {
      const previous =
        previousDelayMs ?? (attempt > 1 ? backoffCeilingMs(attempt - 1, settings) : settings.baseMs);
      const upper = Math.max(settings.baseMs, previous * 3);
      return Math.round(Math.min(settings.maxMs, settings.baseMs + r * (upper - settings.baseMs)));
    }
    default: {
      const exhaustive: never = settings.jitter;
      return exhaustive;
    }
  }
}

function clampUnit(value: number): number {
  if (!Number.isFinite(value) || value < 0) return 0;
  return Math.min(value, 1);
}

/** Sleeps `ms`, ending early (resolving, never rejecting) when `signal` aborts. */
export function abortableDelay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, Math.max(0, ms));
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
