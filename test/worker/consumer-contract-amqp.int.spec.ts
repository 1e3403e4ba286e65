/**
 * The consumer contract (test/worker/consumer-contract.ts) over RabbitMQ (the fixture:
 * test/worker/support/amqp-contract-fixture.ts).
 */
import { describeConsumerContract } from '../../src/testing/consumer-contract.js';
import { AmqpContractFixture } from './support/amqp-contract-fixture.js';

describeConsumerContract('RabbitMQ', new AmqpContractFixture());
