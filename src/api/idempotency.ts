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

export class IdempotencyKeys {
  /** `ttlMs`: how long a completed key is remembered (HERALD_IDEMPOTENCY_TTL_HOURS). */
  constructor(private readonly ttlMs: number) {}

  /**
   * Reserves the key in `tx`: null when this request now owns it, else the stored result to replay.
   * Throws IDEMPOTENCY_KEY_IN_USE while another request holds it (with the Retry-After to advise) and
   * IDEMPOTENCY_KEY_REUSED when it was used for a different request.
   */
  async reserve<T>(tx: SqlClient, key: RequestKey): Promise<{ stored: T } | null> {
    const reservation = await reserveIdempotencyKey(tx, {
      scope: key.scope,
      key: key.key,
      requestHash: key.fingerprint,
      ttlMs: this.ttlMs,
    });
    if (reservation.kind === 'reserved') return null;
    if (reservation.kind === 'in-flight' || reservation.state !== 'completed') {
      throw new IdempotencyKeyError(
        'IDEMPOTENCY_KEY_IN_USE',
        'a request with this Idempotency-Key is still in progress; retry later',
        { retryAfterSeconds: IN_PROGRESS_RETRY_AFTER_SECONDS },
      );
    }
    if (reservation.requestHash !== key.fingerprint) {
      throw new IdempotencyKeyError(
        'IDEMPOTENCY_KEY_REUSED',
        'this Idempotency-Key was used for a different request (method, route, parameters or body)',
        { field: 'Idempotency-Key' },
      );
    }
    return { stored: reservation.response as T };
  }

  /** Stores the result of the request that reserved the key (in the transaction of its last write). */
  complete(tx: SqlClient, key: RequestKey, stored: unknown): Promise<void> {
    return completeIdempotencyKey(tx, { scope: key.scope, key: key.key, response: stored });
  }

  /** Gives a reserved key up (the operation failed: a retry is a new request). */
  release(db: SqlClient, key: RequestKey): Promise<void> {
    return releaseIdempotencyKey(db, key.scope, key.key);
  }

  /**
   * Reserve now, complete later: reserves `key` (if any) in a transaction of its own and replays a
   * stored result; otherwise runs `operation`, which completes the key in its last transaction, and
   * releases the key when it throws (best effort: a key left reserved expires on its own).
   */
  async aroundReservation<T>(
    db: Database,
    key: RequestKey | undefined,
    logger: Logger,
    operation: () => Promise<T>,
  ): Promise<Replayable<T>> {
    if (key) {
      const replay = await db.transaction((tx) => this.reserve<T>(tx, key));
      if (replay) return { body: replay.stored, replayed: true };
    }
    try {
      return { body: await operation(), replayed: false };
    } catch (error) {
      if (key) {
        await this.release(db, key).catch((releaseError: unknown) =>
          logger.error({ err: releaseError }, 'could not release an idempotency key; it expires on its own'),
        );
      }
      throw error;
    }
  }
}
