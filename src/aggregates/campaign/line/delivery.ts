/**
 * Seed 000's LINE delivery on the Messaging API (ADR 0021), as a configuration of the fenced handler:
 * a dispatch message is delivered only while its campaign is DISPATCHING with the message's epoch
 * (invariant 5). The delivery is planned once (chunks of ≤ 500 user ids of the sealed audience, or one
 * broadcast / narrowcast call); each chunk is sent with its planned retry key and recorded as soon as LINE
 * answers, in its own transaction under the claim's epoch, so a crash resumes at the next chunk and an
 * unrecorded chunk goes again with the same key (LINE answers 409: already accepted). Every recorded step
 * is a sign of life for the claim. The completion (COMPLETED, or PARTIAL with chunks given up as
 * unconfirmed) is the inbox transaction's command (invariant 4); a refusal by LINE fails the campaign
 * with LINE's message, a 5xx or network error goes back to the consumer's retry queue.
 */
import { z } from 'zod';
import type { LineMessagingPort, LineOutcome } from '../../../adapters/line/messaging-api.js';
import type { LineDeliveryStep } from '../../../domain/campaign/commands.js';
import {
  lineDeliveryDone,
  lineRetryKey,
  nextChunkKeyExpired,
  plannedChunks,
} from '../../../domain/campaign/line.js';
import type {
  CampaignCommand,
  CampaignEvent,
  CampaignState,
  ExistingCampaign,
} from '../../../domain/campaign.js';
import { IllegalStateError, NotFoundError, PermanentError, TransientError } from '../../../errors.js';
import type { CommandHandler } from '../../../eventstore/command-handler.js';
import { databaseNow } from '../../../eventstore/command-handler.js';
import type { Logger } from '../../../logger.js';
import type { EventMeta } from '../../../ports/events.js';
import type { Handler } from '../../../worker/delivery-policy.js';
import {
  DEFAULT_HEARTBEAT_MS,
  type EffectContext,
  type FencedHandlerDefinition,
  fencedHandler,
} from '../../../worker/fenced-handler.js';
import { campaignAggregate, type LineDispatchPayload } from '../descriptor.js';
import { LINE_DELIVERY_CONSUMER } from '../topology.js';
import { ChunkPages } from './chunk-pages.js';
import type { LineEndpoint, LineRateLimiter } from './rate-limit.js';
import type { LineSettings } from './settings.js';

export const lineDispatchPayload = z.strictObject({
  campaignId: z.uuid(),
  audienceId: z.string().nullable(),
  organizationId: z.string().min(1),
  lineOaId: z.string().nullable(),
  castType: z.enum(['broadcast', 'multicast', 'narrowcast']),
  epoch: z.number().int().positive(),
}) satisfies z.ZodType<LineDispatchPayload>;

/** What the delivery needs of the LINE directory (channels and audiences). */
export interface LineDeliveryDirectory {
  tokenFor(lineOaId: string): Promise<string>;
  invalidateToken(lineOaId: string): void;
  /** The sealed audience's size, or why it cannot be sent to. */
  sealedAudienceSize(audienceId: string, organizationId: string): Promise<number | { refused: string }>;
  membersPage(audienceId: string, after: string | null, limit: number): Promise<string[]>;
}

export interface LineDeliveryDeps {
  handler: CommandHandler;
  logger: Logger;
  messaging: LineMessagingPort;
  directory: LineDeliveryDirectory;
  rateLimiter: LineRateLimiter;
  settings: Pick<LineSettings, 'maxThrottleWaitMs'>;
  heartbeatMs?: number;
  sleep?: (ms: number) => Promise<void>;
  /** Chunks of audience ids one read fetches (default LINE_CHUNKS_PER_READ). */
  chunksPerRead?: number;
}

/** A 429 without Retry-After waits this long, doubling up to the throttle cap. */
const THROTTLE_BACKOFF_MS = 1000;

type Dispatching = Extract<ExistingCampaign, { status: 'DISPATCHING' }>;

/** The claim was revoked while the delivery ran: stop sending; the completion then discards the message. */
class ClaimRevoked extends Error {}

const endpointOf = (castType: string): LineEndpoint =>
  castType === 'broadcast' ? 'broadcast' : castType === 'narrowcast' ? 'narrowcast' : 'multicast';

function failure(outcome: Exclude<LineOutcome, { kind: 'accepted' | 'duplicate' }>) {
  return {
    kind: outcome.kind,
    status:
      'status' in outcome
        ? outcome.status
        : outcome.kind === 'quota' || outcome.kind === 'throttled'
          ? 429
          : null,
    requestId: outcome.requestId,
    message: outcome.message.slice(0, 2000) || outcome.kind,
    ...(outcome.kind === 'rejected' && outcome.details.length > 0
      ? { details: outcome.details.slice(0, 20) }
      : {}),
    ...(outcome.kind === 'throttled' ? { retryAfterMs: outcome.retryAfterMs } : {}),
  };
}

function refusalReason(
  chunk: number,
  outcome: Exclude<LineOutcome, { kind: 'accepted' | 'duplicate' }>,
): string {
  const id = outcome.requestId ? ` (x-line-request-id ${outcome.requestId})` : '';
  if (outcome.kind === 'quota')
    return `LINE monthly message quota reached at chunk ${chunk}: ${outcome.message}${id}`;
  const status = 'status' in outcome ? outcome.status : null;
  const details =
    outcome.kind === 'rejected' && outcome.details.length > 0
      ? `; ${outcome.details.map((d) => [d.property, d.message].filter(Boolean).join(': ')).join('; ')}`
      : '';
  return `LINE refused chunk ${chunk} (${status ?? outcome.kind}): ${outcome.message}${details}${id}`;
}

/** The fenced handler's definition of the LINE delivery. */
export function lineDelivery(
  deps: LineDeliveryDeps,
): FencedHandlerDefinition<CampaignState, CampaignCommand, CampaignEvent, LineDispatchPayload> {
  const commands = deps.handler.for(campaignAggregate);
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));

  async function deliver({
    message,
    claim,
    state,
    tx,
    log,
  }: EffectContext<CampaignState, LineDispatchPayload>) {
    const meta: EventMeta = {
      ...(message.correlationId ? { correlationId: message.correlationId } : {}),
      causationId: message.messageId,
      actor: LINE_DELIVERY_CONSUMER,
    };
    let s = state as Dispatching;
    if (s.line === null || s.castType === null || s.lineOaId === null) {
      throw new PermanentError(`campaign ${s.campaignId} has no LINE content, cast type or official account`);
    }
    const { campaignId, castType, lineOaId } = s;
    const audienceId = s.audienceId;
    const multicast = castType === 'multicast';

    /** The campaign as this delivery's last step left it: the next step decides on it without a load. */
    let held: { streamId: string; state: CampaignState; version: number } | null = null;
    const step = async (next: LineDeliveryStep): Promise<Dispatching> => {
      const command = (now: Date): CampaignCommand => ({
        type: 'AdvanceLineDelivery',
        campaignId,
        epoch: claim.epoch,
        now,
        step: next,
      });
      try {
        // Guarded by the held version: a campaign changed meanwhile (a heartbeat, a pause) is loaded again.
        const result = held
          ? await commands.handleFrom(held, command, { meta })
          : await commands.handle(campaignId, command, { meta });
        held = { streamId: campaignId, state: result.state, version: result.version };
        return result.state as Dispatching;
      } catch (error) {
        if (error instanceof IllegalStateError) throw new ClaimRevoked(error.message);
        throw error;
      }
    };

    try {
      if (s.line!.plan === null) {
        let recipients: number | null = null;
        if (multicast) {
          const size = await deps.directory.sealedAudienceSize(audienceId!, s.organizationId);
          if (typeof size !== 'number') throw new PermanentError(size.refused);
          recipients = size;
        }
        s = await step({ type: 'plan', chunks: plannedChunks(castType, recipients ?? 0), recipients });
        log.info({ chunks: s.line!.plan!.chunks, recipients }, 'LINE delivery planned');
      }
      const plan = s.line!.plan!;
      let token: string;
      try {
        token = await deps.directory.tokenFor(lineOaId);
      } catch (error) {
        if (error instanceof NotFoundError) throw new PermanentError(error.message);
        throw error;
      }
      const endpoint = endpointOf(castType);
      // Only the first chunk of this attempt can have waited past its key's validity (a crash, a pause).
      const startedAt = await databaseNow(tx);
      let first = true;
      let throttleWaitMs = THROTTLE_BACKOFF_MS;
      let reauthenticated = false;
      const pages = multicast
        ? new ChunkPages(
            (after, limit) => deps.directory.membersPage(audienceId!, after, limit),
            deps.chunksPerRead,
          )
        : null;

      while (!lineDeliveryDone(s.line!)) {
        const progress = s.line!.progress;
        const chunk = progress.chunksDone;
        const page = pages === null ? null : await pages.page(progress.cursor, plan.chunks - chunk);
        if (page !== null && page.length === 0) {
          throw new PermanentError(
            `audience ${audienceId} has no members after ${progress.cursor}: it changed after sealing`,
          );
        }
        const members: { recipients: number; cursor: string } | null =
          page === null ? null : { recipients: page.length, cursor: page[page.length - 1]! };
        if (first && nextChunkKeyExpired(s.line!, startedAt)) {
          s = await step({
            type: 'unconfirmed',
            chunk,
            recipients: members?.recipients ?? null,
            cursor: members?.cursor ?? null,
          });
          log.warn({ chunk }, 'LINE chunk given up as unconfirmed: its retry key may have expired');
          if (page !== null) pages!.done(page);
          continue;
        }
        first = false;
        // The delivery holds its inbox transaction while it waits: a slot further away than the throttle
        // cap gives the message back to the retry queue instead (the chunk keeps its key).
        const busyFor = await deps.rateLimiter.take(lineOaId, endpoint, deps.settings.maxThrottleWaitMs);
        if (busyFor !== null) {
          throw new TransientError(
            `LINE channel ${lineOaId}'s ${endpoint} rate leaves no slot for chunk ${chunk} within ${deps.settings.maxThrottleWaitMs} ms (next in ${Math.ceil(busyFor)} ms)`,
          );
        }
        // The next chunks' ids are read while this one is in flight (only read: sent after it is recorded).
        if (page !== null) pages!.readAhead(page, plan.chunks - chunk - 1);
        const call = {
          token,
          retryKey: lineRetryKey(campaignId, plan.epoch, chunk),
          messages: s.line!.messages,
        };
        const outcome =
          castType === 'broadcast'
            ? await deps.messaging.broadcast(call)
            : castType === 'narrowcast'
              ? await deps.messaging.narrowcast({ ...call, audienceGroupId: Number(audienceId) })
              : await deps.messaging.multicast({ ...call, to: page! });
        // No read in flight while recording: a delivery holds one pooled connection beside its inbox one.
        await pages?.settled();

        if (outcome.kind === 'accepted' || outcome.kind === 'duplicate') {
          s = await step({
            type: 'accepted',
            chunk,
            recipients: members?.recipients ?? null,
            cursor: members?.cursor ?? null,
            requestId: outcome.requestId,
            acceptedRequestId: outcome.kind === 'duplicate' ? outcome.acceptedRequestId : null,
          });
          log.info(
            {
              chunk,
              requestId: outcome.requestId,
              ...(outcome.kind === 'duplicate' ? { acceptedRequestId: outcome.acceptedRequestId } : {}),
            },
            outcome.kind === 'duplicate' ? 'LINE chunk already accepted (409)' : 'LINE chunk accepted',
          );
          if (page !== null) pages!.done(page);
          throttleWaitMs = THROTTLE_BACKOFF_MS;
          reauthenticated = false;
          continue;
        }
        s = await step({ type: 'failed', chunk, failure: failure(outcome) });
        if (outcome.kind === 'throttled') {
          const wait = outcome.retryAfterMs ?? throttleWaitMs;
          if (wait > deps.settings.maxThrottleWaitMs) {
            throw new TransientError(
              `LINE throttled chunk ${chunk} for ${wait} ms: longer than the throttle cap`,
            );
          }
          deps.rateLimiter.pause(lineOaId, endpoint, wait);
          log.warn(
            { chunk, waitMs: wait, requestId: outcome.requestId },
            'LINE throttled the chunk (429): waiting',
          );
          throttleWaitMs = Math.min(throttleWaitMs * 2, deps.settings.maxThrottleWaitMs);
          await sleep(wait);
          continue;
        }
        if (outcome.kind === 'rejected' && outcome.status === 401 && !reauthenticated) {
          // A token revoked or expired early: one fresh token before the refusal counts.
          deps.directory.invalidateToken(lineOaId);
          token = await deps.directory.tokenFor(lineOaId);
          reauthenticated = true;
          continue;
        }
        if (outcome.kind === 'transient') {
          throw new TransientError(
            `LINE call for chunk ${chunk} failed (${outcome.status ?? 'network'}): ${outcome.message}`,
          );
        }
        throw new PermanentError(refusalReason(chunk, outcome));
      }
    } catch (error) {
      if (error instanceof ClaimRevoked) {
        log.info({ reason: error.message }, 'claim revoked during the LINE delivery: stopped');
        return;
      }
      throw error;
    }
  }

  return {
    consumer: LINE_DELIVERY_CONSUMER,
    aggregate: campaignAggregate,
    effect: deliver,
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

/** The consumer's handler: the fenced LINE delivery under a heartbeat (seed 000: 5 minutes). */
export function lineDeliveryHandler(deps: LineDeliveryDeps): Handler<LineDispatchPayload> {
  return fencedHandler(lineDelivery(deps), {
    handler: deps.handler,
    logger: deps.logger,
    heartbeatMs: deps.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
  });
}
