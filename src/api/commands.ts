/**
 * How a request runs its commands (invariant 1 across a whole request): in ONE transaction, through
 * the same library services a Node caller uses (each registered slice's `service`), whose own
 * transactions join it as savepoints (src/adapters/postgres/joined-transaction.ts). With an Idempotency-Key the key's row is
 * reserved first in that transaction and completed with the response before it commits, so the key,
 * the events, the state rows and the outbox rows commit together or not at all: a retry replays the
 * stored response and can never enqueue twice (the IETF draft "The Idempotency-Key HTTP Header
 * Field", Stripe's semantics). The relay and scanner wake-ups the commands owe are held until the
 * commit (a wake-up before it would find nothing) and dropped on a rollback.
 *
 * The key is scoped by (organization, method, route pattern); the fingerprint is the SHA-256 of the
 * canonical JSON (sorted keys) of the request's body, path parameters and query, so the same key on
 * another resource or with another body is refused (422), never applied to it.
 */
import { createHash } from 'node:crypto';
import { completeIdempotencyKey, reserveIdempotencyKey } from '../adapters/postgres/idempotency-queries.js';
import { joinedDatabase } from '../adapters/postgres/joined-transaction.js';
import { IdempotencyKeyError, ValidationError } from '../errors.js';
import { CommandHandler } from '../eventstore/command-handler.js';
import type { Database, SqlClient } from '../ports/database.js';
import type { EventMeta } from '../ports/events.js';
import type { WakeupSignal } from '../ports/wakeups.js';
import type { HeraldConfig } from '../settings/core.js';
import type { Principal } from './auth.js';
import type { ServiceContext } from './module.js';

/**
 * The registered slices' services, bound to one database (the pool for reads, the request's
 * transaction for commands); a route plugin sees those of its slice (`Svc`).
 */
export type Services<Svc = unknown> = Svc & { db: Database };

/** What a command route answers: status, body (the route's response view) and extra headers. */
export interface ApiResponse {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

export interface CommandRequest {
  principal: Principal;
  requestId: string;
  method: string;
  /** The route pattern (`/v1/campaigns/:id/pause`): the key's scope. */
  route: string;
  idempotencyKey: string | undefined;
  /** Body, path parameters and query as received (before validation): the fingerprint's input. */
  fingerprintOf: unknown;
}

export interface CommandOutcome extends ApiResponse {
  replayed: boolean;
}

/** Wake-ups held until the request's transaction commits. */
class HeldWakeups implements WakeupSignal {
  readonly channels = new Set<string>();
  signal(channel: string): void {
    this.channels.add(channel);
  }
}

const KEY_FORMAT = /^[\x21-\x7e]{1,255}$/;

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

export class RequestCommands<Svc = unknown> {
  /** Services on the pool, for reads. */
  readonly readers: Services<Svc>;

  constructor(
    private readonly deps: {
      db: Database;
      wakeups: WakeupSignal;
      config: HeraldConfig;
      /** Every slice's services on a database (the registry's). */
      services: (context: ServiceContext) => Record<string, unknown>;
    },
  ) {
    this.readers = this.services(deps.db, new CommandHandler(this.handlerDeps(deps.db, deps.wakeups)));
  }

  /** Validates an Idempotency-Key header value (printable ASCII, at most 255 characters). */
  static parseKey(header: string | string[] | undefined): string | undefined {
    if (header === undefined) return undefined;
    const value = Array.isArray(header) ? header[0] : header;
    if (value === undefined || !KEY_FORMAT.test(value)) {
      throw new ValidationError('Idempotency-Key must be 1 to 255 printable ASCII characters', {
        field: 'Idempotency-Key',
      });
    }
    return value;
  }

  /**
   * Runs `work` (the route's commands) in one transaction with the request's actor and correlation id,
   * honouring the Idempotency-Key. Throws IdempotencyKeyError for a key in flight (409) or reused for
   * another request (422); any other throw rolls everything back.
   */
  async run(
    request: CommandRequest,
    work: (services: Services<Svc>, meta: EventMeta, tx: SqlClient) => Promise<ApiResponse>,
  ): Promise<CommandOutcome> {
    const meta: EventMeta = { actor: request.principal.actor, correlationId: request.requestId };
    const key = request.idempotencyKey;
    const scope = JSON.stringify([request.principal.organizationId, request.method, request.route]);
    const requestHash = key === undefined ? '' : fingerprint(request.fingerprintOf);
    let held = new HeldWakeups();
    const outcome = await this.deps.db.transaction(async (tx): Promise<CommandOutcome> => {
      held = new HeldWakeups(); // a retried transaction owes only its own wake-ups
      if (key !== undefined) {
        const reservation = await reserveIdempotencyKey(tx, {
          scope,
          key,
          requestHash,
          ttlMs: this.deps.config.api.idempotencyTtlMs,
        });
        if (
          reservation.kind === 'in-flight' ||
          (reservation.kind === 'existing' && reservation.state !== 'completed')
        ) {
          throw new IdempotencyKeyError(
            'IDEMPOTENCY_KEY_IN_USE',
            'a request with this Idempotency-Key is still in progress; retry later',
          );
        }
        if (reservation.kind === 'existing') {
          if (reservation.requestHash !== requestHash) {
            throw new IdempotencyKeyError(
              'IDEMPOTENCY_KEY_REUSED',
              'this Idempotency-Key was used for a different request (method, route, parameters or body)',
              { field: 'Idempotency-Key' },
            );
          }
          return { ...(reservation.response as ApiResponse), replayed: true };
        }
      }
      const db = joinedDatabase(tx, this.deps.db.schema);
      const services = this.services(db, new CommandHandler(this.handlerDeps(db, held)));
      const response = await work(services, meta, tx);
      if (key !== undefined) await completeIdempotencyKey(tx, { scope, key, response });
      return { ...response, replayed: false };
    });
    if (!outcome.replayed) for (const channel of held.channels) this.deps.wakeups.signal(channel);
    return outcome;
  }

  private handlerDeps(db: Database, wakeups: WakeupSignal) {
    return { db, wakeups, pod: this.deps.config.pod, wakeHorizonMs: this.deps.config.scanner.pollMs };
  }

  private services(db: Database, handler: CommandHandler): Services<Svc> {
    return { ...this.deps.services({ db, handler, config: this.deps.config }), db } as Services<Svc>;
  }
}
