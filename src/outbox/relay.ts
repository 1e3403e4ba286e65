/**
 * The outbox relay: the only code that publishes (invariant 2). It claims due rows with SKIP LOCKED and a
 * short lease (invariant 7), publishes them through the sink of their kind, and marks a row `sent` only
 * after the broker confirmed it (invariant 3); every publish carries the row's `message_id` (invariant 4),
 * so a relay dying between confirm and mark costs a duplicate, never a loss. Claims, publishes and marks
 * are pipelined; idle, it sleeps until a NOTIFY or the next due time by the database clock (invariant 6).
 * Rejected rows retry with backoff until `dead`; a missing broker delays rows without killing them;
 * ordered rows leave in per-key order. ADR 0004, ADR 0007.
 */
import { wakeKeyHeads } from '../adapters/postgres/outbox-order-queries.js';
import {
  claimOutboxBatch,
  markSentIds,
  nextDueInMs,
  releaseClaims,
  scheduleRetry,
} from '../adapters/postgres/outbox-queries.js';
import { errorMessage, IllegalStateError } from '../errors.js';
import { type Logger, silentLogger } from '../logger.js';
import { HEADER } from '../messaging/headers.js';
import { heraldMetrics, type RelaySinkMeters } from '../observability/metrics.js';
import {
  contextOf,
  failSpan,
  inSpan,
  SpanKind,
  startSpan,
  traceparentOf,
  tracingOn,
} from '../observability/tracing.js';
import type { Database, OutboxPublisher } from '../ports/database.js';
import type { MessageSink, OutboundMessage, PublishOutcome } from '../ports/message-sink.js';
import type { ClaimedForPublish, Sink } from '../ports/outbox.js';
import { channels, type WakeupListener, type WakeupSignal } from '../ports/wakeups.js';
import {
  type BackoffSettings,
  type JitterMode,
  type RandomSource,
  retryDelayMs,
} from '../runtime/backoff.js';
import { ServiceLoop } from '../runtime/service-loop.js';
import type { RelaySettings } from '../settings/core.js';

/** The sinks this relay owns, by kind; it claims only rows for these. */
export interface RelaySinks {
  readonly amqp?: MessageSink;
  readonly kafka?: MessageSink;
}

export interface ConfirmedBatch {
  readonly ids: readonly number[];
  readonly messageIds: readonly string[];
}

/** Test seams. Never set in production. */
export interface OutboxRelayHooks {
  /** Runs after a batch was claimed (or committed leased) and before it is published (crash-window tests). */
  beforePublish?: (rows: readonly ClaimedForPublish[]) => Promise<void> | void;
  /** Runs after the broker confirmed a batch and before the relay marks it (crash-window tests). */
  beforeMark?: (batch: ConfirmedBatch) => Promise<void> | void;
}

export interface OutboxRelayOptions {
  db: Database;
  sinks: RelaySinks;
  settings: RelaySettings;
  /** Recorded in `locked_by`; the pod name. */
  owner: string;
  /** Wake-ups on NOTIFY; without one the relay polls (idlePollMs) and follows due times. */
  listener?: WakeupListener;
  /** Tells dashboards that rows were sent or died (`channels.changed(schema, 'outbox')`, coalesced). */
  changes?: WakeupSignal;
  logger?: Logger;
  /** Jitter for row retries. Default 'equal': a row's delay never shrinks between attempts. */
  jitter?: JitterMode;
  random?: RandomSource;
  hooks?: OutboxRelayHooks;
}

export interface RelayCounters {
  /** Rows confirmed by the broker and marked sent. */
  published: number;
  /** Failed publish attempts (rows rescheduled or made dead). */
  failed: number;
  /** Rows made dead. */
  dead: number;
  /** Claimed batches. */
  batches: number;
  /** Claimed rows. */
  claimed: number;
  /** Claimed rows handed back unpublished (stop). */
  released: number;
  /** Ordered rows the claim moved to waiting behind an earlier row of their key. */
  deferred: number;
}

/** Retrying the database: quick at first, never slower than every 5 s (it coming back is the normal case). */
const DB_RETRY: BackoffSettings = { baseMs: 200, maxMs: 5_000, jitter: 'equal' };
/** Probing a broker that was unavailable: never slower than every 5 s, whatever the row backoff cap. */
const BROKER_PROBE_MAX_MS = 5_000;
/** "Unavailable" never makes a row dead: an attempt bound no row reaches (int4 max). */
const NEVER_DEAD = 2_147_483_647;
/** Shortest idle sleep when a row is already due but could not be claimed (locked by another relay). */
const MIN_IDLE_MS = 10;

export class OutboxRelay {
  readonly counters: RelayCounters = {
    published: 0,
    failed: 0,
    dead: 0,
    batches: 0,
    claimed: 0,
    released: 0,
    deferred: 0,
  };

  private readonly db: Database;
  private readonly settings: RelaySettings;
  private readonly logger: Logger;
  private readonly sinkKinds: Sink[];
  private readonly backoff: BackoffSettings;
  private readonly random: RandomSource;
  private loop: ServiceLoop | undefined;
  private stopping = false;
  private readonly tasks = new Set<Promise<void>>();
  /** Claimed rows not yet settled by their sink (queued in it or awaiting the broker's confirm). */
  private publishing = 0;
  /** Rows whose outcome is being written back (mark sent / schedule retry). */
  private marking = 0;
  private progress: (() => void) | undefined;
  private brokerFailures = 0;
  private pausedUntil = 0;
  private readonly meters: Partial<Record<Sink, RelaySinkMeters>>;
  /** Batches claimed and not yet marked, in claim order, with their claim time (performance.now()). */
  private readonly claimedAt = new Map<ClaimedForPublish[], number>();
  private untrackClaims: (() => void) | undefined;

  constructor(private readonly options: OutboxRelayOptions) {
    this.db = options.db;
    this.settings = options.settings;
    this.logger = options.logger ?? silentLogger;
    this.sinkKinds = (Object.keys(options.sinks) as Sink[]).filter(
      (kind) => options.sinks[kind] !== undefined,
    );
    if (this.sinkKinds.length === 0) throw new IllegalStateError('the relay needs at least one sink');
    this.meters = Object.fromEntries(this.sinkKinds.map((kind) => [kind, heraldMetrics.relaySink(kind)]));
    this.backoff = {
      baseMs: this.settings.backoffBaseMs,
      maxMs: this.settings.backoffMaxMs,
      jitter: options.jitter ?? 'equal',
    };
    this.random = options.random ?? Math.random;
  }

  /**
   * Starts the loop. Resolves once the relay listens for wake-ups (the loop
   * runs before that; while the database is down this waits for it).
   */
  async start(): Promise<void> {
    if (this.loop) throw new IllegalStateError('relay already started');
    this.stopping = false;
    this.loop = new ServiceLoop({
      name: 'relay',
      logger: this.logger,
      // Database away: quick at first, never slower than every 5 s (it coming back is the normal case).
      errorBackoff: DB_RETRY,
      random: this.random,
      round: async () => {
        await this.pump(true);
        return this.idleWaitMs();
      },
      onError: (error, attempt, delayMs) =>
        this.logger.error({ err: error, attempt, delayMs }, 'relay loop failed; retrying'),
    });
    this.loop.start();
    this.untrackClaims = heraldMetrics.trackRelayClaims(() => this.claimedAt.values().next().value ?? null);
    if (this.options.listener) {
      try {
        await this.options.listener.subscribe(channels.outbox(this.db.schema), () => this.wake());
      } catch (error) {
        this.logger.warn({ err: error }, 'relay cannot listen for wake-ups; polling only');
      }
    }
    this.logger.info({ sinks: this.sinkKinds, settings: this.settings }, 'relay started');
  }

  /**
   * Graceful stop: no new claims; in-flight publishes finish and are marked; rows claimed but not yet
   * handed to a sink are released (pending, attempt not counted). Resolves when all of that is done.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.loop?.stop();
    await Promise.all(this.tasks);
    this.loop = undefined;
    this.untrackClaims?.();
    this.untrackClaims = undefined;
    this.logger.info({ counters: this.counters }, 'relay stopped');
  }

  /** True while the loop sleeps with nothing in flight (health checks, tests). */
  get idle(): boolean {
    return this.loop?.sleeping === true && this.tasks.size === 0;
  }

  /** Asks the loop to claim now (a NOTIFY arrived, or rows were re-queued). */
  wake(): void {
    this.loop?.wake();
  }

  /**
   * This relay as the in-process publisher of its process's own transactions (ADR 0024): the rows they
   * wrote leased to `owner` are published and marked right after each commit, through this relay's
   * sinks, budget and marks, without a claim. It accepts new rows while its budget has room and the
   * broker is not being probed after a failure; otherwise rows are written for the relays, as they are
   * for a row this process never marks (it died between commit and publish: the lease hands it over).
   */
  inlinePublisher(): OutboxPublisher {
    const relay = this;
    return {
      owner: this.options.owner,
      leaseSeconds: this.settings.lockSeconds,
      sinks: this.sinkKinds,
      get accepting() {
        return (
          !relay.stopping &&
          relay.pausedUntil <= Date.now() &&
          relay.publishing + relay.marking < relay.settings.inFlight
        );
      },
      publish(rows) {
        // Stopping: the lease hands them to a relay.
        if (relay.stopping) return;
        relay.counters.claimed += rows.length;
        relay.dispatch(rows, performance.now());
      },
    };
  }

  /**
   * For tests and tools: claims and publishes until a claim comes back short, then waits for every
   * publish and mark. Not while the loop runs.
   */
  async drainOnce(): Promise<RelayCounters> {
    if (this.loop) throw new IllegalStateError('drainOnce() while the relay runs');
    await this.pump(false);
    await Promise.all(this.tasks);
    return { ...this.counters };
  }

  /**
   * Claims and dispatches batches while they come back full, within the publishing and marking
   * budgets. Returns when a claim comes back short (nothing more due now) or on stop.
   */
  private async pump(running: boolean): Promise<void> {
    const fullBatch = Math.min(this.settings.batchSize, this.settings.inFlight);
    while (!this.stopping) {
      if (this.pausedUntil > Date.now()) {
        if (!running || !this.loop) return;
        await this.loop.delay(this.pausedUntil - Date.now());
        continue;
      }
      // The sink holds at most inFlight unconfirmed messages; one more batch may wait in it, so the
      // broker's window refills the moment confirms arrive. Marks have a budget of their own: rows
      // being written back do not occupy the broker's window.
      if (this.publishing > this.settings.inFlight || this.marking >= this.settings.inFlight) {
        await this.nextProgress();
        continue;
      }
      // While the broker is unavailable, probe with one row instead of failing a whole batch.
      const limit = this.brokerFailures > 0 ? 1 : fullBatch;
      this.loop?.clearWake(); // this claim sees whatever the wake-up announced
      const claimStarted = performance.now();
      const { rows, deferred } = await claimOutboxBatch(this.db, {
        limit,
        lockSeconds: this.settings.lockSeconds,
        owner: this.options.owner,
        sinks: this.sinkKinds,
      });
      this.counters.claimed += rows.length;
      this.counters.deferred += deferred;
      if (rows.length > 0) {
        if (this.stopping) {
          await this.release(rows);
          return;
        }
        this.dispatch(rows, claimStarted);
      }
      // Deferred rows are progress too: the due range held at least `limit` rows.
      if (rows.length + deferred < limit) return;
      if (this.brokerFailures > 0) await this.nextProgress(); // one probe at a time
    }
  }

  /** How long to sleep: until the next due row, or the idle poll (a wake-up ends the sleep sooner). */
  private async idleWaitMs(): Promise<number> {
    if (this.stopping || this.loop?.wakePending) return 0;
    const dueInMs = await nextDueInMs(this.db, this.sinkKinds);
    if (dueInMs === null) return this.settings.idlePollMs;
    return Math.min(this.settings.idlePollMs, Math.max(MIN_IDLE_MS, Math.ceil(dueInMs)));
  }

  /** Resolves when a batch moves on (published, or marked); immediately when nothing is outstanding. */
  private nextProgress(): Promise<void> {
    if (this.tasks.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const previous = this.progress;
      this.progress = () => {
        previous?.();
        resolve();
      };
    });
  }

  private signalProgress(): void {
    const progress = this.progress;
    this.progress = undefined;
    progress?.();
  }

  private dispatch(rows: ClaimedForPublish[], claimStarted: number): void {
    this.publishing += rows.length;
    this.counters.batches++;
    this.claimedAt.set(rows, claimStarted);
    let phase: 'publishing' | 'marking' | 'done' = 'publishing';
    const moveTo = (next: 'marking' | 'done') => {
      if (phase === 'publishing') this.publishing -= rows.length;
      if (phase === 'marking') this.marking -= rows.length;
      if (next === 'marking') this.marking += rows.length;
      phase = next;
      this.signalProgress();
    };
    const task: Promise<void> = this.publishAndMark(rows, () => moveTo('marking'))
      .catch((error: unknown) => {
        // Only reachable through a bug: marks retry internally. The lease returns the rows.
        this.logger.error({ err: error, rows: rows.length }, 'relay batch failed');
      })
      .finally(() => {
        moveTo('done');
        this.claimedAt.delete(rows);
        heraldMetrics.relayBatchDone((performance.now() - claimStarted) / 1000);
        this.tasks.delete(task);
        this.signalProgress();
      });
    this.tasks.add(task);
  }

  private async publishAndMark(rows: ClaimedForPublish[], published: () => void): Promise<void> {
    await this.options.hooks?.beforePublish?.(rows);
    const outcomes = await this.publish(rows);
    published();
    if (this.options.hooks?.beforeMark) {
      const confirmed = rows.filter((_, index) => outcomes[index]!.ok);
      await this.options.hooks.beforeMark({
        ids: confirmed.map((row) => row.id),
        messageIds: confirmed.map((row) => row.messageId),
      });
    }
    await this.mark(rows, outcomes);
  }

  /**
   * Publishes rows through their sinks; returns one outcome per row, in row order. While tracing, a
   * row that carries a traceparent is published in a producer span of that trace (ended at its
   * confirm), whose own traceparent the message carries on (ADR 0017).
   */
  private async publish(rows: ClaimedForPublish[]): Promise<PublishOutcome[]> {
    if (!tracingOn()) return this.publishThroughSinks(rows);
    return inSpan('relay batch', { attributes: { 'herald.rows': rows.length } }, async () => {
      const spans = rows.map((row) => {
        const traceparent = row.headers[HEADER.traceparent];
        return typeof traceparent === 'string'
          ? startSpan(`publish ${row.destination}`, {
              kind: SpanKind.PRODUCER,
              parent: contextOf(traceparent),
              attributes: {
                'messaging.destination.name': row.destination,
                'messaging.message.id': row.messageId,
              },
            })
          : undefined;
      });
      const traced = rows.map((row, index) => {
        const span = spans[index];
        return span
          ? { ...row, headers: { ...row.headers, [HEADER.traceparent]: traceparentOf(span)! } }
          : row;
      });
      const outcomes = await this.publishThroughSinks(traced);
      for (const [index, span] of spans.entries()) {
        const outcome = outcomes[index]!;
        if (!span) continue;
        if (outcome.ok) span.end();
        else failSpan(span, new Error(outcome.error));
      }
      return outcomes;
    });
  }

  private async publishThroughSinks(rows: ClaimedForPublish[]): Promise<PublishOutcome[]> {
    const groups = new Map<Sink, { indexes: number[]; messages: OutboundMessage[] }>();
    for (let index = 0; index < rows.length; index++) {
      const row = rows[index]!;
      let group = groups.get(row.sink);
      if (!group) {
        group = { indexes: [], messages: [] };
        groups.set(row.sink, group);
      }
      group.indexes.push(index);
      group.messages.push({
        id: row.id,
        messageId: row.messageId,
        destination: row.destination,
        routingKey: row.routingKey,
        partitionKey: row.partitionKey,
        headers: row.headers,
        body: Buffer.from(row.payloadText, 'utf8'),
        priority: row.priority,
        timestamp: row.createdAt,
      });
    }
    const outcomes = new Array<PublishOutcome>(rows.length);
    await Promise.all(
      [...groups].map(async ([kind, group]) => {
        const sink = this.options.sinks[kind];
        let results: PublishOutcome[];
        const started = performance.now();
        try {
          results = sink
            ? await sink.publish(group.messages)
            : group.messages.map((m) => noOutcome(m.id, `no ${kind} sink in this relay`));
        } catch (error) {
          results = group.messages.map((m) => noOutcome(m.id, `sink threw: ${errorMessage(error)}`));
        }
        this.meters[kind]?.confirmed((performance.now() - started) / 1000);
        const byId = new Map(results.map((result) => [result.id, result]));
        for (const [position, index] of group.indexes.entries()) {
          const id = group.messages[position]!.id;
          outcomes[index] = byId.get(id) ?? noOutcome(id, 'sink returned no outcome');
        }
      }),
    );
    return outcomes;
  }

  /** Marks confirmed rows sent and schedules retries for the rest, each in one batch statement. */
  private async mark(rows: ClaimedForPublish[], outcomes: PublishOutcome[]): Promise<void> {
    const sent: { id: number; attempts: number; brokerRef: string | null }[] = [];
    const rejected: { id: number; attempts: number; error: string; delayMs: number }[] = [];
    const unavailable: { id: number; attempts: number; error: string; delayMs: number }[] = [];
    const failedRows = new Map<number, { row: ClaimedForPublish; error: string; delayMs: number }>();
    for (let index = 0; index < rows.length; index++) {
      const row = rows[index]!;
      const outcome = outcomes[index]!;
      if (outcome.ok) {
        sent.push({ id: row.id, attempts: row.attempts, brokerRef: outcome.brokerRef });
        continue;
      }
      const delayMs = retryDelayMs(row.attempts, this.backoff, this.random);
      const retry = { id: row.id, attempts: row.attempts, error: outcome.error, delayMs };
      if (outcome.failure === 'unavailable') unavailable.push(retry);
      else rejected.push(retry);
      failedRows.set(row.id, { row, error: outcome.error, delayMs });
    }
    this.trackBroker(rows.length, unavailable.length);

    const lease = this.settings.lockSeconds * 1_000;
    const [marked, rescheduled, waiting] = await Promise.all([
      this.withDatabaseRetry('mark sent', lease, () => markSentIds(this.db, sent)),
      this.withDatabaseRetry('schedule retry', lease, () =>
        scheduleRetry(this.db, rejected, this.settings.maxAttempts),
      ),
      this.withDatabaseRetry('schedule retry', lease, () => scheduleRetry(this.db, unavailable, NEVER_DEAD)),
    ]);
    this.counters.published += marked?.length ?? 0;
    this.counters.failed += (rescheduled?.length ?? 0) + (waiting?.length ?? 0);
    this.countBySink(rows, marked, rescheduled, waiting);
    // Tell the dashboards of the organizations whose rows were sent or died (and no other).
    const changedIds = new Set([
      ...(marked ?? []),
      ...(rescheduled ?? []).flatMap((r) => (r.status === 'dead' ? [r.id] : [])),
    ]);
    if (changedIds.size > 0 && this.options.changes) {
      const organizations = new Set<string | null>();
      for (const row of rows) if (changedIds.has(row.id)) organizations.add(row.organizationId ?? null);
      for (const organizationId of organizations) {
        this.options.changes.signal(channels.changed(this.db.schema, 'outbox'), organizationId);
      }
    }
    // Ordered heads that were sent: wake the next row of each key, after the mark committed (ADR 0007).
    // A late or repeated wake-up is harmless; a missed one (crash, give-up) is caught by maintenance.
    const sentKeys = rows.flatMap((row, index) =>
      row.ordered && outcomes[index]!.ok && row.partitionKey !== null
        ? [{ sink: row.sink, destination: row.destination, partitionKey: row.partitionKey }]
        : [],
    );
    if (sentKeys.length > 0) {
      const woken = await this.withDatabaseRetry('wake ordered keys', lease, () =>
        wakeKeyHeads(this.db, sentKeys),
      );
      if (woken && woken.length > 0) this.wake();
    }

    if (this.logger.isLevelEnabled('debug')) {
      for (const row of rows) {
        if (!failedRows.has(row.id)) this.logger.debug(messageFields(row), 'published');
      }
    }
    for (const { id, status } of [...(rescheduled ?? []), ...(waiting ?? [])]) {
      const failure = failedRows.get(id)!;
      const fields = { ...messageFields(failure.row), error: failure.error };
      if (status === 'dead') {
        this.counters.dead++;
        this.logger.error(
          fields,
          failure.row.ordered
            ? 'publish failed for the last time; outbox row is dead and parks its ordered key'
            : 'publish failed for the last time; outbox row is dead',
        );
      } else {
        this.logger.warn({ ...fields, retryInMs: failure.delayMs }, 'publish failed; retry scheduled');
      }
    }
    // A retry may now be due before whatever the idle loop is waiting for.
    if (failedRows.size > 0) this.wake();
  }

  /** The batch's outcomes that were written back, per sink (a statement that gave up counts nothing). */
  private countBySink(
    rows: readonly ClaimedForPublish[],
    marked: readonly number[] | undefined,
    ...retried: ({ id: number; status: 'pending' | 'dead' }[] | undefined)[]
  ): void {
    const sinkOf = new Map(rows.map((row) => [row.id, row.sink]));
    const counts = new Map<Sink, { published: number; failed: number; dead: number }>();
    const countsOf = (id: number) => {
      const sink = sinkOf.get(id)!;
      let entry = counts.get(sink);
      if (!entry) {
        entry = { published: 0, failed: 0, dead: 0 };
        counts.set(sink, entry);
      }
      return entry;
    };
    for (const id of marked ?? []) countsOf(id).published++;
    for (const { id, status } of retried.flatMap((list) => list ?? [])) {
      const entry = countsOf(id);
      entry.failed++;
      if (status === 'dead') entry.dead++;
    }
    for (const [sink, { published, failed, dead }] of counts) {
      const meters = this.meters[sink];
      meters?.published(published);
      meters?.failed(failed);
      meters?.dead(dead);
    }
  }

  /** Counts consecutive batches that failed only for lack of a broker, and pauses claiming meanwhile. */
  private trackBroker(total: number, unavailable: number): void {
    if (unavailable > 0 && unavailable === total) {
      this.brokerFailures++;
      const delayMs = retryDelayMs(
        this.brokerFailures,
        { ...this.backoff, maxMs: Math.min(this.backoff.maxMs, BROKER_PROBE_MAX_MS) },
        this.random,
      );
      this.pausedUntil = Date.now() + delayMs;
      if (this.brokerFailures === 1)
        this.logger.warn({ delayMs }, 'broker unavailable; pausing claims and probing');
    } else if (this.brokerFailures > 0 && unavailable < total) {
      this.logger.info({ after: this.brokerFailures }, 'broker available again');
      this.brokerFailures = 0;
      this.pausedUntil = 0;
      this.wake();
    }
  }

  private async release(rows: ClaimedForPublish[]): Promise<void> {
    const claims = rows.map((row) => ({ id: row.id, attempts: row.attempts }));
    await this.withDatabaseRetry('release claims', this.settings.lockSeconds * 1_000, () =>
      releaseClaims(this.db, claims),
    );
    this.counters.released += rows.length;
  }

  /**
   * Runs a guarded statement, retrying while the database is away, for at most `budgetMs` (the lease:
   * after it, another relay may own the rows and the guard makes our statement a no-op anyway).
   * Returns undefined when it gave up; the rows' lease then hands them to the next claim.
   */
  private async withDatabaseRetry<T>(
    what: string,
    budgetMs: number,
    work: () => Promise<T>,
  ): Promise<T | undefined> {
    const deadline = Date.now() + budgetMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await work();
      } catch (error) {
        const delayMs = retryDelayMs(attempt, DB_RETRY, this.random);
        if (Date.now() + delayMs > deadline) {
          this.logger.error({ err: error, attempt }, `${what} failed; the lease will return the rows`);
          return undefined;
        }
        this.logger.warn({ err: error, attempt, delayMs }, `${what} failed; retrying`);
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
    }
  }
}

function noOutcome(id: number, error: string): PublishOutcome {
  return { id, ok: false, error, failure: 'unavailable' };
}

function messageFields(row: ClaimedForPublish): Record<string, unknown> {
  return {
    messageId: row.messageId,
    correlationId: row.headers[HEADER.correlationId],
    aggregateId: row.headers[HEADER.streamId],
    outboxId: row.id,
    attempts: row.attempts,
    destination: row.destination,
    ...(row.ordered ? { partitionKey: row.partitionKey } : {}),
  };
}
