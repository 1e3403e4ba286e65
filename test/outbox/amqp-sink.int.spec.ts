import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AmqpSink } from '../../src/adapters/amqp/amqp-sink.js';
import { describeSinkContract, outbound, type SinkTarget } from '../../src/testing/sink-contract.js';
import { waitFor } from '../../src/testing/wait.js';
import { requireEnv, uniqueName } from '../support/services.js';
import { BrokerFixture } from './support/fixtures.js';

const IN_FLIGHT = 64;

describeSinkContract('AmqpSink', async () => {
  const broker = await BrokerFixture.open();
  return {
    inFlight: IN_FLIGHT,
    makeSink: async () =>
      new AmqpSink({ url: requireEnv('AMQP_URL'), inFlight: IN_FLIGHT, name: 'contract' }),
    // Port 1 on loopback: nothing listens there, so connecting is refused at once.
    makeUnreachableSink: async () =>
      new AmqpSink({ url: 'amqp://guest:guest@127.0.0.1:1', inFlight: IN_FLIGHT, connectTimeoutMs: 2_000 }),
    routableTarget: async (): Promise<SinkTarget> => {
      const queue = await broker.queue('contract');
      const received = await broker.consume(queue);
      return { destination: queue, routingKey: null, received: () => received };
    },
    unroutableTarget: () => ({ destination: uniqueName('herald_test_missing'), routingKey: null }),
    close: () => broker.close(),
  };
});

describe('AmqpSink specifics', () => {
  let broker: BrokerFixture;
  let sink: AmqpSink;

  beforeAll(async () => {
    broker = await BrokerFixture.open();
    sink = new AmqpSink({ url: requireEnv('AMQP_URL'), inFlight: IN_FLIGHT, exchangeCheckTtlMs: 60_000 });
  });

  afterAll(async () => {
    await sink?.close();
    await broker?.close();
  });

  it('publishes persistent JSON with Herald priority mapped to AMQP (0 → 9) and the row timestamp', async () => {
    const queue = await broker.queue('props');
    const received = await broker.consume(queue);
    const createdAt = new Date('2026-01-02T03:04:05Z');
    const message = outbound({ destination: queue, routingKey: null }, { priority: 0, timestamp: createdAt });
    const [outcome] = await sink.publish([message]);
    expect(outcome?.ok).toBe(true);
    const [delivery] = await waitFor(() => (received.length ? received : undefined));
    expect(delivery).toMatchObject({
      deliveryMode: 2,
      contentType: 'application/json',
      priority: 9,
      timestamp: Math.floor(createdAt.getTime() / 1000),
      correlationId: message.headers['x-correlation-id'],
    });
  });

  it('routes through an exchange when a routing key is given, and rejects a missing exchange without failing the rest', async () => {
    const queue = await broker.queue('bound');
    const exchange = uniqueName('herald_test_x');
    await broker.channel.assertExchange(exchange, 'direct', { durable: false, autoDelete: true });
    await broker.channel.bindQueue(queue, exchange, 'rk');
    const received = await broker.consume(queue);

    const good = Array.from({ length: 10 }, () => outbound({ destination: exchange, routingKey: 'rk' }));
    const wrongKey = outbound({ destination: exchange, routingKey: 'nobody-binds-this' });
    const noExchange = outbound({ destination: uniqueName('herald_test_nox'), routingKey: 'rk' });
    const outcomes = await sink.publish([...good.slice(0, 5), noExchange, wrongKey, ...good.slice(5)]);
    const byId = new Map(outcomes.map((o) => [o.id, o]));
    for (const m of good) expect(byId.get(m.id)?.ok).toBe(true);
    expect(byId.get(noExchange.id)).toMatchObject({ ok: false, failure: 'rejected' });
    expect(byId.get(noExchange.id)?.ok === false && byId.get(noExchange.id)).toMatchObject({
      error: expect.stringMatching(/exchange not found/),
    });
    expect(byId.get(wrongKey.id)).toMatchObject({ ok: false, failure: 'rejected' });
    await waitFor(() => received.length >= good.length);
    expect(received.map((d) => d.messageId).sort()).toEqual(good.map((m) => m.messageId).sort());
  });

  it('re-opens its channel after the broker closed it, and keeps publishing', async () => {
    const queue = await broker.queue('reopen');
    const received = await broker.consume(queue);
    // An exchange the sink has checked (cached as existing), then deleted behind its back: the
    // publish makes the broker close the channel (404), which the next publish must survive.
    const exchange = uniqueName('herald_test_gone');
    await broker.channel.assertExchange(exchange, 'fanout', { durable: false });
    await broker.channel.bindQueue(queue, exchange, '');
    const [first] = await sink.publish([outbound({ destination: exchange, routingKey: '' })]);
    expect(first?.ok).toBe(true);
    await broker.channel.deleteExchange(exchange);

    const [killed] = await sink.publish([outbound({ destination: exchange, routingKey: '' })]);
    expect(killed).toMatchObject({ ok: false, failure: 'rejected' });

    const after = Array.from({ length: 5 }, () => outbound({ destination: queue, routingKey: null }));
    const outcomes = await sink.publish(after);
    expect(outcomes.every((o) => o.ok)).toBe(true);
    await waitFor(() => received.length >= 6);
  });
});
