/**
 * The asynchronous projector: follows the event log (and publish receipts) for one projection and applies
 * it batch by batch, never skipping and never applying twice: reads are gap-safe (below
 * `pg_snapshot_xmin`, in (tx, position) order), and each batch is one transaction that locks the
 * checkpoint, applies and advances it guarded by the value it read. One replica is active through a lease
 * on the database clock (invariant 6), re-checked in each batch; the checkpoint lock makes several
 * replicas safe anyway (invariant 7). Rebuilds fill shadow tables and swap them in. ADR 0008.
 */
import { randomUUID } from 'node:crypto';
import { readLogAfter } from '../adapters/postgres/event-queries.js';
import {
  acquireLease,
  holdsLease,
  type LeaseGrant,
  releaseLease,
  renewLease,
} from '../adapters/postgres/lease-queries.js';
import {
  advanceCheckpoint,
  deleteCheckpoints,
  ensureCheckpoint,
  lockCheckpoint,
  recreateShadowTable,
  resetCheckpoints,
  swapShadowTable,
} from '../adapters/postgres/projection-queries.js';
import { readReceiptsAfter } from '../adapters/postgres/receipt-queries.js';
import { ConcurrencyError, errorMessage, IllegalStateError } from '../errors.js';
import { type Logger, silentLogger } from '../logger.js';
import type { Database, SqlClient } from '../ports/database.js';
import type { LogCursor, StoredEvent } from '../ports/events.js';
import { ServiceLoop } from '../runtime/service-loop.js';
import {
  checkpointName,
  type Projection,
  type ProjectionSource,
  type ProjectionTarget,
  shadowTable,
} from './projection.js';

const LIVE: ProjectionTarget = { shadow: false };
const SHADOW: ProjectionTarget = { shadow: true };

/** A stored event in the current shape of its stream type (the registry's `upcast`; ADR 0039). */
export type Upcast = (event: StoredEvent) => StoredEvent;

/** Test seams. Never set in production. */
export interface ProjectorHooks {
  /** Runs inside a batch's transaction after the projection's writes, before the checkpoint moves. */
  afterApply?: (batch: { source: ProjectionSource; count: number }) => Promise<void> | void;
}

export interface BatchResult {
  source: ProjectionSource;
  count: number;
  cursor: LogCursor;
}

/**
 * Applies the next batch of one source inside `tx`: locks the checkpoint, (optionally) checks the
 * lease, reads after the checkpoint, applies, advances. Returns how many entries it applied.
 */
export async function projectBatchInTransaction(
  tx: SqlClient,
  projection: Projection,
  source: ProjectionSource,
  target: ProjectionTarget,
  options: { batchSize: number; lease?: LeaseGrant; hooks?: ProjectorHooks; upcast?: Upcast },
): Promise<BatchResult> {
  const name = checkpointName(projection.name, source, target);
  let from = await lockCheckpoint(tx, name);
  if (!from) {
    await ensureCheckpoint(tx, name);
    from = await lockCheckpoint(tx, name);
  }
  if (!from) throw new IllegalStateError(`checkpoint ${name} could not be created`);
  if (options.lease && !(await holdsLease(tx, options.lease))) {
    throw new LeaseLostError(options.lease);
  }
  let count: number;
  let to: LogCursor;
  if (source === 'events') {
    const read = await readLogAfter(tx, from, options.batchSize);
    // In the current shape (ADR 0039). A version this release does not read fails the batch: the
    // checkpoint stays before it until a release that reads it takes over.
    const events = options.upcast ? read.map(options.upcast) : read;
    if (events.length === 0) return { source, count: 0, cursor: from };
    await projection.applyEvents(tx, events, target);
    const last = events[events.length - 1]!;
    count = events.length;
    to = { tx: last.tx, position: last.position };
  } else {
    const receipts = await readReceiptsAfter(tx, from, options.batchSize);
    if (receipts.length === 0) return { source, count: 0, cursor: from };
    if (!projection.applyReceipts) throw new IllegalStateError(`${projection.name} does not follow receipts`);
    await projection.applyReceipts(tx, receipts, target);
    const last = receipts[receipts.length - 1]!;
    count = receipts.length;
    to = { tx: last.tx, position: last.id };
  }
  await options.hooks?.afterApply?.({ source, count });
  if (!(await advanceCheckpoint(tx, name, from, to))) {
    throw new ConcurrencyError(`checkpoint ${name} moved during the batch`, { name });
  }
  return { source, count, cursor: to };
}

/** The lease the one active projector of a projection holds (readiness requires it to stay fresh). */
export function projectorLeaseName(projection: string): string {
  return `projector:${projection}`;
}

/** The projector no longer holds its lease (another replica took it over). */
export class LeaseLostError extends IllegalStateError {
  constructor(lease: LeaseGrant) {
    super(`lease ${lease.name} (term ${lease.term}) is no longer held by ${lease.owner}`, {
      lease: lease.name,
      term: lease.term,
    });
  }
}

export interface ProjectorOptions {
  db: Database;
  projection: Projection;
  /** Unique per process: the lease owner. Default `<pod>:<random>`. */
  owner?: string;
  pod?: string;
  batchSize?: number;
  /** Sleep when caught up (and retry interval while another replica holds the lease). */
  pollMs?: number;
  /** Lease length; renewed every third of it. */
  leaseMs?: number;
  logger?: Logger;
  hooks?: ProjectorHooks;
  /** Events in the current shape of their stream type (the registry's `upcast`; ADR 0039). */
  upcast?: Upcast;
}

export interface ProjectorStats {
  events: number;
  receipts: number;
  batches: number;
  leaseAcquired: number;
  leaseLost: number;
  errors: number;
}

/** Runs one projection: lease, then batches until caught up, then poll. */
export class Projector {
  readonly owner: string;
  readonly stats: ProjectorStats = {
    events: 0,
    receipts: 0,
    batches: 0,
    leaseAcquired: 0,
    leaseLost: 0,
    errors: 0,
  };
  private readonly batchSize: number;
  private readonly pollMs: number;
  private readonly leaseMs: number;
  private readonly logger: Logger;
  private lease: LeaseGrant | null = null;
  private renewAt = 0;
  private loop: ServiceLoop | undefined;
  private stopping = false;
  private checkpointsReady = false;

  constructor(private readonly options: ProjectorOptions) {
    this.owner = options.owner ?? `${options.pod ?? 'herald'}:${randomUUID().slice(0, 8)}`;
    this.batchSize = options.batchSize ?? 1_000;
    this.pollMs = options.pollMs ?? 1_000;
    this.leaseMs = options.leaseMs ?? 30_000;
    this.logger = (options.logger ?? silentLogger).child({
      projection: options.projection.name,
      owner: this.owner,
    });
  }

  get leaseName(): string {
    return projectorLeaseName(this.options.projection.name);
  }

  /** True while this replica holds the projection's lease. */
  get active(): boolean {
    return this.lease !== null;
  }

  start(): void {
    if (this.loop) throw new IllegalStateError('projector already started');
    this.stopping = false;
    this.loop = new ServiceLoop({
      name: 'projector',
      logger: this.logger,
      round: async () => {
        try {
          return await this.round();
        } catch (error) {
          this.stats.errors++;
          throw error;
        }
      },
      errorBackoff: { baseMs: 200, maxMs: 5_000, jitter: 'equal' },
      onError: (error, attempt, delayMs) =>
        this.logger.error({ err: error, attempt, delayMs }, 'projector batch failed; retrying'),
    });
    this.loop.start();
  }

  /** Finishes the batch in flight, releases the lease (another replica takes over at once). */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.loop?.stop();
    this.loop = undefined;
    await this.releaseHeldLease();
    this.logger.info({ stats: this.stats }, 'projector stopped');
  }

  /**
   * Applies batches of every source until each comes back short (caught up with the committed log).
   * Without a lease when none is held (tests, tools); the loop calls it while holding one.
   */
  catchUp(): Promise<{ events: number; receipts: number }> {
    return this.applyUntilCaughtUp(false);
  }

  /** With `leased`, every batch is fenced by the lease, and the work stops as soon as it is lost. */
  private async applyUntilCaughtUp(leased: boolean): Promise<{ events: number; receipts: number }> {
    const total = { events: 0, receipts: 0 };
    for (const source of this.options.projection.sources) {
      for (;;) {
        const lease = this.lease;
        if (leased && !lease) return total;
        const batch = await this.options.db.transaction((tx) =>
          projectBatchInTransaction(tx, this.options.projection, source, LIVE, {
            batchSize: this.batchSize,
            ...(leased && lease ? { lease } : {}),
            ...(this.options.hooks ? { hooks: this.options.hooks } : {}),
            ...(this.options.upcast ? { upcast: this.options.upcast } : {}),
          }),
        );
        total[source] += batch.count;
        this.stats[source] += batch.count;
        if (batch.count > 0) this.stats.batches++;
        if (batch.count < this.batchSize || this.stopping) break;
        if (leased && Date.now() >= this.renewAt) await this.keepLease();
      }
    }
    return total;
  }

  /** One round: make sure the checkpoints exist, hold the lease, catch up; sleep when idle. */
  private async round(): Promise<number> {
    if (!this.checkpointsReady) {
      for (const source of this.options.projection.sources) {
        await ensureCheckpoint(this.options.db, checkpointName(this.options.projection.name, source, LIVE));
      }
      this.checkpointsReady = true;
    }
    try {
      if (!this.lease) {
        await this.takeLease();
        if (!this.lease) return Math.min(this.pollMs, this.leaseMs / 3);
      } else if (Date.now() >= this.renewAt) {
        await this.keepLease();
        if (!this.lease) return 0;
      }
      const done = await this.applyUntilCaughtUp(true);
      return done.events === 0 && done.receipts === 0 ? this.pollMs : 0;
    } catch (error) {
      if (!(error instanceof LeaseLostError)) throw error;
      this.dropLease('lease lost during a batch');
      return 0;
    }
  }

  private async releaseHeldLease(): Promise<void> {
    const lease = this.lease;
    if (!lease) return;
    this.lease = null;
    await releaseLease(this.options.db, lease).catch((error: unknown) =>
      this.logger.warn({ err: error }, 'could not release the projector lease; it expires on its own'),
    );
  }

  private async takeLease(): Promise<void> {
    const grant = await acquireLease(this.options.db, this.leaseName, this.owner, this.leaseMs);
    if (!grant) return;
    this.lease = grant;
    this.renewAt = Date.now() + this.leaseMs / 3;
    this.stats.leaseAcquired++;
    this.logger.info({ term: grant.term }, 'projector lease acquired: this replica is active');
  }

  private async keepLease(): Promise<void> {
    const lease = this.lease;
    if (!lease) return;
    if (await renewLease(this.options.db, lease, this.leaseMs)) {
      this.renewAt = Date.now() + this.leaseMs / 3;
    } else {
      this.dropLease('lease taken over by another replica');
    }
  }

  private dropLease(why: string): void {
    if (!this.lease) return;
    this.logger.warn({ term: this.lease.term }, why);
    this.lease = null;
    this.stats.leaseLost++;
  }
}

export interface RebuildResult {
  projection: string;
  events: number;
  receipts: number;
  /** Entries applied inside the swap transaction (the tail written while the rebuild ran). */
  tail: number;
  ms: number;
}

/**
 * Rebuilds a projection from the start of the log into shadow tables, then swaps them in. The live
 * projection keeps serving (and its projector keeps running) until the swap, which holds the live
 * checkpoints' locks, applies the last entries to the shadow, replaces the live tables and moves the
 * shadow checkpoints onto the live ones, in one transaction. Only one rebuild per projection at a time
 * (a lease `rebuild:<name>`).
 */
export async function rebuildProjection(
  db: Database,
  projection: Projection,
  options: { owner?: string; batchSize?: number; leaseMs?: number; logger?: Logger; upcast?: Upcast } = {},
): Promise<RebuildResult> {
  const started = Date.now();
  const owner = options.owner ?? `rebuild:${randomUUID().slice(0, 8)}`;
  const batchSize = options.batchSize ?? 5_000;
  const leaseMs = options.leaseMs ?? 60_000;
  const upcast = options.upcast ? { upcast: options.upcast } : {};
  const logger = (options.logger ?? silentLogger).child({ projection: projection.name, rebuild: owner });
  const lease = await acquireLease(db, `rebuild:${projection.name}`, owner, leaseMs);
  if (!lease) throw new IllegalStateError(`a rebuild of ${projection.name} is already running`);
  let renewAt = Date.now() + leaseMs / 3;
  const shadowCheckpoints = projection.sources.map((s) => checkpointName(projection.name, s, SHADOW));
  const liveCheckpoints = projection.sources.map((s) => checkpointName(projection.name, s, LIVE));
  const totals = { events: 0, receipts: 0, tail: 0 };
  try {
    await db.transaction(async (tx) => {
      for (const table of projection.tables) await recreateShadowTable(tx, table, shadowTable(table));
      await resetCheckpoints(tx, shadowCheckpoints);
    });
    logger.info({ tables: projection.tables.map(shadowTable) }, 'rebuild: shadow tables created');

    // Catch up outside the swap: the bulk of the work, while the live projection keeps serving.
    for (const source of projection.sources) {
      for (;;) {
        const batch = await db.transaction((tx) =>
          projectBatchInTransaction(tx, projection, source, SHADOW, { batchSize, lease, ...upcast }),
        );
        totals[source] += batch.count;
        if (batch.count < batchSize) break;
        if (Date.now() >= renewAt) {
          if (!(await renewLease(db, lease, leaseMs))) throw new LeaseLostError(lease);
          renewAt = Date.now() + leaseMs / 3;
        }
      }
    }
    logger.info(totals, 'rebuild: caught up; swapping');

    await db.transaction(async (tx) => {
      for (const name of liveCheckpoints) await ensureCheckpoint(tx, name);
      const live: (LogCursor | null)[] = [];
      for (const name of liveCheckpoints) live.push(await lockCheckpoint(tx, name));
      for (const source of projection.sources) {
        for (;;) {
          const batch = await projectBatchInTransaction(tx, projection, source, SHADOW, {
            batchSize,
            lease,
            ...upcast,
          });
          totals.tail += batch.count;
          totals[source] += batch.count;
          if (batch.count < batchSize) break;
        }
      }
      const caughtUp: (LogCursor | null)[] = [];
      for (const name of shadowCheckpoints) caughtUp.push(await lockCheckpoint(tx, name));
      for (const table of projection.tables) await swapShadowTable(tx, table, shadowTable(table));
      for (const [index, name] of liveCheckpoints.entries()) {
        const from = live[index];
        const to = caughtUp[index];
        if (!from || !to || !(await advanceCheckpoint(tx, name, from, to))) {
          throw new ConcurrencyError(`checkpoint ${name} moved during the swap`, { name });
        }
      }
      await deleteCheckpoints(tx, shadowCheckpoints);
    });
    const result = { projection: projection.name, ...totals, ms: Date.now() - started };
    logger.info(result, 'rebuild: swapped in');
    return result;
  } catch (error) {
    logger.error({ err: error }, `rebuild failed: ${errorMessage(error)}`);
    throw error;
  } finally {
    await releaseLease(db, lease).catch(() => {});
  }
}
