/**
 * The delivery side of seed 000: consumes line_broadcast_rich_message / line_multicast_rich_message.
 * Before doing anything it re-checks the campaign (invariant 5): unless the campaign is DISPATCHING
 * *with the message's epoch*, the message is a quiet, permanent discard (recorded as an event and in
 * the inbox; the campaign is NOT flipped to FAILED). While the send runs, a heartbeat refreshes the
 * claim so the reaper leaves it alone. The outcome (COMPLETED, or FAILED on a permanent delivery
 * error) is a campaign command in the same transaction as the inbox row (invariant 4), so a
 * redelivered message is delivered once.
 */
import { z } from 'zod';
import { appendEvents } from '../../adapters/postgres/event-queries.js';
import {
  type LineDeliveryRecord,
  recordLineDelivery,
} from '../../adapters/postgres/line-delivery-queries.js';
import type { CampaignCommand, CampaignEvent, CampaignState } from '../../domain/campaign.js';
import { errorMessage, PermanentError } from '../../errors.js';
import type { AggregateCommands, CommandHandler } from '../../eventstore/command-handler.js';
import type { Logger } from '../../logger.js';
import type { SqlClient } from '../../ports/database.js';
import { type ConsumeDeps, type ConsumedMessage, type Consumer, consume } from '../../worker/consume.js';
import { withHeartbeat } from '../../worker/heartbeat.js';
import { campaignAggregate, type LineDispatchPayload } from './descriptor.js';
import { LINE_DELIVERY_CONSUMER, LINE_DELIVERY_STREAM_TYPE, LINE_QUEUES } from './topology.js';

/** Seed 000: the delivery consumer refreshes claimed_at every 5 minutes during a send. */
export const DEFAULT_HEARTBEAT_MS = 5 * 60_000;

export const lineDispatchPayload = z.strictObject({
  campaignId: z.uuid(),
  audienceId: z.string().nullable(),
  organizationId: z.string().min(1),
  lineOaId: z.string().nullable(),
  castType: z.enum(['broadcast', 'multicast']),
  epoch: z.number().int().positive(),
}) satisfies z.ZodType<LineDispatchPayload>;

/**
 * The LINE API is out of scope: a port with a working default that records each delivery in
 * `line_delivery` inside the handler's transaction. A real adapter calls the LINE Messaging API and
 * throws PermanentError for errors retrying cannot fix (anything else is retried with a delay).
 */
export interface LineDeliveryPort {
  deliver(delivery: LineDeliveryRecord, tx: SqlClient): Promise<void>;
}

export const recordingLineDeliveryPort: LineDeliveryPort = {
  deliver: (delivery, tx) => recordLineDelivery(tx, delivery),
};

export interface LineDeliveryWorkerOptions {
  handler: CommandHandler;
  logger: Logger;
  port?: LineDeliveryPort;
  heartbeatMs?: number;
}

export class LineDeliveryWorker {
  private readonly campaigns: AggregateCommands<CampaignState, CampaignCommand, CampaignEvent>;
  private readonly port: LineDeliveryPort;

  constructor(private readonly options: LineDeliveryWorkerOptions) {
    this.campaigns = options.handler.for(campaignAggregate);
    this.port = options.port ?? recordingLineDeliveryPort;
  }

  /** The consumer handler (exported for the toolkit; also usable with any transport). */
  readonly handle = async (message: ConsumedMessage<LineDispatchPayload>, tx: SqlClient) => {
    const { campaignId, epoch } = message.payload;
    const log = this.options.logger.child({
      messageId: message.messageId,
      correlationId: message.correlationId,
      aggregateId: campaignId,
      epoch,
    });
    const loaded = await campaignAggregate.store.load(tx, campaignId);
    const current = loaded?.state;
    if (current?.status !== 'DISPATCHING' || current.claimEpoch !== epoch) {
      const reason = !current
        ? 'campaign not found'
        : current.status !== 'DISPATCHING'
          ? `campaign is ${current.status}, not DISPATCHING`
          : `stale epoch ${epoch}: the live claim is epoch ${current.claimEpoch}`;
      await appendEvents(tx, [
        {
          streamType: LINE_DELIVERY_STREAM_TYPE,
          streamId: message.messageId,
          version: 1,
          type: 'LineDeliveryDiscarded',
          data: {
            campaignId,
            epoch,
            reason,
            campaignStatus: current?.status ?? null,
            campaignEpoch: current && current.status !== 'NONE' ? current.claimEpoch : null,
          },
          meta: {
            correlationId: message.correlationId,
            causationId: message.messageId,
            actor: LINE_DELIVERY_CONSUMER,
          },
        },
      ]);
      log.info({ reason }, 'delivery discarded at the destination re-check');
      return { discard: reason };
    }

    const meta = {
      correlationId: message.correlationId,
      causationId: message.messageId,
      actor: LINE_DELIVERY_CONSUMER,
    };
    try {
      await withHeartbeat(
        this.options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
        async () => {
          await this.campaigns.handle(campaignId, (now) => ({ type: 'Heartbeat', campaignId, epoch, now }), {
            meta,
          });
        },
        () =>
          this.port.deliver(
            {
              campaignId,
              epoch,
              castType: message.payload.castType,
              audienceId: message.payload.audienceId,
              lineOaId: message.payload.lineOaId,
              messageId: message.messageId,
            },
            tx,
          ),
        { onError: (error) => log.warn({ err: error }, 'heartbeat failed') },
      );
    } catch (error) {
      if (!(error instanceof PermanentError)) throw error; // transient: retried through the retry queue
      await this.campaigns.handleInTransaction(
        tx,
        campaignId,
        (now) => ({ type: 'FailCampaign', campaignId, epoch, reason: errorMessage(error), now }),
        { meta },
      );
      log.warn({ err: error }, 'delivery failed permanently: campaign FAILED');
      return 'processed' as const;
    }
    await this.campaigns.handleInTransaction(
      tx,
      campaignId,
      (now) => ({ type: 'CompleteCampaign', campaignId, epoch, now }),
      {
        meta,
      },
    );
    log.info('campaign delivered: COMPLETED');
    return 'processed' as const;
  };

  /** Starts one consumer per LINE queue. */
  async start(
    deps: ConsumeDeps,
    options: {
      prefetch?: number;
      maxAttempts?: number;
      retryDelayMs?: number;
      queueType?: 'quorum' | 'classic';
      signal?: AbortSignal;
    } = {},
  ): Promise<Consumer[]> {
    return Promise.all(
      LINE_QUEUES.map((queue) =>
        consume<LineDispatchPayload>(deps, queue, this.handle, {
          consumer: LINE_DELIVERY_CONSUMER,
          parse: (payload) => lineDispatchPayload.parse(payload),
          ...options,
        }),
      ),
    );
  }
}
