/**
 * The generic configuration (ADR 0020): the sections of variables Herald's machinery reads (database,
 * brokers, relay, scanner, consumers, projector, maintenance, the HTTP API, metrics and tracing), each
 * variable written once with its validator, default and meaning, and the typed `HeraldConfig` they
 * become. Slices add their own fragments (src/settings/fragment.ts); `loadSettings` (load.ts) composes
 * both. Nothing here names an aggregate.
 */
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import {
  connectionEnvShape,
  connectionSettings,
  type KafkaSecurity,
  type RedisConnection,
  SECRET_VARIABLES,
} from './connections.js';
import { describeSetting as d, type EnvOf, type EnvSection } from './fragment.js';
import { type OidcSettings, oidcSection, oidcSettings, oidcWarnings } from './oidc.js';
import { flag, identifier, nonNegativeInt, positiveInt, url, urlList } from './validators.js';

const c = connectionEnvShape;

export const databaseSection = {
  title: 'PostgreSQL',
  env: {
    DATABASE_URL: d(
      url(['postgres', 'postgresql']),
      "PostgreSQL URL; may carry libpq's `sslmode`, `sslrootcert`, `sslcert`, `sslkey` (the `HERALD_DB_SSL*` variables win over them)",
    ),
    HERALD_DB_SSLMODE: c.HERALD_DB_SSLMODE,
    HERALD_DB_SSL_CA_PATH: c.HERALD_DB_SSL_CA_PATH,
    HERALD_DB_SSL_CERT_PATH: c.HERALD_DB_SSL_CERT_PATH,
    HERALD_DB_SSL_KEY_PATH: c.HERALD_DB_SSL_KEY_PATH,
    HERALD_SCHEMA: d(identifier.default('herald'), 'schema for all tables (also prefixes NOTIFY channels)'),
    HERALD_DB_POOL_SIZE: d(positiveInt.default(10), 'connections per process'),
  },
  secretVariables: ['DATABASE_URL'],
} satisfies EnvSection;

export const amqpSection = {
  title: 'RabbitMQ',
  env: {
    AMQP_URL: d(
      urlList(['amqp', 'amqps']).optional(),
      "RabbitMQ URL (required by the worker; the relay needs it or `KAFKA_BROKERS`); `amqps://` for TLS, verified against the URL's host name (or its `server_name_indication` parameter). A cluster: its nodes' URLs separated by commas, one scheme for all; Herald connects to the first that answers and moves to another when a connection is lost (ADR 0037)",
    ),
    HERALD_AMQP_CA_PATH: c.HERALD_AMQP_CA_PATH,
    HERALD_AMQP_CERT_PATH: c.HERALD_AMQP_CERT_PATH,
    HERALD_AMQP_KEY_PATH: c.HERALD_AMQP_KEY_PATH,
    HERALD_AMQP_QUEUE_TYPE: d(
      z.enum(['quorum', 'classic']).default('quorum'),
      '`quorum` or `classic` for declared queues',
    ),
  },
  secretVariables: ['AMQP_URL'],
} satisfies EnvSection;

export const redisSection = {
  title: 'Redis',
  env: {
    REDIS_URL: d(
      url(['redis', 'rediss']).optional(),
      'Redis for de-duplicating work across replicas where a slice uses it (optional: correctness never depends on it); `rediss://` for TLS',
    ),
    HERALD_REDIS_USERNAME: c.HERALD_REDIS_USERNAME,
    HERALD_REDIS_PASSWORD: c.HERALD_REDIS_PASSWORD,
    HERALD_REDIS_CA_PATH: c.HERALD_REDIS_CA_PATH,
    HERALD_REDIS_CERT_PATH: c.HERALD_REDIS_CERT_PATH,
    HERALD_REDIS_KEY_PATH: c.HERALD_REDIS_KEY_PATH,
  },
  secretVariables: ['REDIS_URL', 'HERALD_REDIS_PASSWORD'],
} satisfies EnvSection;

export const kafkaSection = {
  title: 'Kafka',
  env: {
    KAFKA_BROKERS: d(
      z
        .string()
        .regex(/^[^,\s]+:\d+(,[^,\s]+:\d+)*$/, 'must be host:port[,host:port…]')
        .optional(),
      "`host:port[,…]`: the relay's Kafka sink and the Kafka consumers",
    ),
    HERALD_KAFKA_CREATE_TOPICS: d(
      flag('false'),
      "create missing topics (the relay's destinations, a consumer's topic and its `.retry`/`.dead`); else a missing destination topic is unroutable",
    ),
    HERALD_KAFKA_TOPIC_PARTITIONS: d(
      positiveInt.max(10_000).optional(),
      'partitions of topics Herald creates',
      'broker default',
    ),
    HERALD_KAFKA_REPLICATION_FACTOR: d(
      positiveInt.max(100).optional(),
      'replication factor of topics Herald creates',
      'broker default',
    ),
    HERALD_KAFKA_SECURITY_PROTOCOL: c.HERALD_KAFKA_SECURITY_PROTOCOL,
    HERALD_KAFKA_SASL_MECHANISM: c.HERALD_KAFKA_SASL_MECHANISM,
    HERALD_KAFKA_SASL_USERNAME: c.HERALD_KAFKA_SASL_USERNAME,
    HERALD_KAFKA_SASL_PASSWORD: c.HERALD_KAFKA_SASL_PASSWORD,
    HERALD_KAFKA_CA_PATH: c.HERALD_KAFKA_CA_PATH,
    HERALD_KAFKA_CERT_PATH: c.HERALD_KAFKA_CERT_PATH,
    HERALD_KAFKA_KEY_PATH: c.HERALD_KAFKA_KEY_PATH,
  },
  secretVariables: ['HERALD_KAFKA_SASL_PASSWORD'],
} satisfies EnvSection;

export const processSection = {
  title: 'Process',
  env: {
    HERALD_LOG_LEVEL: d(
      z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
      'pino level',
    ),
    HERALD_POD: d(
      z.string().min(1).optional(),
      'pod name in logs, events and outbox locks',
      '`herald-<pid>`',
    ),
  },
} satisfies EnvSection;

export const relaySection = {
  title: 'Relay',
  env: {
    HERALD_RELAY_BATCH_SIZE: d(positiveInt.max(10_000).default(500), 'rows claimed per relay batch'),
    HERALD_RELAY_IN_FLIGHT: d(positiveInt.max(100_000).default(2_000), 'unconfirmed publishes per relay'),
    HERALD_RELAY_LOCK_SECONDS: d(
      positiveInt.default(30),
      "lease on claimed rows (a dead relay's rows return after it)",
    ),
    HERALD_RELAY_MAX_ATTEMPTS: d(positiveInt.default(5), 'failed publishes before a row is `dead`'),
    HERALD_RELAY_BACKOFF_BASE_MS: d(
      positiveInt.default(1_000),
      'first retry delay (exponential backoff with jitter)',
    ),
    HERALD_RELAY_BACKOFF_MAX_MS: d(positiveInt.default(300_000), 'longest retry delay'),
    HERALD_RELAY_IDLE_POLL_MS: d(positiveInt.default(5_000), 'fallback poll when no NOTIFY arrives'),
    HERALD_RELAY_INLINE_PUBLISH: d(
      flag('true'),
      'a role that commits outbox rows publishes them itself right after the commit (ADR 0024); the relays take whatever it does not mark within `HERALD_RELAY_LOCK_SECONDS`',
    ),
    HERALD_RELAY_RECOVERY_COOLDOWN_SECONDS: d(
      nonNegativeInt.default(600),
      'dead rows are re-queued after this long…',
    ),
    HERALD_RELAY_RECOVERY_MAX_ROUNDS: d(
      nonNegativeInt.default(3),
      '…this many times, then left dead for investigation',
    ),
    HERALD_RELAY_RETENTION_HOURS: d(
      nonNegativeInt.default(168),
      'sent rows are pruned after this (the event log keeps the audit)',
    ),
    HERALD_NOTIFY_COALESCE_MS: d(
      nonNegativeInt.default(20),
      "at most one NOTIFY per channel per process per interval (not the scanner's relay wake-up after a claim transaction: one per transaction, at once)",
    ),
  },
} satisfies EnvSection;

export const scannerSection = {
  title: 'Scanner',
  env: {
    HERALD_SCANNER_BATCH_SIZE: d(
      positiveInt.max(10_000).default(500),
      'states claimed per sweep transaction',
    ),
    HERALD_SCANNER_POLL_MS: d(
      positiveInt.default(30_000),
      'scanner fallback poll (and wake-up horizon: a commit leaving something due within it wakes the scanners)',
    ),
    HERALD_SCANNER_MAX_RECLAIMS_PER_PASS: d(
      positiveInt.default(100),
      'stale recovery reclaims at most this many claims per scanner pass',
    ),
    HERALD_MESSAGE_LOST_AFTER_SECONDS: d(
      positiveInt.default(86_400),
      "a claim's message published this long ago that no consumer settled is presumed lost (a purged queue), and the claim recoverable",
    ),
  },
} satisfies EnvSection;

export const consumerSection = {
  title: 'Consumers',
  env: {
    HERALD_CONSUMER_PREFETCH: d(positiveInt.max(65_535).default(32), 'in-flight messages per consumer'),
    HERALD_CONSUMER_MAX_ATTEMPTS: d(
      positiveInt.default(5),
      'attempts before a message goes to `<queue>.dead`',
    ),
    HERALD_CONSUMER_RETRY_DELAY_MS: d(positiveInt.default(10_000), 'delay of `<queue>.retry.<delay>ms`'),
    HERALD_CONSUMER_BATCH_SIZE: d(
      positiveInt.max(1_000).default(32),
      'deliveries per transaction for handlers with a batch form (1: one at a time)',
    ),
  },
} satisfies EnvSection;

export const projectorSection = {
  title: 'Projector',
  env: {
    HERALD_PROJECTOR_BATCH_SIZE: d(
      positiveInt.max(100_000).default(1_000),
      'events (or receipts) applied per projection transaction',
    ),
    HERALD_PROJECTOR_POLL_MS: d(positiveInt.default(1_000), 'projector sleep when caught up'),
    HERALD_PROJECTOR_LEASE_SECONDS: d(
      positiveInt.default(30),
      'one active projector per projection; a standby takes over after this',
    ),
    HERALD_RECEIPT_RETENTION_DAYS: d(
      positiveInt.default(400),
      'publish receipts kept this long (the outbox only `HERALD_RELAY_RETENTION_HOURS`)',
    ),
  },
} satisfies EnvSection;

export const maintenanceSection = {
  title: 'Maintenance',
  env: {
    HERALD_MAINTENANCE_BATCH_SIZE: d(
      positiveInt.max(100_000).default(10_000),
      'rows per maintenance statement (a round runs statements until one comes back short, at most 50)',
    ),
    HERALD_OUTBOX_RECOVERY_INTERVAL_SECONDS: d(
      positiveInt.default(30),
      '`outbox-recovery` (dead rows re-queued after `HERALD_RELAY_RECOVERY_COOLDOWN_SECONDS`, up to `HERALD_RELAY_RECOVERY_MAX_ROUNDS`) and `outbox-ordered-heads`',
    ),
    HERALD_OUTBOX_PRUNE_INTERVAL_SECONDS: d(
      positiveInt.default(300),
      '`outbox-sent-pruning` (after `HERALD_RELAY_RETENTION_HOURS`) and `outbox-skipped-pruning`',
    ),
    HERALD_OUTBOX_SKIPPED_RETENTION_DAYS: d(
      positiveInt.default(30),
      'skipped outbox rows (an operator gave up on them) are deleted after this',
    ),
    HERALD_RECEIPT_PRUNE_INTERVAL_SECONDS: d(positiveInt.default(600), '`receipt-retention`'),
    HERALD_INBOX_RETENTION_DAYS: d(
      positiveInt.default(30),
      'settled inbox rows are deleted after this (`dead` rows are kept); keep it far above any redelivery window',
    ),
    HERALD_INBOX_PRUNE_INTERVAL_SECONDS: d(
      positiveInt.default(600),
      "`inbox-retention`, and the slices' retention tasks that follow it",
    ),
    HERALD_IDEMPOTENCY_EXPIRY_INTERVAL_SECONDS: d(
      positiveInt.default(600),
      '`idempotency-expiry` (keys past their `expires_at`)',
    ),
    HERALD_STREAM_PRUNE_INTERVAL_SECONDS: d(positiveInt.default(3_600), '`stream-retention:<side stream>`'),
  },
} satisfies EnvSection;

export const apiSection = {
  title: 'HTTP API',
  env: {
    HERALD_API_HOST: d(
      z.string().min(1).default('127.0.0.1'),
      'where `herald api` listens (`0.0.0.0` in a pod)',
    ),
    HERALD_API_PORT: d(nonNegativeInt.max(65_535).default(8080), 'its port (`0`: any free port)'),
    HERALD_API_BODY_LIMIT_BYTES: d(
      positiveInt.max(100 * 1024 * 1024).default(1_048_576),
      'largest request body (larger: 413)',
    ),
    HERALD_API_SHUTDOWN_TIMEOUT_SECONDS: d(
      positiveInt.default(10),
      'on SIGTERM, in-flight requests get this long before their connections are closed',
    ),
    HERALD_API_SESSION_IDLE_MINUTES: d(
      positiveInt.max(7 * 24 * 60).default(60),
      'a dashboard sign-in session unused this long expires (database clock); revoking the key ends its sessions at once',
    ),
    HERALD_API_SESSION_SECURE: d(
      z.enum(['auto', 'true', 'false']).default('auto'),
      "the session cookie's `Secure` flag: `auto` sets it when the request came over TLS (or `X-Forwarded-Proto: https` with `HERALD_API_TRUST_PROXY`), `true` always, `false` never",
    ),
    HERALD_API_TRUST_PROXY: d(
      z
        .string()
        .regex(
          /^(true|false|[0-9a-f.:/]+(,[0-9a-f.:/]+)*)$/i,
          'must be true, false, or the proxies’ addresses/CIDRs separated by commas',
        )
        .default('false'),
      'trust `X-Forwarded-For` / `X-Forwarded-Proto` (behind a TLS-terminating proxy): `true` trusts every hop (the client address is then the left-most, which a client can forge); the proxies’ addresses/CIDRs (`10.0.0.0/8,127.0.0.1`) take the address the last trusted proxy saw. The client address is what the authentication throttle counts by',
    ),
    HERALD_API_AUTH_FAILURE_LIMIT: d(
      nonNegativeInt.max(1_000_000).default(20),
      'failed authentications (a wrong, malformed or revoked API key, a failed sign-in) one client address may make within `HERALD_API_AUTH_FAILURE_WINDOW_SECONDS`; then its requests with credentials answer 429 with `Retry-After` until the window ends, across every API process (`0`: no throttle)',
    ),
    HERALD_API_AUTH_FAILURE_WINDOW_SECONDS: d(
      positiveInt.max(86_400).default(60),
      'the window of `HERALD_API_AUTH_FAILURE_LIMIT` (database clock)',
    ),
    HERALD_API_STREAMS_MAX: d(
      positiveInt.max(100_000).default(1_000),
      'live streams (`GET /v1/stream`) one API process serves at once (more: 503 naming this limit)',
    ),
    HERALD_API_STREAMS_PER_ORGANIZATION: d(
      positiveInt.max(100_000).default(100),
      "live streams one organization may hold open on one API process (more: 429 naming this limit, with Retry-After), so one organization cannot take every process's slots",
    ),
    HERALD_API_STREAMS_PER_KEY: d(
      positiveInt.max(100_000).default(20),
      'live streams one API key (or its sign-in sessions) may hold open on one API process (more: 429 naming this limit, with Retry-After)',
    ),
    HERALD_IDEMPOTENCY_TTL_HOURS: d(
      positiveInt.max(24 * 365).default(24),
      'an Idempotency-Key is remembered this long; then the same key is a new request (`herald maintenance` deletes expired keys)',
    ),
    HERALD_DEMO_API_SECONDS: d(
      nonNegativeInt.max(86_400).default(0),
      '`npm run demo` keeps its API up this long after its run',
    ),
  },
} satisfies EnvSection;

export const observabilitySection = {
  title: 'Metrics and health',
  env: {
    HERALD_METRICS_HOST: d(
      z.string().min(1).default('0.0.0.0'),
      "address of every long-running role's `/metrics`, `/healthz`, `/readyz` endpoint (all interfaces: reachable from the pod's network; `127.0.0.1` keeps it local)",
    ),
    HERALD_METRICS_PORT: d(
      nonNegativeInt.max(65_535).default(9464),
      'its port; the roles of one process (`herald all`, the demo) share one endpoint; several processes on one host need one port each; `0` takes any free port (logged)',
    ),
    HERALD_READY_TIMEOUT_MS: d(
      positiveInt.max(60_000).default(1_000),
      '`/readyz`: bound on its database reads (`select 1`, leases, lag)',
    ),
    HERALD_READY_MAX_LEASE_AGE_SECONDS: d(
      nonNegativeInt.optional(),
      "`/readyz` fails when a required lease (a projection's `projector:<name>`, a slice's poller lease) is missing or was renewed longer ago (seed 003); `0`: not checked",
      '2 × `HERALD_PROJECTOR_LEASE_SECONDS` (60)',
    ),
    HERALD_READY_MAX_PROJECTION_LAG_SECONDS: d(
      nonNegativeInt.default(300),
      "`/readyz` fails when a projection's oldest unapplied event or receipt is older; `0`: not checked",
    ),
    HERALD_READY_STARTUP_GRACE_SECONDS: d(
      nonNegativeInt.default(60),
      "after start, lease and lag failures are reported but do not fail `/readyz` for this long (seed 003's startup wait)",
    ),
  },
} satisfies EnvSection;

export const tracingSection = {
  title: 'Tracing',
  env: {
    OTEL_EXPORTER_OTLP_ENDPOINT: d(
      z.url({ protocol: /^https?$/ }).optional(),
      'an http(s) OTLP endpoint turns tracing on (ADR 0017)',
    ),
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: d(
      z.url({ protocol: /^https?$/ }).optional(),
      'the same, for traces only',
    ),
    OTEL_SDK_DISABLED: d(z.enum(['true', 'false']).optional(), '`true` turns tracing off again'),
    OTEL_SERVICE_NAME: d(
      z.string().min(1).optional(),
      "the traces' service name (`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS` as the specification says)",
      '`herald-<role>`',
    ),
    OTEL_BSP_SCHEDULE_DELAY: d(nonNegativeInt.default(5_000), 'ms between span exports'),
  },
} satisfies EnvSection;

/** The generic sections, in the reference's order. */
export const CORE_SECTIONS = [
  databaseSection,
  amqpSection,
  redisSection,
  kafkaSection,
  processSection,
  relaySection,
  scannerSection,
  consumerSection,
  projectorSection,
  maintenanceSection,
  apiSection,
  oidcSection,
  observabilitySection,
  tracingSection,
] as const;

export const CORE_SECRET_VARIABLES: readonly string[] = [...SECRET_VARIABLES, ...oidcSection.secretVariables];

/** Every generic variable → its validator. */
export const CORE_ENV = {
  ...databaseSection.env,
  ...amqpSection.env,
  ...redisSection.env,
  ...kafkaSection.env,
  ...processSection.env,
  ...relaySection.env,
  ...scannerSection.env,
  ...consumerSection.env,
  ...projectorSection.env,
  ...maintenanceSection.env,
  ...apiSection.env,
  ...oidcSection.env,
  ...observabilitySection.env,
  ...tracingSection.env,
};

/** The validated generic variables. */
export type CoreEnv = EnvOf<typeof CORE_ENV>;

/**
 * The generic configuration every role and the library read. A slice's settings sit beside these
 * under the slice's key (`config.sms`, `config.cron`), typed by its fragment.
 */
export interface HeraldConfig {
  readonly databaseUrl: string;
  readonly schema: string;
  readonly dbPoolSize: number;
  readonly amqpUrl: string | undefined;
  readonly amqpQueueType: 'quorum' | 'classic';
  /** REDIS_URL as given; `redis` is how to connect (ACL credentials and TLS, ADR 0015). */
  readonly redisUrl: string | undefined;
  readonly redis: RedisConnection | undefined;
  readonly kafkaBrokers: readonly string[];
  readonly kafka: KafkaSettings;
  readonly logLevel: CoreEnv['HERALD_LOG_LEVEL'];
  readonly pod: string;
  readonly relay: RelaySettings;
  readonly notifyCoalesceMs: number;
  readonly consumer: ConsumerSettings;
  readonly scanner: ScannerSettings;
  readonly projector: ProjectorSettings;
  readonly maintenance: MaintenanceSettings;
  readonly api: ApiSettings;
  readonly observability: ObservabilitySettings;
  readonly tracing: TracingSettings;
  /** Settings that work together but weaken a guarantee; logged by every role at start-up. */
  readonly warnings: readonly string[];
  /** Every secret value of the configuration (passwords): the logger scrubs them from its output. */
  readonly secrets: readonly string[];
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
  /** Trust X-Forwarded-* headers (behind a TLS-terminating proxy): every hop, or the proxies' addresses/CIDRs. */
  readonly trustProxy: boolean | string;
  /** Failed authentications one client address may make per window (0: no throttle). */
  readonly authFailureLimit: number;
  readonly authFailureWindowMs: number;
  /** Live streams (GET /v1/stream) per API process: in all, per organization, per API key. */
  readonly streams: {
    readonly maxClients: number;
    readonly perOrganization: number;
    readonly perKey: number;
  };
  /** Bearer JWTs of an OpenID Connect issuer and the dashboard's sign-in through it (ADR 0035); undefined: keys only. */
  readonly oidc: OidcSettings | undefined;
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
  /** Role processes publish the rows they commit themselves, the relays being the fallback (ADR 0024). */
  readonly inlinePublish: boolean;
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

/** Generic settings that are each valid but contradict each other; each refusal names both variables. */
function refuseContradictions(e: CoreEnv): void {
  if (e.HERALD_RELAY_BACKOFF_MAX_MS < e.HERALD_RELAY_BACKOFF_BASE_MS) {
    throw new ConfigError('HERALD_RELAY_BACKOFF_MAX_MS', 'must be >= HERALD_RELAY_BACKOFF_BASE_MS');
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

/** Generic combinations that work but weaken a guarantee (each names both variables). */
function contradictionWarnings(e: CoreEnv): string[] {
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

/** HERALD_API_TRUST_PROXY as Fastify's `trustProxy`: a boolean, or the proxies' addresses/CIDRs. */
function trustProxyOf(value: string): boolean | string {
  return value === 'true' || value === 'false' ? value === 'true' : value;
}

/** The generic configuration from its validated variables; throws ConfigError on a contradiction. */
export function coreConfig(e: CoreEnv, defaults: { pod?: string } = {}): HeraldConfig {
  const connections = connectionSettings(e);
  refuseContradictions(e);
  return {
    databaseUrl: connections.databaseUrl,
    schema: e.HERALD_SCHEMA,
    dbPoolSize: e.HERALD_DB_POOL_SIZE,
    amqpUrl: connections.amqpUrl,
    amqpQueueType: e.HERALD_AMQP_QUEUE_TYPE,
    redisUrl: e.REDIS_URL,
    redis: connections.redis,
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
      inlinePublish: e.HERALD_RELAY_INLINE_PUBLISH,
      recoveryCooldownSeconds: e.HERALD_RELAY_RECOVERY_COOLDOWN_SECONDS,
      recoveryMaxRounds: e.HERALD_RELAY_RECOVERY_MAX_ROUNDS,
      retentionHours: e.HERALD_RELAY_RETENTION_HOURS,
    },
    notifyCoalesceMs: e.HERALD_NOTIFY_COALESCE_MS,
    scanner: {
      batchSize: e.HERALD_SCANNER_BATCH_SIZE,
      pollMs: e.HERALD_SCANNER_POLL_MS,
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
      streamPruneIntervalMs: e.HERALD_STREAM_PRUNE_INTERVAL_SECONDS * 1000,
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
      trustProxy: trustProxyOf(e.HERALD_API_TRUST_PROXY),
      authFailureLimit: e.HERALD_API_AUTH_FAILURE_LIMIT,
      authFailureWindowMs: e.HERALD_API_AUTH_FAILURE_WINDOW_SECONDS * 1000,
      streams: {
        maxClients: e.HERALD_API_STREAMS_MAX,
        perOrganization: e.HERALD_API_STREAMS_PER_ORGANIZATION,
        perKey: e.HERALD_API_STREAMS_PER_KEY,
      },
      oidc: oidcSettings(e),
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
    warnings: [...contradictionWarnings(e), ...oidcWarnings(e), ...connections.warnings],
    secrets: [
      ...connections.secrets,
      ...(e.HERALD_API_OIDC_CLIENT_SECRET === undefined ? [] : [e.HERALD_API_OIDC_CLIENT_SECRET]),
    ],
  };
}
