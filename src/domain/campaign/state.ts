/**
 * Campaign state (the inline projection stored in the campaign state table) and `evolve`, which
 * folds events into it. State is plain JSON, keyed on `status`, and never holds `undefined`, so a
 * jsonb round trip and a replay of the stream both give exactly the stored row (invariant 8).
 * `evolve` trusts the facts it is given but refuses events that cannot follow the current state:
 * such an event means a corrupt log or a decide/evolve bug, and replay must stop loudly.
 */

import { IllegalStateError } from '../../errors.js';
import { assertNever } from '../decider.js';
import { addMoney, toUnits, ZERO_MONEY } from '../sms/money.js';
import type { CampaignEvent } from './events.js';
import { type LineCampaignFacts, newLineFacts } from './line.js';
import { EMPTY_PROGRESS, newSmsFacts, type SmsCampaignFacts, withdrawable } from './sms.js';
import {
  CAMPAIGN_STATUSES,
  type CampaignChannel,
  type CampaignStatus,
  type CastType,
  type PausableCampaignStatus,
} from './status.js';

/** Fields every existing campaign has, whatever its status. */
export interface CampaignFields {
  readonly campaignId: string;
  readonly organizationId: string;
  readonly channel: CampaignChannel;
  /** LINE only (null for sms): decides the destination queue. */
  readonly castType: CastType | null;
  /** LINE only; required for a multicast, optional for a broadcast (which goes to every friend). */
  readonly audienceId: string | null;
  /** LINE only: the official account that sends. */
  readonly lineOaId: string | null;
  readonly name: string;
  readonly idempotencyKey: string | null;
  /** The Idempotency-Key header of the request that created it, or null. */
  readonly requestIdempotencyKey: string | null;
  /** When dispatch may start; null = instant (activation goes to QUEUED). */
  readonly startAt: string | null;
  /** A SCHEDULED campaign not claimed by this time expires instead; null = no deadline. */
  readonly dispatchDeadline: string | null;
  /** Fencing token: incremented by every claim and by every revocation of a live claim. Starts at 0. */
  readonly claimEpoch: number;
  /** Time of the live claim's last claim/heartbeat; non-null only while DISPATCHING. */
  readonly claimedAt: string | null;
  /** The status a PAUSED campaign was paused from; non-null only while PAUSED. */
  readonly pausedFrom: PausableCampaignStatus | null;
  /** Why a PAUSED campaign was paused (operator's reason, auto-pause's measured rate); null otherwise. */
  readonly pauseReason: string | null;
  /** Soft delete: a deleted campaign keeps its status but is never claimed again. */
  readonly deletedAt: string | null;
  /** Incremented by each ResendFailed; part of seed 003's charge/refund keys. */
  readonly resendAttempt: number;
  /** Why the campaign failed; non-null only while FAILED. */
  readonly failureReason: string | null;
  readonly createdAt: string;
  /** When the campaign entered its current status (stale-recovery jobs measure from here). */
  readonly statusChangedAt: string;
  /** SMS campaigns with a definition (seed 003): totals, charge, build attempts, progress; null otherwise. */
  readonly sms: SmsCampaignFacts | null;
  /** LINE campaigns: content, delivery plan and progress (ADR 0021); null for SMS and pre-issue-20 LINE events. */
  readonly line: LineCampaignFacts | null;
}

export interface NoCampaign {
  readonly status: 'NONE';
}
export type DraftCampaign = CampaignFields & { readonly status: 'DRAFT' };
export type BuildingCampaign = CampaignFields & { readonly status: 'BUILDING' };
export type QueuedCampaign = CampaignFields & { readonly status: 'QUEUED' };
export type ScheduledCampaign = CampaignFields & { readonly status: 'SCHEDULED'; readonly startAt: string };
export type DispatchingCampaign = CampaignFields & {
  readonly status: 'DISPATCHING';
  readonly claimedAt: string;
};
export type PausedCampaign = CampaignFields & {
  readonly status: 'PAUSED';
  readonly pausedFrom: PausableCampaignStatus;
};
export type CompletedCampaign = CampaignFields & { readonly status: 'COMPLETED' };
export type PartialCampaign = CampaignFields & { readonly status: 'PARTIAL' };
export type FailedCampaign = CampaignFields & { readonly status: 'FAILED'; readonly failureReason: string };
export type ExpiredCampaign = CampaignFields & {
  readonly status: 'EXPIRED';
  readonly dispatchDeadline: string;
};
export type CancellingCampaign = CampaignFields & { readonly status: 'CANCELLING' };
export type CancelledCampaign = CampaignFields & { readonly status: 'CANCELLED' };

export type ExistingCampaign =
  | DraftCampaign
  | BuildingCampaign
  | QueuedCampaign
  | ScheduledCampaign
  | DispatchingCampaign
  | PausedCampaign
  | CompletedCampaign
  | PartialCampaign
  | FailedCampaign
  | ExpiredCampaign
  | CancellingCampaign
  | CancelledCampaign;

export type CampaignState = NoCampaign | ExistingCampaign;

export type CampaignIn<S extends CampaignStatus> = Extract<ExistingCampaign, { status: S }>;

export function initialCampaignState(): CampaignState {
  return { status: 'NONE' };
}

/** Statuses a campaign may be soft-deleted in (see the ADR: never while work or money is in flight). */
export const DELETABLE_STATUSES = [
  'DRAFT',
  'QUEUED',
  'SCHEDULED',
  'PAUSED',
  'COMPLETED',
  'PARTIAL',
  'FAILED',
  'CANCELLED',
  'EXPIRED',
] as const satisfies readonly CampaignStatus[];

export function evolveCampaign(state: CampaignState, event: CampaignEvent): CampaignState {
  switch (event.type) {
    case 'CampaignCreated': {
      if (state.status !== 'NONE') throw unfit(state, event);
      const { mode, at, sms, line, requestIdempotencyKey, ...fields } = event.data;
      return {
        ...fields,
        requestIdempotencyKey: requestIdempotencyKey ?? null,
        sms: sms ? newSmsFacts(sms) : null,
        line: line ? newLineFacts(line.messages) : null,
        status: mode === 'building' ? 'BUILDING' : 'DRAFT',
        claimEpoch: 0,
        claimedAt: null,
        pausedFrom: null,
        pauseReason: null,
        deletedAt: null,
        resendAttempt: 0,
        failureReason: null,
        createdAt: at,
        statusChangedAt: at,
      };
    }
    case 'CampaignActivated': {
      const found = requireStatus(state, event, ['DRAFT', 'BUILDING'], { live: true });
      const { charge } = event.data;
      if ((charge !== undefined) !== (found.sms !== null)) {
        throw unfit(
          state,
          event,
          charge ? 'only an SMS campaign is charged' : 'an SMS campaign is activated by its charge',
        );
      }
      const s =
        charge && found.sms
          ? { ...found, sms: { ...found.sms, chargeKey: charge.key, chargedAt: event.data.at } }
          : found;
      if (event.data.to === 'SCHEDULED') {
        if (s.startAt === null) throw unfit(state, event, 'it has no startAt');
        return { ...s, status: 'SCHEDULED', startAt: s.startAt, statusChangedAt: event.data.at };
      }
      return { ...s, status: 'QUEUED', statusChangedAt: event.data.at };
    }
    case 'CampaignScheduled': {
      const s = requireStatus(state, event, ['DRAFT'], { live: true });
      const { startAt, dispatchDeadline, at } = event.data;
      return { ...s, status: 'SCHEDULED', startAt, dispatchDeadline, statusChangedAt: at };
    }
    case 'CampaignClaimed': {
      const s = requireStatus(state, event, ['QUEUED', 'SCHEDULED'], { live: true });
      expectEpoch(s, event, s.claimEpoch + 1);
      const { epoch, claimedAt } = event.data;
      return { ...s, status: 'DISPATCHING', claimEpoch: epoch, claimedAt, statusChangedAt: claimedAt };
    }
    case 'CampaignReclaimed': {
      const s = requireStatus(state, event, ['DISPATCHING']);
      expectEpoch(s, event, s.claimEpoch + 1);
      const { epoch, to, at } = event.data;
      const released = { ...s, claimEpoch: epoch, claimedAt: null, statusChangedAt: at };
      if (to === 'SCHEDULED') {
        if (s.startAt === null) throw unfit(state, event, 'it has no startAt');
        return { ...released, status: 'SCHEDULED', startAt: s.startAt };
      }
      return { ...released, status: 'QUEUED' };
    }
    case 'CampaignHeartbeat': {
      const s = requireStatus(state, event, ['DISPATCHING']);
      expectEpoch(s, event, s.claimEpoch);
      return { ...s, claimedAt: event.data.claimedAt };
    }
    case 'CampaignCompleted': {
      const s = requireStatus(state, event, ['DISPATCHING']);
      expectEpoch(s, event, s.claimEpoch);
      return { ...s, status: 'COMPLETED', claimedAt: null, statusChangedAt: event.data.at };
    }
    case 'CampaignFailed': {
      const s = requireStatus(state, event, ['DRAFT', 'BUILDING', 'DISPATCHING']);
      if (s.status === 'DISPATCHING') expectEpoch(s, event, s.claimEpoch);
      else if (event.data.epoch !== null)
        throw unfit(state, event, 'only a DISPATCHING failure carries an epoch');
      const { reason, at } = event.data;
      let sms = s.sms;
      if (event.data.recipientsCleared) {
        if (!sms || s.status === 'DISPATCHING') throw unfit(state, event, 'no saved recipients to clear');
        sms = { ...sms, recipients: 0, segments: 0, totalCost: ZERO_MONEY, progress: EMPTY_PROGRESS };
      }
      return { ...s, status: 'FAILED', claimedAt: null, failureReason: reason, statusChangedAt: at, sms };
    }
    case 'CampaignPartiallyCompleted': {
      const s = requireStatus(state, event, ['DISPATCHING']);
      expectEpoch(s, event, s.claimEpoch);
      return { ...s, status: 'PARTIAL', claimedAt: null, statusChangedAt: event.data.at };
    }
    case 'CampaignDeferred': {
      const s = requireStatus(state, event, ['DISPATCHING']);
      expectEpoch(s, event, s.claimEpoch);
      const { startAt, dispatchDeadline, at } = event.data;
      return { ...s, status: 'SCHEDULED', startAt, dispatchDeadline, claimedAt: null, statusChangedAt: at };
    }
    case 'CampaignPaused': {
      const s = requireStatus(state, event, ['SCHEDULED', 'QUEUED', 'DISPATCHING'], { live: true });
      if (event.data.pausedFrom !== s.status)
        throw unfit(state, event, `pausedFrom is ${event.data.pausedFrom}`);
      expectEpoch(s, event, s.status === 'DISPATCHING' ? s.claimEpoch + 1 : s.claimEpoch);
      const { pausedFrom, epoch, at } = event.data;
      return {
        ...s,
        status: 'PAUSED',
        pausedFrom,
        pauseReason: event.data.reason ?? null,
        claimEpoch: epoch,
        claimedAt: null,
        statusChangedAt: at,
      };
    }
    case 'CampaignResumed': {
      const s = requireStatus(state, event, ['PAUSED'], { live: true });
      const { to, at } = event.data;
      if (to !== (s.pausedFrom === 'SCHEDULED' ? 'SCHEDULED' : 'QUEUED')) {
        throw unfit(state, event, `it was paused from ${s.pausedFrom}`);
      }
      const resumed = { ...s, pausedFrom: null, pauseReason: null, statusChangedAt: at };
      if (to === 'SCHEDULED') {
        if (s.startAt === null) throw unfit(state, event, 'it has no startAt');
        return { ...resumed, status: 'SCHEDULED', startAt: s.startAt };
      }
      return { ...resumed, status: 'QUEUED' };
    }
    case 'CampaignRescheduled': {
      const s = requireStatus(state, event, ['SCHEDULED', 'PAUSED'], { live: true });
      if (s.status === 'PAUSED' && s.pausedFrom !== 'SCHEDULED') {
        throw unfit(state, event, `it was paused from ${s.pausedFrom}`);
      }
      const { startAt, dispatchDeadline } = event.data;
      return { ...s, startAt, dispatchDeadline };
    }
    case 'CampaignCancellationRequested': {
      const s = requireStatus(state, event, ['BUILDING', 'QUEUED', 'SCHEDULED', 'PAUSED', 'DISPATCHING']);
      if (event.data.from !== s.status) throw unfit(state, event, `from is ${event.data.from}`);
      if (s.status === 'BUILDING' && (s.sms?.source !== 'csv' || s.sms.recipients > 0)) {
        throw unfit(state, event, 'only a CSV build without saved recipients is cancelled');
      }
      const cancelling = {
        ...s,
        status: 'CANCELLING' as const,
        pausedFrom: null,
        pauseReason: null,
        statusChangedAt: event.data.at,
      };
      if (s.status === 'DISPATCHING') {
        // SMS only: the live dispatch claim is revoked, so the epoch moves (invariant 5).
        if (s.channel !== 'sms')
          throw unfit(state, event, 'only an SMS campaign is cancelled while dispatching');
        if (event.data.epoch !== s.claimEpoch + 1) {
          throw unfit(state, event, `expected epoch ${s.claimEpoch + 1}, claim epoch is ${s.claimEpoch}`);
        }
        return { ...cancelling, claimEpoch: event.data.epoch, claimedAt: null };
      }
      if (event.data.epoch !== undefined)
        throw unfit(state, event, 'only a DISPATCHING cancellation carries an epoch');
      return cancelling;
    }
    case 'CampaignCancelled': {
      const s = requireStatus(state, event, ['CANCELLING']);
      return { ...s, status: 'CANCELLED', statusChangedAt: event.data.at };
    }
    case 'CampaignExpired': {
      const s = requireStatus(state, event, ['SCHEDULED']);
      if (s.dispatchDeadline !== event.data.dispatchDeadline) {
        throw unfit(state, event, `its dispatchDeadline is ${s.dispatchDeadline}`);
      }
      const { dispatchDeadline, at } = event.data;
      return { ...s, status: 'EXPIRED', dispatchDeadline, statusChangedAt: at };
    }
    case 'CampaignRequeued': {
      const s = requireStatus(state, event, ['DISPATCHING']);
      expectEpoch(s, event, s.claimEpoch + 1);
      const { epoch, at } = event.data;
      return { ...s, status: 'QUEUED', claimEpoch: epoch, claimedAt: null, statusChangedAt: at };
    }
    case 'CampaignResendRequested': {
      const s = requireStatus(state, event, ['PARTIAL', 'FAILED'], { live: true });
      if (event.data.resendAttempt !== s.resendAttempt + 1) {
        throw unfit(state, event, `its resendAttempt is ${s.resendAttempt}`);
      }
      const { resendAttempt, at, charge } = event.data;
      const reopened = {
        ...s,
        status: 'QUEUED' as const,
        resendAttempt,
        failureReason: null,
        statusChangedAt: at,
      };
      // Events written before part 2 (and LINE campaigns) carry no charge: only the status moves.
      if (charge === undefined) {
        if (event.data.recipients !== undefined) throw unfit(state, event, 'recipients without a charge');
        return reopened;
      }
      const sms = requireSms(s, event);
      const { failed, refunded, unconfirmed } = sms.progress;
      if (failed === 0 || refunded + unconfirmed !== failed) {
        throw unfit(state, event, `${failed} failed, ${refunded} refunded, ${unconfirmed} unconfirmed`);
      }
      if (event.data.recipients !== failed || toUnits(charge.amount) !== toUnits(sms.failedCost)) {
        throw unfit(state, event, `it has ${failed} failed recipients costing ${sms.failedCost}`);
      }
      return {
        ...reopened,
        sms: {
          ...sms,
          totalCost: addMoney(sms.totalCost, charge.amount),
          failedCost: ZERO_MONEY,
          withdrawal: null,
          progress: {
            ...sms.progress,
            pending: sms.progress.pending + failed,
            failed: 0,
            refunded: 0,
            unconfirmed: 0,
          },
        },
      };
    }
    case 'CampaignDeleted': {
      const s = requireStatus(state, event, DELETABLE_STATUSES, { live: true });
      return { ...s, deletedAt: event.data.at };
    }
    case 'CampaignBuildStarted': {
      const s = requireStatus(state, event, ['BUILDING'], { live: true });
      const sms = requireSms(s, event);
      if (event.data.attempt !== sms.buildAttempt + 1) {
        throw unfit(state, event, `its build attempt is ${sms.buildAttempt}`);
      }
      return { ...s, sms: { ...sms, buildAttempt: event.data.attempt, buildHeartbeatAt: event.data.at } };
    }
    case 'CampaignRecipientsAdded': {
      const s = requireStatus(state, event, ['DRAFT', 'BUILDING'], { live: true });
      const sms = requireSms(s, event);
      const { buildAttempt, recipients, segments, cost, rejected, at } = event.data;
      if ((s.status === 'BUILDING' ? sms.buildAttempt : null) !== buildAttempt) {
        throw unfit(state, event, `its build attempt is ${sms.buildAttempt}`);
      }
      return {
        ...s,
        sms: {
          ...sms,
          recipients: sms.recipients + recipients,
          segments: sms.segments + segments,
          totalCost: addMoney(sms.totalCost, cost),
          rejected: sms.rejected + rejected,
          buildHeartbeatAt: s.status === 'BUILDING' ? at : sms.buildHeartbeatAt,
          progress: { ...sms.progress, pending: sms.progress.pending + recipients },
        },
      };
    }
    case 'CampaignRecipientsDispatched': {
      const s = requireStatus(state, event, ['DISPATCHING']);
      expectEpoch(s, event, s.claimEpoch);
      const sms = requireSms(s, event);
      const d = event.data;
      const fromPending = d.submittedFromPending + d.deferredFromPending;
      const fromDeferred = d.submittedFromDeferred + d.deferredAgain;
      const { pending, deferred, submitted } = sms.progress;
      if (fromPending > pending || fromDeferred > deferred) {
        throw unfit(state, event, `it has ${pending} pending and ${deferred} deferred recipients`);
      }
      return {
        ...s,
        claimedAt: d.at,
        sms: {
          ...sms,
          progress: {
            ...sms.progress,
            pending: pending - fromPending,
            deferred: deferred - d.submittedFromDeferred + d.deferredFromPending,
            submitted: submitted + d.submittedFromPending + d.submittedFromDeferred,
          },
          deferrals: sms.deferrals + d.deferredFromPending + d.deferredAgain,
          submissions: sms.submissions + d.submissions,
        },
      };
    }
    case 'CampaignDeliveryReported': {
      const s = requireStatus(state, event, REPORTING_STATUSES);
      const sms = requireSms(s, event);
      const d = event.data;
      const p = sms.progress;
      const counted = d.delivered + d.failed + d.retryPending;
      if (counted === 0 || counted > p.submitted) {
        throw unfit(state, event, `${counted} reports counted, ${p.submitted} recipients submitted`);
      }
      if (d.unconfirmed > d.failed || toUnits(d.unconfirmedCost) > toUnits(d.failedCost)) {
        throw unfit(state, event, 'unconfirmed recipients are failed ones');
      }
      if (d.retryPending > 0 && !retriesAllowed(s)) {
        throw unfit(state, event, 'its unsent recipients are withdrawn or it is final: no retries');
      }
      return {
        ...s,
        sms: {
          ...sms,
          actualCost: addMoney(sms.actualCost, d.deliveredCost),
          failedCost: addMoney(sms.failedCost, d.failedCost),
          unconfirmedCost: addMoney(sms.unconfirmedCost, d.unconfirmedCost),
          progress: {
            ...p,
            submitted: p.submitted - counted,
            delivered: p.delivered + d.delivered,
            failed: p.failed + d.failed,
            unconfirmed: p.unconfirmed + d.unconfirmed,
            retryPending: p.retryPending + d.retryPending,
          },
        },
      };
    }
    case 'CampaignRetriesReleased': {
      const s = requireStatus(state, event, RETRY_RELEASE_STATUSES);
      const sms = requireSms(s, event);
      const { recipients, to, at } = event.data;
      if (recipients > sms.progress.retryPending) {
        throw unfit(state, event, `${recipients} released, ${sms.progress.retryPending} retry pending`);
      }
      if ((to === 'QUEUED') !== (s.status === 'DISPATCHING')) throw unfit(state, event, `to is ${to}`);
      const released = {
        ...s,
        sms: {
          ...sms,
          progress: {
            ...sms.progress,
            retryPending: sms.progress.retryPending - recipients,
            pending: sms.progress.pending + recipients,
          },
        },
      };
      if (s.status !== 'DISPATCHING') return released;
      return { ...released, status: 'QUEUED', claimedAt: null, statusChangedAt: at };
    }
    case 'CampaignRecipientsRefunded': {
      const s = requireStatus(state, event, ANY_EXISTING_STATUS);
      const sms = requireSms(s, event);
      const { failed, unconfirmed, refunded } = sms.progress;
      if (refunded + event.data.recipients > failed - unconfirmed) {
        throw unfit(
          state,
          event,
          `${refunded} of ${failed - unconfirmed} refundable recipients already refunded`,
        );
      }
      return {
        ...s,
        sms: {
          ...sms,
          refundedCost: addMoney(sms.refundedCost, event.data.amount),
          progress: { ...sms.progress, refunded: refunded + event.data.recipients },
        },
      };
    }
    case 'CampaignUnsentWithdrawn': {
      const s = requireStatus(state, event, ['CANCELLING', 'EXPIRED']);
      const sms = requireSms(s, event);
      const { reason, recipients, amount, key } = event.data;
      if ((reason === 'cancelled') !== (s.status === 'CANCELLING'))
        throw unfit(state, event, `reason ${reason}`);
      if (sms.withdrawal !== null) throw unfit(state, event, 'its unsent recipients are already withdrawn');
      if (recipients !== withdrawable(sms)) {
        throw unfit(state, event, `${recipients} withdrawn, ${withdrawable(sms)} unsent`);
      }
      return {
        ...s,
        sms: {
          ...sms,
          cancelledCost: addMoney(sms.cancelledCost, amount),
          withdrawal: { key, reason, recipients, amount, refundedAt: null },
          progress: {
            ...sms.progress,
            pending: 0,
            deferred: 0,
            retryPending: 0,
            cancelled: sms.progress.cancelled + recipients,
          },
        },
      };
    }
    case 'CampaignWithdrawalRefunded': {
      const s = requireStatus(state, event, ANY_EXISTING_STATUS);
      const sms = requireSms(s, event);
      const w = sms.withdrawal;
      if (w === null || w.refundedAt !== null || w.key !== event.data.key) {
        throw unfit(
          state,
          event,
          w ? `withdrawal ${w.key} refunded at ${w.refundedAt}` : 'nothing withdrawn',
        );
      }
      if (toUnits(w.amount) !== toUnits(event.data.amount))
        throw unfit(state, event, `withdrawn ${w.amount}`);
      return {
        ...s,
        sms: {
          ...sms,
          refundedCost: addMoney(sms.refundedCost, w.amount),
          withdrawal: { ...w, refundedAt: event.data.at },
        },
      };
    }
    case 'CampaignEdited': {
      const s = requireStatus(state, event, ['DRAFT', 'SCHEDULED'], { live: true });
      if (s.line?.plan) throw unfit(state, event, 'its delivery is planned');
      const { messages, ...fields } = event.data.changes;
      if (messages !== undefined && s.line === null && s.channel !== 'line') {
        throw unfit(state, event, 'only a LINE campaign has messages');
      }
      return {
        ...s,
        ...fields,
        line: messages !== undefined ? { ...(s.line ?? newLineFacts(messages)), messages } : s.line,
      };
    }
    case 'LineDeliveryPlanned': {
      const s = requireStatus(state, event, ['DISPATCHING']);
      expectEpoch(s, event, s.claimEpoch);
      if (s.line === null || s.line.plan !== null) throw unfit(state, event, 'no LINE content, or planned');
      const { epoch, chunks, recipients, at } = event.data;
      return {
        ...s,
        line: {
          ...s.line,
          plan: { epoch, chunks, recipients, plannedAt: at },
          progress: { ...s.line.progress, inDoubtSince: at },
        },
      };
    }
    case 'LineChunkAccepted':
    case 'LineChunkUnconfirmed':
    case 'LineCallFailed': {
      const s = requireStatus(state, event, ['DISPATCHING']);
      expectEpoch(s, event, s.claimEpoch);
      const line = s.line;
      if (line === null || line.plan === null) throw unfit(state, event, 'its LINE delivery is not planned');
      const p = line.progress;
      if (event.data.chunk !== p.chunksDone || event.data.chunk >= line.plan.chunks) {
        throw unfit(state, event, `${p.chunksDone} of ${line.plan.chunks} chunks are done`);
      }
      const { at } = event.data;
      if (event.type === 'LineCallFailed') {
        const { kind, status, message, requestId } = event.data;
        const progress = {
          ...p,
          failedCalls: p.failedCalls + 1,
          lastRequestId: requestId ?? p.lastRequestId,
          lastError: { kind, status, message, requestId },
        };
        // A call answered by LINE is a sign of life: the claim's heartbeat (seed 000) runs per call.
        return { ...s, claimedAt: at, line: { ...line, progress } };
      }
      const n = event.data.recipients ?? 0;
      const done = { ...p, chunksDone: p.chunksDone + 1, cursor: event.data.cursor, inDoubtSince: at };
      if (event.type === 'LineChunkUnconfirmed') {
        const progress = {
          ...done,
          chunksUnconfirmed: p.chunksUnconfirmed + 1,
          recipientsUnconfirmed: p.recipientsUnconfirmed + n,
        };
        return { ...s, claimedAt: at, line: { ...line, progress } };
      }
      const { requestId, acceptedRequestId } = event.data;
      const progress = {
        ...done,
        chunksAccepted: p.chunksAccepted + 1,
        recipientsAccepted: p.recipientsAccepted + n,
        duplicates: p.duplicates + (acceptedRequestId !== null ? 1 : 0),
        lastRequestId: requestId ?? acceptedRequestId,
      };
      return { ...s, claimedAt: at, line: { ...line, progress } };
    }
    default:
      return assertNever(event, 'campaign event');
  }
}

/** Statuses an activated SMS campaign may receive delivery reports in (its submitted recipients decide). */
export const REPORTING_STATUSES = [
  'QUEUED',
  'SCHEDULED',
  'DISPATCHING',
  'PAUSED',
  'CANCELLING',
  'CANCELLED',
  'EXPIRED',
  'COMPLETED',
  'PARTIAL',
  'FAILED',
] as const satisfies readonly CampaignStatus[];

/** Statuses RETRY_PENDING recipients are released in (a cancelled/expired campaign withdraws them instead). */
export const RETRY_RELEASE_STATUSES = [
  'DISPATCHING',
  'QUEUED',
  'SCHEDULED',
  'PAUSED',
] as const satisfies readonly CampaignStatus[];

const ANY_EXISTING_STATUS = CAMPAIGN_STATUSES;

/**
 * Whether a report may still make recipients RETRY_PENDING: not once the unsent recipients were
 * withdrawn (they would never be withdrawn or released) and not in a final status (class LATE instead).
 */
export function retriesAllowed(state: ExistingCampaign): boolean {
  if (state.sms?.withdrawal) return false;
  return !['CANCELLED', 'EXPIRED', 'COMPLETED', 'PARTIAL', 'FAILED'].includes(state.status);
}

/**
 * The final status an SMS campaign's counters call for once none of its recipients is left unsent or
 * awaiting a report (seed 003's recount), or null while some are: all delivered → COMPLETED, none
 * delivered → FAILED, a mix → PARTIAL.
 */
export function smsRecount(sms: SmsCampaignFacts | null): 'COMPLETED' | 'PARTIAL' | 'FAILED' | null {
  if (sms === null || sms.recipients === 0) return null;
  const p = sms.progress;
  if (p.pending + p.deferred + p.submitted + p.retryPending > 0) return null;
  if (p.failed === 0 && p.cancelled === 0) return 'COMPLETED';
  if (p.delivered === 0) return 'FAILED';
  return 'PARTIAL';
}

function requireStatus<S extends CampaignStatus>(
  state: CampaignState,
  event: CampaignEvent,
  allowed: readonly S[],
  options: { live?: boolean } = {},
): CampaignIn<S> {
  if (!(allowed as readonly string[]).includes(state.status)) throw unfit(state, event);
  const existing = state as CampaignIn<S>;
  if (options.live && existing.deletedAt !== null) throw unfit(state, event, 'it is deleted');
  return existing;
}

function requireSms(state: ExistingCampaign, event: CampaignEvent): SmsCampaignFacts {
  if (state.sms === null) throw unfit(state, event, 'it is not an SMS campaign with a definition');
  return state.sms;
}

function expectEpoch(
  state: ExistingCampaign,
  event: CampaignEvent & { data: { epoch: number | null } },
  epoch: number,
) {
  if (event.data.epoch !== epoch) {
    throw unfit(state, event, `expected epoch ${epoch}, claim epoch is ${state.claimEpoch}`);
  }
}

function unfit(state: CampaignState, event: CampaignEvent, why?: string): IllegalStateError {
  const id = state.status === 'NONE' ? '(new)' : state.campaignId;
  return new IllegalStateError(
    `cannot apply ${event.type} to campaign ${id} in status ${state.status}${why ? `: ${why}` : ''}`,
    { event: event.type, status: state.status, campaignId: id },
  );
}
