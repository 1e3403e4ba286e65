/**
 * A consumer whose topic a broker does not know yet (created a moment ago on a cluster whose metadata
 * has not caught up, as the HA tests met: "This server does not host this topic-partition") keeps
 * trying to start instead of failing its role.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, it } from 'vitest';
import { KafkaTopicConsumer } from '../../src/adapters/kafka/kafka-consumer.js';
import { waitFor } from '../../src/testing/wait.js';
import { requireEnv, uniqueName } from '../support/services.js';
import { KafkaFixture } from './support/kafka-fixture.js';

let kafka: KafkaFixture;
const brokers = () => requireEnv('KAFKA_BROKERS').split(',');

beforeAll(async () => {
  kafka = await KafkaFixture.open();
});
afterAll(async () => {
  await kafka?.close();
});

it('keeps trying to start until its topic exists, then consumes', async () => {
  const topic = uniqueName('herald_test_late');
  kafka.adopt(topic);
  const warnings: string[] = [];
  const logger = pino(
    { level: 'warn' },
    new Writable({
      write(chunk, _encoding, callback) {
        warnings.push(JSON.parse(String(chunk)).msg);
        callback();
      },
    }),
  );
  const received: string[] = [];
  const starting = KafkaTopicConsumer.start({
    brokers: brokers(),
    clientId: 'late-topic',
    groupId: uniqueName('late_group'),
    topic,
    logger,
    onDelivery: async (delivery) => {
      received.push(delivery.body.toString());
    },
  });
  // The first start failed on the missing topic; only now does the topic appear.
  await waitFor(async () => warnings.includes('kafka consumer could not start; trying again'), {
    what: 'a failed start being tried again',
    timeoutMs: 60_000,
  });
  await kafka.topic('late', { name: topic, partitions: 1 });
  const consumer = await starting;
  try {
    await kafka.produce(topic, [{ key: 'k', value: 'hello' }]);
    await waitFor(async () => received.includes('hello'), {
      what: 'the message consumed',
      timeoutMs: 30_000,
    });
  } finally {
    await consumer.stop();
  }
});
