/**
 * The scanner shared by every sweeper of every registered aggregate, on the shared service loop. A pass
 * runs each sweeper until its batches stop coming back full; then the scanner sleeps until the
 * earliest of: the next due time any sweeper reports (a timer armed from database time, so a row
 * due at 12:00:00.000 is claimed within milliseconds), a wake-up (NOTIFY, tick), or the fallback
 * poll. Wake-ups only cut latency (invariant 7): correctness rests on the sweepers' row claims.
 */
import { errorMessage } from '../errors.js';
import type { Logger } from '../logger.js';
import { ServiceLoop } from '../runtime/service-loop.js';

export interface SweepResult {
  /** Rows changed by this call. */
  processed: number;
  /** True when the batch came back full: call again before sleeping. */
  more: boolean;
}

export interface Sweeper {
  readonly name: string;
  /** Counters for the stop log line and metrics (claimed, reclaimed, …). */
  readonly stats?: Readonly<Record<string, number>>;
  /** Called at the start of each scanner pass (per-pass budgets). */
  beginPass?(): void;
  sweep(): Promise<SweepResult>;
  /** Milliseconds until this sweeper has work again (null: nothing scheduled). */
  nextDueInMs(): Promise<number | null>;
  /** Called once the scanner stopped (e.g. a leased sweeper releases its lease). */
  stop?(): Promise<void>;
}

export interface ScannerOptions {
  sweepers: readonly Sweeper[];
  /** Fallback poll: the longest the scanner sleeps, whatever else happens. */
  pollIntervalMs: number;
  logger: Logger;
  /** Back-off after a failed pass (database down). */
  errorBackoffMs?: number;
}

export class Scanner {
  private readonly loop: ServiceLoop;
  private readonly counts = { passes: 0, processed: 0 };

  constructor(private readonly options: ScannerOptions) {
    this.loop = new ServiceLoop({
      name: 'scanner',
      logger: options.logger,
      round: async () => {
        await this.passOnce();
        const sleepMs = await this.nextSleepMs();
        options.logger.debug(
          { sleepMs },
          'scanner pass done: sleeping until the next due time, a wake-up or the poll',
        );
        return sleepMs;
      },
      errorBackoff: { baseMs: options.errorBackoffMs ?? 250, maxMs: options.pollIntervalMs, jitter: 'equal' },
      onError: (error, failures, retryInMs) =>
        options.logger.error(
          { err: error, failures, retryInMs },
          `scanner pass failed: ${errorMessage(error)}`,
        ),
    });
  }

  /** `sleeps` counts the times the scanner went to sleep with its timer armed (tests wait on it). */
  get stats() {
    return { ...this.counts, errors: this.loop.stats.errors, sleeps: this.loop.stats.sleeps };
  }

  start(): void {
    this.loop.start();
  }

  /** Wakes the scanner now (NOTIFY, tick). Safe to call at any time, any number of times. */
  wake(): void {
    this.loop.wake();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
    await Promise.all(this.options.sweepers.map((sweeper) => sweeper.stop?.()));
  }

  /** One full pass over every sweeper (tests and `herald scanner --once`). */
  async passOnce(): Promise<number> {
    let processed = 0;
    for (const sweeper of this.options.sweepers) sweeper.beginPass?.();
    for (const sweeper of this.options.sweepers) {
      for (;;) {
        if (this.loop.stopping) return processed;
        const result = await sweeper.sweep();
        processed += result.processed;
        this.counts.processed += result.processed; // per sweep: a pass cut short by stop() still counts
        if (!result.more) break;
      }
    }
    this.counts.passes++;
    return processed;
  }

  private async nextSleepMs(): Promise<number> {
    let sleepMs = this.options.pollIntervalMs;
    for (const sweeper of this.options.sweepers) {
      const dueIn = await sweeper.nextDueInMs();
      // Rounded up, no margin on top (every ms here is due → claimed latency): the claim compares with
      // the database's now(), and a timer that fires a fraction early (libuv counts whole ms) costs one
      // pass that claims nothing and a 1 ms retry. At least 1 ms, so something due but not claimable
      // yet (another scanner's claim transaction holds it) is retried soon without spinning.
      if (dueIn !== null) sleepMs = Math.min(sleepMs, Math.max(1, Math.ceil(dueIn)));
    }
    return sleepMs;
  }
}
