/**
 * The start/stop/wake/sleep/backoff primitive every long-running service runs on: the scanner, the
 * relay, the projector, the tick and the maintenance services (River's `maintenance` base service).
 * A round does some work and says how long to sleep; a wake-up (NOTIFY, a tick, new work) ends the
 * sleep early or, when it arrives during a round, skips the next sleep; a round that throws is logged
 * and retried after a backoff (`retryDelayMs`), so a database that is down delays work and never
 * stops the process. An outage is logged twice, not once per failed round: its first failure at error,
 * and the round that succeeds again at warn with how long the outage lasted, how many rounds failed and
 * the first error (the failures between are debug lines). `stop()` aborts every sleep and delay, lets
 * the round in progress finish, and resolves. Wake-ups only cut latency (invariant 7): correctness rests on what the rounds claim.
 */
import { errorMessage } from '../errors.js';
import type { Logger } from '../logger.js';
import { abortableDelay, type BackoffSettings, type RandomSource, retryDelayMs } from './backoff.js';

export interface ServiceLoopOptions {
  /** Named in log lines. */
  name: string;
  logger: Logger;
  /** One round of work; resolves with how long to sleep before the next one (ms). */
  round: () => Promise<number>;
  /** Back-off after a failed round, by consecutive failures. Default 250 ms doubling to 30 s. */
  errorBackoff?: BackoffSettings;
  random?: RandomSource;
  /**
   * Called for the first failed round of an outage instead of the default error log line (which names
   * the service, the error and the delay); the later ones are debug lines.
   */
  onError?: (error: unknown, failures: number, retryInMs: number) => void;
  /** The clock outages are timed with (ms). Default `Date.now`. */
  now?: () => number;
}

export interface ServiceLoopStats {
  rounds: number;
  errors: number;
  /** Sleeps begun (a test can wait for the service to go idle). */
  sleeps: number;
}

const DEFAULT_ERROR_BACKOFF: BackoffSettings = { baseMs: 250, maxMs: 30_000, jitter: 'equal' };

export class ServiceLoop {
  readonly stats: ServiceLoopStats = { rounds: 0, errors: 0, sleeps: 0 };
  private readonly controller = new AbortController();
  private running: Promise<void> | undefined;
  private wakeRequested = false;
  private endSleep: (() => void) | undefined;
  private consecutiveFailures = 0;
  /** The outage in progress: when its first round failed, and with what. */
  private outage: { since: number; error: unknown } | undefined;

  constructor(private readonly options: ServiceLoopOptions) {}

  /** Starts the rounds (once; later calls do nothing). */
  start(): void {
    if (this.controller.signal.aborted) return;
    this.running ??= this.run();
  }

  /** Aborts sleeps and delays, waits for the round in progress, resolves. Idempotent. */
  async stop(): Promise<void> {
    this.controller.abort();
    this.endSleep?.();
    await this.running;
  }

  /** Ends the current sleep now, or skips the next one if a round is running. Never throws. */
  wake(): void {
    this.wakeRequested = true;
    this.endSleep?.();
  }

  /** Forgets a wake-up that the work about to start will cover (e.g. right before a claim). */
  clearWake(): void {
    this.wakeRequested = false;
  }

  get wakePending(): boolean {
    return this.wakeRequested;
  }

  get stopping(): boolean {
    return this.controller.signal.aborted;
  }

  /** Aborted by stop(): pass it to anything a round waits on. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** True while the loop sleeps between rounds (a wake-up ends it). */
  get sleeping(): boolean {
    return this.endSleep !== undefined;
  }

  /** Consecutive failed rounds (0 after a good one). */
  get failures(): number {
    return this.consecutiveFailures;
  }

  /** A pause inside a round: ended by stop(), not by a wake-up. */
  delay(ms: number): Promise<void> {
    return abortableDelay(ms, this.controller.signal);
  }

  private async run(): Promise<void> {
    const { logger, name } = this.options;
    const backoff = this.options.errorBackoff ?? DEFAULT_ERROR_BACKOFF;
    while (!this.stopping) {
      this.wakeRequested = false;
      let sleepMs: number;
      try {
        sleepMs = await this.options.round();
        if (this.outage) this.recovered(this.outage);
        this.consecutiveFailures = 0;
        this.stats.rounds++;
      } catch (error) {
        this.consecutiveFailures++;
        this.stats.errors++;
        sleepMs = retryDelayMs(this.consecutiveFailures, backoff, this.options.random);
        if (this.outage)
          logger.debug(
            { err: error, service: name, failures: this.consecutiveFailures, retryInMs: sleepMs },
            `${name} round failed again: ${errorMessage(error)}`,
          );
        else {
          this.outage = { since: this.now(), error };
          if (this.options.onError) this.options.onError(error, this.consecutiveFailures, sleepMs);
          else
            logger.error(
              { err: error, service: name, failures: this.consecutiveFailures, retryInMs: sleepMs },
              `${name} round failed: ${errorMessage(error)}`,
            );
        }
      }
      if (this.stopping) break;
      if (this.wakeRequested) continue;
      await this.sleep(sleepMs);
    }
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  private recovered(outage: { since: number; error: unknown }): void {
    this.outage = undefined;
    const outageMs = this.now() - outage.since;
    this.options.logger.warn(
      {
        service: this.options.name,
        outageMs,
        failedRounds: this.consecutiveFailures,
        firstError: errorMessage(outage.error),
      },
      `${this.options.name} recovered after ${(outageMs / 1000).toFixed(1)} s (${this.consecutiveFailures} failed rounds; first: ${errorMessage(outage.error)})`,
    );
  }

  private sleep(ms: number): Promise<void> {
    this.stats.sleeps++;
    return new Promise((resolve) => {
      const timer = setTimeout(finish, Math.max(0, ms));
      const self = this;
      function finish() {
        clearTimeout(timer);
        if (self.endSleep === finish) self.endSleep = undefined;
        resolve();
      }
      this.endSleep = finish;
    });
  }
}
