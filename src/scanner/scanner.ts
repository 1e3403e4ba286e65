/**
 * The scanner loop shared by every sweeper (campaigns now; delayed actions and cron next). A pass
 * runs each sweeper until its batches stop coming back full; then the scanner sleeps until the
 * earliest of: the next due time any sweeper reports (a timer armed from database time, so a row
 * due at 12:00:00.000 is claimed within milliseconds), a wake-up (NOTIFY, tick), or the fallback
 * poll. Wake-ups only cut latency (invariant 7): correctness rests on the sweepers' row claims.
 */
import { abortableDelay } from '../adapters/amqp/amqp-connection.js';
import { errorMessage } from '../errors.js';
import type { Logger } from '../logger.js';

export interface SweepResult {
  /** Rows changed by this call. */
  processed: number;
  /** True when the batch came back full: call again before sleeping. */
  more: boolean;
}

export interface Sweeper {
  readonly name: string;
  sweep(): Promise<SweepResult>;
  /** Milliseconds until this sweeper has work again (null: nothing scheduled). */
  nextDueInMs(): Promise<number | null>;
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
  private wakeRequested = false;
  private wakeWaiter: (() => void) | undefined;
  private readonly controller = new AbortController();
  private loop: Promise<void> | undefined;
  /** `sleeps` counts the times the scanner went to sleep with its timer armed (tests wait on it). */
  readonly stats = { passes: 0, processed: 0, errors: 0, sleeps: 0 };

  constructor(private readonly options: ScannerOptions) {}

  start(): void {
    this.loop ??= this.run();
  }

  /** Wakes the scanner now (NOTIFY, tick). Safe to call at any time, any number of times. */
  wake(): void {
    this.wakeRequested = true;
    this.wakeWaiter?.();
  }

  async stop(): Promise<void> {
    this.controller.abort();
    this.wakeWaiter?.();
    await this.loop;
  }

  /** One full pass over every sweeper (tests and `herald scanner --once`). */
  async passOnce(): Promise<number> {
    let processed = 0;
    for (const sweeper of this.options.sweepers) {
      for (;;) {
        if (this.controller.signal.aborted) return processed;
        const result = await sweeper.sweep();
        processed += result.processed;
        this.stats.processed += result.processed; // per sweep: a pass cut short by stop() still counts
        if (!result.more) break;
      }
    }
    this.stats.passes++;
    return processed;
  }

  private async run(): Promise<void> {
    const { logger } = this.options;
    let failures = 0;
    while (!this.controller.signal.aborted) {
      this.wakeRequested = false;
      let sleepMs = this.options.pollIntervalMs;
      try {
        await this.passOnce();
        sleepMs = await this.nextSleepMs();
        failures = 0;
      } catch (error) {
        failures++;
        this.stats.errors++;
        sleepMs = Math.min(
          this.options.pollIntervalMs,
          (this.options.errorBackoffMs ?? 250) * 2 ** Math.min(failures, 6),
        );
        logger.error(
          { err: error, failures, retryInMs: sleepMs },
          `scanner pass failed: ${errorMessage(error)}`,
        );
      }
      if (this.wakeRequested || this.controller.signal.aborted) continue;
      await this.sleep(sleepMs);
    }
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

  private sleep(ms: number): Promise<void> {
    this.stats.sleeps++;
    return new Promise((resolve) => {
      const timer = new AbortController();
      this.wakeWaiter = () => timer.abort();
      abortableDelay(ms, timer.signal).then(() => {
        this.wakeWaiter = undefined;
        resolve();
      });
    });
  }
}
