/**
 * The tick role (seed 000's cron-scheduler profile): once a minute by the database clock (invariant 6),
 * one message to `process_campaign` that wakes the campaign scanners. A tick is a `CampaignTickEmitted`
 * event at version 1 of `campaign_tick/<minute>` plus its outbox row, in one transaction (invariants 1 and
 * 2). Redis `SET NX` only spares the losing replicas a round trip: when it is down every replica writes and
 * the unique event version lets exactly one commit (invariant 7). ADR 0006.
 */
import { randomUUID } from 'node:crypto';
import { appendEvents } from '../../adapters/postgres/event-queries.js';
import { RedisLock } from '../../adapters/redis/redis-lock.js';
import { ConcurrencyError, errorMessage, ValidationError } from '../../errors.js';
import { databaseNow } from '../../eventstore/command-handler.js';
import type { Logger } from '../../logger.js';
import { toOutboxRows, writeOutbox } from '../../outbox/outbox-writer.js';
import type { Database } from '../../ports/database.js';
import { channels, type WakeupSignal } from '../../ports/wakeups.js';
import type { RoleDefinition, Runtime } from '../../registry/role.js';
import { aborted } from '../../roles/runtime.js';
import { ServiceLoop } from '../../runtime/service-loop.js';
import type { CampaignConfig } from './settings.js';
import { PROCESS_CAMPAIGN_QUEUE, TICK_STREAM_TYPE } from './topology.js';

export const TICK_EVENT_TYPE = 'CampaignTickEmitted';
export const DEFAULT_TICK_KEY_PREFIX = 'CAMPAIGN_SCHEDULE_TICK';
/** Seed 000: 55 s, so a minute's key is gone before the next minute's SET, with 5 s of clock skew to spare. */
export const TICK_KEY_TTL_SECONDS = 55;
const MINUTE_MS = 60_000;

export type TickResult = 'published' | 'skipped' | 'duplicate';

/** The de-duplication gate (implemented by src/adapters/redis/redis-lock.ts). */
export interface TickLock {
  setOnce(key: string, ttlSeconds: number): Promise<'acquired' | 'taken' | 'unavailable'>;
}

export interface CampaignTickEventData {
  /** Start of the period (minute) the tick is for, ISO 8601 UTC. */
  minute: string;
  /** True when this replica wrote without winning the Redis key (Redis unavailable or not configured). */
  fallback: boolean;
}

export interface CampaignTickOptions {
  db: Database;
  /** null: no Redis configured; every replica writes and the event stream keeps one tick. */
  lock: TickLock | null;
  wakeups?: WakeupSignal;
  logger: Logger;
  /** Redis key prefix (HERALD_TICK_KEY_PREFIX). */
  keyPrefix?: string;
  pod?: string;
  keyTtlSeconds?: number;
  /**
   * Length of a tick period. 60 000 (a minute) in production; tests use a fraction of a second.
   * Periods are aligned to multiples of it since the epoch, by the clock below. Sub-minute periods
   * get keys with seconds and milliseconds, so every period has its own key and stream.
   */
  periodMs?: number;
  /** The time source the loop aligns to. Default: the database's `now()` (invariant 6). */
  clock?: () => Promise<Date>;
  /** Back-off after a failed round (database down), capped at one period. */
  errorBackoffMs?: number;
}

/** `yyyy-MM-ddTHH:mm` (UTC) for minute periods; `yyyy-MM-ddTHH:mm:ss.SSS` for shorter test periods. */
export function tickPeriodKey(periodStart: Date, periodMs = MINUTE_MS): string {
  const iso = periodStart.toISOString();
  return periodMs % MINUTE_MS === 0 ? iso.slice(0, 16) : iso.slice(0, 23);
}

export class CampaignTick {
  private readonly periodMs: number;
  private readonly keyPrefix: string;
  private readonly keyTtlSeconds: number;
  private readonly clock: () => Promise<Date>;
  private readonly logger: Logger;
  private loop: ServiceLoop | undefined;
  /** The period start the loop ticks next (undefined until the first round reads the clock). */
  private next: number | undefined;
  readonly stats = { published: 0, skipped: 0, duplicate: 0, fallback: 0, errors: 0 };

  constructor(private readonly options: CampaignTickOptions) {
    this.periodMs = options.periodMs ?? MINUTE_MS;
    if (!Number.isInteger(this.periodMs) || this.periodMs < 1) {
      throw new ValidationError('periodMs must be a positive integer', { periodMs: this.periodMs });
    }
    this.keyPrefix = options.keyPrefix ?? DEFAULT_TICK_KEY_PREFIX;
    this.keyTtlSeconds = options.keyTtlSeconds ?? TICK_KEY_TTL_SECONDS;
    this.clock = options.clock ?? (() => databaseNow(options.db));
    this.logger = options.logger.child({ component: 'tick' });
  }

  /**
   * Writes the tick for the period containing `minute` unless another replica does: 'published'
   * (this call wrote it), 'skipped' (another replica won the Redis key), 'duplicate' (Redis could
   * not decide and another replica's write committed first). Database errors are thrown.
   */
  async tickOnce(minute: Date): Promise<TickResult> {
    const start = new Date(Math.floor(minute.getTime() / this.periodMs) * this.periodMs);
    const streamId = tickPeriodKey(start, this.periodMs);
    const key = `${this.keyPrefix}:${streamId}`;
    const log = this.logger.child({ aggregateId: streamId, key });

    const gate = this.options.lock ? await this.options.lock.setOnce(key, this.keyTtlSeconds) : 'unavailable';
    if (gate === 'taken') {
      this.stats.skipped++;
      log.debug('another replica publishes this tick');
      return 'skipped';
    }
    const fallback = gate === 'unavailable';
    if (fallback) {
      this.stats.fallback++;
      if (this.options.lock) {
        log.warn('redis unavailable: writing the tick anyway; the event stream keeps one per minute');
      }
    }

    const correlationId = randomUUID();
    const meta = { correlationId, actor: 'tick', ...(this.options.pod ? { pod: this.options.pod } : {}) };
    const data: CampaignTickEventData = { minute: start.toISOString(), fallback };
    let messageId: string;
    try {
      messageId = await this.options.db.transaction(async (tx) => {
        const [appended] = await appendEvents(tx, [
          { streamType: TICK_STREAM_TYPE, streamId, version: 1, type: TICK_EVENT_TYPE, data, meta },
        ]);
        const rows = toOutboxRows(
          {
            eventPosition: appended!.position,
            eventType: TICK_EVENT_TYPE,
            streamType: TICK_STREAM_TYPE,
            streamId,
            meta,
          },
          [{ destination: PROCESS_CAMPAIGN_QUEUE, payload: { minute: data.minute } }],
        );
        await writeOutbox(tx, rows);
        return rows[0]!.messageId;
      });
    } catch (error) {
      if (error instanceof ConcurrencyError) {
        this.stats.duplicate++;
        log.info({ fallback }, 'tick already written by another replica');
        return 'duplicate';
      }
      throw error;
    }
    this.options.wakeups?.signal(channels.outbox(this.options.db.schema));
    this.stats.published++;
    log.info({ messageId, correlationId, fallback }, 'tick written');
    return 'published';
  }

  /** Starts the loop: one tick at each period boundary by the clock, until stop(). */
  start(): void {
    if (this.loop) return;
    this.next = undefined;
    this.loop = new ServiceLoop({
      name: 'tick',
      logger: this.logger,
      round: () => this.round(),
      errorBackoff: {
        baseMs: (this.options.errorBackoffMs ?? 250) * 2,
        maxMs: this.periodMs,
        jitter: 'equal',
      },
      onError: (error, failures, retryInMs) => {
        this.stats.errors++;
        this.logger.error({ err: error, failures, retryInMs }, `tick failed: ${errorMessage(error)}`);
      },
    });
    this.loop.start();
  }

  /** Stops the loop; a tick in progress finishes first. */
  async stop(): Promise<void> {
    await this.loop?.stop();
    this.loop = undefined;
  }

  /**
   * Ticks the current period once its boundary has passed, then sleeps until the next boundary.
   * Starting mid-minute waits for the next boundary, as a once-a-minute cron would.
   */
  private async round(): Promise<number> {
    const nowMs = (await this.clock()).getTime();
    const current = Math.floor(nowMs / this.periodMs) * this.periodMs;
    this.next ??= current + this.periodMs;
    // +1 ms: timers may round down, and the boundary is checked again against the clock.
    if (current < this.next) return this.next - nowMs + 1;
    if (current > this.next) {
      this.logger.warn(
        { missedPeriods: (current - this.next) / this.periodMs },
        'tick loop fell behind; ticking the current period',
      );
    }
    // Whatever the outcome, this period is done: a retry would find our own Redis key taken.
    this.next = current + this.periodMs;
    await this.tickOnce(new Date(current));
    return 0;
  }
}

/**
 * `herald tick`: runs the loop on the role's runtime until `signal` aborts. Without REDIS_URL it
 * runs in fallback mode (every replica writes; the database keeps one tick per minute).
 */
export const tickRole: RoleDefinition<CampaignConfig> = {
  summary: 'publish one tick per minute to process_campaign (Redis SET NX; the event log de-duplicates)',
  async run(runtime: Runtime<CampaignConfig>, signal: AbortSignal): Promise<void> {
    const { config, logger } = runtime;
    let lock: RedisLock | null = null;
    if (config.redis) {
      lock = new RedisLock({
        ...config.redis,
        logger,
        name: `herald-tick-${config.pod}`.replace(/[^\w.-]/g, '_'),
      });
    } else {
      logger.warn('REDIS_URL is not set: every tick replica writes each minute and the database keeps one');
    }
    const tick = new CampaignTick({
      db: runtime.db,
      lock,
      wakeups: runtime.notifier,
      logger,
      keyPrefix: config.campaign.tickKeyPrefix,
      pod: config.pod,
    });
    try {
      tick.start();
      logger.info({ keyPrefix: config.campaign.tickKeyPrefix, redis: lock !== null }, 'tick role started');
      await aborted(signal);
    } finally {
      await tick.stop();
      await lock?.close();
      logger.info(tick.stats, 'tick role stopped');
    }
  },
};
