/**
 * Outbox test fixtures on the real services: rows written through the production writer (one event,
 * its outbox rows, one transaction: invariant 1), a raw amqplib consumer that records every delivery
 * (so tests count by message_id without going through Herald's own code), and queue helpers.
 */
import { randomUUID } from 'node:crypto';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { appendEvents } from '../../../src/adapters/postgres/event-queries.js';
import { type OutboxMessageSpec, toOutboxRows, writeOutbox } from '../../../src/outbox/outbox-writer.js';
import type { Database } from '../../../src/ports/database.js';
import { requireEnv, uniqueName } from '../../support/services.js';

export interface SeedOptions {
  count: number;
  /** Default amqp. */
  sink?: 'amqp' | 'kafka';
  destination: string;
  routingKey?: string;
  priority?: number;
  payload?: (index: number) => unknown;
  /** The organization the rows belong to (default: none). */
  organizationId?: string;
}

export interface SeededRows {
  messageIds: string[];
  streamId: string;
  correlationId: string;
}

/** Writes `count` outbox rows caused by one event, in one transaction. */
export async function seedOutbox(db: Database, options: SeedOptions): Promise<SeededRows> {
  const streamId = uniqueName('stream');
  const correlationId = randomUUID();
  const messageIds: string[] = [];
  await db.transaction(async (tx) => {
    const [event] = await appendEvents(tx, [
      { streamType: 'test', streamId, version: 1, type: 'TestHappened', data: {}, meta: { correlationId } },
    ]);
    const origin = {
      eventPosition: event!.position,
      eventType: 'TestHappened',
      streamType: 'test',
      streamId,
      meta: { correlationId },
      ...(options.organizationId ? { organizationId: options.organizationId } : {}),
    };
    const chunk = 5_000;
    for (let start = 0; start < options.count; start += chunk) {
      const specs: OutboxMessageSpec[] = [];
      for (let index = start; index < Math.min(options.count, start + chunk); index++) {
        specs.push({
          ...(options.sink ? { sink: options.sink } : {}),
          destination: options.destination,
          ...(options.routingKey !== undefined ? { routingKey: options.routingKey } : {}),
          ...(options.priority !== undefined ? { priority: options.priority } : {}),
          payload: options.payload ? options.payload(index) : { index },
        });
      }
      const rows = toOutboxRows(origin, specs);
      await writeOutbox(tx, rows);
      messageIds.push(...rows.map((row) => row.messageId));
    }
  });
  return { messageIds, streamId, correlationId };
}

export interface Delivery {
  messageId: string;
  headers: Record<string, unknown>;
  body: string;
  priority: number | undefined;
  deliveryMode: number | undefined;
  contentType: string | undefined;
  timestamp: number | undefined;
  correlationId: string | undefined;
}

/** A raw amqplib connection for the test side of the broker (declaring, consuming, deleting). */
export class BrokerFixture {
  readonly deliveries = new Map<string, Delivery[]>();
  private constructor(
    private readonly model: ChannelModel,
    readonly channel: Channel,
    private readonly queues: Set<string>,
  ) {}

  static async open(): Promise<BrokerFixture> {
    const model = await amqp.connect(requireEnv('AMQP_URL'));
    model.on('error', () => {}); // a broker-outage test may take the broker away under us
    const channel = await model.createChannel();
    channel.on('error', () => {});
    await channel.prefetch(2_000);
    return new BrokerFixture(model, channel, new Set());
  }

  /** Deletes `queue` when this fixture closes (queues declared elsewhere). */
  adopt(queue: string): void {
    this.queues.add(queue);
  }

  /** Declares a fresh durable quorum queue (deleted by close()). */
  async queue(prefix = 'q'): Promise<string> {
    const name = uniqueName(`herald_test_${prefix}`);
    await this.channel.assertQueue(name, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    this.queues.add(name);
    return name;
  }

  /** Records every delivery on `queue`; `onMessage` runs before the ack. */
  async consume(
    queue: string,
    onMessage?: (delivery: Delivery) => Promise<void> | void,
  ): Promise<Delivery[]> {
    const received: Delivery[] = [];
    await this.channel.consume(queue, (message) => {
      if (!message) return;
      const p = message.properties;
      const delivery: Delivery = {
        messageId: String(p.messageId),
        headers: (p.headers ?? {}) as Record<string, unknown>,
        body: message.content.toString('utf8'),
        priority: p.priority as number | undefined,
        deliveryMode: p.deliveryMode as number | undefined,
        contentType: p.contentType as string | undefined,
        timestamp: p.timestamp as number | undefined,
        correlationId: p.correlationId as string | undefined,
      };
      received.push(delivery);
      const list = this.deliveries.get(delivery.messageId) ?? [];
      list.push(delivery);
      this.deliveries.set(delivery.messageId, list);
      void Promise.resolve(onMessage?.(delivery)).then(
        () => this.channel.ack(message),
        () => this.channel.nack(message, false, true),
      );
    });
    return received;
  }

  async close(): Promise<void> {
    for (const queue of this.queues) {
      try {
        await this.channel.deleteQueue(queue);
      } catch {
        // the broker went away with this connection; the next fixture's close() cleans up
      }
    }
    try {
      await this.model.close();
    } catch {
      // already closed
    }
  }
}

/** Counts of deliveries per message id: [distinct, total, max per id]. */
export function deliveryStats(deliveries: Map<string, Delivery[]>, ids: Iterable<string>) {
  let distinct = 0;
  let total = 0;
  let maxPerId = 0;
  for (const id of ids) {
    const count = deliveries.get(id)?.length ?? 0;
    if (count > 0) distinct++;
    total += count;
    maxPerId = Math.max(maxPerId, count);
  }
  return { distinct, total, maxPerId };
}

export const OUTBOX_STATUS_COUNTS = `
  select count(*) filter (where status = 'pending')::int as pending,
         count(*) filter (where status = 'sent')::int as sent,
         count(*) filter (where status = 'dead')::int as dead
    from outbox`;

export async function outboxCounts(db: Database): Promise<{ pending: number; sent: number; dead: number }> {
  const { rows } = await db.query<{ pending: number; sent: number; dead: number }>(OUTBOX_STATUS_COUNTS);
  return rows[0]!;
}
