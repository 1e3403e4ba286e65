/**
 * The delivery side of seed 000, as a configuration of the fenced handler (src/worker/fenced-handler.ts):
 * consumes line_broadcast_rich_message / line_multicast_rich_message and delivers a campaign only while
 * it is DISPATCHING *with the message's epoch* (invariant 5); anything else is a quiet, permanent
 * discard recorded as `LineDeliveryDiscarded` on `line_delivery/<message id>` (the campaign is NOT
 * flipped to FAILED). While the send runs, a heartbeat refreshes the claim; the outcome (COMPLETED, or
 * FAILED on a permanent delivery error) is a campaign command in the inbox transaction (invariant 4),
 * so a redelivered message is delivered once.
 */
import { z } from 'zod';
import {
  type LineDeliveryRecord,
  recordLineDeliveries,
  recordLineDelivery,
} from '../../adapters/postgres/line-delivery-queries.js';
import type { CampaignCommand, CampaignEvent, CampaignState } from '../../domain/campaign.js';
import type { CommandHandler } from '../../eventstore/command-handler.js';
import type { Logger } from '../../logger.js';
import type { SqlClient } from '../../ports/database.js';
import { type ConsumeDeps, type Consumer, consume, type Handler } from '../../worker/consume.js';
import {
  DEFAULT_HEARTBEAT_MS,
  type EffectContext,
  type FencedHandlerDefinition,
  fencedHandler,
} from '../../worker/fenced-handler.js';
import { campaignAggregate, type LineDispatchPayload } from './descriptor.js';
import { LINE_DELIVERY_CONSUMER, LINE_QUEUES } from './topology.js';

export { DEFAULT_HEARTBEAT_MS };

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
  /** Several deliveries at once (optional): with it, the worker handles messages in batches. */
  deliverMany?(deliveries: readonly LineDeliveryRecord[], tx: SqlClient): Promise<void>;
}

export const recordingLineDeliveryPort: LineDeliveryPort = {
  deliver: (delivery, tx) => recordLineDelivery(tx, delivery),
  deliverMany: (deliveries, tx) => recordLineDeliveries(tx, deliveries),
};

const deliveryRecord = ({
  message,
  claim,
}: EffectContext<CampaignState, LineDispatchPayload>): LineDeliveryRecord => ({
  campaignId: claim.streamId,
  epoch: claim.epoch,
  castType: message.payload.castType,
  audienceId: message.payload.audienceId,
  lineOaId: message.payload.lineOaId,
  messageId: message.messageId,
});

export function lineDelivery(
  port: LineDeliveryPort,
): FencedHandlerDefinition<CampaignState, CampaignCommand, CampaignEvent, LineDispatchPayload> {
  return {
    consumer: LINE_DELIVERY_CONSUMER,
    aggregate: campaignAggregate,
    effect: (context) => port.deliver(deliveryRecord(context), context.tx),
    ...(port.deliverMany
      ? {
          effectMany: (contexts: readonly EffectContext<CampaignState, LineDispatchPayload>[]) =>
            port.deliverMany!(contexts.map(deliveryRecord), contexts[0]!.tx),
        }
      : {}),
    heartbeat: ({ streamId, epoch }, now) => ({ type: 'Heartbeat', campaignId: streamId, epoch, now }),
    complete: ({ streamId, epoch }, now) => ({ type: 'CompleteCampaign', campaignId: streamId, epoch, now }),
    fail: ({ streamId, epoch }, reason, now) => ({
      type: 'FailCampaign',
      campaignId: streamId,
      epoch,
      reason,
      now,
    }),
  };
}

export interface LineDeliveryWorkerOptions {
  handler: CommandHandler;
  logger: Logger;
  port?: LineDeliveryPort;
  heartbeatMs?: number;
}

/** The LINE delivery handler, and a way to start it on both LINE queues outside the worker role. */
export class LineDeliveryWorker {
  readonly handle: Handler<LineDispatchPayload>;

  constructor(options: LineDeliveryWorkerOptions) {
    this.handle = fencedHandler(lineDelivery(options.port ?? recordingLineDeliveryPort), {
      handler: options.handler,
      logger: options.logger,
      heartbeatMs: options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
    });
  }

  /** Starts one consumer per LINE queue. */
  start(
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
