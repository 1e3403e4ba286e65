/**
 * A network partition of one Kafka broker (ADR 0038): broker 3, leading a partition of the topic, is cut
 * off from its two peers (controller quorum and replication) and from the clients, which are on the
 * majority's side, while the relay publishes with acks=all and a consumer reads. The controllers fence it and the majority takes over its leadership with an ISR of
 * two (min.insync.replicas=2): every row is still published, and after the heal, once broker 3 is back
 * in every ISR, each message id has exactly one effect at the consumer (invariants 3 and 4).
 * This file PARTITIONS broker 3 of kafka-cluster and heals it.
 */
import { Kafka, logLevel } from 'kafkajs';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logger.js';
import { OutboxRelay } from '../../src/outbox/relay.js';
import { createSinks } from '../../src/roles/sinks.js';
import { waitFor } from '../../src/testing/wait.js';
import { consumeKafka } from '../../src/worker/consume-kafka.js';
import type { Consumer } from '../../src/worker/delivery-policy.js';
import { outboxCounts, seedOutbox } from '../outbox/support/fixtures.js';
import type { TestDatabase } from '../support/services.js';
import { uniqueName } from '../support/services.js';
import { createEffects, effectHandler, effects } from './support/effects.js';
import { createHaDatabase, requireHa, services } from './support.js';

const brokers = requireHa('HERALD_HA_KAFKA_BROKERS').split(',');
const topic = uniqueName('ha_kpart');
// Asks broker 1 (on the majority's side): a cut-off broker serves stale metadata.
const admin = new Kafka({
  clientId: 'herald-ha-kpart',
  brokers: brokers.slice(0, 1),
  logLevel: logLevel.NOTHING,
  connectionTimeout: 1_000,
  requestTimeout: 5_000,
}).admin();
let t: TestDatabase;
let relay: OutboxRelay | undefined;
let consumer: Consumer | undefined;
let close: (() => Promise<void>) | undefined;
let partitioned = false;

/** Per partition of the topic: its leader and ISR, as the majority's metadata says. */
async function layout(): Promise<{ leader: number; isr: number[] }[]> {
  const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
  return (topics[0]?.partitions ?? []).map((p) => ({ leader: p.leader, isr: [...p.isr].sort() }));
}

beforeAll(async () => {
  t = await createHaDatabase();
  await createEffects(t.db);
  await admin.connect();
});

afterAll(async () => {
  if (partitioned) await services('heal', 'kafka-cluster', '3');
  await consumer?.stop();
  await relay?.stop();
  await close?.();
  await admin.deleteTopics({ topics: [topic, `${topic}.retry`, `${topic}.dead`] }).catch(() => {});
  await admin.disconnect();
  await t?.drop();
}, 240_000);

describe('Kafka: one broker partitioned from its peers', () => {
  it('the majority keeps publishing with acks=all and min ISR 2; nothing doubles after the heal', async () => {
    const config = t.config({
      HERALD_RELAY_IDLE_POLL_MS: '100',
      HERALD_RELAY_BACKOFF_BASE_MS: '50',
      HERALD_RELAY_BACKOFF_MAX_MS: '1000',
    });
    await admin.createTopics({
      topics: [topic, `${topic}.retry`, `${topic}.dead`].map((name) => ({ topic: name, numPartitions: 3 })),
      waitForLeaders: false, // kafkajs' own wait gives up while a broker does not know the topic yet
    });
    await waitFor(async () => (await layout()).filter((p) => p.leader > 0).length === 3, {
      timeoutMs: 30_000,
      intervalMs: 200,
      what: "the topic's leaders",
    });
    // A topic just created is not yet known to every broker: the first join may be refused.
    consumer = await waitFor(
      () =>
        consumeKafka(
          { db: t.db, brokers, logger: process.env.HA_DEBUG ? pino({ level: 'info' }) : silentLogger },
          topic,
          effectHandler('kpart'),
          { consumer: 'ha-kpart', retryDelayMs: 1_000 },
        ),
      { timeoutMs: 30_000, intervalMs: 500, what: 'the consumer joined' },
    );
    const sinks = createSinks(
      config,
      process.env.HA_DEBUG ? pino({ level: 'warn' }) : silentLogger,
      'herald-ha-kpart-relay',
    );
    close = async () => {
      await sinks.kafka?.close();
      await sinks.amqp?.close();
    };
    relay = new OutboxRelay({
      db: t.db,
      owner: 'ha-kpart',
      sinks: { kafka: sinks.kafka! },
      settings: config.relay,
    });
    await relay.start();

    const seeded: string[] = [];
    const seed = async (count: number) => {
      seeded.push(...(await seedOutbox(t.db, { count, sink: 'kafka', destination: topic })).messageIds);
    };
    const t0 = Date.now();
    const mark = (what: string) => console.info(`${((Date.now() - t0) / 1000).toFixed(1)} s ${what}`);
    const allSent = (what: string) =>
      waitFor(async () => (await outboxCounts(t.db)).sent === seeded.length, { timeoutMs: 60_000, what });
    const allHandled = (what: string) =>
      waitFor(async () => (await effects(t.db)).ids.size === seeded.length, { timeoutMs: 60_000, what });

    await seed(50);
    await allHandled('the first rows handled');
    mark('the first rows handled');
    const before = await layout();
    expect(before.map((p) => p.isr)).toEqual(before.map(() => [1, 2, 3]));
    expect(before.map((p) => p.leader)).toContain(3);

    partitioned = true;
    // --clients: the relay, the consumer and this test are on the majority's side; broker 3 refuses them.
    // (Cut from its peers only, broker 3 served its stale metadata to clients and the consumer stalled
    // until the heal; with client packets silently dropped, kafkajs waited out 4-6 request timeouts.)
    await services('partition', '--clients', 'kafka-cluster', '3');
    // Rows keep coming while the controllers fence broker 3 (broker.session.timeout.ms, 9 s) and the
    // majority takes its partitions over.
    await waitFor(
      async () => {
        await seed(10);
        const now = await layout();
        return now.every((p) => p.leader !== 3 && p.leader >= 0 && !p.isr.includes(3));
      },
      { timeoutMs: 60_000, intervalMs: 500, what: 'broker 3 fenced: out of every ISR, leading nothing' },
    );
    mark('fenced');
    // The majority serves: acks=all with an ISR of two.
    await seed(50);
    await allSent('rows published while broker 3 is cut off');
    mark('rows published while broker 3 is cut off');
    await allHandled('rows handled while broker 3 is cut off');
    mark('rows handled while broker 3 is cut off');

    await services('heal', 'kafka-cluster', '3');
    partitioned = false;
    mark('healed');
    expect((await layout()).map((p) => p.isr)).toEqual(before.map(() => [1, 2, 3]));
    await seed(50);
    await allHandled('rows handled after the heal');
    mark('rows handled after the heal');

    const { ids, twice } = await effects(t.db);
    expect(twice).toEqual([]);
    expect([...ids].sort()).toEqual([...seeded].sort());
    expect((await outboxCounts(t.db)).dead).toBe(0);
    console.info(`kafka partition: ${seeded.length} rows, inbox duplicates ${consumer.stats.duplicates}`);
  });
});
