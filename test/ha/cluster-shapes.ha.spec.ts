/**
 * What Herald declares on the clusters is replicated as ADR 0037 says: the quorum queue Herald's relay
 * declares has a member on each of the three RabbitMQ nodes, and a Kafka topic Herald creates (broker
 * defaults) has three replicas per partition and min.insync.replicas=2, written with acks=all.
 */
import { ConfigResourceTypes, Kafka, logLevel } from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import { AmqpConnection, declareQueues } from '../../src/adapters/amqp/amqp-connection.js';
import { KafkaSink } from '../../src/adapters/kafka/kafka-sink.js';
import { loadConfig } from '../../src/config.js';
import { outbound } from '../../src/testing/sink-contract.js';
import { waitFor } from '../../src/testing/wait.js';
import { uniqueName } from '../support/services.js';
import { requireHa, services } from './support.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

describe('cluster shapes', () => {
  it('the quorum queue Herald declares has a member on each of the three nodes', async () => {
    const config = loadConfig({
      DATABASE_URL: 'postgres://unused@127.0.0.1/x',
      AMQP_URL: requireHa('HERALD_HA_AMQP_URLS'),
    });
    const queue = uniqueName('ha_shape');
    const connection = await AmqpConnection.connect({ url: config.amqpUrl!, name: 'herald-ha-test' });
    cleanups.push(() => connection.close());
    const channel = await connection.channel();
    await declareQueues(channel, [queue], config.amqpQueueType);
    cleanups.push(() => channel.deleteQueue(queue));

    const listed = JSON.parse(
      await services(
        'rabbitmqctl',
        '2',
        'list_queues',
        'name',
        'type',
        'members',
        'online',
        '--formatter',
        'json',
      ),
    ) as { name: string; type: string; members: string[]; online: string[] }[];
    const declared = listed.find((q) => q.name === queue);
    const nodes = requireHa('HERALD_HA_RABBITMQ_NODES').split(',').sort();
    expect(declared).toMatchObject({ type: 'quorum' });
    expect([...(declared?.members ?? [])].sort()).toEqual(nodes);
    expect([...(declared?.online ?? [])].sort()).toEqual(nodes);
  });

  it('a topic Herald creates has three replicas per partition and min.insync.replicas=2', async () => {
    const brokers = requireHa('HERALD_HA_KAFKA_BROKERS').split(',');
    const topic = uniqueName('ha_shape');
    const sink = new KafkaSink({
      brokers,
      clientId: 'herald-ha-test',
      maxBatchMessages: 100,
      createTopics: {},
    });
    cleanups.push(() => sink.close());
    // The first publish may find the new topic's partitions still electing leaders ('unavailable'): the
    // relay would retry it, and so does this test.
    const message = outbound({ destination: topic, routingKey: null });
    await waitFor(async () => (await sink.publish([message]))[0]?.ok, { what: 'a publish to the new topic' });

    const admin = new Kafka({
      clientId: 'herald-ha-test-admin',
      brokers,
      logLevel: logLevel.NOTHING,
    }).admin();
    await admin.connect();
    cleanups.push(() => admin.disconnect());
    cleanups.push(() => admin.deleteTopics({ topics: [topic] }));
    const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
    const partitions = topics[0]?.partitions ?? [];
    expect(partitions.length).toBeGreaterThan(0);
    for (const partition of partitions) {
      expect(partition.replicas).toHaveLength(3);
      expect(partition.isr).toHaveLength(3);
    }
    const described = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['min.insync.replicas'] }],
    });
    const minIsr = described.resources[0]?.configEntries.find((e) => e.configName === 'min.insync.replicas');
    expect(minIsr?.configValue).toBe('2');
  });
});
