/**
 * The consumer contract's RabbitMQ fixture: `consume` on a fresh queue, raw messages published on an
 * amqplib confirm channel, `<queue>.dead` read with basic.get, and the backlog counted as the messages
 * ready in the queue and its retry queues once the consumers stopped (an unacknowledged delivery
 * returns to its queue when the consumer's channel closes).
 */
import amqp, { type ChannelModel, type ConfirmChannel } from 'amqplib';
import { retryQueueName } from '../../../src/adapters/amqp/amqp-consumer.js';
import { silentLogger } from '../../../src/logger.js';
import type { DeadLetter, TransportFixture } from '../../../src/testing/consumer-contract.js';
import { consume } from '../../../src/worker/consume.js';
import { createTestDatabase, requireEnv, uniqueName } from '../../support/services.js';

function headerText(value: unknown): string {
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  return typeof value === 'string' ? value : String(value);
}

export class AmqpContractFixture implements TransportFixture {
  /** A database of its own for the suite, migrated (test/support/services.ts). */
  database = () => createTestDatabase();

  private url = '';
  private connection: ChannelModel | undefined;
  private publisher: ConfirmChannel | undefined;
  /** Each source made since the last cleanup, with the retry delays its consumers used. */
  private readonly sources = new Map<string, Set<number>>();
  private readonly dead = new Map<string, DeadLetter[]>();

  async open(): Promise<void> {
    this.url = requireEnv('AMQP_URL');
    this.connection = await amqp.connect(this.url);
    this.publisher = await this.connection.createConfirmChannel();
  }

  async close(): Promise<void> {
    await this.cleanup();
    await this.connection?.close();
  }

  async newSource(): Promise<string> {
    const queue = uniqueName('consume_contract');
    this.sources.set(queue, new Set());
    return queue;
  }

  start: TransportFixture['start'] = (db, source, handler, options) =>
    this.startWith(db, source, handler, options);

  /** Starts `consume` on the source with the contract's options (subclasses pass a different handler). */
  protected startWith: TransportFixture['start'] = (db, source, handler, options) => {
    this.sources.get(source)?.add(options.retryDelayMs ?? 10_000);
    return consume({ db, amqp: this.url, logger: silentLogger }, source, handler, {
      consumer: options.consumer,
      ...(options.maxAttempts !== undefined ? { maxAttempts: options.maxAttempts } : {}),
      ...(options.retryDelayMs !== undefined ? { retryDelayMs: options.retryDelayMs } : {}),
      ...(options.parse ? { parse: options.parse } : {}),
      ...(options.oneAtATime ? { prefetch: 1 } : {}),
    });
  };

  async publish(source: string, messages: Parameters<TransportFixture['publish']>[1]): Promise<void> {
    const publisher = this.publisher!;
    for (const message of messages) {
      publisher.sendToQueue(source, Buffer.from(message.body), {
        persistent: true,
        contentType: 'application/json',
        ...(message.messageId !== undefined ? { messageId: message.messageId } : {}),
        headers: message.headers ?? {},
      });
    }
    await publisher.waitForConfirms();
  }

  async deadLetters(source: string): Promise<DeadLetter[]> {
    const letters = this.dead.get(source) ?? [];
    this.dead.set(source, letters);
    const channel = await this.connection!.createChannel();
    try {
      for (;;) {
        const message = await channel.get(`${source}.dead`, { noAck: true });
        if (!message) break;
        const { messageId, headers } = message.properties;
        letters.push({
          messageId: typeof messageId === 'string' && messageId !== '' ? messageId : undefined,
          body: message.content.toString('utf8'),
          headers: Object.fromEntries(
            Object.entries(headers ?? {}).map(([name, value]) => [name, headerText(value)]),
          ),
        });
      }
    } finally {
      await channel.close();
    }
    return [...letters];
  }

  async backlog(source: string): Promise<number> {
    const delays = this.sources.get(source) ?? new Set<number>();
    let total = 0;
    for (const queue of [source, ...[...delays].map((delay) => retryQueueName(source, delay))]) {
      total += await this.ready(queue);
    }
    return total;
  }

  async cleanup(): Promise<void> {
    if (!this.connection) return;
    const channel = await this.connection.createChannel();
    try {
      for (const [queue, delays] of this.sources) {
        const retries = [...delays].map((delay) => retryQueueName(queue, delay));
        for (const name of [queue, ...retries, `${queue}.dead`]) await channel.deleteQueue(name);
      }
    } finally {
      this.sources.clear();
      this.dead.clear();
      await channel.close();
    }
  }

  /** Ready messages in `queue` (each consumer declared its queues, so a missing one is a failure). */
  private async ready(queue: string): Promise<number> {
    const channel = await this.connection!.createChannel();
    channel.on('error', () => {}); // a failed check closes the channel; the rejection says why
    try {
      return (await channel.checkQueue(queue)).messageCount;
    } finally {
      await channel.close().catch(() => {});
    }
  }
}
