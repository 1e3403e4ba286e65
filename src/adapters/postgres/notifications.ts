/**
 * LISTEN/NOTIFY adapters. Writers call `signal()` after commit; the notifier coalesces so a process
 * sends at most one NOTIFY per channel per interval (leading edge at once, one trailing send for
 * everything signalled meanwhile); a change channel's payload names the organizations signalled (the
 * live stream's routing). NOTIFY is never issued inside hot transactions: a notifying commit
 * takes a cluster-wide lock. The listener uses pg-listen, which reconnects and re-LISTENs by itself;
 * after each (re)connection subscribers are woken once, since notifications sent while disconnected
 * are lost.
 */

import type { Subscriber } from 'pg-listen';
import * as pgListen from 'pg-listen';
import type { Logger } from '../../logger.js';
import type { Database } from '../../ports/database.js';
import {
  CHANGE_NOTIFY_MS,
  isChangeChannel,
  type OnWake,
  organizationPayloads,
  type WakeupListener,
  type WakeupSignal,
} from '../../ports/wakeups.js';
import { abortableDelay, type BackoffSettings, retryDelayMs } from '../../runtime/backoff.js';
import { connectionConfig, type DatabaseOptions } from './database.js';

const NOTIFY = 'select pg_notify($1, $2)';
/** Reconnecting the LISTEN connection: quick at first, never slower than every 5 s. */
const LISTEN_RETRY: BackoffSettings = { baseMs: 100, maxMs: 5_000, jitter: 'equal' };

export class CoalescingNotifier implements WakeupSignal {
  /** Open windows: whether the channel was signalled again, and the organizations named meanwhile. */
  private readonly pending = new Map<
    string,
    { timer: NodeJS.Timeout; again: boolean; organizations: Set<string> }
  >();
  private closed = false;

  constructor(
    private readonly db: Pick<Database, 'query'>,
    private readonly intervalMs: number,
    private readonly logger?: Logger,
  ) {}

  signal(channel: string, organizationId?: string | null): void {
    if (this.closed) return;
    const window = this.pending.get(channel);
    if (window) {
      window.again = true;
      if (organizationId) window.organizations.add(organizationId);
      return;
    }
    this.send(channel, organizationId ? [organizationId] : []);
    this.openWindow(channel);
  }

  private openWindow(channel: string): void {
    const timer = setTimeout(
      () => {
        const window = this.pending.get(channel);
        this.pending.delete(channel);
        if (window?.again && !this.closed) {
          this.send(channel, window.organizations);
          this.openWindow(channel);
        }
      },
      isChangeChannel(channel) ? Math.max(this.intervalMs, CHANGE_NOTIFY_MS) : this.intervalMs,
    );
    timer.unref();
    this.pending.set(channel, { timer, again: false, organizations: new Set() });
  }

  /** One NOTIFY, or several when the organizations named do not fit one payload. */
  private send(channel: string, organizations: Iterable<string>): void {
    for (const payload of organizationPayloads(organizations)) {
      this.db.query(NOTIFY, [channel, payload]).catch((error: unknown) => {
        // Harmless: waiters fall back to polling.
        this.logger?.debug({ err: error, channel }, 'notify failed');
      });
    }
  }

  close(): void {
    this.closed = true;
    for (const { timer } of this.pending.values()) clearTimeout(timer);
    this.pending.clear();
  }
}

/**
 * LISTEN through pg-listen. The first connection is made by a fresh subscriber per attempt (a pg-listen
 * subscriber whose first connect failed cannot connect again: "Client has already been connected"),
 * retried with backoff until it works or close() is called; once connected, pg-listen reconnects and
 * re-LISTENs by itself. Subscribers are woken after every (re)connection.
 */
export class PgWakeupListener implements WakeupListener {
  private subscriber: Subscriber | undefined;
  private readonly handlers = new Map<string, Set<OnWake>>();
  private connected: Promise<void> | undefined;
  private readonly closing = new AbortController();

  constructor(
    private readonly options: DatabaseOptions,
    private readonly logger?: Logger,
  ) {}

  private createSubscriber(): Subscriber {
    // pg-listen is CommonJS with `exports.default`; loaders differ in whether they unwrap it.
    type CreateSubscriber = typeof pgListen.default.default;
    const loaded = pgListen.default as unknown as CreateSubscriber | { default: CreateSubscriber };
    const createSubscriber = typeof loaded === 'function' ? loaded : loaded.default;
    const subscriber = createSubscriber(
      connectionConfig({ ...this.options, applicationName: 'herald-listen' }),
      {
        parse: (payload: string) => payload,
        retryLimit: Number.POSITIVE_INFINITY,
        retryTimeout: 0, // never give up: the database coming back is the normal case
        retryInterval: (attempt: number) => retryDelayMs(attempt + 1, LISTEN_RETRY),
        paranoidChecking: 10_000,
      },
    );
    subscriber.events.on('notification', ({ channel, payload }) =>
      this.wake(channel, typeof payload === 'string' ? payload : ''),
    );
    subscriber.events.on('connected', () => this.wakeAll());
    subscriber.events.on('reconnect', (attempt) => this.logger?.warn({ attempt }, 'listener reconnecting'));
    subscriber.events.on('error', (error) => this.logger?.error({ err: error }, 'listener error'));
    return subscriber;
  }

  /** A notification (its payload) or, without one, the wake-up after a (re)connection. */
  private wake(channel: string, payload?: string): void {
    for (const handler of this.handlers.get(channel) ?? []) handler(payload);
  }

  private wakeAll(): void {
    for (const channel of this.handlers.keys()) this.wake(channel);
  }

  private connect(): Promise<void> {
    this.connected ??= (async () => {
      for (let attempt = 1; !this.closing.signal.aborted; attempt++) {
        const subscriber = this.createSubscriber();
        try {
          await subscriber.connect();
          if (this.closing.signal.aborted) break;
          for (const channel of this.handlers.keys()) await subscriber.listenTo(channel);
          this.subscriber = subscriber;
          if (attempt > 1) this.logger?.info({ attempts: attempt }, 'listener connected');
          this.wakeAll(); // notifications sent while we were away are lost
          return;
        } catch (error) {
          await subscriber.close().catch(() => {});
          const delayMs = retryDelayMs(attempt, LISTEN_RETRY);
          this.logger?.warn(
            { err: error, attempt, retryInMs: delayMs },
            'listener cannot connect yet; retrying',
          );
          await abortableDelay(delayMs, this.closing.signal);
        }
      }
    })();
    return this.connected;
  }

  /** Resolves once listening (waits while the database is away; callers need not wait for it). */
  async subscribe(channel: string, onWake: OnWake): Promise<void> {
    const set = this.handlers.get(channel) ?? new Set();
    set.add(onWake);
    this.handlers.set(channel, set);
    await this.connect();
    if (set.size === 1) await this.subscriber?.listenTo(channel);
  }

  async close(): Promise<void> {
    this.closing.abort();
    this.handlers.clear();
    await this.connected;
    await this.subscriber?.close().catch(() => {});
  }
}
