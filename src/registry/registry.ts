/**
 * The registry: one list of registered slices that every surface iterates — configuration, scanner,
 * worker, relay and consumer topology, projector, replay, verify, sandbox, export, maintenance, readiness,
 * the API, the CLI and the demo. Generic machinery receives a registry (or the narrow view of it it
 * defines) and never imports a slice; Herald's own is src/aggregates/registry.ts. A registration claims
 * its stream types, its aggregates' and its side streams', and `herald verify` fails on any stream type in
 * the log that no registration claims (invariant 8). ADR 0009, ADR 0020.
 */
import type { ApiModule, ApiRegistry, ServiceContext } from '../api/module.js';
import { ValidationError } from '../errors.js';

import type { MaintenanceTask } from '../maintenance/maintenance-service.js';
import type { Projection } from '../projections/projection.js';
import {
  type FoldedEvent,
  type StateModel,
  type StateModelCatalogue,
  upcastWith,
} from '../projections/state-models.js';
import type { Sweeper } from '../scanner/scanner.js';
import type { HeraldConfig } from '../settings/core.js';
import type { AnySettingsFragment } from '../settings/fragment.js';
import { loadSettings } from '../settings/load.js';
import type { ConsumerDefinition } from '../worker/consumer-definition.js';
import type { DemoStep } from './demo.js';
import type { AggregateContext, RegisteredModule, RequiredLease, SideStream } from './module.js';
import type { Role, RoleDefinition } from './role.js';

const unique = <T>(values: Iterable<T>) => [...new Set(values)];

type UnionToIntersection<U> = (U extends unknown ? (union: U) => void : never) extends (
  intersection: infer I,
) => void
  ? I
  : never;

/** The settings the slices of a registry add to the configuration. */
export type RegistrySettings<M> = UnionToIntersection<M extends RegisteredModule<infer S> ? S : never>;

// biome-ignore lint/suspicious/noExplicitAny: a registration of any settings.
type AnyModule = RegisteredModule<any>;

export class AggregateRegistry<M extends AnyModule = AnyModule> implements ApiRegistry, StateModelCatalogue {
  readonly modules: readonly M[];
  readonly stateModels: ReadonlyMap<string, StateModel>;
  readonly projections: ReadonlyMap<string, Projection>;
  readonly roles: Readonly<Record<string, RoleDefinition>>;
  /** The `herald` commands the slices add. */
  readonly commands: Readonly<Record<string, Role>>;
  readonly settings: readonly AnySettingsFragment[];
  readonly apiModules: readonly ApiModule[];
  /** The slices' demo steps, in registry order. */
  readonly demos: readonly (DemoStep & { readonly name: string })[];

  constructor(modules: readonly M[]) {
    const claimed = new Map<string, string>();
    const claim = (what: string, name: string, by: string) => {
      const key = `${what}:${name}`;
      const owner = claimed.get(key);
      if (owner !== undefined) {
        throw new ValidationError(`${what} '${name}' is registered twice (${owner} and ${by})`, {
          [what.replace(/ (.)/g, (_, c: string) => c.toUpperCase())]: name,
        });
      }
      claimed.set(key, by);
    };
    const projections = new Map<string, Projection>();
    const roles: Record<string, RoleDefinition> = {};
    const commands: Record<string, Role> = {};
    for (const module of modules) {
      for (const streamType of module.streamTypes) claim('stream type', streamType, module.name);
      for (const side of module.sideStreams) claim('stream type', side.streamType, module.name);
      claim('slice', module.name, module.name);
      for (const projection of module.projections) {
        claim('projection', projection.name, module.name);
        projections.set(projection.name, projection);
      }
      for (const [name, role] of Object.entries(module.roles)) {
        claim('role', name, module.name);
        roles[name] = role;
      }
      for (const [name, command] of Object.entries(module.cli)) {
        claim('command', name, module.name);
        commands[name] = command;
      }
    }
    this.modules = modules;
    this.stateModels = new Map(modules.flatMap((m) => m.stateModels).map((s) => [s.streamType, s]));
    this.projections = projections;
    this.roles = roles;
    this.commands = commands;
    this.settings = modules.flatMap((m) => m.settings);
    this.apiModules = modules.map((m) => m.api);
    this.demos = modules.flatMap((m) => (m.demo ? [{ ...m.demo, name: m.name }] : []));
  }

  /**
   * Validates the environment for the generic settings and every slice's fragment: the configuration
   * this registry's roles run with (Herald's: `loadConfig` of src/config.ts).
   */
  loadConfig(
    env: Record<string, string | undefined>,
    defaults: { pod?: string } = {},
  ): HeraldConfig & RegistrySettings<M> {
    return loadSettings(env, this.settings, defaults) as HeraldConfig & RegistrySettings<M>;
  }

  /** Every stream type a registration claims: aggregates and their side streams. */
  get streamTypes(): readonly string[] {
    return this.modules.flatMap((m) => [...m.streamTypes, ...m.sideStreams.map((s) => s.streamType)]);
  }

  get sideStreams(): readonly SideStream[] {
    return this.modules.flatMap((m) => m.sideStreams);
  }

  /** Every lease a registration's sweepers hold (readiness requires those of the roles a process runs). */
  get leases(): readonly RequiredLease[] {
    return this.modules.flatMap((m) => m.leases);
  }

  /**
   * A stored event with its data in the current shape, by its stream type's event schemas (ADR 0039);
   * stream types without a state model (side streams) have version 1 only.
   */
  upcast<E extends FoldedEvent & { readonly streamType: string }>(event: E): E {
    return upcastWith(this.stateModels.get(event.streamType), event);
  }

  stateModelFor(streamType: string): StateModel {
    const model = this.stateModels.get(streamType);
    if (!model) {
      throw new ValidationError(
        `no state model for stream type '${streamType}' (known: ${[...this.stateModels.keys()].join(', ')})`,
        { streamType },
      );
    }
    return model;
  }

  projectionNamed(name: string): Projection {
    const projection = this.projections.get(name);
    if (!projection) {
      throw new ValidationError(
        `no projection named '${name}' (known: ${[...this.projections.keys()].join(', ')})`,
        { name },
      );
    }
    return projection;
  }

  /** Queues the relay declares: every slice's destinations and the scanner's wake-up queues. */
  get amqpQueues(): readonly string[] {
    return unique(
      this.modules.flatMap((m) => [
        ...(m.topology.amqpQueues ?? []),
        ...(m.topology.scannerWakeQueues ?? []).map((w) => w.queue),
      ]),
    );
  }

  get kafkaTopics(): readonly string[] {
    return unique(this.modules.flatMap((m) => m.topology.kafkaTopics ?? []));
  }

  get scannerWakeQueues(): readonly { readonly queue: string; readonly consumer: string }[] {
    return this.modules.flatMap((m) => m.topology.scannerWakeQueues ?? []);
  }

  sweepers(context: Omit<AggregateContext, 'ports'>): Sweeper[] {
    return this.modules.flatMap((m) => m.sweepers(context));
  }

  workerSweepers(context: Omit<AggregateContext, 'ports'>): Sweeper[] {
    return this.modules.flatMap((m) => m.workerSweepers(context));
  }

  consumers(context: Omit<AggregateContext, 'ports'>): ConsumerDefinition[] {
    return this.modules.flatMap((m) => m.consumers(context));
  }

  maintenanceTasks(config: HeraldConfig): MaintenanceTask[] {
    return this.modules.flatMap((m) => m.maintenance(config));
  }

  /** Every slice's service on one database, merged into one object (a key two slices use is refused). */
  services(context: ServiceContext): Record<string, unknown> {
    const services: Record<string, unknown> = {};
    const owner = new Map<string, string>();
    for (const module of this.modules) {
      const service = module.service(context);
      if (!service) continue;
      for (const [key, value] of Object.entries(service)) {
        const first = owner.get(key);
        if (first !== undefined) {
          throw new ValidationError(`service '${key}' is registered twice (${first} and ${module.name})`, {
            service: key,
          });
        }
        owner.set(key, module.name);
        services[key] = value;
      }
    }
    return services;
  }
}
