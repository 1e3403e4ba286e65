/**
 * How a request runs its commands (invariant 1 across a whole request): in ONE transaction, through
 * the same library services a Node caller uses (each registered slice's `service`), whose own
 * transactions join it as savepoints (src/adapters/postgres/joined-transaction.ts). With an
 * Idempotency-Key (src/api/idempotency.ts) the key's row is reserved first in that transaction and
 * completed with the response before it commits, so the key, the events, the state rows and the outbox
 * rows commit together or not at all. The relay and scanner wake-ups the commands owe are held until
 * the commit (a wake-up before it would find nothing) and dropped on a rollback.
 *
 * The key is scoped by (organization, method, route pattern) and fingerprinted over the request's
 * body, path parameters and query as received.
 */
import { joinedDatabase } from '../adapters/postgres/joined-transaction.js';
import { CommandHandler } from '../eventstore/command-handler.js';
import type { Logger } from '../logger.js';
import type { Database, SqlClient } from '../ports/database.js';
import type { EventMeta } from '../ports/events.js';
import type { WakeupSignal } from '../ports/wakeups.js';
import type { HeraldConfig } from '../settings/core.js';
import type { Principal } from './auth.js';
import { IdempotencyKeys, type RequestKey } from './idempotency.js';
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
  /** The request's Idempotency-Key, scoped and fingerprinted (src/api/http.ts `requestKeyOf`). */
  idempotency: RequestKey | undefined;
}

export interface CommandOutcome extends ApiResponse {
  replayed: boolean;
}

/** Wake-ups held until the request's transaction commits. */
class HeldWakeups implements WakeupSignal {
  /** Channel → the organizations named (a channel signalled without one: an empty set). */
  readonly channels = new Map<string, Set<string>>();
  signal(channel: string, organizationId?: string | null): void {
    const organizations = this.channels.get(channel) ?? new Set<string>();
    if (organizationId) organizations.add(organizationId);
    this.channels.set(channel, organizations);
  }

  /** Sends what the transaction owes, once it committed. */
  release(to: WakeupSignal): void {
    for (const [channel, organizations] of this.channels) {
      if (organizations.size === 0) to.signal(channel);
      for (const organizationId of organizations) to.signal(channel, organizationId);
    }
  }
}

export class RequestCommands<Svc = unknown> {
  /** Services on the pool, for reads. */
  readonly readers: Services<Svc>;
  private readonly keys: IdempotencyKeys;

  constructor(
    private readonly deps: {
      db: Database;
      wakeups: WakeupSignal;
      config: HeraldConfig;
      logger: Logger;
      /** Every slice's services on a database (the registry's). */
      services: (context: ServiceContext) => Record<string, unknown>;
    },
  ) {
    this.readers = this.services(deps.db, new CommandHandler(this.handlerDeps(deps.db, deps.wakeups)));
    this.keys = new IdempotencyKeys(deps.config.api.idempotencyTtlMs);
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
    const key = request.idempotency;
    let held = new HeldWakeups();
    const outcome = await this.deps.db.transaction(async (tx): Promise<CommandOutcome> => {
      held = new HeldWakeups(); // a retried transaction owes only its own wake-ups
      if (key) {
        const replay = await this.keys.reserve<ApiResponse>(tx, key);
        if (replay) return { ...replay.stored, replayed: true };
      }
      const db = joinedDatabase(tx, this.deps.db.schema);
      const services = this.services(db, new CommandHandler(this.handlerDeps(db, held)));
      const response = await work(services, meta, tx);
      if (key) await this.keys.complete(tx, key, response);
      return { ...response, replayed: false };
    });
    if (!outcome.replayed) held.release(this.deps.wakeups);
    return outcome;
  }

  private handlerDeps(db: Database, wakeups: WakeupSignal) {
    const { config } = this.deps;
    return { db, wakeups, pod: config.pod, wakeHorizonMs: config.scanner.pollMs, config };
  }

  private services(db: Database, handler: CommandHandler): Services<Svc> {
    const { config, logger } = this.deps;
    return { ...this.deps.services({ db, handler, config, logger }), db } as Services<Svc>;
  }
}
