/**
 * Kafka over SASL_SSL (ADR 0015) on the kafka-tls instance of scripts/services: Herald's sink and
 * consumer toolkit publish and consume with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN, the broker's
 * certificate verified against the CA and the advertised host name (localhost); a wrong password, a
 * certificate that does not name the bootstrap host (127.0.0.1), one from another CA and an untrusted
 * client certificate are refused. kafka-tls is a second single-node broker: the shared one cannot gain a
 * SASL_SSL listener without a restart (KRaft refuses to change advertised listeners dynamically), so
 * this file starts the instance itself (ADR 0015 has the measurements).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafka } from '../../src/adapters/kafka/kafka-client.js';
import { KafkaSink } from '../../src/adapters/kafka/kafka-sink.js';
import type { HeraldSettings as HeraldConfig } from '../../src/config.js';
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../../src/logger.js';
import type { OutboundMessage } from '../../src/ports/message-sink.js';
import { waitFor } from '../../src/testing/wait.js';
import { consumeKafka, deadTopicName, retryTopicName } from '../../src/worker/consume-kafka.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/services.js';
import { startTlsServices, type TlsMaterial, tlsMaterial, tlsUrls } from '../support/tls.js';

let m: TlsMaterial;
let t: TestDatabase;
const topics: string[] = [];

beforeAll(async () => {
  await startTlsServices('kafka-tls');
  m = tlsMaterial();
  t = await createTestDatabase();
});

afterAll(async () => {
  if (topics.length > 0) {
    const admin = createKafka({
      brokers: kafkaConfig().kafkaBrokers,
      security: kafkaConfig().kafka.security,
      clientId: 'tls-test-cleanup',
    }).admin();
    await admin.connect();
    await admin.deleteTopics({ topics }).catch(() => {});
    await admin.disconnect();
  }
  await t?.drop();
});

function kafkaConfig(env: Record<string, string> = {}): HeraldConfig {
  return loadConfig({
    DATABASE_URL: t.url,
    HERALD_LOG_LEVEL: 'silent',
    KAFKA_BROKERS: tlsUrls.kafkaBrokers(),
    HERALD_KAFKA_SECURITY_PROTOCOL: 'SASL_SSL',
    HERALD_KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
    HERALD_KAFKA_SASL_USERNAME: 'herald',
    HERALD_KAFKA_SASL_PASSWORD_FILE: m.passwordFile,
    HERALD_KAFKA_CA_PATH: m.ca,
    ...env,
  });
}

function sinkOf(c: HeraldConfig): KafkaSink {
  return new KafkaSink({
    brokers: c.kafkaBrokers,
    security: c.kafka.security,
    clientId: uniqueName('herald-tls-test'),
    maxBatchMessages: 10,
    createTopics: { partitions: 1 },
    logger: silentLogger,
  });
}

const message = (topic: string, n: number): OutboundMessage => ({
  id: n,
  messageId: randomUUID(),
  destination: topic,
  routingKey: null,
  partitionKey: 'k',
  headers: { 'x-correlation-id': randomUUID() },
  body: Buffer.from(JSON.stringify({ n })),
  priority: 0,
});

describe('Kafka over SASL_SSL', () => {
  it.each(['SCRAM-SHA-512', 'SCRAM-SHA-256', 'PLAIN'])(
    'publishes (acks=all) and consumes through the toolkit with %s, the password from a file',
    async (mechanism) => {
      const c = kafkaConfig({ HERALD_KAFKA_SASL_MECHANISM: mechanism });
      expect(c.kafka.security).toMatchObject({
        protocol: 'SASL_SSL',
        sasl: { mechanism, username: 'herald', password: m.password },
      });
      const topic = uniqueName('herald_tls');
      topics.push(topic, retryTopicName(topic), deadTopicName(topic));
      const seen: string[] = [];
      const consumer = await consumeKafka(
        { db: t.db, brokers: c.kafkaBrokers, security: c.kafka.security, logger: silentLogger },
        topic,
        async (delivered) => {
          seen.push(delivered.messageId);
        },
        { consumer: uniqueName('tls-consumer'), topicPartitions: 1 },
      );
      const sink = sinkOf(c);
      try {
        const sent = message(topic, 1);
        expect(await sink.publish([sent])).toEqual([{ id: 1, ok: true, brokerRef: expect.any(String) }]);
        await waitFor(() => seen.includes(sent.messageId), {
          what: 'the message at the consumer',
          timeoutMs: 30_000,
        });
      } finally {
        await sink.close();
        await consumer.stop({ timeoutMs: 10_000 });
      }
    },
  );

  async function refusal(c: HeraldConfig): Promise<string> {
    const sink = sinkOf(c);
    try {
      const error = await sink.ensureConnected().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, 'the connection should have been refused').toBeInstanceOf(Error);
      return String((error as Error).message);
    } finally {
      await sink.close();
    }
  }

  it('refuses a wrong password', async () => {
    expect(
      await refusal(
        kafkaConfig({ HERALD_KAFKA_SASL_PASSWORD: 'not-the-password', HERALD_KAFKA_SASL_PASSWORD_FILE: '' }),
      ),
    ).toMatch(/SASL SCRAM SHA512 authentication failed/);
  });

  it('refuses plain text on the SASL_SSL listener', async () => {
    const plain = kafkaConfig({ HERALD_KAFKA_SECURITY_PROTOCOL: 'SASL_PLAINTEXT', HERALD_KAFKA_CA_PATH: '' });
    expect(plain.kafka.security.tls).toBeUndefined();
    expect(await refusal(plain)).toMatch(/Closed connection/);
  });

  it('refuses a broker whose certificate does not name the bootstrap host, or another CA issued', async () => {
    const byAddress = tlsUrls.kafkaBrokers().replace(/^localhost:/, '127.0.0.1:');
    expect(await refusal(kafkaConfig({ KAFKA_BROKERS: byAddress }))).toMatch(
      /IP: 127\.0\.0\.1 is not in the cert's list/,
    );
    expect(await refusal(kafkaConfig({ HERALD_KAFKA_CA_PATH: m.otherCa }))).toMatch(
      /self-signed certificate in certificate chain|unable to (get local issuer|verify the first) certificate/,
    );
  });

  it('presents a client certificate: one the CA issued is accepted, one from another CA refused', async () => {
    const ours = sinkOf(
      kafkaConfig({ HERALD_KAFKA_CERT_PATH: m.client.cert, HERALD_KAFKA_KEY_PATH: m.client.key }),
    );
    try {
      await ours.ensureConnected();
    } finally {
      await ours.close();
    }
    expect(
      await refusal(
        kafkaConfig({ HERALD_KAFKA_CERT_PATH: m.otherClient.cert, HERALD_KAFKA_KEY_PATH: m.otherClient.key }),
      ),
    ).toMatch(/alert certificate unknown/);
  });
});
