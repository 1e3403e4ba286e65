/**
 * Idempotency-Key, once for every command: scope, fingerprint, reservation, completion, release and the
 * two refusals. The API reserves and completes a key in the transaction of the request's commands
 * (invariant 1: key, events, state rows and outbox rows commit together); a service whose operation spans
 * an outside call reserves now and completes in its last transaction (`aroundReservation`). A retry
 * replays the stored result and never enqueues or charges twice; the same key with another request is
 * refused. ADR 0012, ADR 0020.
 */
import { createHash } from 'node:crypto';
import {
  completeIdempotencyKey,
  releaseIdempotencyKey,
  reserveIdempotencyKey,
  resumeIdempotencyKey,
  suspendIdempotencyKey,
} from '../adapters/postgres/idempotency-queries.js';
import { IdempotencyKeyError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Database, SqlClient } from '../ports/database.js';
import { RETRY_AFTER_SECONDS } from './problem.js';

/**
 * Seed 003: a client retrying while the first request is in progress is told to come back in 2 s — the
 * API's one Retry-After (src/api/problem.ts), under the name this module has always exported.
 */
export const IN_PROGRESS_RETRY_AFTER_SECONDS = RETRY_AFTER_SECONDS;

/** An Idempotency-Key with its scope and the fingerprint of the request it was sent with. */
export interface RequestKey {
  readonly scope: string;
  readonly key: string;
  readonly fingerprint: string;
}

/** An operation's result, and whether it was replayed from its Idempotency-Key. */
export interface Replayable<T> {
  readonly body: T;
  readonly replayed: boolean;
}

/** JSON with object keys sorted, so the same request always has the same fingerprint. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : v,
  );
}

export function fingerprint(value: unknown): string {
  return createHash('sha256')
    .update(canonicalJson(value ?? null))
    .digest('hex');
}

/** The key with more of the request in its fingerprint (e.g. an uploaded file's SHA-256). */
export function withFingerprintOf(key: RequestKey, extra: string): RequestKey {
  return {
    ...key,
    fingerprint: createHash('sha256').update(`${key.fingerprint}\n${extra}`).digest('hex'),
  };
}

/**
 * Thrown by an operation run `aroundReservation` that failed in a way the same request may finish later
 * (ADR 0023: the charge billing did not answer): the key stays reserved with `token`, and a retry with the
 * same key and request resumes the operation with it; `failure` is what the caller is told now.
 */
export class SuspendedOperation extends Error {
  constructor(
    readonly token: unknown,
    readonly failure: unknown,
  ) {
    super('operation suspended');
  }
}

/**
 * How long a reservation holds its key before a retry may take it over: longer than any request runs
 * (an SMS creation's billing calls included), short enough that a request cut between its reservation and
 * its completion (a process or database failover: its release never reached the database) does not
 * refuse the caller's retries for the whole TTL.
 */
export const RESERVATION_LEASE_MS = 5 * 60_000;

export class IdempotencyKeys {
  /**
   * `ttlMs`: how long a completed (or suspended) key is remembered (HERALD_IDEMPOTENCY_TTL_HOURS);
   * `leaseMs`: how long a reservation lasts (RESERVATION_LEASE_MS).
   */
  constructor(
    private readonly ttlMs: number,
    private readonly leaseMs = RESERVATION_LEASE_MS,
  ) {}

  /**
   * Reserves the key in `tx`: null when this request now owns it, else the stored result to replay.
   * Throws IDEMPOTENCY_KEY_IN_USE while another request holds it (with the Retry-After to advise) and
   * IDEMPOTENCY_KEY_REUSED when it was used for a different request.
   */
  async reserve<T>(tx: SqlClient, key: RequestKey): Promise<{ stored: T } | null> {
    const outcome = await this.reserveOrResume<T>(tx, key, { resumable: false });
    return outcome.kind === 'replay' ? { stored: outcome.stored } : null;
  }

  /**
   * `reserve`, and with `resumable` a suspended key (SuspendedOperation) is taken over by this request
   * when it is the same request: its token is returned to resume the operation with.
   */
  async reserveOrResume<T>(
    tx: SqlClient,
    key: RequestKey,
    options: { resumable: boolean },
  ): Promise<{ kind: 'reserved' } | { kind: 'replay'; stored: T } | { kind: 'resume'; token: unknown }> {
    const reservation = await reserveIdempotencyKey(tx, {
      scope: key.scope,
      key: key.key,
      requestHash: key.fingerprint,
      leaseMs: Math.min(this.leaseMs, this.ttlMs),
    });
    if (reservation.kind === 'reserved') return { kind: 'reserved' };
    const inUse = () =>
      new IdempotencyKeyError(
        'IDEMPOTENCY_KEY_IN_USE',
        'a request with this Idempotency-Key is still in progress; retry later',
        { retryAfterSeconds: IN_PROGRESS_RETRY_AFTER_SECONDS },
      );
    const reused = () =>
      new IdempotencyKeyError(
        'IDEMPOTENCY_KEY_REUSED',
        'this Idempotency-Key was used for a different request (method, route, parameters or body)',
        { field: 'Idempotency-Key' },
      );
    if (reservation.kind === 'in-flight') throw inUse();
    if (reservation.state !== 'completed') {
      const suspended =
        typeof reservation.response === 'object' &&
        reservation.response !== null &&
        'resume' in reservation.response;
      if (!suspended || !options.resumable) throw inUse();
      if (reservation.requestHash !== key.fingerprint) throw reused();
      const token = await resumeIdempotencyKey(tx, {
        scope: key.scope,
        key: key.key,
        requestHash: key.fingerprint,
        leaseMs: Math.min(this.leaseMs, this.ttlMs),
      });
      if (token === null) throw inUse();
      return { kind: 'resume', token };
    }
    if (reservation.requestHash !== key.fingerprint) throw reused();
    return { kind: 'replay', stored: reservation.response as T };
  }

  /** Stores the result of the request that reserved the key (in the transaction of its last write). */
  complete(tx: SqlClient, key: RequestKey, stored: unknown): Promise<void> {
    return completeIdempotencyKey(tx, {
      scope: key.scope,
      key: key.key,
      response: stored,
      ttlMs: this.ttlMs,
    });
  }

  /** Gives a reserved key up (the operation failed: a retry is a new request). */
  release(db: SqlClient, key: RequestKey): Promise<void> {
    return releaseIdempotencyKey(db, key.scope, key.key);
  }

  /**
   * Reserve now, complete later: reserves `key` (if any) in a transaction of its own and replays a
   * stored result; otherwise runs `operation`, which completes the key in its last transaction, and
   * releases the key when it throws (best effort: a key left reserved expires after its lease). An operation
   * that throws SuspendedOperation keeps the key reserved with its token instead, and the next request
   * with the same key and request gets that token (`operation(token)`) to resume with.
   */
  async aroundReservation<T>(
    db: Database,
    key: RequestKey | undefined,
    logger: Logger,
    operation: (resume: unknown | undefined) => Promise<T>,
  ): Promise<Replayable<T>> {
    let resume: unknown;
    if (key) {
      const reserved = await db.transaction((tx) => this.reserveOrResume<T>(tx, key, { resumable: true }));
      if (reserved.kind === 'replay') return { body: reserved.stored, replayed: true };
      if (reserved.kind === 'resume') resume = reserved.token;
    }
    try {
      return { body: await operation(resume), replayed: false };
    } catch (error) {
      if (key && error instanceof SuspendedOperation) {
        const kept = await suspendIdempotencyKey(db, {
          scope: key.scope,
          key: key.key,
          token: error.token,
          ttlMs: this.ttlMs,
        }).catch((suspendError: unknown) => {
          logger.error({ err: suspendError }, 'could not keep an idempotency key for a retry; releasing it');
          return false;
        });
        if (!kept) await this.releaseQuietly(db, key, logger);
        throw error.failure;
      }
      if (key) await this.releaseQuietly(db, key, logger);
      throw error instanceof SuspendedOperation ? error.failure : error;
    }
  }

  private async releaseQuietly(db: Database, key: RequestKey, logger: Logger): Promise<void> {
    await this.release(db, key).catch((releaseError: unknown) =>
      logger.error({ err: releaseError }, 'could not release an idempotency key; it expires on its own'),
    );
  }
}
