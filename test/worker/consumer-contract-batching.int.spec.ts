/**
 * The consumer contract again, over RabbitMQ, with every handler given a batch form: deliveries that
 * arrive together are handled in one transaction (the policy's batch path), and a batch in which any
 * message fails is handled again one message at a time. Every contract case must hold unchanged: the
 * batch path may change the round trips, never an outcome.
 */
import { afterAll, expect } from 'vitest';
import { describeConsumerContract, type TransportFixture } from '../../src/testing/consumer-contract.js';
import type { BatchingHandler, Handler, HandlerOutcome } from '../../src/worker/delivery-policy.js';
import { AmqpContractFixture } from './support/amqp-contract-fixture.js';

/** Messages that went through a batch of more than one (the suite must really take the batch path). */
let batched = 0;
afterAll(() => expect(batched).toBeGreaterThan(100));

/** The plain handler run message by message inside the batch's transaction (a throw fails the batch). */
function batching<T>(handler: Handler<T>): BatchingHandler<T> {
  return Object.assign(((message, tx) => handler(message, tx)) as Handler<T>, {
    batch: async (messages: readonly Parameters<Handler<T>>[0][], tx: Parameters<Handler<T>>[1]) => {
      if (messages.length > 1) batched += messages.length;
      const outcomes: HandlerOutcome[] = [];
      for (const message of messages) outcomes.push((await handler(message, tx)) ?? 'processed');
      return outcomes;
    },
  });
}

class BatchingAmqpFixture extends AmqpContractFixture {
  override start: TransportFixture['start'] = (db, source, handler, options) =>
    this.startWith(db, source, batching(handler), options);
}

describeConsumerContract('RabbitMQ, batched', new BatchingAmqpFixture());
