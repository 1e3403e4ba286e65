/**
 * The failure classifier (seed 003's CampaignFailureClassifier) and the roll-up's per-report decision,
 * pure: what a terminal delivery report does to the recipient it names. DELIVERED → DELIVERED;
 * NOT_AVAILABLE → FAILED and unconfirmed (maybe delivered: never refunded); a temporary failure
 * (SEND_FAILED: the Kafka send failed; EXPIRED: validity or timeout; FAILED with a configured retryable
 * MNPSP code, or a code naming a timeout, a connection error or a downstream 5xx) with attempts left
 * and a campaign that still sends → RETRY_PENDING at now + retry delay + jitter; everything else →
 * FAILED with a refund owed (class PERMANENT, EXHAUSTED or LATE). The SMPP gateway's codes (ADR 0022): a
 * retryable submit_sm_resp status (`SMPP_0x…`) is temporary; SEND_FAILED also covers a submission the
 * gateway withdrew before sending it (its campaign paused or cancelled): never sent, so safe to retry. The attempt count is the row's
 * (only the dispatcher's submission increases it), so classifying never counts an attempt.
 * Time comes in (`now`, the transaction's database time) and so does randomness (`random`).
 */
import { isTemporarySmppCode } from './smpp-outcome.js';

export const REPORT_STATUSES = [
  'DELIVERED',
  'FAILED',
  'EXPIRED',
  'REJECTED',
  'NOT_AVAILABLE',
  'SEND_FAILED',
] as const;
export type ReportStatus = (typeof REPORT_STATUSES)[number];

export const FAILURE_CLASSES = [
  'TEMPORARY',
  'PERMANENT',
  'EXHAUSTED',
  'UNCONFIRMED',
  'SEND_FAILED',
  'LATE',
] as const;
export type FailureClass = (typeof FAILURE_CLASSES)[number];

/** The code a synthetic NOT_AVAILABLE report carries when no report came within the DLR timeout. */
export const DLR_TIMEOUT_CODE = 'DLR_TIMEOUT';

/**
 * GSM MAP error codes the simulator reports (HERALD_SMS_SIMULATOR_FAILED_CODES: 1, 27, 31, 34, 36):
 * 27 absent subscriber, 31 subscriber busy for MT-SMS and 34 system failure are temporary;
 * 1 unknown subscriber and 36 unexpected data value are not.
 */
export const DEFAULT_RETRYABLE_CODES = ['27', '31', '34'] as const;

/** Codes that name a timeout, a connection error or a downstream 5xx are temporary whatever the list says. */
const TEMPORARY_CODE =
  /(time[_ -]?out|timed[_ -]?out|connect|conn[_ -]?(refused|reset)|econn|network|unavailable|^5\d\d$|^http[_ -]?5\d\d$)/i;

export interface DeliveryPolicy {
  /** HERALD_SMS_MAX_ATTEMPTS: submissions a recipient may have (default 3). */
  readonly maxAttempts: number;
  /** HERALD_SMS_RETRY_MINUTES in ms. */
  readonly retryMs: number;
  /** HERALD_SMS_RETRY_JITTER_SECONDS in ms: a random 0..jitterMs is added to each retry. */
  readonly jitterMs: number;
  /** HERALD_SMS_RETRYABLE_CODES. */
  readonly retryableCodes: readonly string[];
}

/** True for a failure worth another submission (the classifier's "temporary"). */
export function isTemporaryFailure(
  status: ReportStatus,
  code: string | null,
  retryableCodes: readonly string[],
): boolean {
  switch (status) {
    case 'SEND_FAILED':
    case 'EXPIRED':
      return true;
    case 'FAILED':
      return (
        code !== null &&
        (retryableCodes.includes(code) || TEMPORARY_CODE.test(code) || isTemporarySmppCode(code))
      );
    case 'REJECTED':
    case 'DELIVERED':
    case 'NOT_AVAILABLE':
      return false;
    default:
      return assertNever(status);
  }
}

/** Campaign statuses in which a recipient may still be retried (ReleaseRetries is allowed there). */
const RETRYING_STATUSES: ReadonlySet<string> = new Set(['DISPATCHING', 'QUEUED', 'SCHEDULED', 'PAUSED']);

export type ReportDecision =
  | { readonly status: 'DELIVERED' }
  | {
      readonly status: 'RETRY_PENDING';
      readonly failureClass: 'TEMPORARY' | 'SEND_FAILED';
      readonly nextRetryAt: number;
    }
  | {
      readonly status: 'FAILED';
      readonly failureClass: Exclude<FailureClass, 'TEMPORARY' | 'SEND_FAILED'>;
      readonly unconfirmed: boolean;
      readonly refundRequired: boolean;
    };

/** Next retry time: now + retry delay + a random 0..jitterMs (whole ms). */
export function nextRetryAt(now: number, policy: DeliveryPolicy, random: () => number): number {
  const r = Math.min(Math.max(random(), 0), 1 - Number.EPSILON);
  return now + policy.retryMs + Math.floor(r * (policy.jitterMs + 1));
}

/**
 * What one terminal report does to its SUBMITTED recipient, given the recipient's attempts so far and
 * the campaign's status.
 */
export function decideReport(
  report: { readonly status: ReportStatus; readonly errorCode: string | null },
  recipient: { readonly attempts: number },
  campaignStatus: string,
  policy: DeliveryPolicy,
  now: number,
  random: () => number = Math.random,
): ReportDecision {
  if (report.status === 'DELIVERED') return { status: 'DELIVERED' };
  if (report.status === 'NOT_AVAILABLE') {
    return { status: 'FAILED', failureClass: 'UNCONFIRMED', unconfirmed: true, refundRequired: false };
  }
  if (!isTemporaryFailure(report.status, report.errorCode, policy.retryableCodes)) {
    return { status: 'FAILED', failureClass: 'PERMANENT', unconfirmed: false, refundRequired: true };
  }
  if (!RETRYING_STATUSES.has(campaignStatus)) {
    return { status: 'FAILED', failureClass: 'LATE', unconfirmed: false, refundRequired: true };
  }
  if (recipient.attempts >= policy.maxAttempts) {
    return { status: 'FAILED', failureClass: 'EXHAUSTED', unconfirmed: false, refundRequired: true };
  }
  return {
    status: 'RETRY_PENDING',
    failureClass: report.status === 'SEND_FAILED' ? 'SEND_FAILED' : 'TEMPORARY',
    nextRetryAt: nextRetryAt(now, policy, random),
  };
}

function assertNever(value: never): never {
  throw new Error(`unexpected report status ${String(value)}`);
}
