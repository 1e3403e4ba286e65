/**
 * A registration is a whole slice (ADR 0020): the aggregates one job groups (descriptors, state
 * tables, side streams) and everything around them — its settings fragment, ports with default
 * adapters, sweepers and consumers, queues and topics, leases, projections, upkeep tasks, the service
 * the API and the CLI call, its routes and live-stream topics, its CLI verbs and roles, its part of the
 * demo. `defineModule` (or `defineAggregate` for a slice of one aggregate) checks it and erases its
 * types; the registry (registry.ts) is the one list every surface iterates.
 *
 * Ports are typed slots with defaults (`ports: { billing: (ctx) => new PostgresLedger(ctx.db) }`),
 * built lazily where the slice runs (a role's pool, a request's transaction); `withPorts` replaces
 * one without forking the registration, as River's `AddWorker` adds a worker to its registry.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { ApiModule, RouteDeps } from '../api/module.js';
import type { DomainEvent } from '../domain/decider.js';
import { ValidationError } from '../errors.js';
import type { AggregateDescriptor } from '../eventstore/aggregate.js';
import type { CommandHandler } from '../eventstore/command-handler.js';
import type { Logger } from '../logger.js';
import type { MaintenanceTask } from '../maintenance/maintenance-service.js';
import type { Database } from '../ports/database.js';
import type { WakeupSignal } from '../ports/wakeups.js';
import type { Projection } from '../projections/projection.js';
import { defineStateModel, type StateModel } from '../projections/state-models.js';
import type { Sweeper } from '../scanner/scanner.js';
import type { HeraldConfig } from '../settings/core.js';
import type { AnySettingsFragment, SettingsOfAll } from '../settings/fragment.js';
import type { ConsumerDefinition } from '../worker/consumer-definition.js';
import type { DemoStep } from './demo.js';
import type { Role, RoleDefinition } from './role.js';

/** A stream without a state table that an aggregate's machinery appends to. */
export interface SideStream<Config extends HeraldConfig = HeraldConfig> {
  readonly streamType: string;
  readonly description: string;
  /**
   * Events of the stream keyed by a message id: the effects replay shows under that message (e.g. a
   * discard at the destination re-check, appended to `<side stream>/<message id>`).
   */
  readonly effectsOfMessages?: boolean;
  /**
   * Days its events are kept (maintenance deletes older ones, never while an outbox row still refers
   * to them); undefined keeps them for ever. Only for streams no state row depends on.
   */
  readonly retentionDays?: (config: Config) => number | undefined;
}

export interface Topology {
  /** Queues the relay declares before relaying (durable, of the configured type). */
  readonly amqpQueues?: readonly string[];
  /** Topics messages are written to (created by the relay when HERALD_KAFKA_CREATE_TOPICS is set). */
  readonly kafkaTopics?: readonly string[];
  /** Queues whose messages only wake the scanner (ticks), with the inbox name `herald scanner` consumes them under. */
  readonly scannerWakeQueues?: readonly { readonly queue: string; readonly consumer: string }[];
}

/**
 * A lease one of the slice's sweepers must hold (a poller that runs alone, e.g. `sms:dlr-rollup`):
 * readiness requires it to be present and fresh in every process that runs `role` (any replica may
 * hold it), and /metrics shows its age (herald_lease_age_seconds).
 */
export interface RequiredLease {
  readonly name: string;
  /** The role whose sweepers hold it (`scanner`, `worker`). */
  readonly role: string;
  readonly description?: string;
}

/** What a slice's ports are built from. */
export interface PortContext<Config extends HeraldConfig = HeraldConfig> {
  readonly config: Config;
  readonly db: Database;
  readonly logger: Logger;
}

/** Port name → the factory of its default adapter. */
export type PortFactories<Config extends HeraldConfig, Ports> = {
  readonly [K in keyof Ports]: (context: PortContext<Config>) => Ports[K];
};

/** What sweeper and consumer factories are built from (one per process role). */
export interface AggregateContext<Config extends HeraldConfig = HeraldConfig, Ports = unknown> {
  readonly config: Config;
  readonly db: Database;
  readonly handler: CommandHandler;
  readonly logger: Logger;
  /** Wakes the relays after a transaction that wrote outbox rows (the scanner's has no coalescing window). */
  readonly wakeups: WakeupSignal;
  /** The slice's ports, built on first use. */
  readonly ports: Ports;
}

/** What a slice's service is built from: the API's pool or request transaction, a CLI command's pool. */
export interface SliceServiceContext<Config extends HeraldConfig = HeraldConfig, Ports = unknown> {
  readonly config: Config;
  readonly db: Database;
  readonly handler: CommandHandler;
  readonly ports: Ports;
}

// biome-ignore lint/suspicious/noExplicitAny: descriptors of any state, command and event types.
export type AnyAggregateDescriptor = AggregateDescriptor<any, any, any>;

/** Everything a slice registers around its aggregates. */
export interface ModuleParts<
  Fragment extends AnySettingsFragment = never,
  Ports = Record<never, never>,
  Service extends object = Record<never, never>,
> {
  /** Its environment variables (src/settings/fragment.ts); their settings are `config[fragment.key]`. */
  readonly settings?: readonly Fragment[];
  readonly ports?: PortFactories<HeraldConfig & SettingsOfAll<Fragment>, Ports>;
  readonly sideStreams?: readonly SideStream<HeraldConfig & SettingsOfAll<Fragment>>[];
  /** Leases its sweepers hold (leasedSweeper), required by readiness where their role runs. */
  readonly leases?: readonly RequiredLease[];
  readonly topology?: Topology;
  readonly sweepers?: (context: AggregateContext<HeraldConfig & SettingsOfAll<Fragment>, Ports>) => Sweeper[];
  /** Sweeps `herald worker` runs itself (a deployment shape where workers claim their own work). */
  readonly workerSweepers?: (
    context: AggregateContext<HeraldConfig & SettingsOfAll<Fragment>, Ports>,
  ) => Sweeper[];
  readonly consumers?: (
    context: AggregateContext<HeraldConfig & SettingsOfAll<Fragment>, Ports>,
  ) => ConsumerDefinition[];
  readonly projections?: readonly Projection[];
  /** Upkeep of its own tables (`herald maintenance` runs them beside the generic tasks). */
  readonly maintenance?: (config: HeraldConfig & SettingsOfAll<Fragment>) => MaintenanceTask[];
  /** The library service its routes and CLI verbs call (keys unique across slices: `campaigns`, `cron`). */
  readonly service?: (context: SliceServiceContext<HeraldConfig & SettingsOfAll<Fragment>, Ports>) => Service;
  readonly api?: {
    /** Mounted under `/v1`; gets the slice's service in every command and read. */
    readonly routes?: FastifyPluginAsync<RouteDeps<Service, HeraldConfig & SettingsOfAll<Fragment>>>;
    /** Live-stream topic → the stream types whose changes it reports. */
    readonly topics?: Readonly<Record<string, readonly string[]>>;
  };
  /** `herald <verb>` commands. */
  readonly cli?: Readonly<Record<string, Role<HeraldConfig & SettingsOfAll<Fragment>>>>;
  /** Long-running roles (`herald tick`). */
  readonly roles?: Readonly<Record<string, RoleDefinition<HeraldConfig & SettingsOfAll<Fragment>>>>;
  /** Its part of `npm run demo`. */
  readonly demo?: DemoStep<HeraldConfig & SettingsOfAll<Fragment>>;
}

export interface ModuleDefinition<
  Fragment extends AnySettingsFragment = never,
  Ports = Record<never, never>,
  Service extends object = Record<never, never>,
> extends ModuleParts<Fragment, Ports, Service> {
  /** The slice's name (unique in a registry; logs, errors). */
  readonly name: string;
  readonly aggregates: readonly AnyAggregateDescriptor[];
}

/** A registration with its types erased, as the registry holds it; `Settings` types the config it needs. */
export interface RegisteredModule<Settings = unknown> {
  readonly name: string;
  /** Its aggregates' descriptors (with their declared claims). */
  readonly aggregates: readonly AnyAggregateDescriptor[];
  readonly streamTypes: readonly string[];
  readonly stateModels: readonly StateModel[];
  readonly settings: readonly AnySettingsFragment[];
  readonly sideStreams: readonly SideStream[];
  readonly leases: readonly RequiredLease[];
  readonly topology: Topology;
  sweepers(context: Omit<AggregateContext, 'ports'>): Sweeper[];
  workerSweepers(context: Omit<AggregateContext, 'ports'>): Sweeper[];
  consumers(context: Omit<AggregateContext, 'ports'>): ConsumerDefinition[];
  readonly projections: readonly Projection[];
  maintenance(config: HeraldConfig): MaintenanceTask[];
  /** The slice's service on `db` (undefined: it has none). */
  service(context: Omit<SliceServiceContext, 'ports'> & { readonly logger: Logger }): object | undefined;
  readonly api: ApiModule;
  readonly cli: Readonly<Record<string, Role>>;
  readonly roles: Readonly<Record<string, RoleDefinition>>;
  readonly demo: DemoStep | undefined;
  /** The same registration with some ports' default adapters replaced. */
  withPorts(
    overrides: Readonly<Record<string, (context: PortContext) => unknown>>,
  ): RegisteredModule<Settings>;
  /** Phantom: the settings this slice adds to the configuration (types only). */
  readonly settingsType?: Settings;
}

/** A slice's ports on one context: each built on first use, then kept. */
function resolvePorts<Ports>(
  factories: Readonly<Record<string, (context: PortContext) => unknown>>,
  context: PortContext,
): Ports {
  const ports: Record<string, unknown> = {};
  for (const [name, factory] of Object.entries(factories)) {
    let built: { value: unknown } | undefined;
    Object.defineProperty(ports, name, {
      enumerable: true,
      get: () => {
        built ??= { value: factory(context) };
        return built.value;
      },
    });
  }
  return ports as Ports;
}

/** Every settings key the configuration must carry for the slice (a config loaded without it is refused). */
function requireSettings(name: string, fragments: readonly AnySettingsFragment[], config: HeraldConfig) {
  for (const { key } of fragments) {
    if (!(key in config)) {
      throw new ValidationError(
        `slice '${name}' needs its settings '${key}': load the configuration with the registry that holds it (registry.loadConfig)`,
        { slice: name, settings: key },
      );
    }
  }
}

export function defineModule<
  Fragment extends AnySettingsFragment = never,
  Ports = Record<never, never>,
  Service extends object = Record<never, never>,
>(definition: ModuleDefinition<Fragment, Ports, Service>): RegisteredModule<SettingsOfAll<Fragment>> {
  return register(definition, (definition.ports ?? {}) as Record<string, (c: PortContext) => unknown>);
}

function register<Fragment extends AnySettingsFragment, Ports, Service extends object>(
  definition: ModuleDefinition<Fragment, Ports, Service>,
  portFactories: Readonly<Record<string, (context: PortContext) => unknown>>,
): RegisteredModule<SettingsOfAll<Fragment>> {
  type Config = HeraldConfig & SettingsOfAll<Fragment>;
  const settings = definition.settings ?? [];
  // A claimed aggregate's discards are a side stream of message effects (replay shows them under the message).
  const claimStreams: SideStream[] = definition.aggregates.flatMap(({ claim }) =>
    claim
      ? [
          {
            streamType: claim.discard.streamType,
            description: claim.discard.description,
            effectsOfMessages: true,
          },
        ]
      : [],
  );
  const sideStreams = [...claimStreams, ...((definition.sideStreams ?? []) as readonly SideStream[])];
  const sharedEffectStreams = (definition.sideStreams ?? [])
    .filter((s) => s.effectsOfMessages)
    .map((s) => s.streamType);
  const withPorts = (context: Omit<AggregateContext, 'ports'>): AggregateContext<Config, Ports> => {
    requireSettings(definition.name, settings, context.config);
    return {
      ...context,
      config: context.config as Config,
      ports: resolvePorts<Ports>(portFactories, context),
    };
  };
  const { api, service } = definition;
  return {
    name: definition.name,
    aggregates: definition.aggregates,
    streamTypes: definition.aggregates.map((a) => a.streamType),
    stateModels: definition.aggregates.map((aggregate) =>
      defineStateModel({
        streamType: aggregate.streamType,
        decider: aggregate.decider,
        ...(aggregate.organizationOf ? { organizationOf: aggregate.organizationOf } : {}),
        ...(aggregate.events ? { events: aggregate.events } : {}),
        ...aggregate.stateTable,
        messageEffectStreams: [
          ...(aggregate.claim ? [aggregate.claim.discard.streamType] : []),
          ...sharedEffectStreams,
        ],
      }),
    ),
    settings,
    sideStreams,
    leases: definition.leases ?? [],
    topology: definition.topology ?? {},
    sweepers: (context) => definition.sweepers?.(withPorts(context)) ?? [],
    workerSweepers: (context) => definition.workerSweepers?.(withPorts(context)) ?? [],
    consumers: (context) => definition.consumers?.(withPorts(context)) ?? [],
    projections: definition.projections ?? [],
    maintenance: (config) => definition.maintenance?.(config as Config) ?? [],
    service: (context) => {
      if (!service) return undefined;
      requireSettings(definition.name, settings, context.config);
      return service({
        config: context.config as Config,
        db: context.db,
        handler: context.handler,
        ports: resolvePorts<Ports>(portFactories, context),
      });
    },
    api: {
      name: definition.name,
      ...(api?.routes ? { routes: api.routes as ApiModule['routes'] } : {}),
      ...(api?.topics ? { topics: api.topics } : {}),
    },
    cli: (definition.cli ?? {}) as Readonly<Record<string, Role>>,
    roles: (definition.roles ?? {}) as Readonly<Record<string, RoleDefinition>>,
    demo: definition.demo as DemoStep | undefined,
    withPorts(overrides) {
      const unknown = Object.keys(overrides).filter((name) => !(name in portFactories));
      if (unknown.length > 0) {
        throw new ValidationError(
          `slice '${definition.name}' has no port ${unknown.join(', ')} (its ports: ${Object.keys(portFactories).join(', ') || 'none'})`,
          { slice: definition.name, ports: unknown },
        );
      }
      return register(definition, { ...portFactories, ...overrides });
    },
  };
}

/** The registration of a slice of one aggregate (its stream type names the slice). */
export function defineAggregate<
  State,
  Command,
  Event extends DomainEvent,
  Fragment extends AnySettingsFragment = never,
  Ports = Record<never, never>,
  Service extends object = Record<never, never>,
>(
  registration: ModuleParts<Fragment, Ports, Service> & {
    readonly aggregate: AggregateDescriptor<State, Command, Event>;
  },
): RegisteredModule<SettingsOfAll<Fragment>> {
  const { aggregate, ...rest } = registration;
  return defineModule<Fragment, Ports, Service>({
    ...rest,
    name: aggregate.streamType,
    aggregates: [aggregate],
  });
}

/** The name the registry's tests and older code use for a registration. */
export type RegisteredAggregate = RegisteredModule;
