/**
 * What the SMSC's answers mean for a recipient (ADR 0022). Pure.
 * - `classifySubmitStatus`: a submit_sm_resp's command_status as accepted, throttled (ESME_RTHROTTLED:
 *   slow down and send the same part again), retryable (the SMSC did not take it now; the part goes
 *   again after a delay, a few times) or permanent.
 * - `parseReceipt`: a deliver_sm delivery receipt, from the receipted_message_id / message_state TLVs
 *   when present and the SMPP 3.4 Appendix B text (`id:… sub:… dlvrd:… submit date:… done date:…
 *   stat:… err:…`) otherwise, as the DLR outcome the existing classifier knows.
 * - `recipientReport`: the one delivery report a recipient gets from the outcomes of its parts: the first
 *   decisive outcome wins, and a recipient any part of which may have reached the SMSC without an
 *   answer is UNCONFIRMED (NOT_AVAILABLE: charged, never resent automatically) — invariant 9.
 */

export const SMPP_STATUS = {
  ESME_ROK: 0x00,
  ESME_RINVBNDSTS: 0x04,
  ESME_RSYSERR: 0x08,
  ESME_RMSGQFUL: 0x14,
  ESME_RSUBMITFAIL: 0x45,
  ESME_RTHROTTLED: 0x58,
  ESME_RX_T_APPN: 0x64,
  ESME_RDELIVERYFAILURE: 0xfe,
  ESME_RUNKNOWNERR: 0xff,
} as const;

export type SubmitClass = 'accepted' | 'throttled' | 'retryable' | 'permanent';

/**
 * Statuses that say "not now" without saying the message is bad: the SMSC's queue is full, a system or
 * temporary application error, a delivery failure of the SMSC itself, an unknown error, or a bind that
 * was not (yet) in a state to submit. Each proves the part was not accepted, so sending it again is safe.
 */
const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([
  SMPP_STATUS.ESME_RINVBNDSTS,
  SMPP_STATUS.ESME_RSYSERR,
  SMPP_STATUS.ESME_RMSGQFUL,
  SMPP_STATUS.ESME_RSUBMITFAIL,
  SMPP_STATUS.ESME_RX_T_APPN,
  SMPP_STATUS.ESME_RDELIVERYFAILURE,
  SMPP_STATUS.ESME_RUNKNOWNERR,
]);

export function classifySubmitStatus(commandStatus: number): SubmitClass {
  if (commandStatus === SMPP_STATUS.ESME_ROK) return 'accepted';
  if (commandStatus === SMPP_STATUS.ESME_RTHROTTLED) return 'throttled';
  return RETRYABLE_STATUSES.has(commandStatus) ? 'retryable' : 'permanent';
}

/** `0x0000000b`: how a command status is written in codes, logs and the gateway's tables. */
export function hexStatus(commandStatus: number): string {
  return `0x${(commandStatus >>> 0).toString(16).padStart(8, '0')}`;
}

/** The error code a report carries for a submit_sm_resp error: `SMPP_0x0000000b`. */
export function submitErrorCode(commandStatus: number): string {
  return `SMPP_${hexStatus(commandStatus)}`;
}

/**
 * True for a report code the classifier must treat as temporary: a retryable submit_sm_resp status
 * (`SMPP_0x…` of a retryable class) that survived the gateway's own re-submissions.
 */
export function isTemporarySmppCode(code: string): boolean {
  const match = /^SMPP_0x([0-9a-f]{8})$/i.exec(code);
  return match !== null && classifySubmitStatus(Number.parseInt(match[1]!, 16)) === 'retryable';
}

/** Codes of the synthetic reports the gateway writes. */
export const SMPP_CODES = {
  /** A part was written to the SMSC and no submit_sm_resp came (timeout, bind lost, gateway killed). */
  UNCONFIRMED: 'SMPP_UNCONFIRMED',
  /** Some parts were accepted and another failed or was withdrawn: the phone may hold half a message. */
  PARTIAL: 'SMPP_PARTIAL',
  /** Never written: the campaign stopped sending (paused, cancelled) before its turn came. */
  WITHDRAWN: 'SMPP_WITHDRAWN',
  /** No SMSC connection is configured for the submission's route channel. */
  NO_SMSC: 'SMPP_NO_SMSC',
} as const;

/** The DLR outcomes (the DeliveryReport statuses) a gateway report may carry. */
export type GatewayReportStatus =
  | 'DELIVERED'
  | 'FAILED'
  | 'EXPIRED'
  | 'REJECTED'
  | 'NOT_AVAILABLE'
  | 'SEND_FAILED';

/** A receipt's SMPP message state (SMPP 3.4 §5.2.28), by TLV value and by receipt text. */
const STATES_BY_NUMBER = [
  'SCHEDULED',
  'ENROUTE',
  'DELIVERED',
  'EXPIRED',
  'DELETED',
  'UNDELIVERABLE',
  'ACCEPTED',
  'UNKNOWN',
  'REJECTED',
  'SKIPPED',
] as const;
export type MessageState = (typeof STATES_BY_NUMBER)[number];
const STATES_BY_TEXT: Readonly<Record<string, MessageState>> = {
  DELIVRD: 'DELIVERED',
  DELIVERED: 'DELIVERED',
  EXPIRED: 'EXPIRED',
  DELETED: 'DELETED',
  UNDELIV: 'UNDELIVERABLE',
  UNDELIVERABLE: 'UNDELIVERABLE',
  ACCEPTD: 'ACCEPTED',
  ACCEPTED: 'ACCEPTED',
  UNKNOWN: 'UNKNOWN',
  REJECTD: 'REJECTED',
  REJECTED: 'REJECTED',
  ENROUTE: 'ENROUTE',
  SCHEDULED: 'SCHEDULED',
  SKIPPED: 'SKIPPED',
};

export interface ReceiptText {
  id: string;
  sub: string | null;
  dlvrd: string | null;
  submitDate: string | null;
  doneDate: string | null;
  stat: string | null;
  err: string | null;
  text: string | null;
}

/**
 * Parses the receipt text of SMPP 3.4 Appendix B. Field names are case-insensitive, `text:` runs to the
 * end; null when there is no `id:`.
 */
export function parseReceiptText(raw: string): ReceiptText | null {
  const fields = new Map<string, string>();
  const textAt = raw.search(/\btext:/i);
  const head = textAt >= 0 ? raw.slice(0, textAt) : raw;
  if (textAt >= 0) fields.set('text', raw.slice(textAt + 5));
  const pattern = /(id|sub|dlvrd|submit date|done date|stat|err):\s*(\S*)/gi;
  for (const match of head.matchAll(pattern)) {
    const name = match[1]!.toLowerCase();
    if (!fields.has(name)) fields.set(name, match[2]!);
  }
  const id = fields.get('id');
  if (!id) return null;
  return {
    id,
    sub: fields.get('sub') ?? null,
    dlvrd: fields.get('dlvrd') ?? null,
    submitDate: fields.get('submit date') ?? null,
    doneDate: fields.get('done date') ?? null,
    stat: fields.get('stat') ?? null,
    err: fields.get('err') ?? null,
    text: fields.get('text') ?? null,
  };
}

export type ParsedReceipt =
  | {
      readonly ok: true;
      readonly messageId: string;
      readonly state: MessageState;
      /** The DLR outcome of a final state; null for an intermediate one (ENROUTE, ACCEPTED, SCHEDULED). */
      readonly outcome: GatewayReportStatus | null;
      /** The error code without leading zeros (`027` → `27`), null when none or zero. */
      readonly errorCode: string | null;
      readonly doneDate: string | null;
    }
  | { readonly ok: false; readonly reason: string; readonly messageId: string | null };

/** The DLR outcome of a final message state (null: not final). */
export function outcomeOfState(state: MessageState): GatewayReportStatus | null {
  switch (state) {
    case 'DELIVERED':
      return 'DELIVERED';
    case 'EXPIRED':
      return 'EXPIRED';
    case 'UNDELIVERABLE':
    case 'DELETED':
      return 'FAILED';
    case 'REJECTED':
      return 'REJECTED';
    case 'UNKNOWN':
      return 'NOT_AVAILABLE';
    case 'SKIPPED':
      return 'REJECTED';
    case 'SCHEDULED':
    case 'ENROUTE':
    case 'ACCEPTED':
      return null;
    default:
      return assertNever(state);
  }
}

function normalizeError(err: string | null | undefined): string | null {
  if (err === null || err === undefined || err === '') return null;
  const trimmed = /^\d+$/.test(err) ? String(Number.parseInt(err, 10)) : err;
  return trimmed === '0' ? null : trimmed;
}

/**
 * A deliver_sm receipt: the TLVs win over the text (they are typed), the text fills what they lack.
 * `networkErrorCode` is the network_error_code TLV (type, 2-byte code) when present.
 */
export function parseReceipt(receipt: {
  text: string;
  receiptedMessageId?: string | null | undefined;
  messageState?: number | null | undefined;
  networkErrorCode?: Uint8Array | null | undefined;
}): ParsedReceipt {
  const parsed = parseReceiptText(receipt.text);
  const messageId = receipt.receiptedMessageId || parsed?.id || null;
  if (!messageId)
    return {
      ok: false,
      reason: 'no message id (no receipted_message_id, no id: in the text)',
      messageId: null,
    };
  let state: MessageState | undefined;
  if (receipt.messageState !== null && receipt.messageState !== undefined) {
    state = STATES_BY_NUMBER[receipt.messageState];
    if (!state)
      return { ok: false, reason: `message_state ${receipt.messageState} is not a message state`, messageId };
  } else if (parsed?.stat) {
    state = STATES_BY_TEXT[parsed.stat.toUpperCase()];
    if (!state) return { ok: false, reason: `stat:${parsed.stat} is not a message state`, messageId };
  } else {
    return { ok: false, reason: 'no message state (no message_state, no stat: in the text)', messageId };
  }
  const network = receipt.networkErrorCode;
  const networkCode = network && network.length >= 3 ? String((network[1]! << 8) | network[2]!) : null;
  const outcome = outcomeOfState(state);
  const errorCode =
    outcome === 'DELIVERED' || outcome === null
      ? null
      : (normalizeError(parsed?.err) ?? normalizeError(networkCode));
  return { ok: true, messageId, state, outcome, errorCode, doneDate: parsed?.doneDate ?? null };
}

/** What happened to one part, as the gateway's table records it. */
export interface PartOutcome {
  readonly state: 'queued' | 'sending' | 'accepted' | 'failed' | 'unconfirmed' | 'withdrawn';
  /** The submit_sm_resp status of a failed part. */
  readonly commandStatus: number | null;
  /** The final receipt of an accepted part (null: none yet). */
  readonly receipt: { readonly outcome: GatewayReportStatus; readonly errorCode: string | null } | null;
  /** Why a part was withdrawn (the campaign's status). */
  readonly reason?: string | null;
}

export interface RecipientReport {
  readonly status: GatewayReportStatus;
  readonly errorCode: string | null;
}

/**
 * The recipient's report from its parts, or null while it is still open. In order: any part that may
 * have reached the SMSC unanswered → UNCONFIRMED; a failed part → its class (permanent: REJECTED;
 * retryable after the gateway's re-submissions: FAILED with the code the classifier retries), unless
 * another part was accepted (PARTIAL, permanent: retrying would send that part twice); withdrawn parts
 * with none sent → SEND_FAILED (safe to resend); a final receipt that is not DELIVERED → its outcome; all
 * parts DELIVERED → DELIVERED.
 */
export function recipientReport(parts: readonly PartOutcome[]): RecipientReport | null {
  if (parts.length === 0) return null;
  const accepted = parts.filter((p) => p.state === 'accepted');
  if (parts.some((p) => p.state === 'unconfirmed')) {
    return { status: 'NOT_AVAILABLE', errorCode: SMPP_CODES.UNCONFIRMED };
  }
  const failed = parts.find((p) => p.state === 'failed');
  if (failed) {
    const code = submitErrorCode(failed.commandStatus ?? SMPP_STATUS.ESME_RUNKNOWNERR);
    if (accepted.length > 0 || parts.some((p) => p.state === 'sending')) {
      return { status: 'REJECTED', errorCode: `${SMPP_CODES.PARTIAL}:${code}` };
    }
    const kind = classifySubmitStatus(failed.commandStatus ?? SMPP_STATUS.ESME_RUNKNOWNERR);
    return { status: kind === 'permanent' ? 'REJECTED' : 'FAILED', errorCode: code };
  }
  const withdrawn = parts.find((p) => p.state === 'withdrawn');
  if (withdrawn) {
    if (parts.some((p) => p.state === 'sending')) return null; // its answer decides
    if (accepted.length > 0) {
      return { status: 'NOT_AVAILABLE', errorCode: `${SMPP_CODES.PARTIAL}:${SMPP_CODES.WITHDRAWN}` };
    }
    return {
      status: 'SEND_FAILED',
      errorCode: withdrawn.reason ? `${SMPP_CODES.WITHDRAWN}:${withdrawn.reason}` : SMPP_CODES.WITHDRAWN,
    };
  }
  const undelivered = accepted.find((p) => p.receipt !== null && p.receipt.outcome !== 'DELIVERED');
  if (undelivered) return { status: undelivered.receipt!.outcome, errorCode: undelivered.receipt!.errorCode };
  if (accepted.length === parts.length && accepted.every((p) => p.receipt?.outcome === 'DELIVERED')) {
    return { status: 'DELIVERED', errorCode: null };
  }
  return null;
}

function assertNever(value: never): never {
  throw new Error(`unexpected value ${String(value)}`);
}
