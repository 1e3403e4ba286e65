/**
 * `decide` for campaigns: validates a command, checks it against the current state and returns the
 * events it causes, or throws (ValidationError for bad input, IllegalStateError for a command the
 * current state does not allow) without emitting anything. Pure: time is the command's `now`.
 *
 * Check order, so errors are predictable: command shape → campaign id → status (and soft delete) →
 * claim epoch → rules that compare the command with the state (times, deadlines).
 */

import { IllegalStateError, ValidationError } from '../../errors.js';
import { assertNever } from '../decider.js';
import { operationRefusal } from '../operations.js';
import { canonicalMoney, toUnits } from '../sms/money.js';
import { ms } from '../time.js';
import { type CampaignCommand, type ParsedCampaignCommand, parseCampaignCommand } from './commands.js';
import type { CampaignEvent } from './events.js';
import { lineDeliveryDone, lineRetryKey, nextChunkKeyExpired, plannedChunks } from './line.js';
import { CAMPAIGN_OPERATIONS, type CampaignOperationEntry } from './operations.js';
import { resendChargeKey, type SmsCampaignFacts, withdrawable, withdrawalKey } from './sms.js';
import {
  type CampaignIn,
  type CampaignState,
  type ExistingCampaign,
  REPORTING_STATUSES,
  RETRY_RELEASE_STATUSES,
  retriesAllowed,
  smsRecount,
} from './state.js';
import type { CampaignStatus } from './status.js';

export function decideCampaign(command: CampaignCommand, state: CampaignState): CampaignEvent[] {
  const c = parseCampaignCommand(command);

  if (c.type === 'CreateCampaign') {
    if (state.status !== 'NONE') throw illegal(c, state, 'it already exists');
    return [
      {
        type: 'CampaignCreated',
        data: {
          campaignId: c.campaignId,
          organizationId: c.organizationId,
          channel: c.channel,
          castType: c.castType ?? null,
          audienceId: c.audienceId ?? null,
          lineOaId: c.lineOaId ?? null,
          name: c.name,
          startAt: c.startAt ?? null,
          dispatchDeadline: c.dispatchDeadline ?? null,
          idempotencyKey: c.idempotencyKey ?? null,
          // Only when the request had one: the events of other creates keep their shape.
          ...(c.requestIdempotencyKey ? { requestIdempotencyKey: c.requestIdempotencyKey } : {}),
          mode: c.mode,
          at: c.now,
          ...(c.sms ? { sms: c.sms } : {}),
          ...(c.line ? { line: { messages: c.line.messages } } : {}),
        },
      },
    ];
  }

  if (state.status === 'NONE') throw illegal(c, state, 'it does not exist');
  if (c.campaignId !== state.campaignId) {
    throw new ValidationError(`${c.type} is for campaign ${c.campaignId}, not ${state.campaignId}`, {
      command: c.type,
      campaignId: c.campaignId,
      streamCampaignId: state.campaignId,
    });
  }
  const now = c.now;

  switch (c.type) {
    case 'ActivateCampaign': {
      const s = requireOperation(c, state, CAMPAIGN_OPERATIONS.activate);
      const charge = s.sms ? requireCharge(c, s, s.sms) : undefined;
      if (!s.sms && c.charge) {
        throw new ValidationError(
          `invalid ActivateCampaign: only an SMS campaign with recipients is charged`,
          {
            command: c.type,
            field: 'charge',
          },
        );
      }
      const extra = charge ? { charge } : {};
      if (s.startAt !== null && ms(s.startAt) > ms(now)) {
        return [{ type: 'CampaignActivated', data: { to: 'SCHEDULED', at: now, ...extra } }];
      }
      requireDeadlineNotPassed(c, s);
      return [{ type: 'CampaignActivated', data: { to: 'QUEUED', at: now, ...extra } }];
    }
    case 'ScheduleCampaign': {
      const s = requireOperation(c, state, CAMPAIGN_OPERATIONS.schedule);
      const dispatchDeadline = nextDeadline(c, s.dispatchDeadline);
      return [{ type: 'CampaignScheduled', data: { startAt: c.startAt, dispatchDeadline, at: now } }];
    }
    case 'SendNow': {
      // From DRAFT, "send now" activates and claims in one command (seed 000's cms-api-go flips a
      // draft to sending itself): two events along the diagram's DRAFT → QUEUED → DISPATCHING, so no
      // scanner can claim the campaign in between.
      const s = requireOperation(c, state, CAMPAIGN_OPERATIONS['send-now']);
      if (s.status !== 'QUEUED') requireDeadlineNotPassed(c, s);
      const claimed: CampaignEvent = {
        type: 'CampaignClaimed',
        data: { epoch: s.claimEpoch + 1, claimedAt: now, trigger: 'send_now' },
      };
      return s.status === 'DRAFT'
        ? [{ type: 'CampaignActivated', data: { to: 'QUEUED', at: now } }, claimed]
        : [claimed, ...recountAfterClaim(s, s.claimEpoch + 1, now)];
    }
    case 'ClaimCampaign': {
      const s = requireStatus(c, state, ['QUEUED', 'SCHEDULED'], { live: true });
      if (s.status === 'SCHEDULED') {
        if (ms(s.startAt) > ms(now)) throw illegal(c, s, `its startAt ${s.startAt} is after now (${now})`);
        requireDeadlineNotPassed(c, s);
      }
      return [
        { type: 'CampaignClaimed', data: { epoch: s.claimEpoch + 1, claimedAt: now, trigger: 'scanner' } },
        ...recountAfterClaim(s, s.claimEpoch + 1, now),
      ];
    }
    case 'ReclaimCampaign': {
      const s = requireStatus(c, state, ['DISPATCHING']);
      const age = ms(now) - ms(s.claimedAt);
      if (age <= c.staleAfterMs) {
        throw illegal(c, s, `its claim is ${age} ms old, not stale (staleAfterMs ${c.staleAfterMs})`);
      }
      // Claimable again at once, whatever triggered the claim: a campaign sent now before its startAt
      // goes back to QUEUED (seed 003: stale recovery is DISPATCHING → QUEUED), not to a SCHEDULED
      // state that would silently wait for the original time. One whose startAt has come goes back
      // to SCHEDULED, due now, where its dispatch deadline still applies.
      const dueAgain = s.startAt !== null && ms(s.startAt) <= ms(now);
      return [
        {
          type: 'CampaignReclaimed',
          data: {
            epoch: s.claimEpoch + 1,
            previousClaimedAt: s.claimedAt,
            reason: c.reason ?? `no heartbeat for more than ${c.staleAfterMs} ms`,
            to: dueAgain ? 'SCHEDULED' : 'QUEUED',
            at: now,
          },
        },
      ];
    }
    case 'Heartbeat': {
      const s = requireStatus(c, state, ['DISPATCHING']);
      requireEpoch(c, s, c.epoch);
      return [{ type: 'CampaignHeartbeat', data: { epoch: c.epoch, claimedAt: now } }];
    }
    case 'CompleteCampaign': {
      const s = requireStatus(c, state, ['DISPATCHING']);
      requireEpoch(c, s, c.epoch);
      if (s.channel === 'line') {
        // A LINE campaign is complete when every planned chunk is done; given-up chunks make it PARTIAL.
        if (s.line === null || !lineDeliveryDone(s.line)) {
          const done = s.line?.plan ? `${s.line.progress.chunksDone} of ${s.line.plan.chunks}` : 'no';
          throw illegal(c, s, `${done} chunks of its LINE delivery are done`);
        }
        if (s.line.progress.chunksUnconfirmed > 0) {
          return [{ type: 'CampaignPartiallyCompleted', data: { epoch: c.epoch, at: now } }];
        }
      }
      return [{ type: 'CampaignCompleted', data: { epoch: c.epoch, at: now } }];
    }
    case 'EditCampaign':
      return editEvents(c, requireOperation(c, state, CAMPAIGN_OPERATIONS.edit));
    case 'AdvanceLineDelivery': {
      const s = requireStatus(c, state, ['DISPATCHING']);
      requireEpoch(c, s, c.epoch);
      return lineDeliveryEvents(c, s);
    }
    case 'FailCampaign': {
      const s = requireStatus(c, state, ['DRAFT', 'BUILDING', 'DISPATCHING']);
      if (s.status === 'DISPATCHING') {
        if (c.epoch === undefined) {
          throw new ValidationError(
            `invalid FailCampaign: epoch is required to fail a DISPATCHING campaign`,
            {
              command: c.type,
            },
          );
        }
        requireEpoch(c, s, c.epoch);
      } else if (c.epoch !== undefined) {
        throw new ValidationError(`invalid FailCampaign: epoch applies only to a DISPATCHING campaign`, {
          command: c.type,
          status: s.status,
        });
      }
      if (c.clearRecipients && (s.sms === null || s.status === 'DISPATCHING')) {
        throw new ValidationError(
          `invalid FailCampaign: clearRecipients applies only to an SMS draft or build (status ${s.status})`,
          { command: c.type, field: 'clearRecipients', status: s.status },
        );
      }
      return [
        {
          type: 'CampaignFailed',
          data: {
            reason: c.reason,
            epoch: c.epoch ?? null,
            at: now,
            ...(c.clearRecipients ? { recipientsCleared: true as const } : {}),
          },
        },
      ];
    }
    case 'FinishPartially': {
      const s = requireStatus(c, state, ['DISPATCHING']);
      requireEpoch(c, s, c.epoch);
      return [{ type: 'CampaignPartiallyCompleted', data: { epoch: c.epoch, at: now } }];
    }
    case 'DeferCampaign': {
      const s = requireStatus(c, state, ['DISPATCHING']);
      requireEpoch(c, s, c.epoch);
      const dispatchDeadline = nextDeadline(c, s.dispatchDeadline);
      return [
        {
          type: 'CampaignDeferred',
          data: { epoch: c.epoch, startAt: c.startAt, dispatchDeadline, reason: c.reason, at: now },
        },
      ];
    }
    case 'PauseCampaign': {
      const s = requireOperation(c, state, CAMPAIGN_OPERATIONS.pause);
      if (c.auto && s.sms === null) {
        throw new ValidationError('invalid PauseCampaign: auto applies only to an SMS campaign', {
          command: c.type,
          field: 'auto',
        });
      }
      // Pausing a DISPATCHING campaign revokes its live claim: bump the epoch to fence the holder.
      const epoch = s.status === 'DISPATCHING' ? s.claimEpoch + 1 : s.claimEpoch;
      const reason = c.reason ?? (c.auto ? autoPauseReason(c.auto) : undefined);
      return [
        {
          type: 'CampaignPaused',
          data: {
            pausedFrom: s.status,
            epoch,
            at: now,
            ...(reason ? { reason } : {}),
            ...(c.auto ? { auto: c.auto } : {}),
          },
        },
      ];
    }
    case 'ResumeCampaign': {
      const s = requireOperation(c, state, CAMPAIGN_OPERATIONS.resume);
      return [
        {
          type: 'CampaignResumed',
          data: {
            to: s.pausedFrom === 'SCHEDULED' ? 'SCHEDULED' : 'QUEUED',
            at: now,
            ...(c.reason ? { reason: c.reason } : {}),
          },
        },
      ];
    }
    case 'RescheduleCampaign': {
      const s = requireOperation(c, state, CAMPAIGN_OPERATIONS.reschedule);
      const dispatchDeadline = nextDeadline(c, s.dispatchDeadline);
      return [
        {
          type: 'CampaignRescheduled',
          data: { startAt: c.startAt, dispatchDeadline, at: now, ...(c.reason ? { reason: c.reason } : {}) },
        },
      ];
    }
    case 'CancelCampaign': {
      const s = requireOperation(c, state, CAMPAIGN_OPERATIONS.cancel);
      const requested: CampaignEvent = {
        type: 'CampaignCancellationRequested',
        data: {
          from: s.status,
          reason: c.reason ?? null,
          at: now,
          ...(s.status === 'DISPATCHING' ? { epoch: s.claimEpoch + 1 } : {}),
        },
      };
      // A LINE campaign is sent as one whole message and is never charged per recipient: nothing to
      // refund, so the cancellation settles at once. An SMS campaign waits for its refunds (SettleCancellation).
      if (s.channel === 'line') return [requested, { type: 'CampaignCancelled', data: { at: now } }];
      // A CSV build without a saved recipient was never charged (the charge follows the last batch).
      if (s.status === 'BUILDING') return [requested, { type: 'CampaignCancelled', data: { at: now } }];
      return [requested];
    }
    case 'SettleCancellation': {
      const s = requireStatus(c, state, ['CANCELLING']);
      if (s.sms) {
        // Part 2: every unsent recipient withdrawn, and a charged campaign's withdrawal refunded.
        const left = withdrawable(s.sms);
        if (left > 0) throw illegal(c, s, `${left} unsent recipients are not withdrawn yet`);
        if (s.sms.chargeKey !== null && s.sms.withdrawal?.refundedAt == null) {
          throw illegal(
            c,
            s,
            s.sms.withdrawal
              ? `the withdrawal refund ${s.sms.withdrawal.key} is not recorded yet`
              : 'its unsent recipients are not withdrawn yet',
          );
        }
      }
      return [{ type: 'CampaignCancelled', data: { at: now } }];
    }
    case 'ExpireCampaign': {
      const s = requireStatus(c, state, ['SCHEDULED']);
      if (s.dispatchDeadline === null) throw illegal(c, s, 'it has no dispatchDeadline');
      if (ms(now) <= ms(s.dispatchDeadline)) {
        throw illegal(c, s, `its dispatchDeadline ${s.dispatchDeadline} has not passed (now ${now})`);
      }
      return [{ type: 'CampaignExpired', data: { dispatchDeadline: s.dispatchDeadline, at: now } }];
    }
    case 'RequeueCampaign': {
      const s = requireStatus(c, state, ['DISPATCHING']);
      return [
        {
          type: 'CampaignRequeued',
          data: {
            epoch: s.claimEpoch + 1,
            previousClaimedAt: s.claimedAt,
            reason: c.reason ?? null,
            at: now,
          },
        },
      ];
    }
    case 'ResendFailed': {
      const s = requireOperation(c, state, CAMPAIGN_OPERATIONS.resend);
      const resendAttempt = s.resendAttempt + 1;
      const reason = c.reason ? { reason: c.reason } : {};
      if (s.sms === null) {
        if (c.charge) {
          throw new ValidationError('invalid ResendFailed: only an SMS campaign is charged for a resend', {
            command: c.type,
            field: 'charge',
          });
        }
        return [{ type: 'CampaignResendRequested', data: { resendAttempt, at: now, ...reason } }];
      }
      const charge = requireResendCharge(c, s, s.sms, resendAttempt);
      return [
        {
          type: 'CampaignResendRequested',
          data: { resendAttempt, at: now, ...reason, recipients: s.sms.progress.failed, charge },
        },
      ];
    }
    case 'DeleteCampaign': {
      requireOperation(c, state, CAMPAIGN_OPERATIONS.delete);
      return [{ type: 'CampaignDeleted', data: { at: now } }];
    }
    case 'StartBuild': {
      const s = requireStatus(c, state, ['BUILDING'], { live: true });
      const sms = requireSms(c, s);
      if (sms.source !== 'csv') throw illegal(c, s, 'only a CSV campaign is built');
      if (sms.buildAttempt > 0 && sms.buildHeartbeatAt !== null) {
        const age = ms(now) - ms(sms.buildHeartbeatAt);
        if (age <= c.staleAfterMs) {
          throw illegal(
            c,
            s,
            `build attempt ${sms.buildAttempt} is alive (last batch ${age} ms ago, staleAfterMs ${c.staleAfterMs})`,
          );
        }
      }
      return [
        {
          type: 'CampaignBuildStarted',
          data: {
            attempt: sms.buildAttempt + 1,
            previousHeartbeatAt: sms.buildAttempt > 0 ? sms.buildHeartbeatAt : null,
            at: now,
          },
        },
      ];
    }
    case 'AddRecipients': {
      const s = requireStatus(c, state, ['DRAFT', 'BUILDING'], { live: true });
      const sms = requireSms(c, s);
      if (s.status === 'DRAFT') {
        if (sms.source !== 'inline') throw illegal(c, s, 'a CSV campaign gets its recipients from its build');
        if (c.buildAttempt !== undefined) throw illegal(c, s, 'an inline draft has no build attempt');
        if (sms.recipients > 0) throw illegal(c, s, 'its inline recipients are already saved');
        if (c.rejected > 0) throw illegal(c, s, 'an inline campaign rejects invalid recipients as a whole');
      } else if (c.buildAttempt !== sms.buildAttempt || sms.buildAttempt === 0) {
        // Fencing: a batch of a build attempt that was taken over is refused (invariant 5 for builds).
        throw illegal(
          c,
          s,
          `build attempt ${c.buildAttempt ?? 'none'} is not the current one (${sms.buildAttempt})`,
        );
      }
      return [
        {
          type: 'CampaignRecipientsAdded',
          data: {
            buildAttempt: s.status === 'BUILDING' ? sms.buildAttempt : null,
            recipients: c.recipients,
            segments: c.segments,
            cost: canonicalMoney(c.cost),
            rejected: c.rejected,
            at: now,
          },
        },
      ];
    }
    case 'RecordDispatch': {
      const s = requireStatus(c, state, ['DISPATCHING']);
      requireEpoch(c, s, c.epoch);
      const sms = requireSms(c, s);
      const { pending, deferred } = sms.progress;
      if (c.submittedFromPending + c.deferredFromPending > pending) {
        throw illegal(
          c,
          s,
          `${c.submittedFromPending + c.deferredFromPending} pending recipients dispatched, ${pending} pending`,
        );
      }
      if (c.submittedFromDeferred + c.deferredAgain > deferred) {
        throw illegal(
          c,
          s,
          `${c.submittedFromDeferred + c.deferredAgain} deferred recipients dispatched, ${deferred} deferred`,
        );
      }
      return [
        {
          type: 'CampaignRecipientsDispatched',
          data: {
            epoch: c.epoch,
            submittedFromPending: c.submittedFromPending,
            submittedFromDeferred: c.submittedFromDeferred,
            deferredFromPending: c.deferredFromPending,
            deferredAgain: c.deferredAgain,
            submissions: c.submissions,
            at: now,
          },
        },
      ];
    }
    case 'RecordDeliveryReports': {
      const s = requireStatus(c, state, REPORTING_STATUSES);
      const sms = requireSms(c, s);
      const counted = c.delivered + c.failed + c.retryPending;
      if (counted > sms.progress.submitted) {
        throw illegal(c, s, `${counted} reports counted, ${sms.progress.submitted} recipients submitted`);
      }
      if (c.retryPending > 0 && !retriesAllowed(s)) {
        throw illegal(
          c,
          s,
          `${c.retryPending} recipients to retry, but its unsent recipients are withdrawn or it is final`,
        );
      }
      const reported: CampaignEvent = {
        type: 'CampaignDeliveryReported',
        data: {
          delivered: c.delivered,
          deliveredCost: canonicalMoney(c.deliveredCost),
          failed: c.failed,
          failedCost: canonicalMoney(c.failedCost),
          unconfirmed: c.unconfirmed,
          unconfirmedCost: canonicalMoney(c.unconfirmedCost),
          retryPending: c.retryPending,
          at: now,
        },
      };
      if (s.status !== 'DISPATCHING') return [reported];
      // The recount, in the same decision: the last recipient counted makes the campaign final.
      const p = sms.progress;
      const after = {
        ...sms,
        progress: {
          ...p,
          submitted: p.submitted - counted,
          delivered: p.delivered + c.delivered,
          failed: p.failed + c.failed,
          retryPending: p.retryPending + c.retryPending,
        },
      };
      return [reported, ...finalEvents(smsRecount(after), s.claimEpoch, now)];
    }
    case 'ReleaseRetries': {
      const s = requireStatus(c, state, RETRY_RELEASE_STATUSES);
      const sms = requireSms(c, s);
      if (c.recipients > sms.progress.retryPending) {
        throw illegal(c, s, `${c.recipients} retries released, ${sms.progress.retryPending} retry pending`);
      }
      return [
        {
          type: 'CampaignRetriesReleased',
          data: { recipients: c.recipients, to: s.status === 'DISPATCHING' ? 'QUEUED' : null, at: now },
        },
      ];
    }
    case 'RecordRefunds': {
      const sms = requireSms(c, state);
      const { failed, unconfirmed, refunded } = sms.progress;
      if (refunded + c.recipients > failed - unconfirmed) {
        throw illegal(
          c,
          state,
          `${c.recipients} refunds recorded, ${failed - unconfirmed - refunded} refundable recipients left`,
        );
      }
      return [
        {
          type: 'CampaignRecipientsRefunded',
          data: { recipients: c.recipients, amount: canonicalMoney(c.amount), at: now },
        },
      ];
    }
    case 'WithdrawUnsent': {
      const s = requireStatus(c, state, c.reason === 'cancelled' ? ['CANCELLING'] : ['EXPIRED']);
      const sms = requireSms(c, s);
      if (sms.withdrawal !== null) {
        throw illegal(c, s, `its unsent recipients were already withdrawn (${sms.withdrawal.key})`);
      }
      const unsentNow = withdrawable(sms);
      if (c.recipients !== unsentNow) {
        throw illegal(c, s, `${c.recipients} recipients withdrawn, ${unsentNow} unsent`);
      }
      const key = withdrawalKey(s.campaignId, c.reason, s.resendAttempt);
      if (c.key !== key) {
        throw new ValidationError(`invalid WithdrawUnsent: key '${c.key}', expected '${key}'`, {
          command: c.type,
          field: 'key',
          key: c.key,
          expected: key,
        });
      }
      if (toUnits(c.amount) > toUnits(sms.totalCost)) {
        throw new ValidationError(
          `invalid WithdrawUnsent: amount ${c.amount} exceeds the campaign's total ${sms.totalCost}`,
          { command: c.type, field: 'amount', amount: c.amount, totalCost: sms.totalCost },
        );
      }
      return [
        {
          type: 'CampaignUnsentWithdrawn',
          data: {
            reason: c.reason,
            recipients: c.recipients,
            amount: canonicalMoney(c.amount),
            key,
            at: now,
          },
        },
      ];
    }
    case 'RecordWithdrawalRefund': {
      const sms = requireSms(c, state);
      const w = sms.withdrawal;
      if (w === null) throw illegal(c, state, 'no unsent recipients were withdrawn');
      if (w.refundedAt !== null)
        throw illegal(c, state, `withdrawal ${w.key} was refunded at ${w.refundedAt}`);
      if (c.key !== w.key) {
        throw new ValidationError(
          `invalid RecordWithdrawalRefund: key '${c.key}', the withdrawal's is '${w.key}'`,
          {
            command: c.type,
            field: 'key',
            key: c.key,
            expected: w.key,
          },
        );
      }
      if (toUnits(c.amount) !== toUnits(w.amount)) {
        throw new ValidationError(
          `invalid RecordWithdrawalRefund: amount ${c.amount}, the withdrawal's is ${w.amount}`,
          { command: c.type, field: 'amount', amount: c.amount, expected: w.amount },
        );
      }
      return [{ type: 'CampaignWithdrawalRefunded', data: { key: w.key, amount: w.amount, at: now } }];
    }
    default:
      return assertNever(c, 'campaign command');
  }
}

/** The fields an edit changes (only those that differ), checked as a whole against the LINE rules. */
function editEvents(
  c: ParsedCampaignCommand & { type: 'EditCampaign' },
  s: ExistingCampaign,
): CampaignEvent[] {
  const lineFields = (['castType', 'audienceId', 'lineOaId', 'messages'] as const).filter(
    (field) => c[field] !== undefined,
  );
  if (s.channel !== 'line' && lineFields.length > 0) {
    throw new ValidationError(`invalid EditCampaign: ${lineFields.join(', ')} only for line campaigns`, {
      command: c.type,
      field: lineFields[0],
    });
  }
  const castType = c.castType ?? s.castType;
  const audienceId = c.audienceId !== undefined ? c.audienceId : s.audienceId;
  if (s.channel === 'line') {
    if ((castType === 'multicast' || castType === 'narrowcast') && audienceId === null) {
      throw new ValidationError(`invalid EditCampaign: a line ${castType} needs an audienceId`, {
        command: c.type,
        field: 'audienceId',
      });
    }
    if (castType === 'narrowcast' && audienceId !== null && !/^[1-9][0-9]{0,17}$/.test(audienceId)) {
      throw new ValidationError(
        'invalid EditCampaign: a narrowcast audience is a LINE audience group id (digits)',
        { command: c.type, field: 'audienceId' },
      );
    }
  }
  const changes: Extract<CampaignEvent, { type: 'CampaignEdited' }>['data']['changes'] = {
    ...(c.name !== undefined && c.name !== s.name ? { name: c.name } : {}),
    ...(c.castType !== undefined && c.castType !== s.castType ? { castType: c.castType } : {}),
    ...(c.audienceId !== undefined && c.audienceId !== s.audienceId ? { audienceId: c.audienceId } : {}),
    ...(c.lineOaId !== undefined && c.lineOaId !== s.lineOaId ? { lineOaId: c.lineOaId } : {}),
    ...(c.messages !== undefined && JSON.stringify(c.messages) !== JSON.stringify(s.line?.messages ?? null)
      ? { messages: c.messages }
      : {}),
  };
  // An edit that changes nothing is accepted and records nothing (a repeated PATCH is harmless).
  if (Object.keys(changes).length === 0) return [];
  return [{ type: 'CampaignEdited', data: { changes, at: c.now } }];
}

/** One step of a LINE delivery: in plan order, each chunk once, under the plan's retry keys. */
function lineDeliveryEvents(
  c: ParsedCampaignCommand & { type: 'AdvanceLineDelivery' },
  s: CampaignIn<'DISPATCHING'>,
): CampaignEvent[] {
  const { step, epoch, now } = c;
  if (s.line === null || s.castType === null) throw illegal(c, s, 'it has no LINE content');
  const { plan, progress } = s.line;
  const multicast = s.castType === 'multicast';
  if (step.type === 'plan') {
    if (plan !== null) throw illegal(c, s, `its delivery was planned under epoch ${plan.epoch}`);
    const expected = multicast && step.recipients !== null ? plannedChunks(s.castType, step.recipients) : 1;
    if (multicast === (step.recipients === null) || step.chunks !== expected || step.recipients === 0) {
      throw new ValidationError(
        `invalid AdvanceLineDelivery: a ${s.castType} of ${step.recipients ?? 'all'} recipients takes ${expected} chunk(s), not ${step.chunks}`,
        { command: c.type, field: 'step.chunks' },
      );
    }
    return [
      {
        type: 'LineDeliveryPlanned',
        data: { epoch, chunks: step.chunks, recipients: step.recipients, at: now },
      },
    ];
  }
  if (plan === null) throw illegal(c, s, 'its LINE delivery is not planned');
  if (step.chunk !== progress.chunksDone || step.chunk >= plan.chunks) {
    throw illegal(
      c,
      s,
      `chunk ${step.chunk} is not the next one (${progress.chunksDone} of ${plan.chunks} chunks done)`,
    );
  }
  const retryKey = lineRetryKey(s.campaignId, plan.epoch, step.chunk);
  if (step.type === 'failed') {
    return [
      { type: 'LineCallFailed', data: { epoch, chunk: step.chunk, retryKey, ...step.failure, at: now } },
    ];
  }
  if (multicast === (step.recipients === null) || multicast === (step.cursor === null)) {
    throw new ValidationError(
      `invalid AdvanceLineDelivery: a ${s.castType} chunk ${multicast ? 'names' : 'has no'} recipients and cursor`,
      { command: c.type, field: 'step.recipients' },
    );
  }
  const chunk = {
    epoch,
    chunk: step.chunk,
    retryKey,
    recipients: step.recipients,
    cursor: step.cursor,
    at: now,
  };
  if (step.type === 'unconfirmed') {
    if (!nextChunkKeyExpired(s.line, new Date(now))) {
      throw illegal(c, s, `chunk ${step.chunk}'s retry key is still valid: it is re-sent, not given up`);
    }
    return [{ type: 'LineChunkUnconfirmed', data: chunk }];
  }
  if (step.requestId === null && step.acceptedRequestId === null) {
    throw new ValidationError('invalid AdvanceLineDelivery: an accepted chunk carries a LINE request id', {
      command: c.type,
      field: 'step.requestId',
    });
  }
  return [
    {
      type: 'LineChunkAccepted',
      data: { ...chunk, requestId: step.requestId, acceptedRequestId: step.acceptedRequestId },
    },
  ];
}

/** The event a recount's final status is recorded by (null: not final yet). */
function finalEvents(
  status: 'COMPLETED' | 'PARTIAL' | 'FAILED' | null,
  epoch: number,
  now: string,
): CampaignEvent[] {
  switch (status) {
    case null:
      return [];
    case 'COMPLETED':
      return [{ type: 'CampaignCompleted', data: { epoch, at: now } }];
    case 'PARTIAL':
      return [{ type: 'CampaignPartiallyCompleted', data: { epoch, at: now } }];
    case 'FAILED':
      return [{ type: 'CampaignFailed', data: { reason: EVERY_RECIPIENT_FAILED, epoch, at: now } }];
  }
}

/** CampaignFailed's reason when the recount finds no recipient delivered. */
export const EVERY_RECIPIENT_FAILED = 'every recipient failed';

/**
 * A charged SMS campaign claimed with no recipient left to send or awaiting a report (every report
 * arrived while it was paused) is recounted in the claim's decision, so it never idles in DISPATCHING.
 */
function recountAfterClaim(s: ExistingCampaign, epoch: number, now: string): CampaignEvent[] {
  if (s.sms === null || s.sms.chargeKey === null) return [];
  return finalEvents(smsRecount(s.sms), epoch, now);
}

function autoPauseReason(auto: { rate: number; window: number; maxFailureRate: number }): string {
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  return `auto-pause: ${pct(auto.rate)} of the last ${auto.window} delivery reports failed (threshold ${pct(auto.maxFailureRate)})`;
}

/** Part 2: an SMS resend is charged exactly its failed recipients' cost, once every refund is recorded. */
function requireResendCharge(
  c: ParsedCampaignCommand & { type: 'ResendFailed' },
  state: ExistingCampaign,
  sms: SmsCampaignFacts,
  resendAttempt: number,
): { key: string; amount: string } {
  const { failed, refunded, unconfirmed } = sms.progress;
  if (failed === 0) throw illegal(c, state, 'it has no failed recipients to resend');
  const owed = failed - refunded - unconfirmed;
  if (owed > 0) throw illegal(c, state, `${owed} refunds are still pending`);
  if (!c.charge) {
    throw new ValidationError('invalid ResendFailed: an SMS resend carries its charge', {
      command: c.type,
      field: 'charge',
    });
  }
  const key = resendChargeKey(state.campaignId, resendAttempt);
  if (c.charge.key !== key) {
    throw new ValidationError(`invalid ResendFailed: charge key '${c.charge.key}', expected '${key}'`, {
      command: c.type,
      field: 'charge.key',
      key: c.charge.key,
      expected: key,
    });
  }
  if (toUnits(c.charge.amount) !== toUnits(sms.failedCost)) {
    throw new ValidationError(
      `invalid ResendFailed: charged ${c.charge.amount}, the failed recipients cost ${sms.failedCost}`,
      { command: c.type, field: 'charge.amount', amount: c.charge.amount, failedCost: sms.failedCost },
    );
  }
  return { key, amount: sms.failedCost };
}

/**
 * Narrows the state to the statuses a command is allowed from. `live` commands are also refused on a
 * soft-deleted campaign; the others (cancel, settle, expire, fail) still let a deleted campaign settle.
 */
function requireStatus<S extends CampaignStatus>(
  c: ParsedCampaignCommand,
  state: ExistingCampaign,
  allowed: readonly S[],
  options: { live?: boolean } = {},
): CampaignIn<S> {
  if (!(allowed as readonly CampaignStatus[]).includes(state.status)) {
    throw illegal(c, state, `allowed only in ${allowed.join(', ')}`);
  }
  if (options.live && state.deletedAt !== null)
    throw illegal(c, state, `it was deleted at ${state.deletedAt}`);
  return state as CampaignIn<S>;
}

/** The operation's refusal (src/domain/campaign/operations.ts) as the command's IllegalStateError. */
function requireOperation<S extends CampaignStatus>(
  c: ParsedCampaignCommand,
  state: ExistingCampaign,
  operation: CampaignOperationEntry<S>,
): CampaignIn<S> {
  const refused = operationRefusal(operation, state);
  if (refused !== null) throw illegal(c, state, refused);
  return state as CampaignIn<S>;
}

function requireSms(c: ParsedCampaignCommand, state: ExistingCampaign): SmsCampaignFacts {
  if (state.sms === null) throw illegal(c, state, 'it is not an SMS campaign with a definition');
  return state.sms;
}

/** Seed 003, step 10: an SMS campaign is activated by one deduction of its whole total. */
function requireCharge(
  c: ParsedCampaignCommand & { type: 'ActivateCampaign' },
  state: ExistingCampaign,
  sms: SmsCampaignFacts,
): { key: string; amount: string } {
  if (sms.recipients === 0) throw illegal(c, state, 'it has no saved recipients');
  if (!c.charge) {
    throw new ValidationError('invalid ActivateCampaign: an SMS campaign is activated by its charge', {
      command: c.type,
      field: 'charge',
    });
  }
  if (toUnits(c.charge.amount) !== toUnits(sms.totalCost)) {
    throw new ValidationError(
      `invalid ActivateCampaign: charged ${c.charge.amount}, the campaign's total is ${sms.totalCost}`,
      { command: c.type, field: 'charge.amount', amount: c.charge.amount, totalCost: sms.totalCost },
    );
  }
  return { key: c.charge.key, amount: sms.totalCost };
}

/** Fencing: a claim's commands must carry the campaign's current epoch (invariant 5). */
function requireEpoch(c: ParsedCampaignCommand, state: CampaignIn<'DISPATCHING'>, epoch: number): void {
  if (epoch !== state.claimEpoch) {
    throw illegal(c, state, `epoch ${epoch} is stale, the current claim epoch is ${state.claimEpoch}`);
  }
}

function requireDeadlineNotPassed(c: ParsedCampaignCommand & { now: string }, state: ExistingCampaign): void {
  if (state.dispatchDeadline !== null && ms(c.now) > ms(state.dispatchDeadline)) {
    throw illegal(c, state, `its dispatchDeadline ${state.dispatchDeadline} has passed (now ${c.now})`);
  }
}

/** The deadline after a new startAt: given → it, null → none, omitted → keep the current one if still valid. */
function nextDeadline(
  c: { type: string; startAt: string; dispatchDeadline?: string | null | undefined },
  current: string | null,
): string | null {
  if (c.dispatchDeadline !== undefined) return c.dispatchDeadline;
  if (current !== null && ms(current) <= ms(c.startAt)) {
    throw new ValidationError(
      `invalid ${c.type}: the current dispatchDeadline ${current} is not after the new startAt ${c.startAt}; ` +
        'pass a new dispatchDeadline or null',
      { command: c.type, startAt: c.startAt, dispatchDeadline: current },
    );
  }
  return current;
}

function illegal(c: ParsedCampaignCommand, state: CampaignState, why: string): IllegalStateError {
  const id = state.status === 'NONE' ? c.campaignId : state.campaignId;
  return new IllegalStateError(`cannot ${c.type} campaign ${id} in status ${state.status}: ${why}`, {
    command: c.type,
    status: state.status,
    campaignId: id,
  });
}
