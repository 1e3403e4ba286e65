/**
 * Herald's public API: the package entry point (`import { … } from 'herald'`, built to
 * dist/index.js). Configuration, logging, the runtime and its roles, the aggregate registry and what a
 * registration is made of, the campaign, SMS campaign, scheduled-action and cron services (with the SMS billing and
 * routing ports), the HTTP API, the consumer toolkit (RabbitMQ and Kafka), the
 * command handler and decider contract, the typed errors and the migrator. Everything else under src/
 * is internal and may change without notice; every export is listed by name here.
 */

export type { AmqpConnection, QueueType } from './adapters/amqp/amqp-connection.js';
export { type MigrationResult, migrate } from './adapters/postgres/migrator.js';
export {
  CampaignService,
  type CampaignServiceDeps,
  type NewCampaign,
} from './aggregates/campaign/service.js';
export {
  type BillingOperation,
  type BillingPort,
  type BillingReceipt,
  PostgresLedger,
} from './aggregates/campaign/sms/billing.js';
export {
  type SmsDispatchDeps,
  type SmsSubmission,
  smsDispatchSweeper,
} from './aggregates/campaign/sms/dispatch.js';
export { checkCampaignMoney, type MoneyCheck } from './aggregates/campaign/sms/money-check.js';
export { refundRecipients, smsRefundRetrySweeper } from './aggregates/campaign/sms/refunds.js';
export { smsRetryDispatcher } from './aggregates/campaign/sms/retries.js';
export { type SmsRollup, smsRollupSweeper } from './aggregates/campaign/sms/rollup.js';
export { postgresSmsRouting, type SmsRoutingPort } from './aggregates/campaign/sms/routing.js';
export {
  type BulkCreated,
  SmsCampaignService,
  type SmsCampaignServiceDeps,
  type SmsPreview,
  type SmsRequestOptions,
  type UploadView,
} from './aggregates/campaign/sms/service.js';
export {
  type DeliveryReport,
  DLR_OUTCOMES,
  type DlrOutcome,
  SmsGatewaySimulator,
} from './aggregates/campaign/sms/simulator.js';
export { cronRegistration } from './aggregates/cron/index.js';
export type { LedgerEntry } from './aggregates/cron/ledger.js';
export {
  type BackfillResult,
  CronService,
  type CronServiceDeps,
  type CronServiceSettings,
  type NewCronJob,
} from './aggregates/cron/service.js';
export { heraldRegistry } from './aggregates/registry.js';
export type { ActionExecutePayload, ActionFirePayload } from './aggregates/scheduled-action/descriptor.js';
export { scheduledActionRegistration } from './aggregates/scheduled-action/index.js';
export type {
  ActionExecutor,
  ActionPorts,
  ConditionsPort,
  ConditionsVerdict,
  ExecutionContext,
  Subject,
  SubjectPort,
} from './aggregates/scheduled-action/processing.js';
export {
  type ScheduleActionParams,
  ScheduledActionService,
  type ScheduledActionServiceDeps,
  type SignalOutcome,
  type SignalParams,
} from './aggregates/scheduled-action/service.js';
export type { ActionSettings } from './aggregates/scheduled-action/settings.js';
export {
  ACTION_EXECUTE_QUEUE,
  SCHEDULED_ACTION_FIRE_QUEUE,
} from './aggregates/scheduled-action/topology.js';
export { type ApiKeyRole, createApiKey, type Principal } from './api/auth.js';
export { type ApiServerDeps, buildApiServer, type RunningApiServer, startApiServer } from './api/server.js';
export { loadConfig } from './config.js';
export type { ActionSignalState, ReceivedSignal } from './domain/action-signal.js';
export type { CampaignCommand, CampaignCommandType, CreateCampaign } from './domain/campaign/commands.js';
export type { CampaignEvent, CampaignEventType } from './domain/campaign/events.js';
export type { SmsCampaignFacts, SmsDefinition, SmsProgress } from './domain/campaign/sms.js';
export type { CampaignFields, CampaignIn, CampaignState, ExistingCampaign } from './domain/campaign/state.js';
export {
  CAMPAIGN_CHANNELS,
  CAMPAIGN_STATUSES,
  CAST_TYPES,
  type CampaignChannel,
  type CampaignStatus,
  type CastType,
  FINAL_CAMPAIGN_STATUSES,
  type FinalCampaignStatus,
  isFinalStatus,
  type PausableCampaignStatus,
} from './domain/campaign/status.js';
export type {
  CatchUpMode,
  CatchUpPolicy,
  CronJobCommand,
  CronJobEvent,
  CronJobState,
  DstPolicy,
  ExistingCronJob,
  JobType,
  Occurrence,
  OverlapPolicy,
  RetryPolicy,
} from './domain/cron-job.js';
export { type Decider, type DomainEvent, fold } from './domain/decider.js';
export type { ExistingJobRun, JobRunEvent, JobRunState, RunFate, RunStatus } from './domain/job-run.js';
export type {
  ActionBranch,
  ActionMode,
  ActionStatus,
  ExistingAction,
  ScheduledActionCommand,
  ScheduledActionEvent,
  ScheduledActionState,
} from './domain/scheduled-action.js';
export {
  type BulkCampaignMeta,
  type InlineCampaignRequest,
  type RuleIssue,
  SmsValidationError,
} from './domain/sms/campaign-request.js';
export { countSegments, type SegmentCount } from './domain/sms/encoding.js';
export { nextAllowedAt, type SendWindowPolicy } from './domain/sms/windows.js';
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
export type {
  Aggregate,
  AggregateDescriptor,
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
export {
  checkReadiness,
  type LeaseRequirements,
  leaseRequirements,
  processReadiness,
  type ReadinessCheck,
  type ReadinessDeps,
  type ReadinessProbe,
  ReadinessProbes,
  type ReadinessReport,
} from './health/readiness.js';
export { type HealthRoutesOptions, healthRoutes } from './health/role-endpoint.js';
export {
  createLogger,
  type Logger,
  type LoggerOptions,
  redactUrlCredentials,
  secretScrubber,
  silentLogger,
} from './logger.js';
export {
  type ConsumerOutcome,
  type DatabaseSource,
  HeraldMetrics,
  heraldMetrics,
} from './observability/metrics.js';
export type { OutboxMessageSpec } from './outbox/outbox-writer.js';
export type { Database, QueryResult, SqlClient, TransactionOptions } from './ports/database.js';
export type { AppendedEvent, EventMeta, StoredEvent } from './ports/events.js';
export type { Sink } from './ports/outbox.js';
export type { LoadOptions, StateStore, StateTableMapping } from './ports/state-store.js';
export type { WakeupSignal } from './ports/wakeups.js';
export type { Projection, ProjectionSource, ProjectionTarget } from './projections/projection.js';
export {
  type AggregateContext,
  defineAggregate,
  defineModule,
  type RegisteredAggregate,
  type RegisteredModule,
  type SideStream,
  type Topology,
} from './registry/module.js';
export { AggregateRegistry } from './registry/registry.js';
export type { RoleDefinition, Runtime } from './registry/role.js';
export { apiRole, startApi } from './roles/api-role.js';
export { maintenanceRole } from './roles/maintenance-role.js';
export { projectorRole } from './roles/projector-role.js';
export { relayRole } from './roles/relay-role.js';
export { createRuntime, type RuntimeOptions, runRole, runTogether } from './roles/runtime.js';
export { scannerRole } from './roles/scanner-role.js';
export { workerRole } from './roles/worker-role.js';
export { type LeasedSweeper, type LeasedSweeperOptions, leasedSweeper } from './scanner/leased-sweeper.js';
export type { Sweeper, SweepResult } from './scanner/scanner.js';
export {
  type ClaimSweepDefinition,
  type CountingSweeper,
  defineClaimSweeper,
  defineStaleRecovery,
  type StaleRecoveryDefinition,
  type StaleRecoverySettings,
  type SweeperDeps,
  type SweepOutcome,
  sweepInOrder,
} from './scanner/sweeper.js';
export {
  type KafkaSaslMechanism,
  type KafkaSecurity,
  type KafkaSecurityProtocol,
  type RedisConnection,
  SECRET_VARIABLES,
  type TlsFiles,
} from './settings/connections.js';
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
  type ConsumeDeps,
  type ConsumedMessage,
  type ConsumeOptions,
  type Consumer,
  type ConsumerState,
  type ConsumerStats,
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
