/**
 * The authentication throttle (issue 23): a client address that made HERALD_API_AUTH_FAILURE_LIMIT
 * failed authentications (a wrong, malformed or revoked API key; a failed sign-in) within
 * HERALD_API_AUTH_FAILURE_WINDOW_SECONDS gets 429 with Retry-After for every request with credentials
 * until the window ends — a right key included, or a guesser would still learn which guess was right.
 * The counters live in PostgreSQL (migration 000018), so the limit holds across API processes; the
 * address is Fastify's `request.ip`, i.e. what HERALD_API_TRUST_PROXY trusts. A request's block check
 * runs beside its key look-up, so a successful request waits for no extra round trip. ADR 0029.
 */
import {
  authBlockedFor,
  pruneAuthFailures,
  recordAuthFailure,
} from '../adapters/postgres/auth-throttle-queries.js';
import { AuthThrottledError, UnauthenticatedError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Database } from '../ports/database.js';

export interface AuthThrottleSettings {
  /** Failures per window from one address (0: the throttle is off). */
  readonly authFailureLimit: number;
  readonly authFailureWindowMs: number;
}

/** Rows of ended windows one failure deletes at most. */
const PRUNE_BATCH = 100;

export class AuthThrottle {
  private readonly windowSeconds: number;

  constructor(
    private readonly db: Database,
    private readonly settings: AuthThrottleSettings,
    private readonly logger: Logger,
  ) {
    this.windowSeconds = settings.authFailureWindowMs / 1000;
  }

  get enabled(): boolean {
    return this.settings.authFailureLimit > 0;
  }

  /**
   * Authenticates with `attempt` on behalf of `client`: 429 when the address is blocked (whatever the
   * attempt's outcome); an UnauthenticatedError from the attempt counts as one failure and is rethrown.
   */
  async guard<T>(client: string, attempt: () => Promise<T>): Promise<T> {
    if (!this.enabled) return attempt();
    const [blocked, outcome] = await Promise.allSettled([this.blockedFor(client), attempt()]);
    if (blocked.status === 'rejected') throw blocked.reason;
    if (blocked.value !== null) throw this.refusal(blocked.value);
    if (outcome.status === 'fulfilled') return outcome.value;
    if (outcome.reason instanceof UnauthenticatedError) await this.failed(client);
    throw outcome.reason;
  }

  private blockedFor(client: string): Promise<number | null> {
    return authBlockedFor(this.db, client, this.windowSeconds, this.settings.authFailureLimit);
  }

  private async failed(client: string): Promise<void> {
    const { failures } = await recordAuthFailure(this.db, client, this.windowSeconds);
    if (failures === this.settings.authFailureLimit) {
      this.logger.warn(
        { client, failures, windowSeconds: this.windowSeconds },
        'authentication throttled: too many failures from one address',
      );
    }
    if (failures === 1) {
      // A new window: a good moment to delete a few ended ones (bounded; never on the success path).
      await pruneAuthFailures(this.db, this.windowSeconds, PRUNE_BATCH).catch((error: unknown) =>
        this.logger.warn({ err: error }, 'could not prune the authentication throttle'),
      );
    }
  }

  private refusal(remainingSeconds: number): AuthThrottledError {
    const retryAfterSeconds = Math.max(1, Math.ceil(remainingSeconds));
    return new AuthThrottledError(
      `too many failed authentications from this address: at most ${this.settings.authFailureLimit} per ` +
        `${this.windowSeconds} s (HERALD_API_AUTH_FAILURE_LIMIT, HERALD_API_AUTH_FAILURE_WINDOW_SECONDS); retry after ${retryAfterSeconds} s`,
      { retryAfterSeconds, limit: this.settings.authFailureLimit, windowSeconds: this.windowSeconds },
    );
  }
}
