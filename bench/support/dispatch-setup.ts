/**
 * Dispatch benchmark setup (not timed): campaigns created and scheduled through the real
 * CampaignService (one command, one transaction each, as an API would), and the LINE delivery queues
 * the relays publish to, checked for consumers and purged.
 */
import amqp from 'amqplib';
import { queueOptions } from '../../src/adapters/amqp/amqp-connection.js';
import { CoalescingNotifier } from '../../src/adapters/postgres/notifications.js';
import { CampaignService } from '../../src/aggregates/campaign/service.js';
import { LINE_BROADCAST_QUEUE, LINE_MULTICAST_QUEUE } from '../../src/aggregates/campaign/topology.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import type { Database } from '../../src/ports/database.js';
import { TEST_LINE_MESSAGES } from '../../test/support/line.js';

export const LINE_QUEUES = [LINE_BROADCAST_QUEUE, LINE_MULTICAST_QUEUE] as const;

/** The library wiring of docs/architecture.md (Library use): a command handler and a service that wake scanner and relay. */
export function campaignService(db: Database, notifyCoalesceMs: number) {
  const notifier = new CoalescingNotifier(db, notifyCoalesceMs);
  const service = new CampaignService({
    db,
    handler: new CommandHandler({ db, wakeups: notifier, pod: 'bench' }),
  });
  return { service, close: () => notifier.close() };
}

/** Runs `work` over `items` with at most `concurrency` calls in flight. */
export async function inParallel<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        await work(items[index]!, index);
      }
    }),
  );
}

/** The organization of warm-up campaigns, which the figures leave out. */
export const WARM_UP_ORGANIZATION = 'bench-warm-up';

/**
 * N draft LINE campaigns with a text message, half broadcasts and half multicasts (both delivery queues
 * see traffic; nothing delivers them here, so no channel or audience is registered).
 */
export async function createDrafts(
  service: CampaignService,
  count: number,
  concurrency: number,
  options: { warmUp?: boolean } = {},
): Promise<string[]> {
  const ids = new Array<string>(count);
  await inParallel(ids, concurrency, async (_, index) => {
    const broadcast = index % 2 === 0;
    const created = await service.create({
      mode: 'draft',
      organizationId: options.warmUp ? WARM_UP_ORGANIZATION : `org-${index % 50}`,
      channel: 'line',
      castType: broadcast ? 'broadcast' : 'multicast',
      audienceId: broadcast ? null : `aud-${index}`,
      lineOaId: `oa-${index % 97}`,
      name: `bench campaign ${index + 1}`,
      line: { messages: TEST_LINE_MESSAGES },
    });
    ids[index] = created.campaignId;
  });
  return ids;
}

/** DRAFT → SCHEDULED at the given instants (epoch ms), through CampaignService.schedule. */
export async function scheduleAll(
  service: CampaignService,
  schedule: readonly { campaignId: string; startAtMs: number }[],
  concurrency: number,
): Promise<void> {
  await inParallel(schedule, concurrency, async ({ campaignId, startAtMs }) => {
    await service.schedule(campaignId, new Date(startAtMs).toISOString());
  });
}

export async function databaseNowMs(db: Database): Promise<number> {
  const { rows } = await db.query<{ now_ms: number }>(
    'select (extract(epoch from clock_timestamp()) * 1000)::float8 as now_ms',
  );
  return rows[0]!.now_ms;
}

/** `count` distinct whole milliseconds in [0, windowMs), uniformly at random, ascending. */
export function distinctOffsets(count: number, windowMs: number): number[] {
  if (count > windowMs) throw new Error(`cannot place ${count} dues at distinct ms in ${windowMs} ms`);
  const chosen = new Set<number>();
  while (chosen.size < count) chosen.add(Math.floor(Math.random() * windowMs));
  return [...chosen].sort((a, b) => a - b);
}

/**
 * Shared queues with fixed names (default: the LINE queues). Refuses to run when anything consumes them
 * (the serial e2e tests' workers would take the benchmark's messages, and the benchmark's messages would
 * reach their workers).
 */
export async function sharedQueues(
  url: string,
  queueType: 'quorum' | 'classic',
  queues: readonly string[] = LINE_QUEUES,
) {
  const connection = await amqp.connect(url);
  const channel = await connection.createChannel();
  const inspect = async () => {
    const counts: Record<string, { messages: number; consumers: number }> = {};
    for (const queue of queues) {
      const ok = await channel.assertQueue(queue, queueOptions(queueType));
      counts[queue] = { messages: ok.messageCount, consumers: ok.consumerCount };
    }
    return counts;
  };
  return {
    inspect,
    async requireNoConsumers() {
      const counts = await inspect();
      const busy = Object.entries(counts).filter(([, c]) => c.consumers > 0);
      if (busy.length > 0) {
        throw new Error(
          `${busy.map(([q, c]) => `${q} has ${c.consumers} consumer(s)`).join(', ')}: something else ` +
            `(the serial e2e tests?) is consuming ${queues.join(', ')}; run the benchmark when nothing does`,
        );
      }
    },
    async purge(): Promise<number> {
      let purged = 0;
      for (const queue of queues) purged += (await channel.purgeQueue(queue)).messageCount;
      return purged;
    },
    async close() {
      try {
        await connection.close();
      } catch {
        // the broker closed it first
      }
    },
  };
}
