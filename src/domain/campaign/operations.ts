/**
 * The campaign's operator commands (src/domain/operations.ts), each said once: where it is allowed
 * and what else it requires of the state. The decider refuses through these entries; the API's view
 * of a campaign lists those its state allows (`commands`), which the dashboard renders.
 */
import type { Operation } from '../operations.js';
import { lineDeliveryDone } from './line.js';
import { DELETABLE_STATUSES, type ExistingCampaign } from './state.js';
import type { CampaignStatus } from './status.js';

/** An operation whose statuses are known, so the decider gets the state narrowed to them. */
export interface CampaignOperationEntry<S extends CampaignStatus = CampaignStatus>
  extends Operation<ExistingCampaign> {
  readonly statuses: readonly S[] | ((state: ExistingCampaign) => readonly S[]);
}

/** A live campaign's operation: refused once the campaign was deleted, then by `rule`. */
function live<S extends CampaignStatus>(
  command: string,
  statuses: readonly S[],
  rule?: (state: ExistingCampaign) => string | null,
  offered?: (state: ExistingCampaign) => boolean,
): CampaignOperationEntry<S> {
  return {
    command,
    statuses,
    rule: (state) =>
      state.deletedAt !== null ? `it was deleted at ${state.deletedAt}` : (rule?.(state) ?? null),
    ...(offered ? { offered } : {}),
  };
}

export const CAMPAIGN_OPERATIONS = {
  activate: live('ActivateCampaign', ['DRAFT', 'BUILDING']),
  schedule: live('ScheduleCampaign', ['DRAFT'], (s) =>
    s.sms ? 'an SMS campaign gets its start at creation and is activated by its charge' : null,
  ),
  'send-now': live('SendNow', ['DRAFT', 'QUEUED', 'SCHEDULED'], (s) =>
    s.sms && s.status === 'DRAFT' ? 'an SMS draft is not charged yet' : null,
  ),
  pause: live('PauseCampaign', ['SCHEDULED', 'QUEUED', 'DISPATCHING']),
  resume: live('ResumeCampaign', ['PAUSED']),
  reschedule: live('RescheduleCampaign', ['SCHEDULED', 'PAUSED'], (s) =>
    s.status === 'PAUSED' && s.pausedFrom !== 'SCHEDULED'
      ? `it was paused from ${s.pausedFrom}, not SCHEDULED`
      : null,
  ),
  // An SMS campaign may also be cancelled while dispatching: the epoch moves, fencing the live batch.
  // A CSV campaign may be cancelled while BUILDING until its build saved a recipient (a build that keeps
  // failing, issue 23): nothing is charged before every recipient is saved, so nothing is refunded.
  cancel: {
    command: 'CancelCampaign',
    statuses: (s): readonly ('BUILDING' | 'QUEUED' | 'SCHEDULED' | 'PAUSED' | 'DISPATCHING')[] =>
      s.channel === 'sms'
        ? s.sms?.source === 'csv'
          ? ['BUILDING', 'QUEUED', 'SCHEDULED', 'PAUSED', 'DISPATCHING']
          : ['QUEUED', 'SCHEDULED', 'PAUSED', 'DISPATCHING']
        : ['QUEUED', 'SCHEDULED', 'PAUSED'],
    rule: (s) =>
      s.status === 'BUILDING' && (s.sms?.recipients ?? 0) > 0
        ? `its build has saved ${s.sms!.recipients} recipients: it is charged and activated, or fails, on its own`
        : null,
  } as CampaignOperationEntry<'BUILDING' | 'QUEUED' | 'SCHEDULED' | 'PAUSED' | 'DISPATCHING'>,
  // CMS edits (seed 000) until the first claim fixes a LINE campaign's delivery plan.
  edit: live('EditCampaign', ['DRAFT', 'SCHEDULED'], (s) =>
    s.line?.plan ? 'it was claimed: its delivery plan and content are fixed' : null,
  ),
  // The API resends an SMS campaign's failed recipients (charged once), and a failed LINE campaign's
  // chunks not yet accepted (under their planned retry keys: an accepted chunk is never sent again).
  resend: live(
    'ResendFailed',
    ['PARTIAL', 'FAILED'],
    // A LINE resend sends what its plan has not done yet (or, never planned, all of it) under the plan's
    // retry keys; a plan that is done has nothing left (an unconfirmed chunk is never re-sent: ADR 0021).
    (s) =>
      s.channel === 'line' && s.line !== null && lineDeliveryDone(s.line)
        ? 'every chunk of its LINE delivery is done'
        : null,
    (s) => s.sms !== null || (s.line !== null && !lineDeliveryDone(s.line)),
  ),
  delete: live('DeleteCampaign', DELETABLE_STATUSES),
} as const satisfies Readonly<Record<string, CampaignOperationEntry>>;

export type CampaignOperation = keyof typeof CAMPAIGN_OPERATIONS;
