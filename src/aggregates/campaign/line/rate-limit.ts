/**
 * The per-channel LINE rate limit, shared by every delivery a worker runs (ADR 0021). Calls to one
 * channel's endpoint are spaced evenly at its rate (no bursts), so no one-second window ever holds more
 * than the rate's calls; a 429 pauses the channel's endpoint for LINE's Retry-After (or a backoff) before
 * the same chunk is tried again. One process's view: several worker pods share LINE's limit, and LINE's
 * own 429 (handled the same way) is the backstop.
 */
import type { LineRateLimits } from './settings.js';

export type LineEndpoint = 'multicast' | 'broadcast' | 'narrowcast';

export interface LineRateLimiterOptions {
  limits: LineRateLimits;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class LineRateLimiter {
  private readonly nextAt = new Map<string, number>();
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(private readonly options: LineRateLimiterOptions) {
    this.now = options.now ?? Date.now;
    this.sleep = options.sleep ?? realSleep;
  }

  /** Milliseconds between two calls to `endpoint` of one channel. */
  intervalMs(endpoint: LineEndpoint): number {
    const { limits } = this.options;
    switch (endpoint) {
      case 'multicast':
        return 1000 / limits.multicastPerSecond;
      case 'broadcast':
        return 3_600_000 / limits.broadcastPerHour;
      case 'narrowcast':
        return 3_600_000 / limits.narrowcastPerHour;
    }
  }

  /**
   * Waits for the channel's next slot at `endpoint` and takes it. When that slot is more than `maxWaitMs`
   * away, nothing is taken and the wait is returned instead (the caller gives the work back rather than
   * hold its transaction that long); null once the slot is taken.
   */
  async take(
    channel: string,
    endpoint: LineEndpoint,
    maxWaitMs = Number.POSITIVE_INFINITY,
  ): Promise<number | null> {
    const key = `${channel}\u0000${endpoint}`;
    const now = this.now();
    const slot = Math.max(now, this.nextAt.get(key) ?? now);
    if (slot - now > maxWaitMs) return slot - now;
    this.nextAt.set(key, slot + this.intervalMs(endpoint));
    if (slot > now) await this.sleep(slot - now);
    return null;
  }

  /** LINE answered 429: nothing goes to the channel's endpoint for `ms`. */
  pause(channel: string, endpoint: LineEndpoint, ms: number): void {
    const key = `${channel}\u0000${endpoint}`;
    const until = this.now() + ms;
    this.nextAt.set(key, Math.max(this.nextAt.get(key) ?? 0, until));
  }
}
