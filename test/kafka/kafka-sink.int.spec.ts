/**
 * KafkaSink against the real broker: the MessageSink port's shared contract (the same suite the
 * AmqpSink runs), then what is Kafka's own: keys and partitions, headers, timestamps, topic creation,
 * and a refused message (over the topic's max.message.bytes) isolated from the batch it came in.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KafkaSink } from '../../src/adapters/kafka/kafka-sink.js';
import { describeSinkContract, outbound, type SinkTarget } from '../../src/testing/sink-contract.js';
import { waitFor } from '../../src/testing/wait.js';
import { requireEnv, uniqueName } from '../support/services.js';
import { KafkaFixture } from './support/kafka-fixture.js';

const MAX_BATCH = 64;
const brokers = () => requireEnv('KAFKA_BROKERS').split(',');

describeSinkContract('KafkaSink', async () => {
  const kafka = await KafkaFixture.open();
  return {
    inFlight: MAX_BATCH,
    makeSink: async () => new KafkaSink({ brokers: brokers(), maxBatchMessages: MAX_BATCH }),
    // Port 1 on loopback: nothing listens there, so connecting is refused at once.
    makeUnreachableSink: async () =>
      new KafkaSink({ brokers: ['127.0.0.1:1'], maxBatchMessages: MAX_BATCH, connectionTimeoutMs: 1_000 }),
    routableTarget: async (): Promise<SinkTarget> => {
      const topic = await kafka.topic('contract');
      const received = await kafka.consume(topic);
      return { destination: topic, routingKey: null, received: () => received };
    },
    unroutableTarget: () => ({ destination: uniqueName('herald_test_missing'), routingKey: null }),
    close: () => kafka.close(),
  };
});

describe('KafkaSink specifics', () => {
  let kafka: KafkaFixture;
  let sink: KafkaSink;

  beforeAll(async () => {
    kafka = await KafkaFixture.open();
    sink = new KafkaSink({ brokers: brokers(), maxBatchMessages: MAX_BATCH });
  });

  afterAll(async () => {
    await sink?.close();
    await kafka?.close();
  });

  it('keys by partition key (one partition per key, in publish order), with the message id, content type and row timestamp', async () => {
    const topic = await kafka.topic('keys', { partitions: 6 });
    const received = await kafka.consume(topic);
    const createdAt = new Date('2026-01-02T03:04:05Z');
    const batch = Array.from({ length: 60 }, (_, i) =>
      outbound(
        { destination: topic, routingKey: null },
        { partitionKey: `key-${i % 5}`, timestamp: createdAt, body: Buffer.from(JSON.stringify({ i })) },
      ),
    );
    const outcomes = await sink.publish(batch);
    expect(outcomes.every((o) => o.ok)).toBe(true);
    await waitFor(() => received.length >= 60, { what: 'all 60 messages' });

    const partitionsByKey = new Map<string, Set<number>>();
    for (const delivery of received) {
      const set = partitionsByKey.get(delivery.key!) ?? new Set();
      set.add(delivery.partition);
      partitionsByKey.set(delivery.key!, set);
    }
    for (const partitions of partitionsByKey.values()) expect(partitions.size).toBe(1);
    for (let k = 0; k < 5; k++) {
      const order = received.filter((d) => d.key === `key-${k}`).map((d) => JSON.parse(d.body).i as number);
      expect(order).toEqual([...order].sort((a, b) => a - b));
    }
    const first = received.find((d) => d.messageId === batch[0]!.messageId)!;
    expect(first.headers).toMatchObject({
      'x-herald-message-id': batch[0]!.messageId,
      'content-type': 'application/json',
      'x-correlation-id': batch[0]!.headers['x-correlation-id'],
      'x-test-n': String(batch[0]!.headers['x-test-n']),
    });
    expect(first.timestamp).toBe(createdAt.getTime());
  });

  it("reports each confirmed message's partition and offset as its broker reference", async () => {
    const topic = await kafka.topic('refs', { partitions: 3 });
    const received = await kafka.consume(topic);
    const target = { destination: topic, routingKey: null };
    // Two publish calls, so offsets continue from a partition's earlier batch.
    const first = Array.from({ length: 12 }, (_, i) => outbound(target, { partitionKey: `key-${i % 4}` }));
    const second = Array.from({ length: 9 }, (_, i) => outbound(target, { partitionKey: `key-${i % 3}` }));
    const outcomes = [...(await sink.publish(first)), ...(await sink.publish(second))];
    const sent = [...first, ...second];
    await waitFor(() => received.length >= sent.length, { what: 'all messages' });
    const actual = new Map(received.map((d) => [d.messageId, `${d.partition}/${d.offset}`]));
    for (const [index, outcome] of outcomes.entries()) {
      expect(outcome).toMatchObject({ ok: true, brokerRef: actual.get(sent[index]!.messageId) });
    }
    expect(new Set(outcomes.map((o) => (o.ok ? o.brokerRef : null))).size).toBe(sent.length);
  });

  it('rejects only the message the topic refuses (max.message.bytes), even when it poisons its record batch', async () => {
    // 1,500 bytes per record batch: a batch of small messages for one partition exceeds it as well,
    // so the sink must split until each refused message stands alone.
    const topic = await kafka.topic('small', {
      partitions: 2,
      configEntries: [{ name: 'max.message.bytes', value: '1500' }],
    });
    const received = await kafka.consume(topic);
    const target = { destination: topic, routingKey: null };
    const small = Array.from({ length: 20 }, (_, i) =>
      outbound(target, { partitionKey: `k${i % 2}`, body: Buffer.from(JSON.stringify({ i })) }),
    );
    const big = outbound(target, {
      partitionKey: 'k0',
      body: Buffer.from(JSON.stringify({ pad: 'x'.repeat(4_000) })),
    });
    const batch = [...small.slice(0, 10), big, ...small.slice(10)];
    const outcomes = await sink.publish(batch);
    const byId = new Map(outcomes.map((o) => [o.id, o]));
    expect(byId.get(big.id)).toMatchObject({ ok: false, failure: 'rejected' });
    expect(byId.get(big.id)?.ok === false && byId.get(big.id)).toMatchObject({
      error: expect.stringMatching(/MESSAGE_TOO_LARGE/),
    });
    for (const m of small) expect(byId.get(m.id)?.ok).toBe(true);
    await waitFor(() => new Set(received.map((d) => d.messageId)).size >= small.length, {
      what: 'the small messages',
    });
    expect(received.some((d) => d.messageId === big.messageId)).toBe(false);
    // a failed send replaces the idempotent producer; publishing goes on normally afterwards
    const after = await sink.publish([outbound(target, { partitionKey: 'k1' })]);
    expect(after[0]?.ok).toBe(true);
    expect(sink.stats.producers).toBeGreaterThan(1);
  });

  it('creates a missing topic when configured to, then delivers to it', async () => {
    const topic = uniqueName('herald_test_created');
    kafka.adopt(topic);
    const creating = new KafkaSink({
      brokers: brokers(),
      maxBatchMessages: MAX_BATCH,
      createTopics: { partitions: 3 },
    });
    try {
      const [outcome] = await creating.publish([outbound({ destination: topic, routingKey: null })]);
      expect(outcome?.ok).toBe(true);
      expect(await kafka.topicExists(topic)).toBe(true);
      const received = await kafka.consume(topic);
      await waitFor(() => received.length === 1, { what: 'the message in the created topic' });
    } finally {
      await creating.close();
    }
  });
});
