/**
 * A dispatch workload on a test database, through the production code paths: campaigns created,
 * activated and claimed by the command handler (CampaignClaimed + outbox row, one transaction), then
 * completed or failed, stale deliveries discarded (LineDeliveryDiscarded), and outbox rows marked sent
 * or dead with the relay's own statements (each writes its publish receipt). Some writers hold their
 * transaction open until later ones have committed, so log positions commit out of order: the
 * situation a naive follower gets wrong.
 */
import { randomUUID } from 'node:crypto';
import { appendEvents } from '../../src/adapters/postgres/event-queries.js';
import {
  claimOutboxForPublish,
  markSent,
  scheduleRetry,
} from '../../src/adapters/postgres/outbox-queries.js';
import { campaignAggregate } from '../../src/aggregates/campaign/descriptor.js';
import { LINE_DELIVERY_STREAM_TYPE as DELIVERY_STREAM_TYPE } from '../../src/aggregates/campaign/topology.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import type { Database, SqlClient } from '../../src/ports/database.js';
import { waitFor } from '../../src/testing/wait.js';
import { lineCampaign, lineDeliveryCompletion } from './campaigns.js';

export interface LoadOptions {
  writers: number;
  /** Writers (by index below this) that hold some transactions open while others commit. */
  holders: number;
  campaignsPerWriter: number;
  /** A holder waits until this many events were committed after its own before committing. */
  overtakenBy?: number;
}

async function eventsAfter(db: Database, position: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>('select count(*)::int as n from event where position > $1', [
    position,
  ]);
  return rows[0]!.n;
}

export async function runDispatchLoad(db: Database, options: LoadOptions): Promise<{ heldCommits: number }> {
  const campaigns = new CommandHandler({ db, pod: 'load' }).for(campaignAggregate);
  const overtakenBy = options.overtakenBy ?? 5;
  let running = options.writers - options.holders;
  let heldCommits = 0;

  const claimCampaign = async (tx: SqlClient, id: string, w: number, i: number) => {
    const input = lineCampaign({
      organizationId: `org-${w % 3}`,
      castType: i % 2 === 0 ? 'broadcast' : 'multicast',
      name: `load ${w}-${i}`,
    });
    await campaigns.handleInTransaction(tx, id, (now) => ({
      type: 'CreateCampaign',
      campaignId: id,
      now,
      ...input,
    }));
    await campaigns.handleInTransaction(tx, id, (now) => ({ type: 'ActivateCampaign', campaignId: id, now }));
    const claimed = await campaigns.handleInTransaction(tx, id, (now) => ({
      type: 'SendNow',
      campaignId: id,
      now,
    }));
    return claimed.appended.at(-1)!.position;
  };

  const writer = async (w: number) => {
    const holds = w < options.holders;
    for (let i = 0; i < options.campaignsPerWriter; i++) {
      const id = randomUUID();
      if (holds && i % 2 === 0) {
        await db.transaction(async (tx) => {
          const position = await claimCampaign(tx, id, w, i);
          // Stay open until later positions have committed (or nobody else is left to commit).
          await waitFor(async () => running === 0 || (await eventsAfter(db, position)) >= overtakenBy, {
            what: `writer ${w} overtaken`,
            timeoutMs: 60_000,
          });
        });
        heldCommits++;
      } else {
        await db.transaction((tx) => claimCampaign(tx, id, w, i));
      }
      const outcome = (w + i) % 4;
      if (outcome === 0 || outcome === 1) {
        // A LINE campaign completes once its delivery plan is done: one chunk, accepted by LINE.
        for (const command of lineDeliveryCompletion(id, 1, i % 2 === 0 ? 'broadcast' : 'multicast')) {
          await campaigns.handle(id, command);
        }
      } else if (outcome === 2) {
        await campaigns.handle(id, (now) => ({
          type: 'FailCampaign',
          campaignId: id,
          epoch: 1,
          reason: 'load',
          now,
        }));
      }
      if (i % 3 === 0) {
        await db.transaction((tx) =>
          appendEvents(tx, [
            {
              streamType: DELIVERY_STREAM_TYPE,
              streamId: randomUUID(),
              version: 1,
              type: 'LineDeliveryDiscarded',
              data: { campaignId: id, epoch: 1, reason: 'load', campaignStatus: null, campaignEpoch: null },
              meta: { actor: 'load' },
            },
          ]),
        );
      }
    }
    if (!holds) running--;
  };

  // The relay's statements, without a broker: most rows confirmed (sent receipt), every 7th dead.
  let relaying = true;
  const relay = async () => {
    let round = 0;
    while (relaying) {
      const rows = await claimOutboxForPublish(db, {
        limit: 20,
        lockSeconds: 30,
        owner: 'load-relay',
        sinks: ['amqp'],
      });
      if (rows.length === 0) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        continue;
      }
      const dead = rows.filter((r) => r.id % 7 === 0);
      const sent = rows.filter((r) => r.id % 7 !== 0);
      const mark = async (sql: SqlClient) => {
        await markSent(
          sql,
          sent.map((r) => ({ id: r.id, attempts: r.attempts, brokerRef: null })),
        );
        await scheduleRetry(
          sql,
          dead.map((r) => ({ id: r.id, attempts: r.attempts, error: 'load: rejected', delayMs: 0 })),
          1,
        );
      };
      if (round++ % 3 === 0) {
        // Hold the receipts' transaction open while the writers commit more.
        await db.transaction(async (tx) => {
          await mark(tx);
          const { rows: head } = await db.query<{ p: number }>(
            'select coalesce(max(position), 0)::int as p from event',
          );
          await waitFor(async () => running === 0 || (await eventsAfter(db, head[0]!.p)) >= 3, {
            what: 'receipts overtaken',
            timeoutMs: 60_000,
          });
        });
      } else {
        await mark(db);
      }
    }
  };

  const relayDone = relay();
  await Promise.all(Array.from({ length: options.writers }, (_, w) => writer(w)));
  // Publish what is left, then stop the simulated relay.
  await waitFor(
    async () => {
      const { rows } = await db.query<{ n: number }>(
        "select count(*)::int as n from outbox where status = 'pending'",
      );
      return rows[0]!.n === 0;
    },
    { what: 'outbox drained', timeoutMs: 60_000 },
  );
  relaying = false;
  await relayDone;
  return { heldCommits };
}
