/**
 * LISTEN/NOTIFY adapters. Writers call `signal()` after commit; the notifier coalesces so a process
 * sends at most one NOTIFY per channel per interval (leading edge at once, one trailing send for
 * everything signalled meanwhile). NOTIFY is never issued inside hot transactions: a notifying commit
 * takes a cluster-wide lock. The listener uses pg-listen, which reconnects and re-LISTENs by itself;
 * after each (re)connection subscribers are woken once, since notifications sent while disconnected
 * are lost.
 */

import type { Subscriber } from 'pg-listen';
import * as pgListen from 'pg-listen';
import type { Logger } from '../../logger.js';
import type { Database } from '../../ports/database.js';
import type { WakeupListener, WakeupSignal } from '../../ports/wakeups.js';
import { type BackoffSettings, retryDelayMs } from '../../runtime/backoff.js';
import { connectionConfig, type DatabaseOptions } from './database.js';

const NOTIFY = 'select pg_notify($1, $2)';
/** Reconnecting the LISTEN connection: quick at first, never slower than every 5 s. */
const LISTEN_RETRY: BackoffSettings = { baseMs: 100, maxMs: 5_000, jitter: 'equal' };

export class CoalescingNotifier implements WakeupSignal {
  private readonly pending = new Map<string, { timer: NodeJS.Timeout; again: boolean }>();
  private closed = false;

  constructor(
    private readonly db: Pick<Database, 'query'>,
    private readonly intervalMs: number,
    private readonly logger?: Logger,
  ) {}

  signal(channel: string): void {
    if (this.closed) return;
    const window = this.pending.get(channel);
    if (window) {
      window.again = true;
      return;
    }
    this.send(channel);
    this.openWindow(channel);
  }

  private openWindow(channel: string): void {
    const timer = setTimeout(() => {
      const window = this.pending.get(channel);
      this.pending.delete(channel);
      if (window?.again && !this.closed) {
        this.send(channel);
        this.openWindow(channel);
      }
    }, this.intervalMs);
    timer.unref();
    this.pending.set(channel, { timer, again: false });
  }

  private send(channel: string): void {
    this.db.query(NOTIFY, [channel, '']).catch((error: unknown) => {
      // Harmless: waiters fall back to polling.
      this.logger?.debug({ err: error, channel }, 'notify failed');
    });
  }

  close(): void {
    this.closed = true;
    for (const { timer } of this.pending.values()) clearTimeout(timer);
    this.pending.clear();
  }
}

export class PgWakeupListener implements WakeupListener {
  private readonly subscriber: Subscriber;
  private readonly handlers = new Map<string, Set<() => void>>();
  private connected: Promise<void> | undefined;
  private closed = false;

  constructor(
    options: DatabaseOptions,
    private readonly logger?: Logger,
  ) {
    // pg-listen is CommonJS with `exports.default`; loaders differ in whether they unwrap it.
    type CreateSubscriber = typeof pgListen.default.default;
    const loaded = pgListen.default as unknown as CreateSubscriber | { default: CreateSubscriber };
    const createSubscriber = typeof loaded === 'function' ? loaded : loaded.default;
    this.subscriber = createSubscriber(connectionConfig({ ...options, applicationName: 'herald-listen' }), {
      parse: (payload: string) => payload,
      retryLimit: Number.POSITIVE_INFINITY,
      retryTimeout: 0, // never give up: the database coming back is the normal case
      retryInterval: (attempt: number) => retryDelayMs(attempt + 1, LISTEN_RETRY),
      paranoidChecking: 10_000,
    });
    this.subscriber.events.on('notification', ({ channel }) => this.wake(channel));
    this.subscriber.events.on('connected', () => {
      for (const channel of this.handlers.keys()) this.wake(channel);
    });
    this.subscriber.events.on('reconnect', (attempt) =>
      this.logger?.warn({ attempt }, 'listener reconnecting'),
    );
    this.subscriber.events.on('error', (error) => this.logger?.error({ err: error }, 'listener error'));
  }

  private wake(channel: string): void {
    for (const handler of this.handlers.get(channel) ?? []) handler();
  }

  private connect(): Promise<void> {
    this.connected ??= (async () => {
      for (let attempt = 0; !this.closed; attempt++) {
        try {
          await this.subscriber.connect();
          return;
        } catch (error) {
          this.logger?.warn({ err: error, attempt }, 'listener cannot connect yet; retrying');
          await new Promise((resolve) => setTimeout(resolve, retryDelayMs(attempt + 1, LISTEN_RETRY)));
        }
      }
    })();
    return this.connected;
  }

  async subscribe(channel: string, onWake: () => void): Promise<void> {
    const set = this.handlers.get(channel) ?? new Set();
    set.add(onWake);
    this.handlers.set(channel, set);
    await this.connect();
    if (set.size === 1) await this.subscriber.listenTo(channel);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.handlers.clear();
    await this.subscriber.close().catch(() => {});
  }
}
