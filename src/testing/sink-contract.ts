/**
 * The MessageSink port's shared suite (one suite, every adapter: river's driver tests). An adapter's
 * spec supplies a harness that knows how to make a routable destination and read it back, name an
 * unroutable one, and build a sink whose broker cannot be reached; the suite checks the port's
 * contract (invariant 3: `ok` only for a broker-confirmed, routed message; invariant 4: the message
 * id travels with the message).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MessageSink, OutboundMessage } from '../ports/message-sink.js';
import { waitFor } from './wait.js';

export interface ReceivedMessage {
  messageId: string;
  headers: Record<string, unknown>;
  body: string;
}

export interface SinkTarget {
  destination: string;
  routingKey: string | null;
  /** Messages received so far at this destination. */
  received(): readonly ReceivedMessage[];
}

export interface SinkContractHarness {
  makeSink(): Promise<MessageSink>;
  /** A sink pointed at a broker address nothing listens on. */
  makeUnreachableSink(): Promise<MessageSink>;
  routableTarget(): Promise<SinkTarget>;
  unroutableTarget(): { destination: string; routingKey: string | null };
  /** The sink's in-flight window, so the suite can publish batches larger than it. */
  inFlight: number;
  close(): Promise<void>;
}

let nextId = 1;

export function outbound(
  target: { destination: string; routingKey: string | null },
  overrides: Partial<OutboundMessage> = {},
): OutboundMessage {
  const id = nextId++;
  return {
    id,
    messageId: randomUUID(),
    destination: target.destination,
    routingKey: target.routingKey,
    partitionKey: `key-${id % 7}`,
    headers: { 'x-correlation-id': randomUUID(), 'x-herald-stream-id': `stream-${id}`, 'x-test-n': id },
    body: Buffer.from(JSON.stringify({ id, text: 'contract' })),
    priority: 3,
    timestamp: new Date(),
    ...overrides,
  };
}

export function describeSinkContract(name: string, makeHarness: () => Promise<SinkContractHarness>): void {
  describe(`MessageSink contract: ${name}`, () => {
    let harness: SinkContractHarness;
    let sink: MessageSink;

    beforeAll(async () => {
      harness = await makeHarness();
      sink = await harness.makeSink();
    });

    afterAll(async () => {
      await sink?.close();
      await harness?.close();
    });

    it('confirms a publish; the message arrives with its message id, headers and body', async () => {
      const target = await harness.routableTarget();
      const message = outbound(target);
      const [outcome] = await sink.publish([message]);
      expect(outcome).toEqual({
        id: message.id,
        ok: true,
        brokerRef: expect.toSatisfy((v) => v === null || typeof v === 'string'),
      });
      const [received] = await waitFor(() => (target.received().length > 0 ? target.received() : undefined), {
        what: 'the message at the destination',
      });
      expect(received!.messageId).toBe(message.messageId);
      // Values compare as text: AMQP keeps a number a number, Kafka headers are bytes.
      const header = (name: string) => String(received!.headers[name]);
      expect({
        'x-correlation-id': header('x-correlation-id'),
        'x-herald-stream-id': header('x-herald-stream-id'),
        'x-test-n': header('x-test-n'),
      }).toEqual({
        'x-correlation-id': String(message.headers['x-correlation-id']),
        'x-herald-stream-id': String(message.headers['x-herald-stream-id']),
        'x-test-n': String(message.headers['x-test-n']),
      });
      expect(JSON.parse(received!.body)).toEqual(JSON.parse(message.body.toString()));
    });

    it('reports an unroutable message as a rejected failure, not as sent', async () => {
      const message = outbound(harness.unroutableTarget());
      const [outcome] = await sink.publish([message]);
      expect(outcome).toMatchObject({ id: message.id, ok: false, failure: 'rejected' });
      expect(outcome!.ok === false && outcome!.error).toMatch(/unroutable|unknown/i);
    });

    it('sorts a mixed batch: routable ones ok, unroutable ones failed, matched by id', async () => {
      const target = await harness.routableTarget();
      const unroutable = harness.unroutableTarget();
      const batch = Array.from({ length: 20 }, (_, i) => outbound(i % 3 === 0 ? unroutable : target));
      const outcomes = await sink.publish(batch);
      expect(outcomes).toHaveLength(batch.length);
      const byId = new Map(outcomes.map((o) => [o.id, o]));
      for (const [i, message] of batch.entries()) {
        expect(byId.get(message.id)?.ok, `message ${i}`).toBe(i % 3 !== 0);
      }
      const routed = batch.filter((_, i) => i % 3 !== 0).map((m) => m.messageId);
      await waitFor(() => target.received().length >= routed.length, { what: 'routed messages' });
      expect(new Set(target.received().map((m) => m.messageId))).toEqual(new Set(routed));
    });

    it('confirms batches larger than its in-flight window, and concurrent batches', async () => {
      const target = await harness.routableTarget();
      const big = Array.from({ length: harness.inFlight * 3 + 7 }, () => outbound(target));
      const small = Array.from({ length: 50 }, () => outbound(target));
      const [bigOutcomes, smallOutcomes] = await Promise.all([sink.publish(big), sink.publish(small)]);
      expect(bigOutcomes.filter((o) => o.ok)).toHaveLength(big.length);
      expect(smallOutcomes.filter((o) => o.ok)).toHaveLength(small.length);
      await waitFor(() => target.received().length >= big.length + small.length, { what: 'all messages' });
      expect(new Set(target.received().map((m) => m.messageId)).size).toBe(big.length + small.length);
    });

    it('fails fast as unavailable when the broker cannot be reached', async () => {
      const unreachable = await harness.makeUnreachableSink();
      try {
        const batch = Array.from({ length: 5 }, () =>
          outbound({ destination: 'anything', routingKey: null }),
        );
        const started = performance.now();
        const outcomes = await unreachable.publish(batch);
        expect(performance.now() - started).toBeLessThan(5_000);
        expect(outcomes.map((o) => o.id)).toEqual(batch.map((m) => m.id));
        for (const outcome of outcomes) expect(outcome).toMatchObject({ ok: false, failure: 'unavailable' });
        // and again: the sink keeps answering (no hang, no throw) while the broker stays away
        const again = await unreachable.publish(batch.slice(0, 1));
        expect(again[0]).toMatchObject({ ok: false, failure: 'unavailable' });
      } finally {
        await unreachable.close();
      }
    });
  });
}
