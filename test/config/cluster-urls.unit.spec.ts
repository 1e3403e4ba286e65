/**
 * Several nodes per broker (ADR 0037): AMQP_URL and KAFKA_BROKERS take a cluster's nodes as a comma
 * list; an invalid list stops startup naming the variable (and which URL of the list is wrong).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { amqpNode, amqpUrls } from '../../src/adapters/amqp/amqp-connection.js';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

const base = { DATABASE_URL: 'postgres://herald@127.0.0.1:5432/herald' };
const nodes =
  'amqp://herald:s3cret@10.0.0.1:5672,amqp://herald:s3cret@10.0.0.2:5672, amqp://herald:other@10.0.0.3';

const refused = (field: string, reason: RegExp = /./) =>
  expect.objectContaining({ name: ConfigError.name, field, message: expect.stringMatching(reason) });

describe('cluster URLs', () => {
  it('accepts several AMQP URLs and several Kafka brokers', () => {
    const config = loadConfig({ ...base, AMQP_URL: nodes, KAFKA_BROKERS: 'k1:9092,k2:9092,k3:9092' });
    expect(amqpUrls(config.amqpUrl ?? '').map(amqpNode)).toEqual([
      '10.0.0.1:5672',
      '10.0.0.2:5672',
      '10.0.0.3:5672',
    ]);
    expect(config.kafkaBrokers).toEqual(['k1:9092', 'k2:9092', 'k3:9092']);
  });

  it.each([
    [`${nodes},`, /URL 4 of 4 must start with amqp:\/\/ or amqps:\/\//],
    ['amqp://a:5672,http://b:5672', /URL 2 of 2 must start with amqp/],
    ['amqp://a:5672,amqps://b:5671', /share one scheme, got amqp and amqps/],
    ['amqp://a:5672,,amqp://b:5672', /URL 2 of 3/],
  ])('refuses AMQP_URL=%s naming AMQP_URL', (value, reason) => {
    expect(() => loadConfig({ ...base, AMQP_URL: value })).toThrow(refused('AMQP_URL', reason));
  });

  it('refuses a broker list with an empty entry naming KAFKA_BROKERS', () => {
    expect(() => loadConfig({ ...base, KAFKA_BROKERS: 'k1:9092,,k2:9092' })).toThrow(
      refused('KAFKA_BROKERS'),
    );
  });

  it('puts the TLS files on every node and scrubs every node password from logs', () => {
    const dir = mkdtempSync(join(tmpdir(), 'herald-cluster-urls-'));
    const ca = join(dir, 'ca.crt');
    writeFileSync(ca, 'not read here');
    const config = loadConfig({
      ...base,
      AMQP_URL: 'amqps://herald:pw1@mq1:5671,amqps://herald:pw2@mq2:5671',
      HERALD_AMQP_CA_PATH: ca,
    });
    const urls = amqpUrls(config.amqpUrl ?? '');
    expect(urls).toHaveLength(2);
    for (const url of urls) expect(new URL(url).searchParams.get('cacertfile')).toBe(ca);
    expect(config.secrets).toEqual(expect.arrayContaining(['pw1', 'pw2']));
  });
});
