/**
 * Herald's public API, the package's root entry (`import { … } from 'herald'`, dist/index.js): the
 * configuration, the runtime and its roles, the registry contract (what a slice is made of), the event
 * store and decider contract, the sweeper and consumer toolkits, the registered slices' services and
 * ports, the typed errors and the migrator. The HTTP API is `herald/api`, the test suites
 * `herald/testing` (ADR 0020). Everything else under src/ is internal and may change without notice.
 */

// Configuration and logging.
export { type MigrationResult, migrate } from './adapters/postgres/migrator.js';
// The registered slices, each with its services, ports and types.
export * from './aggregates/campaign/index.js';
export * from './aggregates/cron/index.js';
export { heraldRegistry } from './aggregates/registry.js';
export * from './aggregates/scheduled-action/index.js';
export { type HeraldRuntime, type HeraldSettings, loadConfig } from './config.js';
export { type Decider, type DomainEvent, fold } from './domain/decider.js';
export {
  availableOperations,
  type Operation,
  type OperationCatalogue,
  operationRefusal,
} from './domain/operations.js';
export {
  BillingUnavailableError,
  BrokerUnavailableError,
  ConcurrencyError,
  ConfigError,
  DatabaseUnavailableError,
  HeraldError,
  type HeraldErrorCode,
  IllegalStateError,
  InsufficientBalanceError,
  NotFoundError,
  PermanentError,
  PublishRejectedError,
  TransientError,
  ValidationError,
} from './errors.js';
// The event store: descriptors, claims, the command handler.
export type {
  Aggregate,
  AggregateDescriptor,
  ClaimDeclaration,
  ClaimedAggregate,
  LoadedStream,
  MessageContext,
} from './eventstore/aggregate.js';
export {
  type AggregateCommands,
  type BatchResult,
  CommandHandler,
  type CommandHandlerDeps,
  type CommandOptions,
  type CommandResult,
} from './eventstore/command-handler.js';
export { createLogger, type Logger, type LoggerOptions, silentLogger } from './logger.js';
export { derivedMessageId, type OutboxMessageSpec } from './outbox/outbox-writer.js';
export type { Database, QueryResult, SqlClient, TransactionOptions } from './ports/database.js';
export type { AppendedEvent, EventMeta, StoredEvent } from './ports/events.js';
export type { Sink } from './ports/outbox.js';
export type { LoadOptions, StateStore, StateTableMapping } from './ports/state-store.js';
export type { WakeupSignal } from './ports/wakeups.js';
export type { Projection, ProjectionSource, ProjectionTarget } from './projections/projection.js';
export type { DemoApi, DemoContext, DemoStep } from './registry/demo.js';
// The registry contract: a slice and its parts.
export {
  type AggregateContext,
  defineAggregate,
  defineModule,
  type ModuleDefinition,
  type ModuleParts,
  type PortContext,
  type PortFactories,
  type RegisteredAggregate,
  type RegisteredModule,
  type RequiredLease,
  type SideStream,
  type SliceServiceContext,
  type Topology,
} from './registry/module.js';
export { AggregateRegistry, type RegistrySettings } from './registry/registry.js';
export type { Role, RoleContext, RoleDefinition, Runtime } from './registry/role.js';
// The runtime and the generic roles.
export { maintenanceRole } from './roles/maintenance-role.js';
export { projectorRole } from './roles/projector-role.js';
export { relayRole } from './roles/relay-role.js';
export { createRuntime, type RuntimeOptions, runRole, runTogether } from './roles/runtime.js';
export { scannerRole } from './roles/scanner-role.js';
export { workerRole } from './roles/worker-role.js';
// The sweeper toolkit.
export { type LeasedSweeper, type LeasedSweeperOptions, leasedSweeper } from './scanner/leased-sweeper.js';
export type { Sweeper, SweepResult } from './scanner/scanner.js';
export {
  type ClaimSweepDefinition,
  defineClaimSweeper,
  defineStaleRecovery,
  type StaleRecoveryDefinition,
  type StaleRecoverySettings,
  type SweeperDeps,
  sweepInOrder,
} from './scanner/sweeper.js';
export type {
  ApiSettings,
  ConsumerSettings,
  HeraldConfig,
  KafkaSettings,
  MaintenanceSettings,
  ProjectorSettings,
  RelaySettings,
  ScannerSettings,
} from './settings/core.js';
export {
  type AnySettingsFragment,
  defineSettings,
  describeSetting,
  type SettingsFragment,
  type SettingsOf,
} from './settings/fragment.js';
// The consumer toolkit.
export {
  type ConsumeDeps,
  type ConsumedMessage,
  type ConsumeOptions,
  type Consumer,
  consume,
  type Handler,
  type HandlerOutcome,
} from './worker/consume.js';
export { consumeKafka, type KafkaConsumeDeps, type KafkaConsumeOptions } from './worker/consume-kafka.js';
export { type ConsumerDefinition, defineConsumer } from './worker/consumer-definition.js';
export {
  type ClaimRef,
  type EffectContext,
  type FencedHandlerDefinition,
  type FencedHandlerDeps,
  fencedHandler,
} from './worker/fenced-handler.js';
export { type HeartbeatOptions, withHeartbeat } from './worker/heartbeat.js';
