/**
 * The one place that reads configuration. `loadConfig(env)` validates every setting with zod and
 * returns a frozen object; an invalid value stops startup with a ConfigError naming the variable.
 * Nothing else in Herald reads `process.env`.
 */
import { z } from 'zod';
import {
  connectionEnvShape,
  connectionSettings,
  type KafkaSecurity,
  type RedisConnection,
  readSecretFiles,
} from './connections.js';
import { isValidTimezone, parseDailyWindow, type SendWindowPolicy } from './domain/sms/windows.js';
import { ConfigError } from './errors.js';

const identifier = z
  .string()
  .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a lowercase SQL identifier (a-z, 0-9, _; at most 63 chars)');
const positiveInt = z.coerce.number().int().positive();
const nonNegativeInt = z.coerce.number().int().nonnegative();
const url = (protocols: string[]) =>
  z
    .string()
    .url()
    .refine((value) => protocols.some((p) => value.startsWith(`${p}://`)), {
      message: `must start with ${protocols.map((p) => `${p}://`).join(' or ')}`,
    });

/** Environment variable → validator. Keys are the variable names, so errors name the field exactly. */
const envSchema = z.object({
  DATABASE_URL: url(['postgres', 'postgresql']),
  HERALD_SCHEMA: identifier.default('herald'),
  HERALD_DB_POOL_SIZE: positiveInt.default(10),
  AMQP_URL: url(['amqp', 'amqps']).optional(),
  HERALD_AMQP_QUEUE_TYPE: z.enum(['quorum', 'classic']).default('quorum'),
  REDIS_URL: url(['redis', 'rediss']).optional(),
  HERALD_TICK_KEY_PREFIX: z
    .string()
    .regex(/^\S+$/, 'must be non-empty and contain no whitespace')
    .default('CAMPAIGN_SCHEDULE_TICK'),
  KAFKA_BROKERS: z
    .string()
    .regex(/^[^,\s]+:\d+(,[^,\s]+:\d+)*$/, 'must be host:port[,host:port…]')
    .optional(),
  HERALD_KAFKA_CREATE_TOPICS: z
    .enum(['true', 'false', '1', '0'], "must be 'true' or 'false'")
    .default('false')
    .transform((value) => value === 'true' || value === '1'),
  HERALD_KAFKA_TOPIC_PARTITIONS: positiveInt.max(10_000).optional(),
  HERALD_KAFKA_REPLICATION_FACTOR: positiveInt.max(100).optional(),
  // TLS and authentication to every service (src/connections.ts, ADR 0015).
  ...connectionEnvShape,
  HERALD_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  HERALD_POD: z.string().min(1).optional(),

  HERALD_RELAY_BATCH_SIZE: positiveInt.max(10_000).default(500),
  HERALD_RELAY_IN_FLIGHT: positiveInt.max(100_000).default(2_000),
  HERALD_RELAY_LOCK_SECONDS: positiveInt.default(30),
  HERALD_RELAY_MAX_ATTEMPTS: positiveInt.default(5),
  HERALD_RELAY_BACKOFF_BASE_MS: positiveInt.default(1_000),
  HERALD_RELAY_BACKOFF_MAX_MS: positiveInt.default(300_000),
  HERALD_RELAY_IDLE_POLL_MS: positiveInt.default(5_000),
  HERALD_RELAY_RECOVERY_COOLDOWN_SECONDS: nonNegativeInt.default(600),
  HERALD_RELAY_RECOVERY_MAX_ROUNDS: nonNegativeInt.default(3),
  HERALD_RELAY_RETENTION_HOURS: nonNegativeInt.default(168),
  HERALD_NOTIFY_COALESCE_MS: nonNegativeInt.default(20),

  HERALD_SCANNER_BATCH_SIZE: positiveInt.max(10_000).default(500),
  HERALD_SCANNER_POLL_MS: positiveInt.default(30_000),
  HERALD_SCANNER_MAX_RECLAIMS_PER_PASS: positiveInt.default(100),
  HERALD_CAMPAIGN_STALE_CLAIM_SECONDS: positiveInt.default(900),
  HERALD_DELIVERY_HEARTBEAT_SECONDS: positiveInt.default(300),
  HERALD_MESSAGE_LOST_AFTER_SECONDS: positiveInt.default(86_400),

  HERALD_CONSUMER_PREFETCH: positiveInt.max(65_535).default(32),
  HERALD_CONSUMER_MAX_ATTEMPTS: positiveInt.default(5),
  HERALD_CONSUMER_RETRY_DELAY_MS: positiveInt.default(10_000),
  HERALD_CONSUMER_BATCH_SIZE: positiveInt.max(1_000).default(32),

  HERALD_PROJECTOR_BATCH_SIZE: positiveInt.max(100_000).default(1_000),
  HERALD_PROJECTOR_POLL_MS: positiveInt.default(1_000),
  HERALD_PROJECTOR_LEASE_SECONDS: positiveInt.default(30),
  HERALD_RECEIPT_RETENTION_DAYS: positiveInt.default(400),

  HERALD_MAINTENANCE_BATCH_SIZE: positiveInt.max(100_000).default(10_000),
  HERALD_OUTBOX_RECOVERY_INTERVAL_SECONDS: positiveInt.default(30),
  HERALD_OUTBOX_PRUNE_INTERVAL_SECONDS: positiveInt.default(300),
  HERALD_OUTBOX_SKIPPED_RETENTION_DAYS: positiveInt.default(30),
  HERALD_RECEIPT_PRUNE_INTERVAL_SECONDS: positiveInt.default(600),
  HERALD_INBOX_RETENTION_DAYS: positiveInt.default(30),
  HERALD_INBOX_PRUNE_INTERVAL_SECONDS: positiveInt.default(600),
  HERALD_IDEMPOTENCY_EXPIRY_INTERVAL_SECONDS: positiveInt.default(600),
  HERALD_TICK_RETENTION_DAYS: positiveInt.default(30),
  HERALD_STREAM_PRUNE_INTERVAL_SECONDS: positiveInt.default(3_600),

  HERALD_ACTIONS_DISPATCH: z.enum(['queue', 'in-process']).default('queue'),
  HERALD_ACTIONS_BATCH_SIZE: positiveInt.max(10_000).default(500),
  HERALD_ACTIONS_STALE_SECONDS: positiveInt.default(300),
  HERALD_ACTIONS_HEARTBEAT_SECONDS: positiveInt.default(60),
  HERALD_ACTIONS_MAX_RETRIES: nonNegativeInt.max(100).default(3),
  HERALD_ACTIONS_RETRY_BASE_MS: positiveInt.default(5_000),
  HERALD_ACTIONS_RETRY_MAX_MS: positiveInt.default(300_000),
  HERALD_ACTIONS_SIGNAL_LOOKBACK_SECONDS: nonNegativeInt.default(86_400),
  HERALD_ACTIONS_CONCURRENCY: positiveInt.max(1_000).optional(),

  // Cron jobs (ADR 0011): executors' outbound allowlist, limits, SMTP.
  HERALD_CRON_ALLOW_PRIVATE_TARGETS: z
    .enum(['true', 'false', '1', '0'], "must be 'true' or 'false'")
    .default('false')
    .transform((value) => value === 'true' || value === '1'),
  HERALD_CRON_ALLOWED_HOSTS: z
    .string()
    .regex(/^[a-z0-9.*:-]+(,[a-z0-9.*:-]+)*$/i, 'must be host[,host…] (a leading *. matches subdomains)')
    .optional(),
  HERALD_CRON_EXECUTOR_CONCURRENCY: positiveInt.max(1_000).optional(),
  HERALD_CRON_DEFAULT_TIMEOUT_MS: positiveInt.default(30_000),
  HERALD_CRON_MAX_TIMEOUT_MS: positiveInt.default(300_000),
  HERALD_CRON_OUTPUT_MAX_BYTES: positiveInt.max(1_000_000).default(2_048),
  HERALD_CRON_STALE_RUN_SECONDS: positiveInt.default(900),
  HERALD_CRON_BACKFILL_MAX: positiveInt.max(100_000).default(1_000),
  HERALD_SMTP_URL: url(['smtp', 'smtps']).optional(),
  HERALD_SMTP_FROM: z.string().min(3).optional(),

  // The HTTP API (`herald api`, ADR 0012).
  HERALD_API_HOST: z.string().min(1).default('127.0.0.1'),
  HERALD_API_PORT: nonNegativeInt.max(65_535).default(8080),
  HERALD_API_BODY_LIMIT_BYTES: positiveInt.max(100 * 1024 * 1024).default(1_048_576),
  HERALD_API_SHUTDOWN_TIMEOUT_SECONDS: positiveInt.default(10),
  // Dashboard sign-in sessions (issue 14): idle timeout, the cookie's Secure flag, proxy headers.
  HERALD_API_SESSION_IDLE_MINUTES: positiveInt.max(7 * 24 * 60).default(60),
  HERALD_API_SESSION_SECURE: z.enum(['auto', 'true', 'false']).default('auto'),
  HERALD_API_TRUST_PROXY: z.enum(['true', 'false']).default('false'),
  HERALD_IDEMPOTENCY_TTL_HOURS: positiveInt.max(24 * 365).default(24),
  HERALD_DEMO_API_SECONDS: nonNegativeInt.max(86_400).default(0),

  // Every long-running role's /metrics, /healthz and /readyz (ADR 0013).
  HERALD_METRICS_HOST: z.string().min(1).default('0.0.0.0'),
  HERALD_METRICS_PORT: nonNegativeInt.max(65_535).default(9464),
  HERALD_READY_TIMEOUT_MS: positiveInt.max(60_000).default(1_000),
  HERALD_READY_MAX_LEASE_AGE_SECONDS: nonNegativeInt.optional(),
  HERALD_READY_MAX_PROJECTION_LAG_SECONDS: nonNegativeInt.default(300),
  HERALD_READY_STARTUP_GRACE_SECONDS: nonNegativeInt.default(60),
  // OpenTelemetry's own variables (ADR 0017): tracing is on when an OTLP endpoint is set.
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  OTEL_SDK_DISABLED: z.enum(['true', 'false']).optional(),
  OTEL_SERVICE_NAME: z.string().min(1).optional(),
  OTEL_BSP_SCHEDULE_DELAY: nonNegativeInt.default(5_000),

  // SMS campaigns (seed 003, ADR 0014).
  HERALD_SMS_TIMEZONE: z
    .string()
    .refine(isValidTimezone, 'must be an IANA time zone such as Asia/Dhaka')
    .default('Asia/Dhaka'),
  HERALD_SMS_PROMOTIONAL_WINDOW: z
    .string()
    .refine((v) => parseDailyWindow(v) !== null, 'must be HH:MM[:SS]-HH:MM[:SS] with start before end')
    .default('09:00-21:00'),
  HERALD_SMS_MIN_LEAD_SECONDS: nonNegativeInt.default(300),
  HERALD_SMS_MAX_FUTURE_DAYS: positiveInt.max(3_650).default(30),
  HERALD_SMS_BULK_MAX_RECIPIENTS: positiveInt.max(10_000_000).default(1_000_000),
  HERALD_SMS_BULK_MAX_BYTES: positiveInt.default(256 * 1024 * 1024),
  HERALD_SMS_BUILD_BATCH_SIZE: positiveInt.max(10_000).default(1_000),
  HERALD_SMS_BUILD_STALE_SECONDS: positiveInt.default(300),
  HERALD_SMS_DISPATCH_BATCH_SIZE: positiveInt.max(10_000).default(999),
  HERALD_SMS_SINK: z.enum(['kafka', 'amqp']).default('kafka'),
  HERALD_SMS_SUBMIT_TOPIC: z
    .string()
    .regex(/^[a-zA-Z0-9._-]{1,200}$/, 'must be 1..200 of [a-zA-Z0-9._-]')
    .default('sms.submit'),
  HERALD_SMS_DLR_TOPIC: z
    .string()
    .regex(/^[a-zA-Z0-9._-]{1,200}$/, 'must be 1..200 of [a-zA-Z0-9._-]')
    .default('sms.dlr'),
  HERALD_SMS_SIMULATOR_OUTCOMES: z
    .string()
    .regex(
      /^(DELIVERED|FAILED|EXPIRED|REJECTED|NOT_AVAILABLE)=\d+(,(DELIVERED|FAILED|EXPIRED|REJECTED|NOT_AVAILABLE)=\d+)*$/,
      'must be OUTCOME=weight[,…] with outcomes DELIVERED, FAILED, EXPIRED, REJECTED, NOT_AVAILABLE',
    )
    .default('DELIVERED=90,FAILED=4,EXPIRED=2,REJECTED=2,NOT_AVAILABLE=2'),
  HERALD_SMS_SIMULATOR_LATENCY_MS: z
    .string()
    .regex(/^\d+(-\d+)?$/, 'must be <ms> or <min>-<max>')
    .default('20-200'),
  HERALD_SMS_SIMULATOR_FAILED_CODES: z
    .string()
    .regex(/^[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*$/, 'must be code[,code…]')
    .default('1,27,31,34,36'),
  HERALD_SMS_SIMULATOR_FIXED_OUTCOMES: z
    .string()
    .regex(
      /^$|^\d{6,15}=(DELIVERED|FAILED|EXPIRED|REJECTED|NOT_AVAILABLE)(:[A-Za-z0-9_]+)?(,\d{6,15}=(DELIVERED|FAILED|EXPIRED|REJECTED|NOT_AVAILABLE)(:[A-Za-z0-9_]+)?)*$/,
      'must be empty or msisdn=OUTCOME[:code][,…] with E.164 digits (no +)',
    )
    .default(''),
  // SMS controls and recovery (seed 003 part 2, the `sms:recovery` poller).
  HERALD_SMS_DISPATCH_DEADLINE_MINUTES: positiveInt.max(525_600).default(1_440),
  HERALD_SMS_DRAFT_STALE_MINUTES: positiveInt.default(10),
  HERALD_SMS_BUILDING_STALE_MINUTES: positiveInt.default(60),
  HERALD_SMS_DISPATCHING_STALE_MINUTES: positiveInt.default(30),
  HERALD_SMS_CANCELLING_STALE_MINUTES: positiveInt.default(5),
  HERALD_SMS_DLR_TIMEOUT_MINUTES: positiveInt.default(2_880),
  // SMS delivery reports, retries and refunds (seed 003 part 2: roll-up, retry dispatcher, refunds).
  HERALD_SMS_MAX_ATTEMPTS: positiveInt.max(100).default(3),
  HERALD_SMS_RETRY_MINUTES: nonNegativeInt.max(10_080).default(5),
  HERALD_SMS_RETRY_JITTER_SECONDS: nonNegativeInt.max(3_600).default(30),
  HERALD_SMS_RETRYABLE_CODES: z
    .string()
    .regex(/^([A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*)?$/, 'must be code[,code…] (or empty)')
    .default('27,31,34'),
  HERALD_SMS_REFUND_RETRY_AFTER_SECONDS: nonNegativeInt.default(60),
  HERALD_SMS_ROLLUP_BATCH_SIZE: positiveInt.max(50_000).default(2_000),
  HERALD_SMS_LEASE_TTL_SECONDS: positiveInt.max(3_600).default(30),
  HERALD_SMS_REPORT_RETENTION_DAYS: positiveInt.default(90),
});

export type HeraldEnv = z.infer<typeof envSchema>;

export interface HeraldConfig {
  readonly databaseUrl: string;
  readonly schema: string;
  readonly dbPoolSize: number;
  readonly amqpUrl: string | undefined;
  readonly amqpQueueType: 'quorum' | 'classic';
  /** REDIS_URL as given; `redis` is how to connect (ACL credentials and TLS, ADR 0015). */
  readonly redisUrl: string | undefined;
  readonly redis: RedisConnection | undefined;
  /** Redis key prefix of the tick role's per-minute SET NX keys (seed 000: CAMPAIGN_SCHEDULE_TICK). */
  readonly tickKeyPrefix: string;
  readonly kafkaBrokers: readonly string[];
  readonly kafka: KafkaSettings;
  readonly logLevel: HeraldEnv['HERALD_LOG_LEVEL'];
  readonly pod: string;
  readonly relay: RelaySettings;
  readonly notifyCoalesceMs: number;
  readonly consumer: ConsumerSettings;
  readonly scanner: ScannerSettings;
  readonly projector: ProjectorSettings;
  readonly maintenance: MaintenanceSettings;
  readonly cron: CronSettings;
  readonly actions: ActionSettings;
  readonly api: ApiSettings;
  readonly observability: ObservabilitySettings;
  readonly tracing: TracingSettings;
  readonly sms: SmsSettings;
  /** Settings that work together but weaken a guarantee; logged by every role at start-up. */
  readonly warnings: readonly string[];
  /** Every secret value of the configuration (passwords): the logger scrubs them from its output. */
  readonly secrets: readonly string[];
}

/** Cron jobs (ADR 0011): the executors' outbound allowlist and limits, and the SMTP server of `email` jobs. */
export interface CronSettings {
  /** Private, loopback and link-local targets (after DNS resolution) are refused unless this is set. */
  readonly allowPrivateTargets: boolean;
  /** When non-empty, the only hosts jobs may target (`*.example.com` matches subdomains). */
  readonly allowedHosts: readonly string[];
  /** Runs one worker executes at once (the cron_events consumer's prefetch); below HERALD_DB_POOL_SIZE. */
  readonly executorConcurrency: number;
  /** A job's timeout when it names none, and the longest one it may name. */
  readonly defaultTimeoutMs: number;
  readonly maxTimeoutMs: number;
  /** Bytes of a response (or SMTP reply) kept on the run. */
  readonly outputMaxBytes: number;
  /** A queued or running run without a sign of life this long whose message is no longer in flight is reclaimed. */
  readonly staleRunMs: number;
  /** Most runs one backfill may create. */
  readonly backfillMax: number;
  /** SMTP server of `email` jobs (smtp:// or smtps://, credentials in the URL); unset: email jobs fail. */
  readonly smtpUrl: string | undefined;
  readonly smtpFrom: string | undefined;
}

function cronSettings(e: HeraldEnv): CronSettings {
  // Every run in flight holds a pooled connection (the fenced handler's inbox transaction) and briefly
  // needs a second one (the run's start marker): the pool must have room for both.
  const concurrency =
    e.HERALD_CRON_EXECUTOR_CONCURRENCY ?? Math.max(1, Math.min(8, e.HERALD_DB_POOL_SIZE - 1));
  if (e.HERALD_CRON_EXECUTOR_CONCURRENCY !== undefined && concurrency >= e.HERALD_DB_POOL_SIZE) {
    throw new ConfigError(
      'HERALD_CRON_EXECUTOR_CONCURRENCY',
      `(${e.HERALD_CRON_EXECUTOR_CONCURRENCY}) must be below HERALD_DB_POOL_SIZE (${e.HERALD_DB_POOL_SIZE}): ` +
        'each run in flight holds one connection and needs another to record its start',
    );
  }
  if (e.HERALD_CRON_DEFAULT_TIMEOUT_MS > e.HERALD_CRON_MAX_TIMEOUT_MS) {
    throw new ConfigError('HERALD_CRON_DEFAULT_TIMEOUT_MS', 'must be <= HERALD_CRON_MAX_TIMEOUT_MS');
  }
  return {
    allowPrivateTargets: e.HERALD_CRON_ALLOW_PRIVATE_TARGETS,
    allowedHosts: e.HERALD_CRON_ALLOWED_HOSTS ? e.HERALD_CRON_ALLOWED_HOSTS.toLowerCase().split(',') : [],
    executorConcurrency: concurrency,
    defaultTimeoutMs: e.HERALD_CRON_DEFAULT_TIMEOUT_MS,
    maxTimeoutMs: e.HERALD_CRON_MAX_TIMEOUT_MS,
    outputMaxBytes: e.HERALD_CRON_OUTPUT_MAX_BYTES,
    staleRunMs: e.HERALD_CRON_STALE_RUN_SECONDS * 1000,
    backfillMax: e.HERALD_CRON_BACKFILL_MAX,
    smtpUrl: e.HERALD_SMTP_URL,
    smtpFrom: e.HERALD_SMTP_FROM,
  };
}

/** The role endpoint: /metrics, /healthz, /readyz (docs/decisions/0013-metrics-and-health.md). */
export interface ObservabilitySettings {
  /** Address the endpoint listens on (0.0.0.0: reachable from the pod's network). */
  readonly host: string;
  /** 0: any free port (tests). Roles run in one process (`herald all`) share one endpoint. */
  readonly port: number;
  /** Bound on each database read of a readiness check. */
  readonly readyTimeoutMs: number;
  /** Seed 003's lease-age check: a required lease renewed longer ago fails readiness; 0: not checked. */
  readonly maxLeaseAgeSeconds: number;
  /** A projection checkpoint whose oldest unapplied entry is older fails readiness; 0: not checked. */
  readonly maxProjectionLagSeconds: number;
  /** After start, lease and lag failures are reported but do not fail readiness for this long (seed 003). */
  readonly startupGraceMs: number;
}

/** OpenTelemetry tracing (docs/decisions/0017-tracing.md); the SDK reads the other OTEL_* variables. */
export interface TracingSettings {
  /** An OTLP endpoint is configured and OTEL_SDK_DISABLED is not `true`. */
  readonly enabled: boolean;
  /** OTEL_SERVICE_NAME; unset: `herald-<role>`. */
  readonly serviceName: string | undefined;
  /** OTEL_BSP_SCHEDULE_DELAY: ms between span exports. */
  readonly exportDelayMs: number;
}

/** The HTTP API (`herald api`, docs/decisions/0012-http-api.md). */
export interface ApiSettings {
  readonly host: string;
  /** 0: any free port (tests, the demo). */
  readonly port: number;
  /** Largest request body accepted (larger: 413). */
  readonly bodyLimitBytes: number;
  /** On SIGTERM, in-flight requests get this long to finish before their connections are closed. */
  readonly shutdownTimeoutMs: number;
  /** An Idempotency-Key is remembered this long after its request completed (then a retry is a new request). */
  readonly idempotencyTtlMs: number;
  /** `npm run demo` keeps its API up this long after the demo's run (0: it exits at once; Ctrl-C ends it). */
  readonly demoHoldMs: number;
  /** A dashboard session unused this long expires (database clock). */
  readonly sessionIdleMs: number;
  /** The session cookie's Secure flag: `auto` sets it when the request came over TLS (or https through a trusted proxy). */
  readonly sessionSecure: 'auto' | 'always' | 'never';
  /** Trust X-Forwarded-* headers (behind a TLS-terminating proxy). */
  readonly trustProxy: boolean;
}

/** SMS campaigns (seed 003, docs/decisions/0014-sms-campaigns.md). */
export interface SmsSettings {
  /** Campaign zone: scheduledAt without an offset, the promotional window, recipients of unknown zone. */
  readonly zone: string;
  /** Seed 003's BTRC window for promotional traffic (daily, in `zone`). */
  readonly promotionalWindow: SendWindowPolicy;
  /** A SCHEDULED campaign starts at least this long after it is created. */
  readonly minLeadMs: number;
  /** …and at most this long after. */
  readonly maxFutureMs: number;
  /** Seed 003's campaign.bulk.max-recipients: most valid rows of a CSV campaign. */
  readonly bulkMaxRecipients: number;
  /** Largest CSV file accepted. */
  readonly bulkMaxBytes: number;
  /** CSV rows priced and saved per build transaction. */
  readonly buildBatchSize: number;
  /** A build attempt without a saved batch for this long is taken over (and fails safe if it saved any). */
  readonly buildStaleMs: number;
  /** Recipients claimed per dispatch transaction (seed 003: 999). */
  readonly dispatchBatchSize: number;
  /** Where submission chunks go: Kafka (default) or RabbitMQ (a queue named like the topic). */
  readonly sink: 'kafka' | 'amqp';
  readonly submitTopic: string;
  /** Where the SMS gateway (or `herald sms-simulator`) writes delivery reports. */
  readonly dlrTopic: string;
  /** An SMS campaign's dispatch deadline: its startAt (or activation, or next window opening) + this. */
  readonly dispatchDeadlineMs: number;
  /** Stale recovery (`sms:recovery`): a DRAFT older than this is reversed and FAILED. */
  readonly draftStaleMs: number;
  /** …a BUILDING campaign without a charge or saved recipients older than this is FAILED (upload again). */
  readonly buildingStaleMs: number;
  /** …a DISPATCHING campaign without progress this long has its unsent work requeued. */
  readonly dispatchingStaleMs: number;
  /** …a CANCELLING campaign still unsettled after this long is settled again (normally at once). */
  readonly cancellingStaleMs: number;
  /** A recipient SUBMITTED this long without a delivery report gets a synthetic NOT_AVAILABLE (DLR_TIMEOUT). */
  readonly dlrTimeoutMs: number;
  /** Submissions a recipient may have before a temporary failure is final (HERALD_SMS_MAX_ATTEMPTS). */
  readonly maxAttempts: number;
  /** A temporary failure is retried after this long… */
  readonly retryMs: number;
  /** …plus a random 0..retryJitterMs. */
  readonly retryJitterMs: number;
  /** FAILED codes that are temporary (besides codes naming timeouts, connection errors, 5xx). */
  readonly retryableCodes: readonly string[];
  /** A failed recipient still unrefunded this long after it failed is refunded again (same key). */
  readonly refundRetryAfterMs: number;
  /** Delivery reports rolled up per campaign transaction. */
  readonly rollupBatchSize: number;
  /** The SMS pollers' leases (sms:dlr-rollup, sms:retry-dispatcher, sms:refund-retry, sms:recovery). */
  readonly leaseTtlMs: number;
  /** Rolled-up delivery reports are deleted this long after their roll-up (`sms-report-retention`). */
  readonly reportRetentionDays: number;
  readonly simulator: {
    readonly outcomes: readonly { readonly outcome: string; readonly weight: number }[];
    readonly latencyMs: { readonly min: number; readonly max: number };
    readonly failedCodes: readonly string[];
    /** Numbers (E.164 digits) that always get one outcome, like a payment sandbox's test cards. */
    readonly fixed: ReadonlyMap<string, { readonly status: string; readonly errorCode: string | null }>;
  };
}

function smsSettings(e: HeraldEnv): SmsSettings {
  const outcomes = e.HERALD_SMS_SIMULATOR_OUTCOMES.split(',').map((pair) => {
    const [outcome, weight] = pair.split('=');
    return { outcome: outcome!, weight: Number(weight) };
  });
  if (outcomes.every((o) => o.weight === 0)) {
    throw new ConfigError('HERALD_SMS_SIMULATOR_OUTCOMES', 'at least one weight must be positive');
  }
  const [min, max] = e.HERALD_SMS_SIMULATOR_LATENCY_MS.split('-').map(Number) as [number, number?];
  if (max !== undefined && max < min) {
    throw new ConfigError('HERALD_SMS_SIMULATOR_LATENCY_MS', 'the maximum must not be below the minimum');
  }
  return {
    zone: e.HERALD_SMS_TIMEZONE,
    promotionalWindow: parseDailyWindow(e.HERALD_SMS_PROMOTIONAL_WINDOW)!,
    minLeadMs: e.HERALD_SMS_MIN_LEAD_SECONDS * 1000,
    maxFutureMs: e.HERALD_SMS_MAX_FUTURE_DAYS * 86_400_000,
    bulkMaxRecipients: e.HERALD_SMS_BULK_MAX_RECIPIENTS,
    bulkMaxBytes: e.HERALD_SMS_BULK_MAX_BYTES,
    buildBatchSize: e.HERALD_SMS_BUILD_BATCH_SIZE,
    buildStaleMs: e.HERALD_SMS_BUILD_STALE_SECONDS * 1000,
    dispatchBatchSize: e.HERALD_SMS_DISPATCH_BATCH_SIZE,
    sink: e.HERALD_SMS_SINK,
    submitTopic: e.HERALD_SMS_SUBMIT_TOPIC,
    dlrTopic: e.HERALD_SMS_DLR_TOPIC,
    dispatchDeadlineMs: e.HERALD_SMS_DISPATCH_DEADLINE_MINUTES * 60_000,
    draftStaleMs: e.HERALD_SMS_DRAFT_STALE_MINUTES * 60_000,
    buildingStaleMs: e.HERALD_SMS_BUILDING_STALE_MINUTES * 60_000,
    dispatchingStaleMs: e.HERALD_SMS_DISPATCHING_STALE_MINUTES * 60_000,
    cancellingStaleMs: e.HERALD_SMS_CANCELLING_STALE_MINUTES * 60_000,
    dlrTimeoutMs: e.HERALD_SMS_DLR_TIMEOUT_MINUTES * 60_000,
    maxAttempts: e.HERALD_SMS_MAX_ATTEMPTS,
    retryMs: e.HERALD_SMS_RETRY_MINUTES * 60_000,
    retryJitterMs: e.HERALD_SMS_RETRY_JITTER_SECONDS * 1000,
    retryableCodes: e.HERALD_SMS_RETRYABLE_CODES === '' ? [] : e.HERALD_SMS_RETRYABLE_CODES.split(','),
    refundRetryAfterMs: e.HERALD_SMS_REFUND_RETRY_AFTER_SECONDS * 1000,
    rollupBatchSize: e.HERALD_SMS_ROLLUP_BATCH_SIZE,
    leaseTtlMs: e.HERALD_SMS_LEASE_TTL_SECONDS * 1000,
    reportRetentionDays: e.HERALD_SMS_REPORT_RETENTION_DAYS,
    simulator: {
      outcomes,
      latencyMs: { min, max: max ?? min },
      failedCodes: e.HERALD_SMS_SIMULATOR_FAILED_CODES.split(','),
      fixed: new Map(
        e.HERALD_SMS_SIMULATOR_FIXED_OUTCOMES.split(',')
          .filter(Boolean)
          .map((pair) => {
            const [msisdn, outcome] = pair.split('=') as [string, string];
            const [status, errorCode] = outcome.split(':') as [string, string?];
            return [msisdn, { status, errorCode: errorCode ?? (status === 'FAILED' ? '1' : null) }];
          }),
      ),
    },
  };
}

/** Scheduled actions (seed 002, docs/decisions/0010-scheduled-actions.md). */
export interface ActionSettings {
  /**
   * queue: `herald scanner` claims due actions and publishes scheduled_action_fire, `herald worker`
   * consumes it (the seed's cron-scheduler profile); in-process: `herald worker` claims and runs them.
   */
  readonly dispatch: 'queue' | 'in-process';
  /** Actions claimed per transaction (seed 002: 500). */
  readonly batchSize: number;
  /** Seed 002: an action processing for longer than this (5 minutes) is recovered. */
  readonly staleMs: number;
  /** A running action refreshes its claim this often. */
  readonly heartbeatMs: number;
  /** Seed 002: 3 retries, then failed (the default for actions scheduled without maxRetries). */
  readonly maxRetries: number;
  readonly retryBaseMs: number;
  readonly retryMaxMs: number;
  /** A signal received this long before a wait is saved still unlocks it (the early-signal race). */
  readonly signalLookbackMs: number;
  /** In-process dispatch: actions a worker runs at once (default min(8, pool size - 1)). */
  readonly concurrency: number;
}

/** Periodic upkeep (src/maintenance/), each service with its own interval; rows per statement shared. */
export interface MaintenanceSettings {
  readonly batchSize: number;
  readonly outboxRecoveryIntervalMs: number;
  readonly outboxPruneIntervalMs: number;
  /** `skipped` outbox rows (an operator gave up on them) are deleted after this many days. */
  readonly skippedRetentionDays: number;
  readonly receiptPruneIntervalMs: number;
  /** Inbox rows (the consumers' de-duplication record) are deleted after this many days. */
  readonly inboxRetentionDays: number;
  readonly inboxPruneIntervalMs: number;
  readonly idempotencyExpiryIntervalMs: number;
  /** Events of the per-minute `campaign_tick` side stream are deleted after this many days. */
  readonly tickRetentionDays: number;
  readonly streamPruneIntervalMs: number;
}

export interface ProjectorSettings {
  /** Log entries (events or receipts) applied per projection transaction. */
  readonly batchSize: number;
  /** Sleep when caught up, and retry interval while another replica holds a projection's lease. */
  readonly pollMs: number;
  /** One active projector per projection: lease length by the database clock, renewed every third. */
  readonly leaseMs: number;
  /** Publish receipts are deleted after this many days (kept far longer than sent outbox rows). */
  readonly receiptRetentionDays: number;
}

export interface KafkaSettings {
  /** Create missing topics (the relay's destinations, a consumer's topic and its .retry/.dead) through the admin client. */
  readonly createTopics: boolean;
  /** Partitions and replication factor of created topics; undefined: the broker's defaults. */
  readonly topicPartitions: number | undefined;
  readonly replicationFactor: number | undefined;
  /** Security protocol, TLS files and SASL credentials of every Kafka client (ADR 0015). */
  readonly security: KafkaSecurity;
}

export interface ScannerSettings {
  readonly batchSize: number;
  /** Fallback poll; also the horizon within which a newly scheduled campaign wakes the scanner. */
  readonly pollMs: number;
  /** Seed 000: a DISPATCHING campaign without a heartbeat for this long is reclaimed (15 min). */
  readonly staleClaimMs: number;
  /** Seed 000: the delivery worker refreshes its claim this often during a send (5 min). */
  readonly heartbeatMs: number;
  /** Stale recovery reclaims at most this many claims per scanner pass (a bound, whatever the backlog). */
  readonly maxReclaimsPerPass: number;
  /**
   * A claim's message published this long ago that no consumer has settled is presumed lost (e.g. its
   * queue was purged) and the claim recoverable; before that, a published message is in the broker's
   * hands and its claim is alive however old it is.
   */
  readonly messageLostAfterMs: number;
}

export interface RelaySettings {
  readonly batchSize: number;
  readonly inFlight: number;
  readonly lockSeconds: number;
  readonly maxAttempts: number;
  readonly backoffBaseMs: number;
  readonly backoffMaxMs: number;
  readonly idlePollMs: number;
  readonly recoveryCooldownSeconds: number;
  readonly recoveryMaxRounds: number;
  readonly retentionHours: number;
}

export interface ConsumerSettings {
  readonly prefetch: number;
  readonly maxAttempts: number;
  readonly retryDelayMs: number;
  /** Deliveries per transaction for handlers with a batch form (1: one at a time). */
  readonly batchSize: number;
}

function deepFreeze<T extends object>(value: T): Readonly<T> {
  for (const inner of Object.values(value)) {
    if (inner && typeof inner === 'object' && !Object.isFrozen(inner)) deepFreeze(inner);
  }
  return Object.freeze(value);
}

/**
 * Settings that are each valid but contradict each other. Each refusal names both variables.
 */
function refuseContradictions(e: HeraldEnv): void {
  const stale = e.HERALD_CAMPAIGN_STALE_CLAIM_SECONDS;
  if (e.HERALD_RELAY_LOCK_SECONDS >= stale) {
    throw new ConfigError(
      'HERALD_RELAY_LOCK_SECONDS',
      `(${e.HERALD_RELAY_LOCK_SECONDS}) must be shorter than HERALD_CAMPAIGN_STALE_CLAIM_SECONDS (${stale}): ` +
        'rows held by a killed relay would wait past the stale-claim window',
    );
  }
  if (e.HERALD_DELIVERY_HEARTBEAT_SECONDS >= stale) {
    throw new ConfigError(
      'HERALD_DELIVERY_HEARTBEAT_SECONDS',
      `(${e.HERALD_DELIVERY_HEARTBEAT_SECONDS}) must be shorter than HERALD_CAMPAIGN_STALE_CLAIM_SECONDS (${stale}): ` +
        'a claim would go stale between two heartbeats of a live send',
    );
  }
  if (e.HERALD_ACTIONS_HEARTBEAT_SECONDS >= e.HERALD_ACTIONS_STALE_SECONDS) {
    throw new ConfigError(
      'HERALD_ACTIONS_HEARTBEAT_SECONDS',
      `(${e.HERALD_ACTIONS_HEARTBEAT_SECONDS}) must be shorter than HERALD_ACTIONS_STALE_SECONDS (${e.HERALD_ACTIONS_STALE_SECONDS}): ` +
        'a running action would go stale between two heartbeats',
    );
  }
  if (e.HERALD_ACTIONS_CONCURRENCY !== undefined && e.HERALD_ACTIONS_CONCURRENCY >= e.HERALD_DB_POOL_SIZE) {
    throw new ConfigError(
      'HERALD_ACTIONS_CONCURRENCY',
      `(${e.HERALD_ACTIONS_CONCURRENCY}) must be below HERALD_DB_POOL_SIZE (${e.HERALD_DB_POOL_SIZE}): ` +
        'each running action holds a connection for its transaction',
    );
  }
  if (e.HERALD_ACTIONS_RETRY_MAX_MS < e.HERALD_ACTIONS_RETRY_BASE_MS) {
    throw new ConfigError('HERALD_ACTIONS_RETRY_MAX_MS', 'must be >= HERALD_ACTIONS_RETRY_BASE_MS');
  }
  const maxLeaseAge = e.HERALD_READY_MAX_LEASE_AGE_SECONDS;
  if (maxLeaseAge !== undefined && maxLeaseAge > 0 && maxLeaseAge * 3 <= e.HERALD_PROJECTOR_LEASE_SECONDS) {
    throw new ConfigError(
      'HERALD_READY_MAX_LEASE_AGE_SECONDS',
      `(${maxLeaseAge}) must be longer than a third of HERALD_PROJECTOR_LEASE_SECONDS (${e.HERALD_PROJECTOR_LEASE_SECONDS}): ` +
        'an active projector renews its lease that often, so a healthy lease would fail readiness',
    );
  }
  if (e.HERALD_PROJECTOR_POLL_MS >= e.HERALD_PROJECTOR_LEASE_SECONDS * 1000) {
    throw new ConfigError(
      'HERALD_PROJECTOR_POLL_MS',
      `(${e.HERALD_PROJECTOR_POLL_MS}) must be shorter than HERALD_PROJECTOR_LEASE_SECONDS (${e.HERALD_PROJECTOR_LEASE_SECONDS} s): ` +
        'an idle projector would let its lease expire between two polls',
    );
  }
}

/** Combinations that work but weaken a guarantee: reported at start-up (each names both variables). */
function contradictionWarnings(e: HeraldEnv): string[] {
  const warnings: string[] = [];
  if (e.HERALD_MESSAGE_LOST_AFTER_SECONDS > e.HERALD_RELAY_RETENTION_HOURS * 3600) {
    warnings.push(
      `HERALD_MESSAGE_LOST_AFTER_SECONDS (${e.HERALD_MESSAGE_LOST_AFTER_SECONDS}) exceeds HERALD_RELAY_RETENTION_HOURS ` +
        `(${e.HERALD_RELAY_RETENTION_HOURS} h): a claim whose outbox row was pruned counts as settled, so stale ` +
        'recovery may reclaim a claim whose message still waits in a queue',
    );
  }
  return warnings;
}

/** Validates the environment. Throws ConfigError naming the first invalid variable. */
export function loadConfig(
  env: Record<string, string | undefined>,
  defaults: { pod?: string } = {},
): HeraldConfig {
  // Empty strings count as unset, as most deployment tools cannot express "unset".
  // Secrets may come from files (X_FILE); a value read from one is reported under that variable.
  const { env: present, fromFile } = readSecretFiles(
    Object.fromEntries(
      Object.entries(env).filter(
        (entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== '',
      ),
    ),
  );
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = String(issue.path[0] ?? 'environment');
    const reason =
      issue.code === 'invalid_type' && present[field] === undefined ? 'is required' : issue.message;
    if (fromFile.has(field)) throw new ConfigError(`${field}_FILE`, `the file's content: ${reason}`);
    throw new ConfigError(field, reason);
  }
  const e = parsed.data;
  const connections = connectionSettings(e);
  if (e.HERALD_RELAY_BACKOFF_MAX_MS < e.HERALD_RELAY_BACKOFF_BASE_MS) {
    throw new ConfigError('HERALD_RELAY_BACKOFF_MAX_MS', 'must be >= HERALD_RELAY_BACKOFF_BASE_MS');
  }
  refuseContradictions(e);
  return deepFreeze({
    databaseUrl: connections.databaseUrl,
    schema: e.HERALD_SCHEMA,
    dbPoolSize: e.HERALD_DB_POOL_SIZE,
    amqpUrl: connections.amqpUrl,
    amqpQueueType: e.HERALD_AMQP_QUEUE_TYPE,
    redisUrl: e.REDIS_URL,
    redis: connections.redis,
    tickKeyPrefix: e.HERALD_TICK_KEY_PREFIX,
    kafkaBrokers: e.KAFKA_BROKERS ? e.KAFKA_BROKERS.split(',') : [],
    kafka: {
      createTopics: e.HERALD_KAFKA_CREATE_TOPICS,
      topicPartitions: e.HERALD_KAFKA_TOPIC_PARTITIONS,
      replicationFactor: e.HERALD_KAFKA_REPLICATION_FACTOR,
      security: connections.kafkaSecurity,
    },
    logLevel: e.HERALD_LOG_LEVEL,
    pod: e.HERALD_POD ?? defaults.pod ?? `herald-${process.pid}`,
    relay: {
      batchSize: e.HERALD_RELAY_BATCH_SIZE,
      inFlight: e.HERALD_RELAY_IN_FLIGHT,
      lockSeconds: e.HERALD_RELAY_LOCK_SECONDS,
      maxAttempts: e.HERALD_RELAY_MAX_ATTEMPTS,
      backoffBaseMs: e.HERALD_RELAY_BACKOFF_BASE_MS,
      backoffMaxMs: e.HERALD_RELAY_BACKOFF_MAX_MS,
      idlePollMs: e.HERALD_RELAY_IDLE_POLL_MS,
      recoveryCooldownSeconds: e.HERALD_RELAY_RECOVERY_COOLDOWN_SECONDS,
      recoveryMaxRounds: e.HERALD_RELAY_RECOVERY_MAX_ROUNDS,
      retentionHours: e.HERALD_RELAY_RETENTION_HOURS,
    },
    notifyCoalesceMs: e.HERALD_NOTIFY_COALESCE_MS,
    scanner: {
      batchSize: e.HERALD_SCANNER_BATCH_SIZE,
      pollMs: e.HERALD_SCANNER_POLL_MS,
      staleClaimMs: e.HERALD_CAMPAIGN_STALE_CLAIM_SECONDS * 1000,
      heartbeatMs: e.HERALD_DELIVERY_HEARTBEAT_SECONDS * 1000,
      maxReclaimsPerPass: e.HERALD_SCANNER_MAX_RECLAIMS_PER_PASS,
      messageLostAfterMs: e.HERALD_MESSAGE_LOST_AFTER_SECONDS * 1000,
    },
    consumer: {
      prefetch: e.HERALD_CONSUMER_PREFETCH,
      maxAttempts: e.HERALD_CONSUMER_MAX_ATTEMPTS,
      retryDelayMs: e.HERALD_CONSUMER_RETRY_DELAY_MS,
      batchSize: e.HERALD_CONSUMER_BATCH_SIZE,
    },
    projector: {
      batchSize: e.HERALD_PROJECTOR_BATCH_SIZE,
      pollMs: e.HERALD_PROJECTOR_POLL_MS,
      leaseMs: e.HERALD_PROJECTOR_LEASE_SECONDS * 1000,
      receiptRetentionDays: e.HERALD_RECEIPT_RETENTION_DAYS,
    },
    maintenance: {
      batchSize: e.HERALD_MAINTENANCE_BATCH_SIZE,
      outboxRecoveryIntervalMs: e.HERALD_OUTBOX_RECOVERY_INTERVAL_SECONDS * 1000,
      outboxPruneIntervalMs: e.HERALD_OUTBOX_PRUNE_INTERVAL_SECONDS * 1000,
      skippedRetentionDays: e.HERALD_OUTBOX_SKIPPED_RETENTION_DAYS,
      receiptPruneIntervalMs: e.HERALD_RECEIPT_PRUNE_INTERVAL_SECONDS * 1000,
      inboxRetentionDays: e.HERALD_INBOX_RETENTION_DAYS,
      inboxPruneIntervalMs: e.HERALD_INBOX_PRUNE_INTERVAL_SECONDS * 1000,
      idempotencyExpiryIntervalMs: e.HERALD_IDEMPOTENCY_EXPIRY_INTERVAL_SECONDS * 1000,
      tickRetentionDays: e.HERALD_TICK_RETENTION_DAYS,
      streamPruneIntervalMs: e.HERALD_STREAM_PRUNE_INTERVAL_SECONDS * 1000,
    },
    cron: cronSettings(e),
    actions: {
      dispatch: e.HERALD_ACTIONS_DISPATCH,
      batchSize: e.HERALD_ACTIONS_BATCH_SIZE,
      staleMs: e.HERALD_ACTIONS_STALE_SECONDS * 1000,
      heartbeatMs: e.HERALD_ACTIONS_HEARTBEAT_SECONDS * 1000,
      maxRetries: e.HERALD_ACTIONS_MAX_RETRIES,
      retryBaseMs: e.HERALD_ACTIONS_RETRY_BASE_MS,
      retryMaxMs: e.HERALD_ACTIONS_RETRY_MAX_MS,
      signalLookbackMs: e.HERALD_ACTIONS_SIGNAL_LOOKBACK_SECONDS * 1000,
      concurrency: e.HERALD_ACTIONS_CONCURRENCY ?? Math.max(1, Math.min(8, e.HERALD_DB_POOL_SIZE - 1)),
    },
    api: {
      host: e.HERALD_API_HOST,
      port: e.HERALD_API_PORT,
      bodyLimitBytes: e.HERALD_API_BODY_LIMIT_BYTES,
      shutdownTimeoutMs: e.HERALD_API_SHUTDOWN_TIMEOUT_SECONDS * 1000,
      idempotencyTtlMs: e.HERALD_IDEMPOTENCY_TTL_HOURS * 3_600_000,
      demoHoldMs: e.HERALD_DEMO_API_SECONDS * 1000,
      sessionIdleMs: e.HERALD_API_SESSION_IDLE_MINUTES * 60_000,
      sessionSecure:
        e.HERALD_API_SESSION_SECURE === 'auto'
          ? 'auto'
          : e.HERALD_API_SESSION_SECURE === 'true'
            ? 'always'
            : 'never',
      trustProxy: e.HERALD_API_TRUST_PROXY === 'true',
    },
    tracing: {
      enabled:
        (e.OTEL_EXPORTER_OTLP_ENDPOINT ?? e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) !== undefined &&
        e.OTEL_SDK_DISABLED !== 'true',
      serviceName: e.OTEL_SERVICE_NAME,
      exportDelayMs: e.OTEL_BSP_SCHEDULE_DELAY,
    },
    observability: {
      host: e.HERALD_METRICS_HOST,
      port: e.HERALD_METRICS_PORT,
      readyTimeoutMs: e.HERALD_READY_TIMEOUT_MS,
      // Two projector leases: no replica renewed it for a whole lease length after it expired.
      maxLeaseAgeSeconds: e.HERALD_READY_MAX_LEASE_AGE_SECONDS ?? 2 * e.HERALD_PROJECTOR_LEASE_SECONDS,
      maxProjectionLagSeconds: e.HERALD_READY_MAX_PROJECTION_LAG_SECONDS,
      startupGraceMs: e.HERALD_READY_STARTUP_GRACE_SECONDS * 1000,
    },
    sms: smsSettings(e),
    warnings: [...contradictionWarnings(e), ...connections.warnings],
    secrets: connections.secrets,
  });
}

/** Documented settings, for `herald config` and the README. */
export const CONFIG_VARIABLES = Object.keys(envSchema.shape);
