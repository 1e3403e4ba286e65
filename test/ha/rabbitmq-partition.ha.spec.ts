/**
 * A network partition of one RabbitMQ node (ADR 0038): node 3 is cut off from its two peers while the
 * relay and a consumer are connected to it. pause_minority makes node 3 refuse (it closes its clients'
 * connections and its listener), the relay and the consumer move to the majority and keep going, and
 * after the heal every row's message id has exactly one effect at the consumer (invariants 3 and 4).
 * This file PARTITIONS node 3 of rabbitmq-cluster and heals it.
 */
import { connect as tcpConnect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AmqpConnection, amqpUrls } from '../../src/adapters/amqp/amqp-connection.js';
import { AmqpSink } from '../../src/adapters/amqp/amqp-sink.js';
import { silentLogger } from '../../src/logger.js';
import { OutboxRelay } from '../../src/outbox/relay.js';
import { waitFor } from '../../src/testing/wait.js';
import { consume } from '../../src/worker/consume.js';
import type { Consumer } from '../../src/worker/delivery-policy.js';
import { outboxCounts, seedOutbox } from '../outbox/support/fixtures.js';
import type { TestDatabase } from '../support/services.js';
import { uniqueName } from '../support/services.js';
import { createEffects, effectHandler, effects, rabbitNodesOf } from './support/effects.js';
import { createHaDatabase, requireHa, services } from './support.js';

const urls = amqpUrls(requireHa('HERALD_HA_AMQP_URLS'));
// Node 3 first: the relay and the consumer connect to the node that will be partitioned.
const listed = [urls[2]!, urls[0]!, urls[1]!].join(',');
const queue = uniqueName('ha_part');
const relayName = uniqueName('herald-ha-part-relay');
let t: TestDatabase;
let relay: OutboxRelay | undefined;
let sink: AmqpSink | undefined;
let consumer: Consumer | undefined;
let partitioned = false;

/** Whether node 3's AMQP listener accepts a TCP connection. */
function listening(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = tcpConnect({ host: hostname, port: Number(port) });
    socket.once('connect', () => resolve(true));
    socket.once('error', () => resolve(false));
    socket.once('connect', () => socket.destroy());
  });
}

beforeAll(async () => {
  t = await createHaDatabase();
  await createEffects(t.db);
});

afterAll(async () => {
  if (partitioned) await services('heal', 'rabbitmq-cluster', '3');
  await consumer?.stop();
  await relay?.stop();
  await sink?.close();
  const cleanup = await AmqpConnection.connect({ url: urls.join(','), name: 'herald-ha-cleanup' });
  const channel = await cleanup.channel();
  for (const q of [queue, `${queue}.retry.1000ms`, `${queue}.dead`])
    await channel.deleteQueue(q).catch(() => {});
  await cleanup.close();
  await t?.drop();
}, 240_000);

describe('RabbitMQ: one node partitioned from its peers', () => {
  it('the minority node refuses, its clients move to the majority, and nothing doubles after the heal', async () => {
    const config = t.config({
      HERALD_RELAY_IDLE_POLL_MS: '100',
      HERALD_RELAY_BACKOFF_BASE_MS: '50',
      HERALD_RELAY_BACKOFF_MAX_MS: '500',
    });
    consumer = await consume({ db: t.db, amqp: listed, logger: silentLogger }, queue, effectHandler('part'), {
      consumer: 'ha-part',
      retryDelayMs: 1_000,
    });
    sink = new AmqpSink({
      url: listed,
      name: relayName,
      inFlight: config.relay.inFlight,
      connectTimeoutMs: 2_000,
    });
    relay = new OutboxRelay({ db: t.db, owner: 'ha-part', sinks: { amqp: sink }, settings: config.relay });
    await relay.start();

    const seeded: string[] = [];
    const seed = async (count: number) => {
      seeded.push(...(await seedOutbox(t.db, { count, destination: queue })).messageIds);
    };
    const allHandled = (what: string) =>
      waitFor(async () => (await effects(t.db)).ids.size === seeded.length, { timeoutMs: 60_000, what });

    await seed(50);
    await allHandled('the first rows handled');
    // Both clients are on node 3.
    expect(await rabbitNodesOf(relayName, 1, urls)).toEqual([3]);
    expect(await rabbitNodesOf('herald-consumer:ha-part:', 1, urls)).toEqual([3]);

    partitioned = true;
    await services('partition', 'rabbitmq-cluster', '3');
    // Rows keep coming while node 3 notices it is in the minority (net_ticktime 10 s) and pauses.
    await waitFor(
      async () => {
        await seed(10);
        return !(await listening(urls[2]!));
      },
      { timeoutMs: 40_000, intervalMs: 500, what: 'node 3 paused (its AMQP listener closed)' },
    );
    // The minority refuses: no AMQP connection to node 3 alone.
    await expect(AmqpConnection.connect({ url: urls[2]!, name: 'herald-ha-refused' })).rejects.toThrow();

    // The majority serves: the relay and the consumer moved to nodes 1/2, and new rows are handled.
    await seed(50);
    await allHandled('rows handled by the majority');
    const relayNodes = await rabbitNodesOf(relayName, 1, urls);
    const consumerNodes = await rabbitNodesOf('herald-consumer:ha-part:', 1, urls);
    expect(relayNodes.length).toBe(1);
    expect(relayNodes[0]).not.toBe(3);
    expect(consumerNodes.length).toBeGreaterThan(0);
    expect(consumerNodes).not.toContain(3);

    await services('heal', 'rabbitmq-cluster', '3');
    partitioned = false;
    await seed(50);
    await allHandled('rows handled after the heal');

    const { ids, twice } = await effects(t.db);
    expect(twice).toEqual([]);
    expect([...ids].sort()).toEqual([...seeded].sort());
    expect((await outboxCounts(t.db)).dead).toBe(0);
    expect(seeded.length).toBeGreaterThan(150);
    // The partition did make the broker deliver something again: what the inbox absorbed.
    console.info(`rabbitmq partition: ${seeded.length} rows, inbox duplicates ${consumer.stats.duplicates}`);
  });
});
