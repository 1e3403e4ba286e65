/**
 * The aggregate registry: one list of registered aggregates that every role and command iterates —
 * the scanner (sweepers), the worker (consumers, and the sweeps of in-process shapes), the relay and
 * consumers (queue and topic topology), the projector (projections), replay, verify, the sandbox and
 * export (state models), maintenance (side-stream retention and an aggregate's own upkeep tasks) and
 * the CLI (roles an aggregate contributes, e.g. the campaign tick).
 * Generic machinery receives a registry and never imports an aggregate's module; the default
 * registry is src/aggregates/registry.ts.
 *
 * A registration claims its stream types: the aggregate's own, plus its side streams (streams without
 * a state table, such as destination discards). `herald verify` fails on any stream type in the log
 * that no registration claims, so a forgotten registration cannot pass unnoticed (invariant 8).
 */
import type { HeraldConfig } from '../config.js';
import type { DomainEvent } from '../domain/decider.js';
import { ValidationError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { MaintenanceTask } from '../maintenance/maintenance-service.js';
import type { Sink } from '../outbox/types.js';
import type { Database } from '../ports/database.js';
import type { WakeupSignal } from '../ports/wakeups.js';
import type { Projection } from '../projections/projection.js';
import { defineStateModel, type StateModel } from '../projections/state-models.js';
import type { RoleDefinition } from '../runtime/runtime.js';
import type { Sweeper } from '../scanner/scanner.js';
import type { Handler } from '../worker/consume.js';
import type { AggregateDescriptor } from './aggregate.js';
import type { CommandHandler } from './command-handler.js';

/** What sweeper and consumer factories are built from (one per process role). */
export interface AggregateContext {
  readonly config: HeraldConfig;
  readonly db: Database;
  readonly handler: CommandHandler;
  readonly logger: Logger;
  /** Wakes the relays after a transaction that wrote outbox rows (the scanner's has no coalescing window). */
  readonly wakeups: WakeupSignal;
}

/** A consumer the worker role runs: one per source queue or topic, each with its retry and dead-letter queue. */
export interface ConsumerDefinition<Payload = unknown> {
  /** The inbox name: de-duplication is per consumer (invariant 4). */
  readonly consumer: string;
  readonly transport: Sink;
  /** Queues (AMQP) or topics (Kafka). */
  readonly sources: readonly string[];
  /** Validates the JSON payload; a throw is permanent (rejected, never retried). */
  readonly parse: (payload: unknown) => Payload;
  readonly handler: Handler<Payload>;
  /** Deliveries in flight at once (AMQP prefetch); default HERALD_CONSUMER_PREFETCH. */
  readonly prefetch?: number;
}

/** Erases a consumer's payload type for the registry (the one cast: `parse` produced the payload). */
export function defineConsumer<Payload>(definition: ConsumerDefinition<Payload>): ConsumerDefinition {
  return definition as unknown as ConsumerDefinition;
}

/** A stream without a state table that an aggregate's machinery appends to. */
export interface SideStream {
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
  readonly retentionDays?: (config: HeraldConfig) => number | undefined;
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
 * A lease one of the registration's sweepers must hold (a poller that runs alone, e.g.
 * `sms:dlr-rollup`): readiness requires it to be present and fresh in every process that runs `role`
 * (any replica may hold it), and /metrics shows its age (herald_lease_age_seconds).
 */
export interface RequiredLease {
  readonly name: string;
  /** The role whose sweepers hold it (`scanner`, `worker`). */
  readonly role: string;
  readonly description?: string;
}

export interface AggregateRegistration<State, Command, Event extends DomainEvent> {
  readonly aggregate: AggregateDescriptor<State, Command, Event>;
  readonly sideStreams?: readonly SideStream[];
  /** Leases its sweepers hold (leasedSweeper), required by readiness where their role runs. */
  readonly leases?: readonly RequiredLease[];
  readonly topology?: Topology;
  readonly sweepers?: (context: AggregateContext) => Sweeper[];
  /** Sweeps `herald worker` runs itself (a deployment shape where workers claim their own work). */
  readonly workerSweepers?: (context: AggregateContext) => Sweeper[];
  readonly consumers?: (context: AggregateContext) => ConsumerDefinition[];
  readonly projections?: readonly Projection[];
  readonly roles?: Readonly<Record<string, RoleDefinition>>;
  /** Upkeep of its own tables (`herald maintenance` runs them beside the generic tasks). */
  readonly maintenance?: (config: HeraldConfig) => MaintenanceTask[];
}

/** A registration with its types erased, as the registry holds it. */
export interface RegisteredAggregate {
  readonly streamType: string;
  readonly stateModel: StateModel;
  readonly sideStreams: readonly SideStream[];
  readonly leases: readonly RequiredLease[];
  readonly topology: Topology;
  readonly sweepers: (context: AggregateContext) => Sweeper[];
  readonly workerSweepers: (context: AggregateContext) => Sweeper[];
  readonly consumers: (context: AggregateContext) => ConsumerDefinition[];
  readonly projections: readonly Projection[];
  readonly roles: Readonly<Record<string, RoleDefinition>>;
  readonly maintenance: (config: HeraldConfig) => MaintenanceTask[];
}

export function defineAggregate<State, Command, Event extends DomainEvent>(
  registration: AggregateRegistration<State, Command, Event>,
): RegisteredAggregate {
  const { aggregate } = registration;
  const sideStreams = registration.sideStreams ?? [];
  return {
    streamType: aggregate.streamType,
    stateModel: defineStateModel({
      streamType: aggregate.streamType,
      decider: aggregate.decider,
      ...aggregate.stateTable,
      messageEffectStreams: sideStreams.filter((s) => s.effectsOfMessages).map((s) => s.streamType),
    }),
    sideStreams,
    leases: registration.leases ?? [],
    topology: registration.topology ?? {},
    sweepers: registration.sweepers ?? (() => []),
    workerSweepers: registration.workerSweepers ?? (() => []),
    consumers: registration.consumers ?? (() => []),
    projections: registration.projections ?? [],
    roles: registration.roles ?? {},
    maintenance: registration.maintenance ?? (() => []),
  };
}

const unique = <T>(values: Iterable<T>) => [...new Set(values)];

export class AggregateRegistry {
  readonly aggregates: readonly RegisteredAggregate[];
  readonly stateModels: ReadonlyMap<string, StateModel>;
  readonly projections: ReadonlyMap<string, Projection>;
  readonly roles: Readonly<Record<string, RoleDefinition>>;

  constructor(aggregates: readonly RegisteredAggregate[]) {
    const claimed = new Map<string, string>();
    const claim = (streamType: string, by: string) => {
      const owner = claimed.get(streamType);
      if (owner !== undefined) {
        throw new ValidationError(`stream type '${streamType}' is registered twice (${owner} and ${by})`, {
          streamType,
        });
      }
      claimed.set(streamType, by);
    };
    const projections = new Map<string, Projection>();
    const roles: Record<string, RoleDefinition> = {};
    for (const registered of aggregates) {
      claim(registered.streamType, registered.streamType);
      for (const side of registered.sideStreams) claim(side.streamType, registered.streamType);
      for (const projection of registered.projections) {
        if (projections.has(projection.name)) {
          throw new ValidationError(`projection '${projection.name}' is registered twice`, {
            projection: projection.name,
          });
        }
        projections.set(projection.name, projection);
      }
      for (const [name, role] of Object.entries(registered.roles)) {
        if (roles[name]) throw new ValidationError(`role '${name}' is registered twice`, { role: name });
        roles[name] = role;
      }
    }
    this.aggregates = aggregates;
    this.stateModels = new Map(aggregates.map((a) => [a.streamType, a.stateModel]));
    this.projections = projections;
    this.roles = roles;
  }

  /** Every stream type a registration claims: aggregates and their side streams. */
  get streamTypes(): readonly string[] {
    return this.aggregates.flatMap((a) => [a.streamType, ...a.sideStreams.map((s) => s.streamType)]);
  }

  get sideStreams(): readonly SideStream[] {
    return this.aggregates.flatMap((a) => a.sideStreams);
  }

  /** Every lease a registration's sweepers hold (readiness requires those of the roles a process runs). */
  get leases(): readonly RequiredLease[] {
    return this.aggregates.flatMap((a) => a.leases);
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

  /** Queues the relay declares: every aggregate's destinations and the scanner's wake-up queues. */
  get amqpQueues(): readonly string[] {
    return unique(
      this.aggregates.flatMap((a) => [
        ...(a.topology.amqpQueues ?? []),
        ...(a.topology.scannerWakeQueues ?? []).map((w) => w.queue),
      ]),
    );
  }

  get kafkaTopics(): readonly string[] {
    return unique(this.aggregates.flatMap((a) => a.topology.kafkaTopics ?? []));
  }

  get scannerWakeQueues(): readonly { readonly queue: string; readonly consumer: string }[] {
    return this.aggregates.flatMap((a) => a.topology.scannerWakeQueues ?? []);
  }

  sweepers(context: AggregateContext): Sweeper[] {
    return this.aggregates.flatMap((a) => a.sweepers(context));
  }

  workerSweepers(context: AggregateContext): Sweeper[] {
    return this.aggregates.flatMap((a) => a.workerSweepers(context));
  }

  consumers(context: AggregateContext): ConsumerDefinition[] {
    return this.aggregates.flatMap((a) => a.consumers(context));
  }

  maintenanceTasks(config: HeraldConfig): MaintenanceTask[] {
    return this.aggregates.flatMap((a) => a.maintenance(config));
  }
}
