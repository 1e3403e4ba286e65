/**
 * The completion notice (seed 003's reporting traffic, ADR 0019): when a charged SMS campaign
 * reaches a final status — COMPLETED, PARTIAL or FAILED (the roll-up's recount), CANCELLED (the
 * cancellation settled) or EXPIRED (once its withdrawal refund is recorded) — one outbox message
 * `campaign.completed` | `campaign.partial` | `campaign.failed` | `campaign.cancelled` |
 * `campaign.expired` with its final counts and costs, for the systems that bill or report. Written by
 * the campaign descriptor's `messagesFor`, so it is in the same transaction as the event that made the
 * campaign final, whichever path took it there (invariant 1), and published by the relay only
 * (invariant 2), at priority 5 so it never holds back dispatch. Its message id is derived from the
 * campaign, the status and the resend attempt: each final status of each cycle is announced once
 * (invariant 4). It goes through the SMS sink the deployment chose (HERALD_SMS_SINK, the command
 * handler's configuration): the Kafka topic `sms.reporting`, or the RabbitMQ queue of that name.
 */
import type { CampaignEvent, CampaignState } from '../../../domain/campaign.js';
import { HEADER } from '../../../messaging/headers.js';
import { derivedMessageId, type OutboxMessageSpec } from '../../../outbox/outbox-writer.js';
import type { HeraldConfig } from '../../../settings/core.js';
import type { SmsSettings } from './settings.js';
import { SMS_REPORTING_TOPIC } from './topology.js';

/** The SMS sink of a process's configuration (HERALD_SMS_SINK); Kafka, its default, without one. */
export function smsSinkOf(config: HeraldConfig | undefined): SmsSettings['sink'] {
  return (config as { sms?: Pick<SmsSettings, 'sink'> } | undefined)?.sms?.sink ?? 'kafka';
}

/** Seed 003: reporting traffic uses priority 5 (SMS dispatch 1–3). */
export const COMPLETION_NOTICE_PRIORITY = 5;

export type CompletionNoticeType =
  | 'campaign.completed'
  | 'campaign.partial'
  | 'campaign.failed'
  | 'campaign.cancelled'
  | 'campaign.expired';

export interface CompletionNotice {
  type: CompletionNoticeType;
  campaignId: string;
  organizationId: string;
  status: 'COMPLETED' | 'PARTIAL' | 'FAILED' | 'CANCELLED' | 'EXPIRED';
  counts: {
    recipients: number;
    delivered: number;
    failed: number;
    unconfirmed: number;
    refunded: number;
    cancelled: number;
  };
  money: {
    totalCost: string;
    actualCost: string;
    refundedCost: string;
    unconfirmedCost: string;
    cancelledCost: string;
  };
  resendAttempt: number;
  at: string;
}

const NOTICE_OF: Partial<Record<CampaignEvent['type'], CompletionNoticeType>> = {
  CampaignCompleted: 'campaign.completed',
  CampaignPartiallyCompleted: 'campaign.partial',
  CampaignFailed: 'campaign.failed',
  CampaignCancelled: 'campaign.cancelled',
};

function noticeType(event: CampaignEvent, state: CampaignState): CompletionNoticeType | null {
  if (event.type === 'CampaignWithdrawalRefunded')
    return state.status === 'EXPIRED' ? 'campaign.expired' : null;
  return NOTICE_OF[event.type] ?? null;
}

/** The notice an event causes (empty for any other event, a LINE campaign, or one never charged). */
export function completionNoticesFor(
  event: CampaignEvent,
  state: CampaignState,
  sink: SmsSettings['sink'] = 'kafka',
): OutboxMessageSpec[] {
  if (state.status === 'NONE' || state.sms === null || state.sms.chargedAt === null) return [];
  const type = noticeType(event, state);
  if (type === null) return [];
  const status = state.status;
  if (
    status !== 'COMPLETED' &&
    status !== 'PARTIAL' &&
    status !== 'FAILED' &&
    status !== 'CANCELLED' &&
    status !== 'EXPIRED'
  ) {
    return [];
  }
  const sms = state.sms;
  const p = sms.progress;
  const payload: CompletionNotice = {
    type,
    campaignId: state.campaignId,
    organizationId: state.organizationId,
    status,
    counts: {
      recipients: sms.recipients,
      delivered: p.delivered,
      failed: p.failed,
      unconfirmed: p.unconfirmed,
      refunded: p.refunded,
      cancelled: p.cancelled,
    },
    money: {
      totalCost: sms.totalCost,
      actualCost: sms.actualCost,
      refundedCost: sms.refundedCost,
      unconfirmedCost: sms.unconfirmedCost,
      cancelledCost: sms.cancelledCost,
    },
    resendAttempt: state.resendAttempt,
    at: state.statusChangedAt,
  };
  return [
    {
      messageId: derivedMessageId('campaign', state.campaignId, 'notice', status, state.resendAttempt),
      sink,
      destination: SMS_REPORTING_TOPIC,
      partitionKey: state.campaignId,
      payload,
      priority: COMPLETION_NOTICE_PRIORITY,
      headers: { [HEADER.organizationId]: state.organizationId },
    },
  ];
}
