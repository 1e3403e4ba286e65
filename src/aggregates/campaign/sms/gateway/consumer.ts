/**
 * The gateway's consumer of the submit topic (ADR 0022), run through the consumer toolkit (inbox
 * `sms-gateway`: a chunk is taken once however often it is delivered, invariant 4). In the inbox
 * transaction it stores the chunk and one row per recipient part, split from the frozen content and
 * encoding exactly as they were charged, for the SMSC connection of the chunk's route channel; sending
 * happens later, bind by bind, from those rows. The fence (invariant 5, as ADR 0022 words it for SMS): a
 * chunk whose campaign no longer sends (PAUSED, CANCELLING, final; not DISPATCHING or QUEUED) or whose
 * recipient no longer waits for this very submission is stored withdrawn — never sent — and its recipients
 * are reported SEND_FAILED in the same transaction, so the campaign's own rules (retry while it may still
 * send, refund once it will not) decide what becomes of them; the inbox records the chunk as discarded.
 */
import { z } from 'zod';
import {
  insertGatewaySubmission,
  type NewGatewayPart,
  sendingState,
} from '../../../../adapters/postgres/sms-gateway-queries.js';
import { splitUnits } from '../../../../domain/sms/smpp-message.js';
import type { Logger } from '../../../../logger.js';
import type { Handler } from '../../../../worker/delivery-policy.js';
import type { SmsSubmission } from '../dispatch.js';
import type { SmsSettings } from '../settings.js';
import { reportRecipients } from './reports.js';
import { type SmsGatewaySettings, smscFor } from './settings.js';

/** The gateway's inbox name (and Kafka consumer group). */
export const SMS_GATEWAY_CONSUMER = 'sms-gateway';

/** Campaign statuses in which a chunk may still be sent (a retry round re-claims the campaign: QUEUED). */
export const SENDING_STATUSES: readonly string[] = ['DISPATCHING', 'QUEUED'];

const digits = z.union([
  z.string().regex(/^[1-9][0-9]{0,18}$/),
  z.number().int().positive().transform(String),
]);

export const smsSubmissionSchema = z.object({
  submissionId: z.uuid(),
  campaignId: z.uuid(),
  organizationId: z.string().min(1),
  epoch: z.number().int().nonnegative(),
  messageType: z.enum(['PROMOTIONAL', 'TRANSACTIONAL']),
  operatorCampaignId: z.string().nullable(),
  priority: z.number().int(),
  lang: z.string(),
  encoding: z.enum(['GSM7', 'UCS2']),
  segments: z.number().int().min(1).max(10),
  content: z.string().min(1),
  sender: z.string().min(1),
  route: z.object({ operator: z.string().min(1), channel: z.string().min(1), mnoUser: z.string().min(1) }),
  recipients: z.array(z.object({ recipientId: digits, msisdn: z.string().min(1) })).min(1),
});

export interface GatewayConsumerDeps {
  settings: Pick<SmsSettings, 'sink' | 'dlrTopic'>;
  gateway: Pick<SmsGatewaySettings, 'smscs'>;
  logger: Logger;
  /** After the commit of a chunk with parts to send for this SMSC (wakes its binds in this process). */
  queued?: (smsc: string) => void;
}

export function gatewayConsumer(deps: GatewayConsumerDeps): Handler<SmsSubmission> {
  return async (message, tx) => {
    const chunk = message.payload;
    const log = deps.logger.child({
      messageId: message.messageId,
      correlationId: message.correlationId,
      aggregateId: chunk.campaignId,
      submissionId: chunk.submissionId,
      epoch: chunk.epoch,
    });
    const smsc = smscFor(deps.gateway.smscs, chunk.route.channel);
    const state = await sendingState(
      tx,
      chunk.campaignId,
      chunk.recipients.map((r) => r.recipientId),
    );
    const campaignSends = state.campaignStatus !== null && SENDING_STATUSES.includes(state.campaignStatus);
    const units = splitUnits(chunk.content, chunk.encoding).length;
    const planMatches = units === chunk.segments;
    if (!planMatches) {
      log.error(
        { segments: chunk.segments, parts: units },
        'the frozen segment plan does not match the parts: not sent',
      );
    }
    const parts: NewGatewayPart[] = [];
    let withdrawn = 0;
    for (const recipient of chunk.recipients) {
      const row = state.recipients.get(recipient.recipientId);
      const reason = !campaignSends
        ? (state.campaignStatus ?? 'campaign not found')
        : !smsc
          ? `no SMSC for channel ${chunk.route.channel}`
          : !planMatches
            ? `segment plan ${chunk.segments} ≠ ${units} parts`
            : row?.status !== 'SUBMITTED' || row.submissionId !== chunk.submissionId
              ? `recipient ${row?.status ?? 'not found'}`
              : null;
      if (reason) withdrawn++;
      for (let partNo = 1; partNo <= units; partNo++) {
        parts.push({
          recipientId: recipient.recipientId,
          msisdn: recipient.msisdn,
          partNo,
          parts: units,
          state: reason ? 'withdrawn' : 'queued',
          withdrawnReason: reason,
        });
      }
    }
    const stored = await insertGatewaySubmission(
      tx,
      {
        submissionId: chunk.submissionId,
        campaignId: chunk.campaignId,
        organizationId: chunk.organizationId,
        epoch: chunk.epoch,
        smsc: smsc?.name ?? '-',
        operator: chunk.route.operator,
        routeChannel: chunk.route.channel,
        mnoUser: chunk.route.mnoUser,
        sender: chunk.sender,
        encoding: chunk.encoding,
        segments: chunk.segments,
        content: chunk.content,
        messageType: chunk.messageType,
      },
      parts,
    );
    if (!stored) {
      log.info('submission already stored; nothing to do');
      return 'processed';
    }
    if (withdrawn > 0) {
      const reported = await reportRecipients(
        tx,
        chunk.recipients.map((r) => ({ submissionId: chunk.submissionId, recipientId: r.recipientId })),
        {
          settings: deps.settings,
          cause: 'consumer',
          smsc: smsc?.name,
          correlationId: message.correlationId,
        },
      );
      log.warn(
        { withdrawn, reported: reported.length, campaignStatus: state.campaignStatus },
        'submission withdrawn unsent',
      );
    }
    if (withdrawn < chunk.recipients.length && smsc) {
      const name = smsc.name;
      message.afterCommit(() => deps.queued?.(name));
      log.debug(
        { recipients: chunk.recipients.length - withdrawn, parts: parts.length },
        'submission queued',
      );
    }
    return campaignSends
      ? 'processed'
      : { discard: `campaign ${state.campaignStatus ?? 'not found'}: withdrawn unsent` };
  };
}
