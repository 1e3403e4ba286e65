/**
 * Consumer benchmark setup (not timed): the LINE channels and sealed audiences of 50 organizations in
 * the LINE test server and Herald's directory; N LINE campaigns created, activated and claimed through the
 * library (the command handler's batch form and the campaign sweeper's claim sweep, 500 per
 * transaction: DISPATCHING with epoch 1 and one outbox row each, exactly as the scanner leaves them),
 * then the outbox rows' messages published by the benchmark itself to a queue of its own with the
 * AmqpSink's properties (persistent, mandatory, messageId = the row's message_id, the row's headers),
 * on one confirm channel, so every message is in the queue before any consumer starts. The rows are
 * then marked sent, as the relay would have left them, and the tables vacuumed.
 */
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import type { QueueType } from '../../src/adapters/amqp/amqp-connection.js';
import { queueOptions } from '../../src/adapters/amqp/amqp-connection.js';
import { consumerQueues } from '../../src/adapters/amqp/amqp-consumer.js';
import { campaignAggregate } from '../../src/aggregates/campaign/descriptor.js';
import type { LineSimulator } from '../../src/aggregates/campaign/line/simulator/server.js';
import { campaignSweeper } from '../../src/aggregates/campaign/sweepers.js';
import type { CampaignCommand, CampaignState } from '../../src/domain/campaign.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { silentLogger } from '../../src/logger.js';
import { HEADER } from '../../src/messaging/headers.js';
import type { Database } from '../../src/ports/database.js';
import { lineWorld, TEST_LINE_MESSAGES, testLineSettings } from '../../test/support/line.js';

/** Campaigns per setup transaction (the sweeper's default claim batch too). */
const SETUP_BATCH = 500;
/** Organizations, each with one LINE official account `oa-<i>` and one sealed audience `aud-<i>`. */
export const BENCH_ORGANIZATIONS = 50;
/** Members of each organization's audience: a multicast is one LINE call (one chunk). */
export const BENCH_AUDIENCE_MEMBERS = 10;

/**
 * Each organization's channel, registered in the LINE test server and in Herald's directory (sealed
 * with the test credentials key that `lineEnv` gives the consumers), and its sealed audience.
 */
export async function registerLineChannels(db: Database, simulator: LineSimulator): Promise<void> {
  const settings = testLineSettings(simulator);
  for (let i = 0; i < BENCH_ORGANIZATIONS; i++) {
    await lineWorld(db, simulator, settings, {
      organizationId: `org-${i}`,
      lineOaId: `oa-${i}`,
      audiences: { [`aud-${i}`]: { members: BENCH_AUDIENCE_MEMBERS, from: i * BENCH_AUDIENCE_MEMBERS } },
    });
  }
}

/**
 * `count` LINE campaigns, half broadcasts and half multicasts (to their organization's audience), with a
 * text message, created and activated (DRAFT → QUEUED)
 * in batches through the command handler, then claimed by the campaign sweeper's claim sweep
 * (QUEUED → DISPATCHING, epoch 1, one dispatch outbox row each). Throws unless every campaign ends
 * DISPATCHING at epoch 1 with exactly one pending outbox row.
 */
export async function createClaimedCampaigns(
  db: Database,
  count: number,
): Promise<{ claimTransactions: number }> {
  const handler = new CommandHandler({ db, pod: 'bench-setup' });
  const campaigns = handler.for(campaignAggregate);
  const initial = campaignAggregate.decider.initialState();
  const meta = { actor: 'bench-setup' };
  for (let start = 0; start < count; start += SETUP_BATCH) {
    const size = Math.min(SETUP_BATCH, count - start);
    const streams = Array.from({ length: size }, () => ({
      streamId: randomUUID(),
      state: initial,
      version: 0,
    }));
    const indexOf = new Map<string, number>(streams.map((s, i) => [s.streamId, start + i]));
    await db.transaction(async (tx) => {
      const created = await campaigns.handleBatchInTransaction(
        tx,
        streams,
        (stream, now): CampaignCommand => {
          const index = indexOf.get(stream.streamId)!;
          const broadcast = index % 2 === 0;
          return {
            type: 'CreateCampaign',
            campaignId: stream.streamId,
            now,
            mode: 'draft',
            organizationId: `org-${index % BENCH_ORGANIZATIONS}`,
            channel: 'line',
            castType: broadcast ? 'broadcast' : 'multicast',
            audienceId: broadcast ? null : `aud-${index % BENCH_ORGANIZATIONS}`,
            lineOaId: `oa-${index % BENCH_ORGANIZATIONS}`,
            name: `bench campaign ${index + 1}`,
            line: { messages: TEST_LINE_MESSAGES },
          };
        },
        { meta },
      );
      if (created.refused.length > 0) throw created.refused[0]!.error;
      const activated = await campaigns.handleBatchInTransaction(
        tx,
        created.results.map((r) => ({
          streamId: r.streamId,
          state: r.state as CampaignState,
          version: r.version,
        })),
        (stream, now): CampaignCommand => ({ type: 'ActivateCampaign', campaignId: stream.streamId, now }),
        { meta },
      );
      if (activated.refused.length > 0) throw activated.refused[0]!.error;
    });
  }
  const sweeper = campaignSweeper({ db, handler, logger: silentLogger, batchSize: SETUP_BATCH });
  let claimTransactions = 0;
  for (;;) {
    const result = await sweeper.claim.sweep();
    claimTransactions++;
    if (!result.more) break;
  }
  const { rows } = await db.query<{ claimed: number; pending: number }>(
    `select (select count(*)::int from campaign where status = 'DISPATCHING' and claim_epoch = 1) as claimed,
            (select count(*)::int from outbox where status = 'pending') as pending`,
  );
  if (rows[0]!.claimed !== count || rows[0]!.pending !== count) {
    throw new Error(
      `setup: expected ${count} claimed campaigns and outbox rows, got ${JSON.stringify(rows[0])}`,
    );
  }
  return { claimTransactions };
}

interface DispatchRow {
  id: number;
  message_id: string;
  headers: Record<string, string | number | boolean>;
  payload_text: string;
  priority: number;
  created_ms: number;
}

/**
 * Publishes every pending outbox row to `queue` (declared here with the consumers' arguments) as the
 * relay's AmqpSink would (same properties), `inFlight` unconfirmed at most, waits for every confirm,
 * then marks the rows sent. Returns the queue's message count as the broker reports it afterwards.
 */
export async function publishDispatchMessages(
  db: Database,
  options: { url: string; queue: string; queueType: QueueType; inFlight?: number },
): Promise<{ published: number; inQueue: number; bodyBytes: number }> {
  const { rows } = await db.query<DispatchRow>(
    `select id, message_id::text as message_id, headers, payload::text as payload_text, priority,
            (extract(epoch from created_at) * 1000)::float8 as created_ms
       from outbox where status = 'pending' order by id`,
  );
  const inFlight = options.inFlight ?? 2_000;
  const model = await amqp.connect(options.url);
  try {
    const channel = await model.createConfirmChannel();
    await channel.assertQueue(options.queue, queueOptions(options.queueType));
    let unconfirmed = 0;
    let failed = 0;
    let wake: (() => void) | undefined;
    const notify = () => {
      const resolve = wake;
      wake = undefined;
      resolve?.();
    };
    channel.on('drain', notify);
    channel.on('return', () => failed++);
    for (const row of rows) {
      while (unconfirmed >= inFlight) await new Promise<void>((resolve) => (wake = resolve));
      unconfirmed++;
      const correlationId = row.headers[HEADER.correlationId];
      channel.publish(
        '',
        options.queue,
        Buffer.from(row.payload_text, 'utf8'),
        {
          persistent: true,
          mandatory: true,
          messageId: row.message_id,
          contentType: 'application/json',
          headers: row.headers,
          priority: 9 - Math.min(9, Math.max(0, row.priority)),
          timestamp: Math.floor(row.created_ms / 1000),
          appId: 'herald',
          ...(typeof correlationId === 'string' ? { correlationId } : {}),
        },
        (error: unknown) => {
          unconfirmed--;
          if (error) failed++;
          notify();
        },
      );
    }
    await channel.waitForConfirms();
    if (failed > 0) throw new Error(`setup: ${failed} of ${rows.length} publishes were nacked or returned`);
    const { messageCount } = await channel.checkQueue(options.queue);
    await channel.close();
    await db.query(
      `update outbox set status = 'sent', attempts = 1, sent_at = now(), locked_until = null where status = 'pending'`,
    );
    for (const table of ['campaign', 'event', 'outbox', 'inbox']) {
      await db.query(`vacuum (analyze) ${table}`);
    }
    return {
      published: rows.length,
      inQueue: messageCount,
      bodyBytes: rows[0] ? Buffer.byteLength(rows[0].payload_text) : 0,
    };
  } finally {
    await model.close().catch(() => {});
  }
}

/** Deletes the queue and the retry and dead-letter queues the consumer toolkit declared next to it. */
export async function deleteConsumerQueues(
  url: string,
  spec: { queue: string; queueType: QueueType; retryDelayMs: number },
): Promise<void> {
  const model = await amqp.connect(url);
  try {
    const channel = await model.createChannel();
    for (const { name } of consumerQueues(spec)) await channel.deleteQueue(name);
  } finally {
    await model.close().catch(() => {});
  }
}
