/**
 * Generic sweepers: an aggregate says which rows are due and which command each gets; locking, the batch
 * command, after-commit wake-ups, counting and logging are shared. A claim sweep locks due streams with
 * FOR UPDATE SKIP LOCKED (invariant 7) and runs one command per stream in ONE transaction (invariant 1).
 * Stale recovery takes back, with a new epoch (invariant 5), only claims whose liveness time is older than
 * the stale window and none of whose messages is still in flight, so a backlog never turns into
 * duplicates; reclaims are bounded per pass. `sweepInOrder` runs an aggregate's sweeps as one sweeper.
 * Metrics per aggregate and sweeper include each claim's due → claimed latency. ADR 0009, ADR 0013.
 */
import type { Span } from '@opentelemetry/api';
import { messagesInFlight } from '../adapters/postgres/claim-liveness-queries.js';
import { latestTraceparents } from '../adapters/postgres/event-queries.js';
import type { DomainEvent } from '../domain/decider.js';
import type { Aggregate, LoadedStream } from '../eventstore/aggregate.js';
import type { CommandHandler, CommandResult } from '../eventstore/command-handler.js';
import type { Logger } from '../logger.js';
import { HEADER } from '../messaging/headers.js';
import { heraldMetrics, type SweeperMeters } from '../observability/metrics.js';
import { contextOf, failSpan, startSpan, traceparentOf, tracingOn } from '../observability/tracing.js';
import type { Database, SqlClient } from '../ports/database.js';
import type { WakeupSignal } from '../ports/wakeups.js';
import type { Sweeper, SweepResult } from './scanner.js';

export interface SweeperDeps {
  db: Database;
  handler: CommandHandler;
  logger: Logger;
  /** Wakes relays and scanners after a sweep committed (the scanner's has no coalescing window). */
  wakeups?: WakeupSignal;
  /** Streams per transaction. */
  batchSize: number;
}

/** How a sweep's result is counted and logged. */
export interface SweepOutcome {
  counter: string;
  message: string;
  level?: 'debug' | 'info' | 'warn';
}

export interface ClaimSweepDefinition<State, Command, Event extends DomainEvent> {
  /** E.g. `campaign.claim`; in logs and the scanner's stop line. */
  name: string;
  aggregate: Aggregate<State, Command, Event>;
  /** Recorded as the events' actor. */
  actor: string;
  /** Locks at most `limit` due streams in `tx` (FOR UPDATE SKIP LOCKED), in due order. */
  lockDue(tx: SqlClient, limit: number): Promise<LoadedStream<State>[]>;
  /** The command for one locked stream, at the transaction's database time (null: leave it). */
  command(stream: LoadedStream<State>, now: Date): Command | null;
  /** Milliseconds until the next stream becomes due by the database clock (null: none scheduled). */
  nextDueInMs?(sql: SqlClient): Promise<number | null>;
  /** How a result is counted and logged. Default: counter `processed`, at debug. */
  outcome?(result: CommandResult<State, Event>): SweepOutcome;
  /**
   * Writes what the batch's events cause in other streams, inside the same transaction (invariant 1:
   * e.g. the job_run streams a cron job's materialization creates); a throw rolls the whole claim back.
   * Returns what to signal after commit (wake-ups for those streams), if anything.
   */
  followUp?(
    tx: SqlClient,
    results: readonly CommandResult<State, Event>[],
  ): Promise<(() => void) | undefined>;
  /**
   * Runs after the sweep's transaction committed, with its results, before the sweep returns (e.g. an
   * in-process deployment running what it just claimed); `more`: the claim came back full, another
   * follows. The claim that ends a pass calls it even when it claimed nothing (empty results, `more`
   * false). A throw fails the pass; the claims stay.
   */
  afterCommit?(results: readonly CommandResult<State, Event>[], pass: { more: boolean }): Promise<void>;
  /** Waits for work `afterCommit` left running (the scanner's stop). */
  stop?(): Promise<void>;
}

export interface StaleRecoveryDefinition<State, Command, Event extends DomainEvent> {
  name: string;
  aggregate: Aggregate<State, Command, Event>;
  actor: string;
  /** Live claims whose liveness time is older than `staleAfterMs` by the database clock, oldest first. */
  findStale(sql: SqlClient, params: { staleAfterMs: number; limit: number }): Promise<LoadedStream<State>[]>;
  /**
   * Locks these candidates in `tx` (FOR UPDATE SKIP LOCKED), each only if it is still at the version it
   * was found at and still stale: whatever moved since is left alone.
   */
  lockStale(
    tx: SqlClient,
    candidates: readonly { streamId: string; version: number }[],
    staleAfterMs: number,
  ): Promise<LoadedStream<State>[]>;
  /** The message ids a claim's liveness rests on (its claim's outbox messages). */
  claimMessageIds(state: State): string[];
  command(stream: LoadedStream<State>, now: Date, staleAfterMs: number): Command | null;
  outcome?(result: CommandResult<State, Event>): SweepOutcome;
}

export interface StaleRecoverySettings {
  /** A claim without a sign of life for this long is examined (seed 000: 15 minutes). */
  staleAfterMs: number;
  /** A published message no consumer settled for this long is presumed lost. */
  messageLostAfterMs: number;
  /** Reclaims per scanner pass at most. */
  maxReclaimsPerPass: number;
}

export interface CountingSweeper extends Sweeper {
  readonly stats: Readonly<Record<string, number>>;
  /** Called by the scanner at the start of each pass (resets per-pass budgets). */
  beginPass?(): void;
}

function logRefusals(
  logger: Logger,
  name: string,
  refused: readonly { streamId: string; error: Error }[],
): void {
  for (const { streamId, error } of refused) {
    logger.warn(
      { aggregateId: streamId, err: error, sweeper: name },
      `${name}: command refused by the decider`,
    );
  }
}

function record<State, Event>(
  logger: Logger,
  stats: Record<string, number>,
  meters: SweeperMeters,
  results: readonly CommandResult<State, Event>[],
  outcome: ((result: CommandResult<State, Event>) => SweepOutcome) | undefined,
): void {
  for (const result of results) {
    const { counter, message, level } = outcome?.(result) ?? { counter: 'processed', message: 'swept' };
    stats[counter] = (stats[counter] ?? 0) + 1;
    meters.swept(counter);
    const first = result.outbox[0];
    logger[level ?? 'debug'](
      {
        aggregateId: result.streamId,
        ...(first
          ? { messageId: first.messageId, correlationId: first.headers?.[HEADER.correlationId] }
          : {}),
      },
      message,
    );
  }
}

export function defineClaimSweeper<State, Command, Event extends DomainEvent>(
  definition: ClaimSweepDefinition<State, Command, Event>,
  deps: SweeperDeps,
): CountingSweeper {
  const commands = deps.handler.for(definition.aggregate);
  const stats: Record<string, number> = {};
  const logger = deps.logger.child({ sweeper: definition.name });
  const meters = heraldMetrics.sweeper(definition.aggregate.streamType, definition.name);
  const dueAt = definition.aggregate.dueAt;
  return {
    name: definition.name,
    stats,
    async sweep(): Promise<SweepResult> {
      const started = performance.now();
      const claimSpans = new Map<string, Span>();
      const claimed = deps.db.transaction(async (tx) => {
        const due = await definition.lockDue(tx, deps.batchSize);
        // While tracing: each claim is a span in the trace of the command that made its stream due.
        if (tracingOn() && due.length > 0) {
          const parents = await latestTraceparents(
            tx,
            definition.aggregate.streamType,
            due.map((s) => s.streamId),
          );
          for (const stream of due) {
            const span = startSpan(`claim ${definition.name}`, {
              parent: contextOf(parents.get(stream.streamId)),
              attributes: { 'herald.stream': `${definition.aggregate.streamType}/${stream.streamId}` },
            });
            if (span) claimSpans.set(stream.streamId, span);
          }
        }
        const batch = await commands.handleBatchInTransaction(tx, due, definition.command, {
          meta: { actor: definition.actor },
          ...(claimSpans.size > 0
            ? { metaFor: (stream) => ({ traceparent: traceparentOf(claimSpans.get(stream.streamId)!) }) }
            : {}),
        });
        const followed =
          definition.followUp && batch.results.length > 0
            ? await definition.followUp(tx, batch.results)
            : undefined;
        const dueTimes =
          dueAt && batch.results.length > 0
            ? new Map(due.map((stream) => [stream.streamId, dueAt(stream.state)]))
            : undefined;
        return { found: due.length, batch, followed, dueTimes };
      });
      const { found, batch, followed, dueTimes } = await claimed.catch((error: unknown) => {
        for (const span of claimSpans.values()) failSpan(span, error);
        throw error;
      });
      for (const span of claimSpans.values()) span.end();
      if (found > 0) meters.batch((performance.now() - started) / 1000);
      for (const result of dueTimes ? batch.results : []) {
        const at = dueTimes!.get(result.streamId);
        const waited = at ? result.now.getTime() - Date.parse(at) : Number.NaN;
        if (waited >= 0) meters.dueToClaimed(waited / 1000);
      }
      commands.signalAfterCommit(batch.results, deps.wakeups);
      followed?.();
      record(logger, stats, meters, batch.results, definition.outcome);
      logRefusals(logger, definition.name, batch.refused);
      const more = found === deps.batchSize;
      // Also when nothing was claimed at the end of a pass: what earlier claims left running finishes.
      if (definition.afterCommit && (batch.results.length > 0 || !more))
        await definition.afterCommit(batch.results, { more });
      return { processed: batch.results.length, more };
    },
    nextDueInMs: () => definition.nextDueInMs?.(deps.db) ?? Promise.resolve(null),
    ...(definition.stop ? { stop: definition.stop } : {}),
  };
}

export function defineStaleRecovery<State, Command, Event extends DomainEvent>(
  definition: StaleRecoveryDefinition<State, Command, Event>,
  deps: SweeperDeps,
  settings: StaleRecoverySettings,
): CountingSweeper {
  const commands = deps.handler.for(definition.aggregate);
  const stats: Record<string, number> = { examined: 0, inFlight: 0 };
  const logger = deps.logger.child({ sweeper: definition.name });
  const meters = heraldMetrics.sweeper(definition.aggregate.streamType, definition.name);
  let budget = settings.maxReclaimsPerPass;
  return {
    name: definition.name,
    stats,
    beginPass() {
      budget = settings.maxReclaimsPerPass;
    },
    async sweep(): Promise<SweepResult> {
      if (budget <= 0) return { processed: 0, more: false };
      const { staleAfterMs } = settings;
      const stale = await definition.findStale(deps.db, { staleAfterMs, limit: deps.batchSize });
      if (stale.length === 0) return { processed: 0, more: false };
      const ids = stale.flatMap((s) => definition.claimMessageIds(s.state));
      const inFlight = new Set(await messagesInFlight(deps.db, ids, settings.messageLostAfterMs));
      const recoverable = stale
        .filter((s) => !definition.claimMessageIds(s.state).some((id) => inFlight.has(id)))
        .slice(0, budget);
      stats.examined! += stale.length;
      stats.inFlight! += stale.length - recoverable.length;
      if (recoverable.length === 0) return { processed: 0, more: false };
      const started = performance.now();
      const batch = await deps.db.transaction(async (tx) => {
        const locked = await definition.lockStale(tx, recoverable, staleAfterMs);
        return commands.handleBatchInTransaction(
          tx,
          locked,
          (stream, now) => definition.command(stream, now, staleAfterMs),
          { meta: { actor: definition.actor } },
        );
      });
      meters.batch((performance.now() - started) / 1000);
      budget -= batch.results.length;
      commands.signalAfterCommit(batch.results, deps.wakeups);
      record(logger, stats, meters, batch.results, definition.outcome);
      logRefusals(logger, definition.name, batch.refused);
      return { processed: batch.results.length, more: budget > 0 && stale.length === deps.batchSize };
    },
    nextDueInMs: () => Promise.resolve(null),
  };
}

/**
 * An aggregate's sweeps as one sweeper, run in order each call: its claim first, so a due row does not
 * wait for the other sweeps' transactions; a later sweep that changed something (a recovery that
 * reclaimed) asks for another call (`more`), whose claim takes what it put back.
 */
export function sweepInOrder(
  name: string,
  claim: CountingSweeper,
  ...after: CountingSweeper[]
): CountingSweeper & { readonly parts: readonly CountingSweeper[] } {
  const parts = [claim, ...after];
  return {
    name,
    parts,
    get stats() {
      return Object.assign({}, ...parts.map((p) => p.stats)) as Record<string, number>;
    },
    beginPass() {
      for (const part of parts) part.beginPass?.();
    },
    async stop() {
      await Promise.all(parts.map((part) => part.stop?.()));
    },
    async sweep(): Promise<SweepResult> {
      const claimed = await claim.sweep();
      let processed = claimed.processed;
      let more = claimed.more;
      for (const sweep of after) {
        const swept = await sweep.sweep();
        processed += swept.processed;
        more ||= swept.more || swept.processed > 0;
      }
      return { processed, more };
    },
    async nextDueInMs() {
      let earliest: number | null = null;
      for (const part of parts) {
        const dueIn = await part.nextDueInMs();
        if (dueIn !== null) earliest = earliest === null ? dueIn : Math.min(earliest, dueIn);
      }
      return earliest;
    },
  };
}
