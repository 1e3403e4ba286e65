/**
 * The relay keeps publishing when the RabbitMQ node its connection is on stops (ADR 0037): AMQP_URL
 * lists the three nodes, the sink reconnects to a surviving one, and a consumer on a surviving node
 * receives every row: none lost, and a message id twice only for a row published again because its
 * confirm never came (attempts > 1: at-least-once, de-duplicated by consumers, invariant 4).
 * This file STOPS AND STARTS A NODE of rabbitmq-cluster.
 */
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AmqpConnection, amqpUrls, declareQueues } from '../../src/adapters/amqp/amqp-connection.js';
import { AmqpSink } from '../../src/adapters/amqp/amqp-sink.js';
import { OutboxRelay } from '../../src/outbox/relay.js';
import { waitFor } from '../../src/testing/wait.js';
import { outboxCounts, seedOutbox } from '../outbox/support/fixtures.js';
import type { TestDatabase } from '../support/services.js';
import { uniqueName } from '../support/services.js';
import { createHaDatabase, requireHa, services } from './support.js';

const urls = amqpUrls(requireHa('HERALD_HA_AMQP_URLS'));
const connectionName = uniqueName('herald-ha-relay');
const queue = uniqueName('ha_relay');
let t: TestDatabase;
let relay: OutboxRelay | undefined;
let sink: AmqpSink | undefined;
let stoppedNode: number | undefined;

/** The node (1..3) the named connection is open to, from the cluster's own view; undefined when none. */
async function nodeOf(name: string, askNode: number): Promise<number | undefined> {
  const listed = JSON.parse(
    await services(
      'rabbitmqctl',
      String(askNode),
      'list_connections',
      'port',
      'client_properties',
      '--formatter',
      'json',
    ),
  ) as { port: number; client_properties: [string, string, unknown][] }[];
  const mine = listed.find((c) =>
    c.client_properties.some(([key, , value]) => key === 'connection_name' && value === name),
  );
  if (!mine) return undefined;
  return urls.findIndex((url) => Number(new URL(url).port) === mine.port) + 1;
}

beforeAll(async () => {
  t = await createHaDatabase();
  const topology = await AmqpConnection.connect({ url: urls.join(','), name: 'herald-ha-topology' });
  await declareQueues(await topology.channel(), [queue], 'quorum');
  await topology.close();
});

afterAll(async () => {
  await relay?.stop();
  await sink?.close();
  if (stoppedNode) await services('node', 'start', 'rabbitmq-cluster', String(stoppedNode));
  const cleanup = await AmqpConnection.connect({ url: urls.join(','), name: 'herald-ha-cleanup' });
  await (await cleanup.channel()).deleteQueue(queue).catch(() => {});
  await cleanup.close();
  await t?.drop();
}, 240_000);

describe('RabbitMQ node stop under the relay', () => {
  it('the relay moves to another node and every row arrives; a message id twice only for a row published twice', async () => {
    const config = t.config({
      HERALD_RELAY_IDLE_POLL_MS: '100',
      HERALD_RELAY_BACKOFF_BASE_MS: '50',
      HERALD_RELAY_BACKOFF_MAX_MS: '500',
    });
    sink = new AmqpSink({
      url: config.amqpUrl!,
      name: connectionName,
      inFlight: config.relay.inFlight,
      connectTimeoutMs: 2_000,
    });
    relay = new OutboxRelay({ db: t.db, owner: 'ha-relay', sinks: { amqp: sink }, settings: config.relay });
    await relay.start();

    const seeded: string[] = [];
    const seed = async (count: number) => {
      seeded.push(...(await seedOutbox(t.db, { count, destination: queue })).messageIds);
    };
    const allSent = (what: string) =>
      waitFor(async () => (await outboxCounts(t.db)).sent === seeded.length, { timeoutMs: 60_000, what });

    await seed(100);
    await allSent('the first rows sent');
    const before = await waitFor(() => nodeOf(connectionName, 1), { what: "the relay's connection" });

    // Rows keep arriving while the relay's node shuts down (a graceful stop: connections closed).
    stoppedNode = before;
    let stopped = false;
    const stopping = services('node', 'stop', 'rabbitmq-cluster', String(before)).finally(() => {
      stopped = true;
    });
    while (!stopped) {
      await seed(20);
      await allSent('rows seeded while the node stops');
    }
    await stopping;
    await seed(100);
    await allSent('rows seeded after the node stopped');

    const surviving = [1, 2, 3].find((n) => n !== before)!;
    const after = await waitFor(() => nodeOf(connectionName, surviving), {
      what: "the relay's new connection",
    });
    expect(after).not.toBe(before);
    expect((await outboxCounts(t.db)).dead).toBe(0);

    // Every row on the queue, read on a surviving node.
    const model = await amqp.connect(urls[surviving - 1]!);
    const channel = await model.createChannel();
    const received = new Map<string, number>();
    await channel.prefetch(500);
    await channel.consume(queue, (message) => {
      if (!message) return;
      const id = String(message.properties.messageId);
      received.set(id, (received.get(id) ?? 0) + 1);
      channel.ack(message);
    });
    await waitFor(() => seeded.every((id) => received.has(id)), {
      timeoutMs: 30_000,
      what: 'every seeded row delivered',
    });
    await model.close();

    const twice = [...received].filter(([, n]) => n > 1).map(([id]) => id);
    const { rows } = await t.db.query<{ message_id: string; attempts: number }>(
      'select message_id::text, attempts from outbox where message_id::text = any($1)',
      [twice],
    );
    expect(rows.filter((row) => row.attempts < 2)).toEqual([]);
    expect(received.size).toBe(seeded.length);
    expect(seeded.length).toBeGreaterThan(200);
  });
});
