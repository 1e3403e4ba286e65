/**
 * What the HTTP API needs of the registered slices (ADR 0020), as the API sees it: each slice's
 * services (built on the pool for reads and on a request's transaction for commands), its route
 * plugin and the live-stream topics its stream types feed; and the registry's state models (history,
 * verify) and leases (the overview). The registry (src/registry/) implements `ApiRegistry`; nothing
 * here names a slice.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { CommandHandler } from '../eventstore/command-handler.js';
import type { Logger } from '../logger.js';
import type { Database } from '../ports/database.js';
import type { Projection } from '../projections/projection.js';
import type { StateModelCatalogue } from '../projections/state-models.js';
import type { HeraldConfig } from '../settings/core.js';
import type { RequestCommands } from './commands.js';

/** What a slice's services are built from. */
export interface ServiceContext {
  readonly db: Database;
  readonly handler: CommandHandler;
  readonly config: HeraldConfig;
  /** Where the services' adapters (ports) log. */
  readonly logger: Logger;
}

/**
 * What a slice's route plugin is registered with (`Svc`: the services it reads and commands through;
 * `Config`: the configuration with its settings).
 */
export interface RouteDeps<Svc = unknown, Config extends HeraldConfig = HeraldConfig> {
  readonly commands: RequestCommands<Svc>;
  readonly registry: ApiRegistry;
  readonly config: Config;
  readonly logger: Logger;
}

/** A slice's part of the API. */
export interface ApiModule {
  readonly name: string;
  /** Mounted under `/v1` with the request's authentication, tenancy and Idempotency-Key machinery. */
  // biome-ignore lint/suspicious/noExplicitAny: each slice's plugin types its own services.
  readonly routes?: FastifyPluginAsync<RouteDeps<any>>;
  /** Live-stream topic → the stream types whose changes it reports (`GET /v1/stream`). */
  readonly topics?: Readonly<Record<string, readonly string[]>>;
}

export interface ApiRegistry extends StateModelCatalogue {
  readonly apiModules: readonly ApiModule[];
  /** Every slice's services on one database, as one object (keys are unique across slices). */
  services(context: ServiceContext): Record<string, unknown>;
  readonly leases: readonly { readonly name: string; readonly role: string }[];
  readonly projections: ReadonlyMap<string, Projection>;
}
