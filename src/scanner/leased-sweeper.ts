/**
 * A sweeper that runs only while this process holds a named lease (seed 003's ShedLock leases, as
 * Herald's `lease` table timed by the database clock: invariant 6). Each sweep first takes or renews
 * the lease (one statement; a lease held by someone else and unexpired → the pass does nothing); the
 * scanner's timer is armed so the holder renews it every third of its TTL even when idle, which keeps
 * its age (readiness, `herald_lease_age_seconds`) below the TTL. A replica that stops renewing loses
 * it after the TTL and another takes it over with a new term.
 *
 * The lease only cuts duplicate work (invariant 7): the wrapped sweeper's writes stay guarded in their
 * WHERE clauses and row locks, so two holders at once (a paused process waking after its lease
 * expired) cost duplicate effort, never a duplicate effect.
 */
import { acquireLease, type LeaseGrant, releaseLease } from '../adapters/postgres/lease-queries.js';
import { errorMessage } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Database } from '../ports/database.js';
import type { Sweeper, SweepResult } from './scanner.js';

export interface LeasedSweeperOptions {
  db: Database;
  /** The lease's name (e.g. `sms:dlr-rollup`). */
  lease: string;
  /** Its owner: unique per process (`<pod>:<random>`). */
  owner: string;
  ttlMs: number;
  logger?: Logger;
}

export interface LeasedSweeper extends Sweeper {
  readonly lease: string;
  /** True while this process held the lease at its last sweep. */
  readonly holding: boolean;
  /** Ends the lease now (graceful stop), so another replica takes it at once. */
  release(): Promise<void>;
}

/** Wraps `sweeper` so that it sweeps only under the lease `options.lease`. */
export function leasedSweeper(sweeper: Sweeper, options: LeasedSweeperOptions): LeasedSweeper {
  let grant: LeaseGrant | null = null;
  // Process clock, only to pace renewals (the lease's own times are the database's).
  let renewedAt = 0;
  const renewEveryMs = Math.max(1, Math.floor(options.ttlMs / 3));
  const stats: Record<string, number> = { leaseAcquired: 0, leaseLost: 0, skippedWithoutLease: 0 };

  async function hold(): Promise<boolean> {
    if (grant && performance.now() - renewedAt < renewEveryMs) return true;
    const previous = grant;
    const taken = await acquireLease(options.db, options.lease, options.owner, options.ttlMs);
    if (taken && (!previous || previous.term !== taken.term)) {
      stats.leaseAcquired!++;
      options.logger?.info({ lease: options.lease, term: taken.term }, `lease ${options.lease} acquired`);
    }
    if (!taken && previous) {
      stats.leaseLost!++;
      options.logger?.warn({ lease: options.lease }, `lease ${options.lease} lost to another replica`);
    }
    grant = taken;
    renewedAt = performance.now();
    return taken !== null;
  }

  async function release(): Promise<void> {
    const held = grant;
    grant = null;
    if (!held) return;
    await releaseLease(options.db, held).catch((error: unknown) =>
      options.logger?.warn(
        { err: error, lease: options.lease },
        `could not release lease ${options.lease}: ${errorMessage(error)}; it expires on its own`,
      ),
    );
  }

  return {
    name: sweeper.name,
    lease: options.lease,
    get holding() {
      return grant !== null;
    },
    get stats() {
      return { ...sweeper.stats, ...stats };
    },
    beginPass() {
      sweeper.beginPass?.();
    },
    async sweep(): Promise<SweepResult> {
      if (!(await hold())) {
        stats.skippedWithoutLease!++;
        return { processed: 0, more: false };
      }
      return sweeper.sweep();
    },
    async nextDueInMs() {
      const renewIn = Math.max(1, renewEveryMs - (performance.now() - renewedAt));
      if (!grant) return renewIn;
      const inner = await sweeper.nextDueInMs();
      return inner === null ? renewIn : Math.min(inner, renewIn);
    },
    stop: release,
    release,
  };
}
