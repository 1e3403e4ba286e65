/**
 * kafkajs wiring shared by the Kafka sink, topic admin and consumer: one place that builds clients
 * (bounded connect and request timeouts, kafkajs logs routed into pino) and that turns kafkajs errors
 * into Herald's two publish failure classes (invariant 2: an outage delays, a refusal counts):
 * - `rejected`: the broker judged what was sent (message too large, invalid record, topic refused by
 *   policy or ACL); the attempt counts toward `dead`.
 * - `unavailable`: the broker never judged it (connection refused or lost, timeouts, leader elections,
 *   idempotent-producer state the broker no longer has); the row waits and is never made dead for it.
 * Every client connects with the configured security (HERALD_KAFKA_SECURITY_PROTOCOL, ADR 0015): TLS
 * verified against the CA file (the system's CAs without one) and the broker's advertised host name,
 * SASL PLAIN or SCRAM.
 */
import {
  Kafka,
  type KafkaConfig,
  type logCreator as LogCreator,
  type LogEntry,
  logLevel,
  type RetryOptions,
} from 'kafkajs';
import { ConfigError, errorMessage } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { PublishFailure } from '../../ports/message-sink.js';
import type { KafkaSecurity } from '../../settings/connections.js';
import { readTlsFiles } from '../tls-files.js';

export interface KafkaClientOptions {
  brokers: readonly string[];
  clientId: string;
  logger?: Logger;
  /** TCP connect bound per broker. Default 3 s. */
  connectionTimeoutMs?: number;
  /** Bound on any single request. Default 10 s. */
  requestTimeoutMs?: number;
  /** kafkajs' own retries for cluster-level operations (connect, metadata). */
  retry?: RetryOptions;
  /** TLS and SASL (config.kafka.security); absent: PLAINTEXT. */
  security?: KafkaSecurity | undefined;
}

/** kafkajs' `ssl` and `sasl` options for the configured security protocol. */
export function kafkaSecurityOptions(security: KafkaSecurity | undefined): Pick<KafkaConfig, 'ssl' | 'sasl'> {
  if (!security) return {};
  const options: Pick<KafkaConfig, 'ssl' | 'sasl'> = {};
  if (security.tls) options.ssl = readTlsFiles(security.tls, 'Kafka');
  if (security.sasl) {
    const { mechanism, username, password } = security.sasl;
    switch (mechanism) {
      case 'PLAIN':
        options.sasl = { mechanism: 'plain', username, password };
        break;
      case 'SCRAM-SHA-256':
        options.sasl = { mechanism: 'scram-sha-256', username, password };
        break;
      case 'SCRAM-SHA-512':
        options.sasl = { mechanism: 'scram-sha-512', username, password };
        break;
      default: {
        const unknown: never = mechanism;
        throw new ConfigError('HERALD_KAFKA_SASL_MECHANISM', `${String(unknown)} is not supported`);
      }
    }
  }
  return options;
}

/**
 * kafkajs warnings that are expected here and only noise: the idempotent producer's retries are
 * bounded on purpose (a publish must come back so the relay can back off; see KafkaSink).
 */
const EXPECTED_WARNINGS = [/Limiting retries for the idempotent producer/];

/**
 * kafkajs logs every protocol error and reconnect attempt at ERROR. Herald classifies and reports
 * those failures itself with message ids, so kafkajs' own lines are diagnostics: ERROR and WARN go to
 * pino at warn, everything below is dropped.
 */
export function pinoLogCreator(logger: Logger | undefined): LogCreator {
  return () =>
    ({ namespace, level, log }: LogEntry) => {
      if (!logger || level > logLevel.WARN) return;
      const { message, timestamp: _timestamp, logger: _name, ...extra } = log;
      if (EXPECTED_WARNINGS.some((pattern) => pattern.test(message))) return;
      logger.warn({ kafkajs: namespace, ...extra }, `kafkajs: ${message}`);
    };
}

export function createKafka(options: KafkaClientOptions): Kafka {
  const config: KafkaConfig = {
    clientId: options.clientId,
    brokers: [...options.brokers],
    connectionTimeout: options.connectionTimeoutMs ?? 3_000,
    requestTimeout: options.requestTimeoutMs ?? 10_000,
    logLevel: logLevel.WARN,
    logCreator: pinoLogCreator(options.logger),
    retry: options.retry ?? { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 },
    ...kafkaSecurityOptions(options.security),
  };
  return new Kafka(config);
}

/** Protocol errors that judge the message (or batch) itself: retrying the same bytes cannot help. */
const REJECTING_TYPES = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'CORRUPT_MESSAGE',
  'INVALID_TIMESTAMP',
  'INVALID_TOPIC_EXCEPTION',
  'TOPIC_AUTHORIZATION_FAILED',
  'POLICY_VIOLATION',
  'INVALID_REQUIRED_ACKS',
  'UNSUPPORTED_FOR_MESSAGE_FORMAT',
]);

/** The broker lost (or fenced) the idempotent producer's state: a new producer fixes it. */
const PRODUCER_STATE_TYPES = new Set([
  'OUT_OF_ORDER_SEQUENCE_NUMBER',
  'DUPLICATE_SEQUENCE_NUMBER',
  'INVALID_PRODUCER_EPOCH',
  'UNKNOWN_PRODUCER_ID',
  'INVALID_PRODUCER_ID_MAPPING',
]);

export interface KafkaFailure {
  failure: PublishFailure;
  /** For last_error: "rejected by broker: …" or "broker unavailable: …". */
  error: string;
  /** The protocol error type when there is one (MESSAGE_TOO_LARGE, …). */
  type?: string;
}

interface KafkaLikeError {
  name?: string;
  type?: string;
  retriable?: boolean;
  cause?: unknown;
  message?: string;
}

/** Classifies an error thrown by kafkajs (a send, a connect, an admin call). */
export function classifyKafkaError(error: unknown): KafkaFailure {
  // KafkaJSNumberOfRetriesExceeded wraps the last attempt's error: judge by that one.
  let inner: KafkaLikeError = (error ?? {}) as KafkaLikeError;
  for (let depth = 0; depth < 5 && inner.name === 'KafkaJSNumberOfRetriesExceeded' && inner.cause; depth++) {
    inner = inner.cause as KafkaLikeError;
  }
  const message = errorMessage(inner);
  const type = typeof inner.type === 'string' ? inner.type : undefined;
  if (inner.name === 'KafkaJSProtocolError' && type) {
    if (REJECTING_TYPES.has(type)) {
      return { failure: 'rejected', error: `rejected by broker: ${type}: ${message}`, type };
    }
    if (PRODUCER_STATE_TYPES.has(type)) {
      return { failure: 'unavailable', error: `broker unavailable: producer state lost (${type})`, type };
    }
    return { failure: 'unavailable', error: `broker unavailable: ${type}: ${message}`, type };
  }
  return { failure: 'unavailable', error: `broker unavailable: ${inner.name ?? 'Error'}: ${message}` };
}
