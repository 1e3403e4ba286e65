/**
 * Pure parts of the Kafka integration: the configuration variables, and how kafkajs errors map to the
 * sink port's failure classes (rejected counts toward dead; unavailable waits, never dead).
 */
import { describe, expect, it } from 'vitest';
import { classifyKafkaError } from '../../src/adapters/kafka/kafka-client.js';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

const base = { DATABASE_URL: 'postgres://h@localhost/db' };

describe('Kafka configuration', () => {
  it('defaults: no brokers, topics not created, broker-default partitions', () => {
    const config = loadConfig(base);
    expect(config.kafkaBrokers).toEqual([]);
    expect(config.kafka).toEqual({
      createTopics: false,
      topicPartitions: undefined,
      replicationFactor: undefined,
      security: { protocol: 'PLAINTEXT', tls: undefined, sasl: undefined },
    });
  });

  it('reads brokers, topic creation, partitions and replication factor', () => {
    const config = loadConfig({
      ...base,
      KAFKA_BROKERS: 'a:9092,b:9093',
      HERALD_KAFKA_CREATE_TOPICS: 'true',
      HERALD_KAFKA_TOPIC_PARTITIONS: '12',
      HERALD_KAFKA_REPLICATION_FACTOR: '3',
    });
    expect(config.kafkaBrokers).toEqual(['a:9092', 'b:9093']);
    expect(config.kafka).toMatchObject({ createTopics: true, topicPartitions: 12, replicationFactor: 3 });
    expect(loadConfig({ ...base, HERALD_KAFKA_CREATE_TOPICS: '0' }).kafka.createTopics).toBe(false);
  });

  it('names the variable when a value is invalid', () => {
    expect(() => loadConfig({ ...base, HERALD_KAFKA_CREATE_TOPICS: 'yes' })).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, HERALD_KAFKA_CREATE_TOPICS: 'yes' })).toThrow(
      /HERALD_KAFKA_CREATE_TOPICS/,
    );
    expect(() => loadConfig({ ...base, HERALD_KAFKA_TOPIC_PARTITIONS: '0' })).toThrow(
      /HERALD_KAFKA_TOPIC_PARTITIONS/,
    );
  });
});

/** Error shapes as kafkajs builds them (name, type, retriable, cause). */
const protocolError = (type: string, retriable = false) =>
  Object.assign(new Error(`${type} message`), { name: 'KafkaJSProtocolError', type, retriable });

describe('classifyKafkaError', () => {
  it('rejects what the broker judged: too large, invalid record, refused topic', () => {
    for (const type of [
      'MESSAGE_TOO_LARGE',
      'RECORD_LIST_TOO_LARGE',
      'INVALID_RECORD',
      'TOPIC_AUTHORIZATION_FAILED',
    ]) {
      expect(classifyKafkaError(protocolError(type))).toMatchObject({ failure: 'rejected', type });
    }
    expect(classifyKafkaError(protocolError('MESSAGE_TOO_LARGE')).error).toMatch(
      /^rejected by broker: MESSAGE_TOO_LARGE/,
    );
  });

  it('judges a retries-exceeded error by its cause', () => {
    const wrapped = Object.assign(new Error('retries exceeded'), {
      name: 'KafkaJSNumberOfRetriesExceeded',
      cause: protocolError('MESSAGE_TOO_LARGE'),
    });
    expect(classifyKafkaError(wrapped)).toMatchObject({ failure: 'rejected', type: 'MESSAGE_TOO_LARGE' });
    const outage = Object.assign(new Error('retries exceeded'), {
      name: 'KafkaJSNumberOfRetriesExceeded',
      cause: Object.assign(new Error('Connection error: ECONNREFUSED'), { name: 'KafkaJSConnectionError' }),
    });
    expect(classifyKafkaError(outage)).toMatchObject({ failure: 'unavailable' });
    expect(classifyKafkaError(outage).error).toMatch(/^broker unavailable: KafkaJSConnectionError/);
  });

  it('treats outages, timeouts, leader changes, lost producer state and unknown errors as unavailable', () => {
    for (const error of [
      Object.assign(new Error('timeout'), { name: 'KafkaJSRequestTimeoutError' }),
      protocolError('LEADER_NOT_AVAILABLE', true),
      protocolError('NOT_ENOUGH_REPLICAS', true),
      protocolError('OUT_OF_ORDER_SEQUENCE_NUMBER'),
      protocolError('UNKNOWN_PRODUCER_ID'),
      new TypeError('a bug'),
      'a string',
      undefined,
    ]) {
      expect(classifyKafkaError(error).failure).toBe('unavailable');
    }
  });
});
