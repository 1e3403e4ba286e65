/**
 * Campaign decider: every legal transition of seed 003's lifecycle, every illegal (status × command)
 * pair, the claim-epoch fence (invariant 5), validation, the event schemas, and a replay property
 * (invariant 8). Histories are produced by the decider itself (`historyFor`), never forged.
 */
import { describe, expect, it } from 'vitest';
import { EMPTY_LINE_PROGRESS } from '../../src/domain/campaign/line.js';
import {
  CAMPAIGN_COMMAND_TYPES,
  CAMPAIGN_EVENT_TYPES,
  CAMPAIGN_STATUSES,
  CAMPAIGN_STREAM_TYPE,
  type CampaignChannel,
  type CampaignCommand,
  type CampaignCommandType,
  type CampaignEvent,
  type CampaignState,
  type CampaignStatus,
  type CreateCampaign,
  campaignDecider,
  campaignDestination,
  isFinalStatus,
  parseCampaignCommand,
  parseCampaignEvent,
  resendChargeKey,
  withdrawable,
  withdrawalKey,
} from '../../src/domain/campaign.js';
import { fold } from '../../src/domain/decider.js';
import { IllegalStateError, ValidationError } from '../../src/errors.js';
import { specFor } from '../../src/testing/given-when-then.js';

const spec = specFor(campaignDecider);
const { given } = spec;

const ID = '0b8f5c1e-6a7d-4c2e-9f3a-1d2e3f4a5b6c';
const T0 = Date.parse('2030-01-01T00:00:00.000Z');
/** Minutes after T0 as canonical ISO: the timeline every history uses. */
const at = (minutes: number) => new Date(T0 + minutes * 60_000).toISOString();

// Timeline of the standard histories: created at 0, startAt 60, claimed at 120, deadline 180.
const START = at(60);
const DEADLINE = at(180);
const CLAIMED = at(120);
const STALE_AFTER_MS = 15 * 60_000;

function create(overrides: Partial<CreateCampaign> = {}, channel: CampaignChannel = 'line'): CreateCampaign {
  const lineFields: Partial<CreateCampaign> = {
    castType: 'multicast',
    audienceId: 'audience-1',
    lineOaId: 'oa-1',
    line: { messages: [{ type: 'text', text: 'Spring sale: 20% off' }] },
  };
  return {
    type: 'CreateCampaign',
    campaignId: ID,
    now: at(0),
    mode: 'draft',
    organizationId: 'org-1',
    channel,
    ...(channel === 'line' ? lineFields : {}),
    name: 'Spring sale',
    startAt: START,
    dispatchDeadline: DEADLINE,
    ...overrides,
  };
}

/** Runs commands through decide → evolve and returns the events: a real history. */
function run(commands: readonly CampaignCommand[], events: CampaignEvent[] = []): CampaignEvent[] {
  const history = [...events];
  let state = fold(campaignDecider, history);
  for (const command of commands) {
    const emitted = campaignDecider.decide(command, state);
    for (const event of emitted) state = campaignDecider.evolve(state, event);
    history.push(...emitted);
  }
  return history;
}

const cmd = {
  activate: (now = at(10)): CampaignCommand => ({ type: 'ActivateCampaign', campaignId: ID, now }),
  claim: (now = CLAIMED): CampaignCommand => ({ type: 'ClaimCampaign', campaignId: ID, now }),
  sendNow: (now = at(20)): CampaignCommand => ({ type: 'SendNow', campaignId: ID, now }),
  pause: (now = at(30)): CampaignCommand => ({ type: 'PauseCampaign', campaignId: ID, now }),
  resume: (now = at(40)): CampaignCommand => ({ type: 'ResumeCampaign', campaignId: ID, now }),
  cancel: (now = at(30)): CampaignCommand => ({ type: 'CancelCampaign', campaignId: ID, now }),
  settle: (now = at(50)): CampaignCommand => ({ type: 'SettleCancellation', campaignId: ID, now }),
  expire: (now = at(240)): CampaignCommand => ({ type: 'ExpireCampaign', campaignId: ID, now }),
  heartbeat: (epoch: number, now = at(125)): CampaignCommand => ({
    type: 'Heartbeat',
    campaignId: ID,
    now,
    epoch,
  }),
  complete: (epoch: number, now = at(160)): CampaignCommand => ({
    type: 'CompleteCampaign',
    campaignId: ID,
    now,
    epoch,
  }),
  partial: (epoch: number, now = at(160)): CampaignCommand => ({
    type: 'FinishPartially',
    campaignId: ID,
    now,
    epoch,
  }),
  fail: (epoch?: number, now = at(160)): CampaignCommand => ({
    type: 'FailCampaign',
    campaignId: ID,
    now,
    reason: 'LINE API rejected the message',
    ...(epoch === undefined ? {} : { epoch }),
  }),
  reclaim: (now = at(140)): CampaignCommand => ({
    type: 'ReclaimCampaign',
    campaignId: ID,
    now,
    staleAfterMs: STALE_AFTER_MS,
  }),
  requeue: (now = at(140)): CampaignCommand => ({
    type: 'RequeueCampaign',
    campaignId: ID,
    now,
    reason: 'retry ready',
  }),
  /** Plans a LINE multicast of `recipients` (chunks of 500) under the claim's epoch. */
  plan: (epoch: number, recipients = 3, now = at(121)): CampaignCommand => ({
    type: 'AdvanceLineDelivery',
    campaignId: ID,
    now,
    epoch,
    step: { type: 'plan', chunks: Math.ceil(recipients / 500), recipients },
  }),
  /** Records LINE's acceptance of chunk `chunk` (3 recipients by default). */
  accepted: (epoch: number, chunk = 0, recipients = 3, now = at(122)): CampaignCommand => ({
    type: 'AdvanceLineDelivery',
    campaignId: ID,
    now,
    epoch,
    step: {
      type: 'accepted',
      chunk,
      recipients,
      cursor: `U${String(chunk).padStart(32, '0')}`,
      requestId: `req-${chunk}`,
      acceptedRequestId: null,
    },
  }),
  resend: (now = at(300)): CampaignCommand => ({ type: 'ResendFailed', campaignId: ID, now }),
  remove: (now = at(300)): CampaignCommand => ({ type: 'DeleteCampaign', campaignId: ID, now }),
};

type Status = CampaignStatus | 'NONE';
const ALL_STATUSES: readonly Status[] = ['NONE', ...CAMPAIGN_STATUSES];

/**
 * A real event history that leaves a campaign in `status`. CANCELLING only exists for SMS (a LINE
 * cancellation settles at once), so it defaults to sms; everything else defaults to line.
 */
function historyFor(status: Status, channel: CampaignChannel = status === 'CANCELLING' ? 'sms' : 'line') {
  const scheduled = [create({}, channel), cmd.activate()];
  const dispatching = [...scheduled, cmd.claim()];
  const scripts: Record<Status, CampaignCommand[]> = {
    NONE: [],
    DRAFT: [create({}, channel)],
    BUILDING: [create({ mode: 'building' }, channel)],
    SCHEDULED: scheduled,
    QUEUED: [create({ startAt: null, dispatchDeadline: null }, channel), cmd.activate()],
    DISPATCHING: dispatching,
    PAUSED: [...scheduled, cmd.pause()],
    COMPLETED:
      channel === 'line'
        ? [...dispatching, cmd.plan(1), cmd.accepted(1), cmd.complete(1)]
        : [...dispatching, cmd.complete(1)],
    PARTIAL: [...dispatching, cmd.partial(1)],
    FAILED: [...dispatching, cmd.fail(1)],
    EXPIRED: [...scheduled, cmd.expire()],
    CANCELLING: [...scheduled, cmd.cancel()],
    CANCELLED: channel === 'line' ? [...scheduled, cmd.cancel()] : [...scheduled, cmd.cancel(), cmd.settle()],
  };
  const events = run(scripts[status]);
  expect(fold(campaignDecider, events).status).toBe(status);
  return events;
}

const stateOf = (events: readonly CampaignEvent[]) => fold(campaignDecider, events);

/** A well-formed command of each type, valid for the state where the type is legal. */
function sample(type: CampaignCommandType, state: CampaignState): CampaignCommand {
  const epoch = state.status === 'NONE' ? 1 : Math.max(state.claimEpoch, 1);
  const base = { campaignId: ID };
  switch (type) {
    case 'CreateCampaign':
      return create();
    case 'ActivateCampaign':
      return { type, ...base, now: at(10) };
    case 'ScheduleCampaign':
      return { type, ...base, now: at(10), startAt: at(90), dispatchDeadline: at(200) };
    case 'SendNow':
      return { type, ...base, now: CLAIMED };
    case 'ClaimCampaign':
      return { type, ...base, now: CLAIMED };
    case 'EditCampaign':
      return { type, ...base, now: at(15), name: 'Summer sale' };
    case 'AdvanceLineDelivery':
      return {
        type,
        ...base,
        now: at(121),
        epoch,
        step: { type: 'plan', chunks: 1, recipients: 3 },
      };
    case 'ReclaimCampaign':
      return { type, ...base, now: at(150), staleAfterMs: STALE_AFTER_MS };
    case 'Heartbeat':
      return { type, ...base, now: at(130), epoch };
    case 'CompleteCampaign':
    case 'FinishPartially':
      return { type, ...base, now: at(160), epoch };
    case 'FailCampaign':
      return {
        type,
        ...base,
        now: at(160),
        reason: 'boom',
        ...(state.status === 'DISPATCHING' ? { epoch } : {}),
      };
    case 'DeferCampaign':
      return {
        type,
        ...base,
        now: at(150),
        epoch,
        startAt: at(24 * 60),
        dispatchDeadline: null,
        reason: 'window',
      };
    case 'PauseCampaign':
    case 'ResumeCampaign':
    case 'CancelCampaign':
    case 'SettleCancellation':
      return { type, ...base, now: at(150) };
    case 'RescheduleCampaign':
      return { type, ...base, now: at(150), startAt: at(300), dispatchDeadline: at(400) };
    case 'ExpireCampaign':
      return { type, ...base, now: at(240) };
    case 'RequeueCampaign':
      return { type, ...base, now: at(150) };
    case 'ResendFailed':
    case 'DeleteCampaign':
      return { type, ...base, now: at(300) };
    case 'StartBuild':
      return { type, ...base, now: at(20), staleAfterMs: STALE_AFTER_MS };
    case 'AddRecipients':
      return { type, ...base, now: at(5), recipients: 2, segments: 2, cost: '0.6', rejected: 0 };
    case 'RecordDispatch':
      return {
        type,
        ...base,
        now: at(130),
        epoch,
        submittedFromPending: 1,
        submittedFromDeferred: 0,
        deferredFromPending: 0,
        deferredAgain: 0,
        submissions: 1,
      };
    case 'RecordDeliveryReports':
      return {
        type,
        ...base,
        now: at(150),
        delivered: 1,
        deliveredCost: '0.3',
        failed: 0,
        failedCost: '0',
        unconfirmed: 0,
        unconfirmedCost: '0',
        retryPending: 0,
      };
    case 'ReleaseRetries':
      return { type, ...base, now: at(150), recipients: 1 };
    case 'RecordRefunds':
      return { type, ...base, now: at(150), recipients: 1, amount: '0.3' };
    case 'WithdrawUnsent':
      return {
        type,
        ...base,
        now: at(150),
        reason: state.status === 'EXPIRED' ? 'expired' : 'cancelled',
        recipients: 0,
        amount: '0',
        key: withdrawalKey(ID, state.status === 'EXPIRED' ? 'expired' : 'cancelled', 0),
      };
    case 'RecordWithdrawalRefund':
      return { type, ...base, now: at(150), key: withdrawalKey(ID, 'cancelled', 0), amount: '0' };
  }
}

/** Seed 003's diagram (plus soft delete and defer), written independently of the decider. */
const LEGAL: Record<CampaignCommandType, readonly Status[]> = {
  CreateCampaign: ['NONE'],
  ActivateCampaign: ['DRAFT', 'BUILDING'],
  ScheduleCampaign: ['DRAFT'],
  SendNow: ['DRAFT', 'QUEUED', 'SCHEDULED'],
  ClaimCampaign: ['QUEUED', 'SCHEDULED'],
  EditCampaign: ['DRAFT', 'SCHEDULED'],
  AdvanceLineDelivery: ['DISPATCHING'],
  ReclaimCampaign: ['DISPATCHING'],
  Heartbeat: ['DISPATCHING'],
  CompleteCampaign: ['DISPATCHING'],
  FailCampaign: ['DRAFT', 'BUILDING', 'DISPATCHING'],
  FinishPartially: ['DISPATCHING'],
  DeferCampaign: ['DISPATCHING'],
  PauseCampaign: ['SCHEDULED', 'QUEUED', 'DISPATCHING'],
  ResumeCampaign: ['PAUSED'],
  RescheduleCampaign: ['SCHEDULED', 'PAUSED'],
  CancelCampaign: ['QUEUED', 'SCHEDULED', 'PAUSED'],
  SettleCancellation: ['CANCELLING'],
  ExpireCampaign: ['SCHEDULED'],
  RequeueCampaign: ['DISPATCHING'],
  ResendFailed: ['PARTIAL', 'FAILED'],
  DeleteCampaign: [
    'DRAFT',
    'QUEUED',
    'SCHEDULED',
    'PAUSED',
    'COMPLETED',
    'PARTIAL',
    'FAILED',
    'CANCELLED',
    'EXPIRED',
  ],
  // Only for SMS campaigns created with a definition (none of the histories here):
  // test/domain/campaign-sms.unit.spec.ts covers their legal and illegal transitions.
  StartBuild: [],
  AddRecipients: [],
  RecordDispatch: [],
  // Part 2 (delivery, refunds, withdrawal): also only with an SMS definition, so refused here for LINE
  // and for bare sms campaigns alike; test/domain/campaign-sms-delivery.unit.spec.ts covers them.
  RecordDeliveryReports: [],
  ReleaseRetries: [],
  RecordRefunds: [],
  WithdrawUnsent: [],
  RecordWithdrawalRefund: [],
};
/** Legal for an sms campaign only (part 2: cancel during dispatch, fencing the live batch). */
const LEGAL_SMS_ONLY: Partial<Record<CampaignCommandType, readonly Status[]>> = {
  CancelCampaign: ['DISPATCHING'],
};
/** Legal for a LINE campaign only (its delivery plan; SMS campaigns deliver per recipient). */
const LINE_ONLY: ReadonlySet<CampaignCommandType> = new Set(['AdvanceLineDelivery']);
const isLegal = (r: { type: CampaignCommandType; status: Status; channel: CampaignChannel }) =>
  (LEGAL[r.type].includes(r.status) && !(r.channel === 'sms' && LINE_ONLY.has(r.type))) ||
  (r.channel === 'sms' && (LEGAL_SMS_ONLY[r.type] ?? []).includes(r.status));
/** Commands that still apply to a soft-deleted campaign: they only let it settle, never dispatch. */
const LEGAL_WHEN_DELETED: ReadonlySet<CampaignCommandType> = new Set([
  'CancelCampaign',
  'SettleCancellation',
  'ExpireCampaign',
  'FailCampaign',
]);

describe('campaign decider: module surface', () => {
  it('exposes the stream type, every command and every event type', () => {
    expect(CAMPAIGN_STREAM_TYPE).toBe('campaign');
    expect([...CAMPAIGN_COMMAND_TYPES].sort()).toEqual(Object.keys(LEGAL).sort());
    expect(CAMPAIGN_EVENT_TYPES).toHaveLength(32);
    expect(campaignDecider.initialState()).toEqual({ status: 'NONE' });
  });

  it('isFinalStatus: COMPLETED, PARTIAL, FAILED, CANCELLED, EXPIRED only', () => {
    const finals = ALL_STATUSES.filter((s) => isFinalStatus(s));
    expect(finals).toEqual(['COMPLETED', 'PARTIAL', 'FAILED', 'EXPIRED', 'CANCELLED']);
  });

  it('campaignDestination uses seed 000 queue names by castType', () => {
    const broadcast = stateOf(run([create({ castType: 'broadcast', audienceId: null })]));
    const multicast = stateOf(historyFor('DRAFT'));
    const sms = stateOf(historyFor('DRAFT', 'sms'));
    if (broadcast.status === 'NONE' || multicast.status === 'NONE' || sms.status === 'NONE')
      throw new Error();
    expect(campaignDestination(broadcast)).toBe('line_broadcast_rich_message');
    expect(campaignDestination(multicast)).toBe('line_multicast_rich_message');
    expect(() => campaignDestination(sms)).toThrow(IllegalStateError);
  });
});

describe('campaign decider: legal transitions', () => {
  it('[*] → DRAFT: inline create', () => {
    const state = given([])
      .when(create())
      .then([
        {
          type: 'CampaignCreated',
          data: {
            campaignId: ID,
            organizationId: 'org-1',
            channel: 'line',
            castType: 'multicast',
            audienceId: 'audience-1',
            lineOaId: 'oa-1',
            name: 'Spring sale',
            startAt: START,
            dispatchDeadline: DEADLINE,
            idempotencyKey: null,
            mode: 'draft',
            line: { messages: [{ type: 'text', text: 'Spring sale: 20% off' }] },
            at: at(0),
          },
        },
      ]);
    expect(state).toEqual({
      status: 'DRAFT',
      campaignId: ID,
      organizationId: 'org-1',
      channel: 'line',
      castType: 'multicast',
      audienceId: 'audience-1',
      lineOaId: 'oa-1',
      name: 'Spring sale',
      idempotencyKey: null,
      requestIdempotencyKey: null,
      startAt: START,
      dispatchDeadline: DEADLINE,
      claimEpoch: 0,
      claimedAt: null,
      pausedFrom: null,
      pauseReason: null,
      deletedAt: null,
      resendAttempt: 0,
      failureReason: null,
      createdAt: at(0),
      statusChangedAt: at(0),
      sms: null,
      line: {
        messages: [{ type: 'text', text: 'Spring sale: 20% off' }],
        plan: null,
        progress: EMPTY_LINE_PROGRESS,
      },
    });
  });

  it('[*] → BUILDING: CSV accepted (sms, no LINE fields, idempotency key kept)', () => {
    const { events, state } = given([])
      .when(
        create({ mode: 'building', idempotencyKey: 'key-1', startAt: null, dispatchDeadline: null }, 'sms'),
      )
      .thenSucceeds();
    expect(events).toHaveLength(1);
    expect(state).toMatchObject({
      status: 'BUILDING',
      channel: 'sms',
      castType: null,
      audienceId: null,
      lineOaId: null,
      idempotencyKey: 'key-1',
    });
  });

  it('DRAFT → QUEUED: activate an instant campaign (no startAt)', () => {
    const history = run([create({ startAt: null, dispatchDeadline: null })]);
    const state = given(history)
      .when(cmd.activate())
      .then([{ type: 'CampaignActivated', data: { to: 'QUEUED', at: at(10) } }]);
    expect(state).toMatchObject({ status: 'QUEUED', statusChangedAt: at(10) });
  });

  it('DRAFT → QUEUED: activate when startAt has already passed (deadline not yet)', () => {
    given(historyFor('DRAFT'))
      .when(cmd.activate(at(90)))
      .then([{ type: 'CampaignActivated', data: { to: 'QUEUED', at: at(90) } }]);
  });

  it('DRAFT → SCHEDULED: activate with a future startAt', () => {
    const state = given(historyFor('DRAFT'))
      .when(cmd.activate())
      .then([{ type: 'CampaignActivated', data: { to: 'SCHEDULED', at: at(10) } }]);
    expect(state).toMatchObject({ status: 'SCHEDULED', startAt: START, dispatchDeadline: DEADLINE });
  });

  it('DRAFT → SCHEDULED: ScheduleCampaign sets startAt and deadline (seed 000 "schedule")', () => {
    const state = given(run([create({ startAt: null, dispatchDeadline: null })]))
      .when({
        type: 'ScheduleCampaign',
        campaignId: ID,
        now: at(5),
        startAt: at(100),
        dispatchDeadline: at(200),
      })
      .then([
        { type: 'CampaignScheduled', data: { startAt: at(100), dispatchDeadline: at(200), at: at(5) } },
      ]);
    expect(state).toMatchObject({ status: 'SCHEDULED', startAt: at(100), dispatchDeadline: at(200) });
  });

  it('ScheduleCampaign keeps a still-valid deadline when omitted and clears it with null', () => {
    given(historyFor('DRAFT'))
      .when({ type: 'ScheduleCampaign', campaignId: ID, now: at(5), startAt: at(100) })
      .then([
        { type: 'CampaignScheduled', data: { startAt: at(100), dispatchDeadline: DEADLINE, at: at(5) } },
      ]);
    given(historyFor('DRAFT'))
      .when({
        type: 'ScheduleCampaign',
        campaignId: ID,
        now: at(5),
        startAt: at(100),
        dispatchDeadline: null,
      })
      .then([{ type: 'CampaignScheduled', data: { startAt: at(100), dispatchDeadline: null, at: at(5) } }]);
  });

  it('DRAFT → FAILED: create/charge fails', () => {
    const state = given(historyFor('DRAFT'))
      .when(cmd.fail(undefined, at(5)))
      .then([
        { type: 'CampaignFailed', data: { reason: 'LINE API rejected the message', epoch: null, at: at(5) } },
      ]);
    expect(state).toMatchObject({ status: 'FAILED', failureReason: 'LINE API rejected the message' });
  });

  it('BUILDING → QUEUED: build + charge succeeds (instant)', () => {
    given(run([create({ mode: 'building', startAt: null, dispatchDeadline: null }, 'sms')]))
      .when(cmd.activate())
      .then([{ type: 'CampaignActivated', data: { to: 'QUEUED', at: at(10) } }]);
  });

  it('BUILDING → SCHEDULED: build + charge succeeds (scheduled)', () => {
    given(historyFor('BUILDING', 'sms'))
      .when(cmd.activate())
      .then([{ type: 'CampaignActivated', data: { to: 'SCHEDULED', at: at(10) } }]);
  });

  it('BUILDING → FAILED: invalid, uncharged or stale build', () => {
    given(historyFor('BUILDING', 'sms'))
      .when({ type: 'FailCampaign', campaignId: ID, now: at(5), reason: 'missing personalized header' })
      .then([
        { type: 'CampaignFailed', data: { reason: 'missing personalized header', epoch: null, at: at(5) } },
      ]);
  });

  it('SCHEDULED → DISPATCHING: the scanner claims once now >= startAt (epoch 1, claimedAt = now)', () => {
    const state = given(historyFor('SCHEDULED'))
      .when(cmd.claim(START))
      .then([{ type: 'CampaignClaimed', data: { epoch: 1, claimedAt: START, trigger: 'scanner' } }]);
    expect(state).toMatchObject({
      status: 'DISPATCHING',
      claimEpoch: 1,
      claimedAt: START,
      statusChangedAt: START,
    });
  });

  it('QUEUED → DISPATCHING: the scanner claims a queued campaign at any time', () => {
    given(historyFor('QUEUED'))
      .when(cmd.claim(at(11)))
      .then([{ type: 'CampaignClaimed', data: { epoch: 1, claimedAt: at(11), trigger: 'scanner' } }]);
  });

  it('SendNow: QUEUED → DISPATCHING and SCHEDULED → DISPATCHING before startAt, trigger send_now', () => {
    given(historyFor('QUEUED'))
      .when(cmd.sendNow())
      .then([{ type: 'CampaignClaimed', data: { epoch: 1, claimedAt: at(20), trigger: 'send_now' } }]);
    given(historyFor('SCHEDULED'))
      .when(cmd.sendNow())
      .then([{ type: 'CampaignClaimed', data: { epoch: 1, claimedAt: at(20), trigger: 'send_now' } }]);
  });

  it('SendNow on a DRAFT activates and claims in one command (no scanner can claim in between)', () => {
    const state = given(historyFor('DRAFT'))
      .when(cmd.sendNow())
      .then([
        { type: 'CampaignActivated', data: { to: 'QUEUED', at: at(20) } },
        { type: 'CampaignClaimed', data: { epoch: 1, claimedAt: at(20), trigger: 'send_now' } },
      ]);
    expect(state).toMatchObject({ status: 'DISPATCHING', claimEpoch: 1 });
  });

  it('SCHEDULED → PAUSED and QUEUED → PAUSED remember pausedFrom; the epoch is unchanged', () => {
    const scheduled = given(historyFor('SCHEDULED'))
      .when(cmd.pause())
      .then([{ type: 'CampaignPaused', data: { pausedFrom: 'SCHEDULED', epoch: 0, at: at(30) } }]);
    expect(scheduled).toMatchObject({ status: 'PAUSED', pausedFrom: 'SCHEDULED', claimEpoch: 0 });
    given(historyFor('QUEUED'))
      .when(cmd.pause())
      .then([{ type: 'CampaignPaused', data: { pausedFrom: 'QUEUED', epoch: 0, at: at(30) } }]);
  });

  it('DISPATCHING → PAUSED revokes the live claim: epoch bumps, claimedAt cleared', () => {
    const state = given(historyFor('DISPATCHING'))
      .when(cmd.pause(at(130)))
      .then([{ type: 'CampaignPaused', data: { pausedFrom: 'DISPATCHING', epoch: 2, at: at(130) } }]);
    expect(state).toMatchObject({
      status: 'PAUSED',
      pausedFrom: 'DISPATCHING',
      claimEpoch: 2,
      claimedAt: null,
    });
  });

  it('PAUSED → SCHEDULED: resume a campaign paused from SCHEDULED', () => {
    const state = given(historyFor('PAUSED'))
      .when(cmd.resume())
      .then([{ type: 'CampaignResumed', data: { to: 'SCHEDULED', at: at(40) } }]);
    expect(state).toMatchObject({ status: 'SCHEDULED', pausedFrom: null, startAt: START });
  });

  it('PAUSED → QUEUED: resume a campaign paused from QUEUED or DISPATCHING', () => {
    given(run([cmd.pause()], historyFor('QUEUED')))
      .when(cmd.resume())
      .then([{ type: 'CampaignResumed', data: { to: 'QUEUED', at: at(40) } }]);
    const state = given(run([cmd.pause(at(130))], historyFor('DISPATCHING')))
      .when(cmd.resume(at(135)))
      .then([{ type: 'CampaignResumed', data: { to: 'QUEUED', at: at(135) } }]);
    expect(state).toMatchObject({ status: 'QUEUED', pausedFrom: null, claimEpoch: 2 });
  });

  it('DISPATCHING → QUEUED: requeue (retry-ready or stale recovery) bumps the epoch', () => {
    const state = given(historyFor('DISPATCHING'))
      .when(cmd.requeue())
      .then([
        {
          type: 'CampaignRequeued',
          data: { epoch: 2, previousClaimedAt: CLAIMED, reason: 'retry ready', at: at(140) },
        },
      ]);
    expect(state).toMatchObject({ status: 'QUEUED', claimEpoch: 2, claimedAt: null });
  });

  it('DISPATCHING → SCHEDULED: the reaper reclaims a stale scheduled campaign (seed 000)', () => {
    const state = given(historyFor('DISPATCHING'))
      .when(cmd.reclaim())
      .then([
        {
          type: 'CampaignReclaimed',
          data: {
            epoch: 2,
            previousClaimedAt: CLAIMED,
            reason: `no heartbeat for more than ${STALE_AFTER_MS} ms`,
            to: 'SCHEDULED',
            at: at(140),
          },
        },
      ]);
    expect(state).toMatchObject({ status: 'SCHEDULED', claimEpoch: 2, claimedAt: null, startAt: START });
  });

  it('DISPATCHING → QUEUED: the reaper reclaims a stale instant campaign (no startAt)', () => {
    const history = run([cmd.claim(at(20))], historyFor('QUEUED'));
    given(history)
      .when({
        type: 'ReclaimCampaign',
        campaignId: ID,
        now: at(40),
        staleAfterMs: STALE_AFTER_MS,
        reason: 'pod gone',
      })
      .then([
        {
          type: 'CampaignReclaimed',
          data: { epoch: 2, previousClaimedAt: at(20), reason: 'pod gone', to: 'QUEUED', at: at(40) },
        },
      ]);
  });

  it('DISPATCHING → QUEUED: a campaign sent now before its startAt is reclaimed claimable at once, not back to its future startAt', () => {
    const future = at(10_000);
    const history = run([
      create({ startAt: future, dispatchDeadline: null }),
      cmd.activate(),
      { type: 'SendNow', campaignId: ID, now: at(20) },
    ]);
    expect(stateOf(history)).toMatchObject({ status: 'DISPATCHING', startAt: future });
    const state = given(history)
      .when(cmd.reclaim(at(36)))
      .then([
        {
          type: 'CampaignReclaimed',
          data: {
            epoch: 2,
            previousClaimedAt: at(20),
            reason: `no heartbeat for more than ${STALE_AFTER_MS} ms`,
            to: 'QUEUED',
            at: at(36),
          },
        },
      ]);
    expect(state).toMatchObject({ status: 'QUEUED', startAt: future, claimEpoch: 2 });
    // and the next claim takes it at once, long before its startAt
    given(run([cmd.reclaim(at(36))], history))
      .when(cmd.claim(at(37)))
      .then([{ type: 'CampaignClaimed', data: { epoch: 3, claimedAt: at(37), trigger: 'scanner' } }]);
  });

  it('DISPATCHING → SCHEDULED: the claim holder defers to the next window (new startAt)', () => {
    const state = given(historyFor('DISPATCHING'))
      .when({
        type: 'DeferCampaign',
        campaignId: ID,
        now: at(150),
        epoch: 1,
        startAt: at(24 * 60),
        dispatchDeadline: at(26 * 60),
        reason: 'promotional window closed',
      })
      .then([
        {
          type: 'CampaignDeferred',
          data: {
            epoch: 1,
            startAt: at(24 * 60),
            dispatchDeadline: at(26 * 60),
            reason: 'promotional window closed',
            at: at(150),
          },
        },
      ]);
    expect(state).toMatchObject({
      status: 'SCHEDULED',
      startAt: at(24 * 60),
      claimEpoch: 1,
      claimedAt: null,
    });
  });

  it('DISPATCHING → COMPLETED: all delivered (a LINE campaign once every planned chunk is accepted)', () => {
    const state = given(run([cmd.plan(1), cmd.accepted(1)], historyFor('DISPATCHING')))
      .when(cmd.complete(1))
      .then([{ type: 'CampaignCompleted', data: { epoch: 1, at: at(160) } }]);
    expect(state).toMatchObject({ status: 'COMPLETED', claimedAt: null, claimEpoch: 1 });
  });

  it('DISPATCHING → PARTIAL: terminal mixed result', () => {
    given(historyFor('DISPATCHING'))
      .when(cmd.partial(1))
      .then([{ type: 'CampaignPartiallyCompleted', data: { epoch: 1, at: at(160) } }]);
  });

  it('DISPATCHING → FAILED: all failed', () => {
    const state = given(historyFor('DISPATCHING'))
      .when(cmd.fail(1))
      .then([
        { type: 'CampaignFailed', data: { reason: 'LINE API rejected the message', epoch: 1, at: at(160) } },
      ]);
    expect(state).toMatchObject({
      status: 'FAILED',
      claimedAt: null,
      failureReason: 'LINE API rejected the message',
    });
  });

  it('DISPATCHING: a heartbeat with the current epoch refreshes claimedAt', () => {
    const state = given(historyFor('DISPATCHING'))
      .when(cmd.heartbeat(1, at(125)))
      .then([{ type: 'CampaignHeartbeat', data: { epoch: 1, claimedAt: at(125) } }]);
    expect(state).toMatchObject({ status: 'DISPATCHING', claimedAt: at(125), statusChangedAt: CLAIMED });
  });

  it('SCHEDULED → EXPIRED: deadline missed', () => {
    const state = given(historyFor('SCHEDULED'))
      .when(cmd.expire(at(181)))
      .then([{ type: 'CampaignExpired', data: { dispatchDeadline: DEADLINE, at: at(181) } }]);
    expect(state).toMatchObject({ status: 'EXPIRED' });
  });

  it.each(['QUEUED', 'SCHEDULED', 'PAUSED'] as const)('%s → CANCELLING: cancel an SMS campaign', (from) => {
    const state = given(historyFor(from, 'sms'))
      .when({ type: 'CancelCampaign', campaignId: ID, now: at(45), reason: 'customer asked' })
      .then([
        { type: 'CampaignCancellationRequested', data: { from, reason: 'customer asked', at: at(45) } },
      ]);
    expect(state).toMatchObject({ status: 'CANCELLING', pausedFrom: null });
  });

  it.each(['QUEUED', 'SCHEDULED', 'PAUSED'] as const)(
    '%s → CANCELLED: a LINE cancel settles at once',
    (from) => {
      given(historyFor(from, 'line'))
        .when(cmd.cancel(at(45)))
        .then([
          { type: 'CampaignCancellationRequested', data: { from, reason: null, at: at(45) } },
          { type: 'CampaignCancelled', data: { at: at(45) } },
        ]);
    },
  );

  it('CANCELLING → CANCELLED: refund settles', () => {
    const state = given(historyFor('CANCELLING'))
      .when(cmd.settle())
      .then([{ type: 'CampaignCancelled', data: { at: at(50) } }]);
    expect(state).toMatchObject({ status: 'CANCELLED' });
  });

  it.each(['PARTIAL', 'FAILED'] as const)('%s → QUEUED: resend failed, resendAttempt increments', (from) => {
    const state = given(historyFor(from))
      .when(cmd.resend())
      .then([{ type: 'CampaignResendRequested', data: { resendAttempt: 1, at: at(300) } }]);
    expect(state).toMatchObject({ status: 'QUEUED', resendAttempt: 1, failureReason: null });
  });

  it('a second resend after another failure is attempt 2, with a fresh claim epoch', () => {
    const history = run([cmd.resend(), cmd.claim(at(310)), cmd.fail(2, at(320))], historyFor('FAILED'));
    const state = given(history)
      .when(cmd.resend(at(330)))
      .then([{ type: 'CampaignResendRequested', data: { resendAttempt: 2, at: at(330) } }]);
    expect(state).toMatchObject({ resendAttempt: 2, claimEpoch: 2 });
  });

  it('SCHEDULED → SCHEDULED: reschedule to a later time with a new deadline', () => {
    const state = given(historyFor('SCHEDULED'))
      .when({
        type: 'RescheduleCampaign',
        campaignId: ID,
        now: at(30),
        startAt: at(500),
        dispatchDeadline: at(600),
      })
      .then([
        { type: 'CampaignRescheduled', data: { startAt: at(500), dispatchDeadline: at(600), at: at(30) } },
      ]);
    expect(state).toMatchObject({ status: 'SCHEDULED', startAt: at(500), dispatchDeadline: at(600) });
  });

  it('PAUSED (from SCHEDULED) → PAUSED: reschedule while paused, then resume to the new time', () => {
    const history = run(
      [{ type: 'RescheduleCampaign', campaignId: ID, now: at(35), startAt: at(100), dispatchDeadline: null }],
      historyFor('PAUSED'),
    );
    const state = given(history)
      .when(cmd.resume())
      .then([{ type: 'CampaignResumed', data: { to: 'SCHEDULED', at: at(40) } }]);
    expect(state).toMatchObject({ status: 'SCHEDULED', startAt: at(100), dispatchDeadline: null });
  });

  it('DeleteCampaign sets deletedAt and keeps the status', () => {
    const state = given(historyFor('SCHEDULED'))
      .when(cmd.remove(at(20)))
      .then([{ type: 'CampaignDeleted', data: { at: at(20) } }]);
    expect(state).toMatchObject({ status: 'SCHEDULED', deletedAt: at(20) });
  });

  it('a deleted campaign can still be cancelled (refund) and expired, never dispatched', () => {
    const deleted = run([cmd.remove(at(20))], historyFor('SCHEDULED', 'sms'));
    given(deleted)
      .when(cmd.cancel(at(25)))
      .thenSucceeds();
    given(deleted).when(cmd.expire()).thenSucceeds();
    given(deleted)
      .when(cmd.claim())
      .thenThrows(IllegalStateError, /ClaimCampaign .* SCHEDULED: it was deleted/);
  });

  it('seed 000 whole flow: schedule → claim → heartbeat → reaper → reclaim → complete', () => {
    const history = run([
      create({ startAt: null, dispatchDeadline: null, castType: 'broadcast', audienceId: null }),
      { type: 'ScheduleCampaign', campaignId: ID, now: at(1), startAt: at(60) },
      cmd.claim(at(60)),
      cmd.heartbeat(1, at(65)),
      cmd.reclaim(at(81)),
      cmd.claim(at(82)),
      {
        type: 'AdvanceLineDelivery',
        campaignId: ID,
        now: at(83),
        epoch: 3,
        step: { type: 'plan', chunks: 1, recipients: null },
      },
      {
        type: 'AdvanceLineDelivery',
        campaignId: ID,
        now: at(84),
        epoch: 3,
        step: {
          type: 'accepted',
          chunk: 0,
          recipients: null,
          cursor: null,
          requestId: 'req-0',
          acceptedRequestId: null,
        },
      },
      cmd.complete(3, at(90)),
    ]);
    const state = stateOf(history);
    expect(state).toMatchObject({ status: 'COMPLETED', claimEpoch: 3, claimedAt: null });
    expect(history.map((e) => e.type)).toEqual([
      'CampaignCreated',
      'CampaignScheduled',
      'CampaignClaimed',
      'CampaignHeartbeat',
      'CampaignReclaimed',
      'CampaignClaimed',
      'LineDeliveryPlanned',
      'LineChunkAccepted',
      'CampaignCompleted',
    ]);
  });
});

describe('campaign decider: every illegal (status × command) pair', () => {
  type Row = { status: Status; channel: CampaignChannel; type: CampaignCommandType };
  const rows: Row[] = [];
  for (const channel of ['line', 'sms'] as const) {
    for (const status of ALL_STATUSES) {
      if (status === 'CANCELLING' && channel === 'line') continue; // a LINE cancel settles at once
      for (const type of CAMPAIGN_COMMAND_TYPES) rows.push({ status, channel, type });
    }
  }
  const illegal = rows.filter((r) => !isLegal(r));
  const legal = rows.filter((r) => isLegal(r));

  it('covers the whole table', () => {
    expect(rows).toHaveLength((ALL_STATUSES.length * 2 - 1) * CAMPAIGN_COMMAND_TYPES.length);
    expect(illegal.length + legal.length).toBe(rows.length);
  });

  it.each(illegal)(
    '$channel $status × $type → IllegalStateError naming both',
    ({ status, channel, type }) => {
      const history = historyFor(status, channel);
      const command = sample(type, stateOf(history));
      const error = given(history).when(command).thenThrows(IllegalStateError);
      expect(error.message).toContain(type);
      expect(error.message).toContain(`status ${status}`);
      expect(error.details).toMatchObject({ command: type, status });
    },
  );

  it.each(legal)('$channel $status × $type is accepted', ({ status, channel, type }) => {
    // A LINE campaign completes once its plan is done (the refusals before that: the LINE tests below).
    const lineDone = channel === 'line' && type === 'CompleteCampaign' ? [cmd.plan(1), cmd.accepted(1)] : [];
    const history = run(lineDone, historyFor(status, channel));
    const { events } = given(history)
      .when(sample(type, stateOf(history)))
      .thenSucceeds();
    expect(events.length).toBeGreaterThan(0);
  });

  describe('on a soft-deleted campaign only settling commands apply', () => {
    const deletable = LEGAL.DeleteCampaign;
    const deletedRows = deletable.flatMap((status) =>
      CAMPAIGN_COMMAND_TYPES.map((type) => ({ status, type })),
    );
    const deletedHistory = (status: Status) => run([cmd.remove(at(100))], historyFor(status, 'sms'));

    it.each(deletedRows.filter((r) => !(LEGAL[r.type].includes(r.status) && LEGAL_WHEN_DELETED.has(r.type))))(
      'deleted $status × $type → IllegalStateError',
      ({ status, type }) => {
        const history = deletedHistory(status);
        const error = given(history)
          .when(sample(type, stateOf(history)))
          .thenThrows(IllegalStateError);
        expect(error.message).toContain(type);
        expect(error.message).toContain(`status ${status}`);
      },
    );

    it.each(deletedRows.filter((r) => LEGAL[r.type].includes(r.status) && LEGAL_WHEN_DELETED.has(r.type)))(
      'deleted $status × $type is accepted',
      ({ status, type }) => {
        const history = deletedHistory(status);
        given(history)
          .when(sample(type, stateOf(history)))
          .thenSucceeds();
      },
    );
  });
});

describe('campaign decider: claim epoch fencing (invariant 5)', () => {
  it('every claim increments the epoch and the event carries it', () => {
    const history = run([cmd.requeue(), cmd.claim(at(141)), cmd.requeue(at(142))], historyFor('DISPATCHING'));
    const state = given(history)
      .when(cmd.claim(at(143)))
      .then([{ type: 'CampaignClaimed', data: { epoch: 5, claimedAt: at(143), trigger: 'scanner' } }]);
    expect(state).toMatchObject({ claimEpoch: 5 });
  });

  it('a heartbeat with a stale epoch is rejected', () => {
    const history = run([cmd.requeue(), cmd.claim(at(141))], historyFor('DISPATCHING'));
    given(history)
      .when(cmd.heartbeat(1, at(142)))
      .thenThrows(
        IllegalStateError,
        /Heartbeat .* DISPATCHING: epoch 1 is stale, the current claim epoch is 3/,
      );
    given(history)
      .when(cmd.heartbeat(3, at(142)))
      .thenSucceeds();
  });

  it('after a reclaim, the old claim epoch no longer matches: before and after the next claim', () => {
    const oldEpoch = 1;
    const reclaimed = run([cmd.reclaim()], historyFor('DISPATCHING'));
    expect(stateOf(reclaimed)).toMatchObject({ status: 'SCHEDULED', claimEpoch: 2 });
    expect(stateOf(reclaimed)).not.toMatchObject({ claimEpoch: oldEpoch });
    given(reclaimed)
      .when(cmd.heartbeat(oldEpoch, at(141)))
      .thenThrows(IllegalStateError, /status SCHEDULED/);
    given(reclaimed)
      .when(cmd.complete(oldEpoch, at(141)))
      .thenThrows(IllegalStateError, /status SCHEDULED/);

    const reclaimedThenClaimed = run([cmd.claim(at(142))], reclaimed);
    expect(stateOf(reclaimedThenClaimed)).toMatchObject({ status: 'DISPATCHING', claimEpoch: 3 });
    for (const late of [
      cmd.heartbeat(oldEpoch, at(143)),
      cmd.complete(oldEpoch, at(143)),
      cmd.partial(oldEpoch, at(143)),
      cmd.fail(oldEpoch, at(143)),
    ]) {
      given(reclaimedThenClaimed)
        .when(late)
        .thenThrows(IllegalStateError, /epoch 1 is stale/);
    }
    given(run([cmd.plan(3, 3, at(143)), cmd.accepted(3, 0, 3, at(143))], reclaimedThenClaimed))
      .when(cmd.complete(3, at(143)))
      .thenSucceeds();
  });

  it('a reclaim is refused while the claim is fresh (age <= staleAfterMs)', () => {
    given(historyFor('DISPATCHING'))
      .when(cmd.reclaim(at(135)))
      .thenThrows(IllegalStateError, /ReclaimCampaign .* DISPATCHING: its claim is 900000 ms old, not stale/);
  });

  it('a heartbeat postpones the reaper', () => {
    const history = run([cmd.heartbeat(1, at(130))], historyFor('DISPATCHING'));
    given(history)
      .when(cmd.reclaim(at(140)))
      .thenThrows(IllegalStateError, /not stale/);
    given(history)
      .when(cmd.reclaim(at(146)))
      .thenSucceeds();
  });

  it('complete, partial, fail and defer need the current epoch', () => {
    const history = historyFor('DISPATCHING');
    given(history)
      .when(cmd.complete(2))
      .thenThrows(IllegalStateError, /epoch 2 is stale/);
    given(history)
      .when(cmd.partial(7))
      .thenThrows(IllegalStateError, /epoch 7 is stale/);
    given(history)
      .when(cmd.fail(2))
      .thenThrows(IllegalStateError, /epoch 2 is stale/);
    given(history)
      .when({
        type: 'DeferCampaign',
        campaignId: ID,
        now: at(150),
        epoch: 2,
        startAt: at(999),
        reason: 'window',
      })
      .thenThrows(IllegalStateError, /epoch 2 is stale/);
  });
});

describe('campaign decider: time and state rules', () => {
  it('claiming a SCHEDULED campaign before its startAt is rejected, even by 1 ms', () => {
    given(historyFor('SCHEDULED'))
      .when(cmd.claim(at(59)))
      .thenThrows(IllegalStateError, /ClaimCampaign .* SCHEDULED: its startAt .* is after now/);
    given(historyFor('SCHEDULED'))
      .when(cmd.claim(new Date(Date.parse(START) - 1).toISOString()))
      .thenThrows(IllegalStateError, /is after now/);
  });

  it('claiming or sending a SCHEDULED campaign after its deadline is rejected (it must expire)', () => {
    given(historyFor('SCHEDULED')).when(cmd.claim(DEADLINE)).thenSucceeds();
    given(historyFor('SCHEDULED'))
      .when(cmd.claim(at(181)))
      .thenThrows(IllegalStateError, /dispatchDeadline .* has passed/);
    given(historyFor('SCHEDULED'))
      .when(cmd.sendNow(at(181)))
      .thenThrows(IllegalStateError, /dispatchDeadline .* has passed/);
  });

  it.each(['QUEUED', 'SCHEDULED'] as const)('claiming a deleted %s campaign is rejected', (status) => {
    const history = run([cmd.remove(at(20))], historyFor(status));
    given(history)
      .when(cmd.claim())
      .thenThrows(IllegalStateError, /ClaimCampaign .* it was deleted/);
    given(history)
      .when(cmd.sendNow(at(21)))
      .thenThrows(IllegalStateError, /SendNow .* it was deleted/);
  });

  it('a deleted campaign cannot be deleted again', () => {
    given(run([cmd.remove(at(20))], historyFor('DRAFT')))
      .when(cmd.remove(at(21)))
      .thenThrows(IllegalStateError, /DeleteCampaign .* it was deleted/);
  });

  it('expiring before (or exactly at) the deadline is rejected; no deadline, no expiry', () => {
    given(historyFor('SCHEDULED'))
      .when(cmd.expire(at(179)))
      .thenThrows(IllegalStateError, /ExpireCampaign .* SCHEDULED: its dispatchDeadline .* has not passed/);
    given(historyFor('SCHEDULED'))
      .when(cmd.expire(DEADLINE))
      .thenThrows(IllegalStateError, /has not passed/);
    const noDeadline = run([create({ dispatchDeadline: null }), cmd.activate()]);
    given(noDeadline)
      .when(cmd.expire())
      .thenThrows(IllegalStateError, /no dispatchDeadline/);
  });

  it('a paused campaign does not expire (the expiry timer stops)', () => {
    given(historyFor('PAUSED'))
      .when(cmd.expire())
      .thenThrows(IllegalStateError, /status PAUSED/);
  });

  it('activating after the deadline has passed is rejected', () => {
    given(historyFor('DRAFT'))
      .when(cmd.activate(at(181)))
      .thenThrows(IllegalStateError, /ActivateCampaign .* DRAFT: its dispatchDeadline .* has passed/);
  });

  it('rescheduling into the past (or to now) is rejected', () => {
    for (const startAt of [at(29), at(30)]) {
      given(historyFor('SCHEDULED'))
        .when({ type: 'RescheduleCampaign', campaignId: ID, now: at(30), startAt })
        .thenThrows(ValidationError, /startAt: startAt .* must be after now/);
    }
  });

  it('rescheduling keeps the deadline only while it is after the new startAt', () => {
    given(historyFor('SCHEDULED'))
      .when({ type: 'RescheduleCampaign', campaignId: ID, now: at(30), startAt: at(120) })
      .then([
        { type: 'CampaignRescheduled', data: { startAt: at(120), dispatchDeadline: DEADLINE, at: at(30) } },
      ]);
    given(historyFor('SCHEDULED'))
      .when({ type: 'RescheduleCampaign', campaignId: ID, now: at(30), startAt: at(500) })
      .thenThrows(ValidationError, /current dispatchDeadline .* is not after the new startAt/);
  });

  it('rescheduling a campaign paused from QUEUED or DISPATCHING is rejected', () => {
    const fromQueued = run([cmd.pause()], historyFor('QUEUED'));
    given(fromQueued)
      .when({ type: 'RescheduleCampaign', campaignId: ID, now: at(35), startAt: at(100) })
      .thenThrows(IllegalStateError, /RescheduleCampaign .* PAUSED: it was paused from QUEUED/);
    const fromDispatching = run([cmd.pause(at(130))], historyFor('DISPATCHING'));
    given(fromDispatching)
      .when({ type: 'RescheduleCampaign', campaignId: ID, now: at(135), startAt: at(300) })
      .thenThrows(IllegalStateError, /paused from DISPATCHING/);
  });

  it('a command for another campaign id is rejected', () => {
    given(historyFor('SCHEDULED'))
      .when({ type: 'ClaimCampaign', campaignId: '7d1f0a52-3c4b-4e8a-9b6c-5d4e3f2a1b0c', now: CLAIMED })
      .thenThrows(ValidationError, /is for campaign 7d1f0a52-.* not 0b8f5c1e-/);
  });

  it('now may be a Date or an ISO string with an offset; stored times are canonical UTC', () => {
    given(historyFor('SCHEDULED'))
      .when({ type: 'ClaimCampaign', campaignId: ID.toUpperCase(), now: new Date(Date.parse(CLAIMED)) })
      .then([{ type: 'CampaignClaimed', data: { epoch: 1, claimedAt: CLAIMED, trigger: 'scanner' } }]);
    given(historyFor('SCHEDULED'))
      .when({ type: 'ClaimCampaign', campaignId: ID, now: '2030-01-01T09:00:00+07:00' })
      .then([{ type: 'CampaignClaimed', data: { epoch: 1, claimedAt: CLAIMED, trigger: 'scanner' } }]);
  });
});

describe('campaign decider: validation', () => {
  const invalidCreates: [string, CreateCampaign, RegExp][] = [
    ['missing castType for line', create({ castType: undefined }), /castType: required for line/],
    ['missing lineOaId for line', create({ lineOaId: null }), /lineOaId: required for line/],
    [
      'multicast without audience',
      create({ audienceId: undefined }),
      /audienceId: required for a line multicast/,
    ],
    ['LINE fields on sms', create({ castType: 'broadcast' }, 'sms'), /castType: only for line campaigns/],
    [
      'deadline before startAt',
      create({ dispatchDeadline: at(30) }),
      /dispatchDeadline .* must be after startAt/,
    ],
    ['deadline equal to startAt', create({ dispatchDeadline: START }), /must be after startAt/],
    ['deadline without startAt', create({ startAt: null }), /a dispatchDeadline needs a startAt/],
    ['bad uuid', create({ campaignId: 'campaign-1' }), /campaignId/],
    ['empty organizationId', create({ organizationId: '' }), /organizationId: must not be empty/],
    ['blank name', create({ name: '   ' }), /name: must not be empty/],
    ['unknown castType', create({ castType: 'unicast' as 'broadcast' }), /castType/],
    ['bad startAt', create({ startAt: 'tomorrow' }), /startAt/],
    ['invalid Date as now', create({ now: new Date(Number.NaN) }), /now/],
    ['unknown field', { ...create(), cast_type: 'broadcast' } as CreateCampaign, /cast_type/],
  ];

  it.each(invalidCreates)('CreateCampaign with %s → ValidationError', (_, command, message) => {
    const error = given([]).when(command).thenThrows(ValidationError, message);
    expect(error.message).toMatch(/^invalid CreateCampaign: /);
  });

  it('reports every problem at once', () => {
    given([])
      .when(create({ castType: null, lineOaId: null, organizationId: '' }))
      .thenThrows(ValidationError, /organizationId.*castType.*lineOaId/);
  });

  it('validation wins over state: a malformed command on a missing campaign is a ValidationError', () => {
    given([])
      .when({ type: 'ClaimCampaign', campaignId: ID, now: 'not a time' })
      .thenThrows(ValidationError, /now/);
  });

  it('an unknown command type is a ValidationError', () => {
    given(historyFor('DRAFT'))
      .when({ type: 'LaunchCampaign', campaignId: ID, now: at(1) } as unknown as CampaignCommand)
      .thenThrows(ValidationError, /type/);
  });

  it('failing a DISPATCHING campaign needs the epoch; failing a DRAFT must not carry one', () => {
    given(historyFor('DISPATCHING'))
      .when(cmd.fail())
      .thenThrows(ValidationError, /epoch is required/);
    given(historyFor('DRAFT'))
      .when(cmd.fail(1))
      .thenThrows(ValidationError, /epoch applies only/);
  });

  it('ScheduleCampaign needs a future startAt and a deadline after it', () => {
    given(historyFor('DRAFT'))
      .when({ type: 'ScheduleCampaign', campaignId: ID, now: at(10), startAt: at(5) })
      .thenThrows(ValidationError, /must be after now/);
    given(historyFor('DRAFT'))
      .when({
        type: 'ScheduleCampaign',
        campaignId: ID,
        now: at(10),
        startAt: at(200),
        dispatchDeadline: at(100),
      })
      .thenThrows(ValidationError, /dispatchDeadline .* must be after startAt/);
    given(historyFor('DRAFT'))
      .when({ type: 'ScheduleCampaign', campaignId: ID, now: at(10), startAt: at(200) })
      .thenThrows(ValidationError, /current dispatchDeadline .* is not after the new startAt/);
  });

  it('epochs and staleAfterMs must be positive integers', () => {
    given(historyFor('DISPATCHING')).when(cmd.heartbeat(0)).thenThrows(ValidationError, /epoch/);
    given(historyFor('DISPATCHING')).when(cmd.heartbeat(1.5)).thenThrows(ValidationError, /epoch/);
    given(historyFor('DISPATCHING'))
      .when({ type: 'ReclaimCampaign', campaignId: ID, now: at(150), staleAfterMs: -1 })
      .thenThrows(ValidationError, /staleAfterMs/);
  });

  it('parseCampaignCommand normalizes input for API callers', () => {
    const parsed = parseCampaignCommand(create({ name: '  Spring sale  ', now: new Date(T0) }));
    expect(parsed).toMatchObject({ name: 'Spring sale', now: at(0) });
  });
});

describe('campaign events: schemas and evolve', () => {
  it('every event decide emits is valid JSON that parses back to itself', () => {
    const everything = [
      ...run(
        [cmd.resend(), cmd.claim(at(301)), cmd.heartbeat(2, at(302)), cmd.pause(at(303))],
        historyFor('FAILED'),
      ),
      ...historyFor('CANCELLED', 'sms'),
      ...historyFor('EXPIRED'),
      ...run(
        [
          {
            type: 'DeferCampaign',
            campaignId: ID,
            now: at(150),
            epoch: 1,
            startAt: at(900),
            dispatchDeadline: null,
            reason: 'window',
          },
          cmd.remove(at(151)),
        ],
        historyFor('DISPATCHING'),
      ),
    ];
    for (const event of everything) {
      expect(parseCampaignEvent(JSON.parse(JSON.stringify(event)))).toEqual(event);
    }
  });

  it('parseCampaignEvent rejects malformed events with a ValidationError', () => {
    expect(() => parseCampaignEvent({ type: 'CampaignExploded', data: {} })).toThrow(ValidationError);
    expect(() =>
      parseCampaignEvent({ type: 'CampaignClaimed', data: { epoch: 0, claimedAt: at(1) } }),
    ).toThrow(/invalid CampaignClaimed: data.epoch.*data.trigger/);
    expect(() =>
      parseCampaignEvent({ type: 'CampaignCompleted', data: { epoch: 1, at: '2030-01-01T09:00:00+07:00' } }),
    ).toThrow(/data.at/);
  });

  it('evolve refuses events that cannot follow the state', () => {
    const draft = stateOf(historyFor('DRAFT'));
    const dispatching = stateOf(historyFor('DISPATCHING'));
    const evolve = campaignDecider.evolve;
    expect(() => evolve(draft, { type: 'CampaignCompleted', data: { epoch: 1, at: at(1) } })).toThrow(
      /cannot apply CampaignCompleted to campaign .* in status DRAFT/,
    );
    expect(() => evolve(dispatching, { type: 'CampaignCompleted', data: { epoch: 9, at: at(1) } })).toThrow(
      IllegalStateError,
    );
    expect(() =>
      evolve(dispatching, {
        type: 'CampaignClaimed',
        data: { epoch: 2, claimedAt: at(1), trigger: 'scanner' },
      }),
    ).toThrow(/status DISPATCHING/);
    expect(() => evolve({ status: 'NONE' }, { type: 'CampaignDeleted', data: { at: at(1) } })).toThrow(
      /status NONE/,
    );
    const created = historyFor('DRAFT')[0]!;
    expect(() => evolve(draft, created)).toThrow(/CampaignCreated .* status DRAFT/);
  });
});

/** Mulberry32: a tiny deterministic PRNG so the property test is reproducible from its seed. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    int: (min: number, max: number) => min + Math.floor(next() * (max - min + 1)),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!,
    chance: (p: number) => next() < p,
  };
}

type Rng = ReturnType<typeof prng>;

/** A random, plausible command of `type` at `now`; it may well be rejected, which the walk skips. */
function randomCommand(
  type: CampaignCommandType,
  state: CampaignState,
  now: number,
  rng: Rng,
): CampaignCommand {
  const iso = (ms: number) => new Date(ms).toISOString();
  const minutes = (m: number) => now + m * 60_000;
  const epoch =
    state.status === 'NONE' ? 1 : rng.chance(0.85) ? Math.max(1, state.claimEpoch) : rng.int(1, 6);
  const base = { campaignId: ID, now: iso(now) };
  const startAt = minutes(rng.int(1, 240));
  const deadline = () =>
    rng.chance(0.3) ? undefined : rng.chance(0.3) ? null : iso(startAt + rng.int(1, 300) * 60_000);
  switch (type) {
    case 'CreateCampaign': {
      const channel = rng.pick(['line', 'sms'] as const);
      const start = rng.chance(0.3) ? null : iso(minutes(rng.int(-60, 240)));
      const mode = rng.pick(['draft', 'building'] as const);
      // Half the sms campaigns carry an SMS definition (seed 003's recipients, charge and progress).
      const sms =
        channel === 'sms' && rng.chance(0.5)
          ? {
              sms: {
                messageType: rng.pick(['PROMOTIONAL', 'TRANSACTIONAL'] as const),
                lang: 'bn' as const,
                operatorCampaignId: 'OP-1',
                templateType: 'GENERIC' as const,
                template: 'অফার',
                source: mode === 'building' ? ('csv' as const) : ('inline' as const),
                sendWindow: null,
              },
            }
          : {};
      return create(
        {
          now: iso(now),
          mode,
          startAt: start,
          dispatchDeadline:
            start !== null && rng.chance(0.6) ? iso(Date.parse(start) + rng.int(1, 300) * 60_000) : null,
          ...sms,
        },
        channel,
      );
    }
    case 'EditCampaign': {
      const castType = rng.pick(['broadcast', 'multicast'] as const);
      return rng.chance(0.5)
        ? { type, ...base, name: `edited ${rng.int(1, 9)}` }
        : {
            type,
            ...base,
            castType,
            audienceId: castType === 'multicast' ? 'audience-2' : null,
            messages: [{ type: 'text', text: `edited ${rng.int(1, 9)}` }],
          };
    }
    case 'AdvanceLineDelivery': {
      // The walk plans small multicasts (1–3 chunks) and then mostly steps through the next chunk.
      const line = state.status === 'NONE' ? null : state.line;
      if (!line?.plan || rng.chance(0.05)) {
        const recipients = rng.int(1, 1_200);
        return {
          type,
          ...base,
          epoch,
          step: rng.chance(0.3)
            ? { type: 'plan', chunks: 1, recipients: null }
            : { type: 'plan', chunks: Math.ceil(recipients / 500), recipients },
        };
      }
      const chunk = rng.chance(0.9) ? line.progress.chunksDone : rng.int(0, line.plan.chunks);
      const members = { recipients: rng.int(1, 500), cursor: `U${String(chunk).padStart(32, '0')}` };
      const step = rng.pick(['accepted', 'accepted', 'accepted', 'failed', 'unconfirmed'] as const);
      if (step === 'failed') {
        const kind = rng.pick(['throttled', 'transient', 'rejected', 'quota'] as const);
        return {
          type,
          ...base,
          epoch,
          step: {
            type: 'failed',
            chunk,
            failure: { kind, status: kind === 'transient' ? 503 : 429, requestId: null, message: kind },
          },
        };
      }
      if (step === 'unconfirmed') {
        return { type, ...base, epoch, step: { type: 'unconfirmed', chunk, ...members } };
      }
      return {
        type,
        ...base,
        epoch,
        step: {
          type: 'accepted',
          chunk,
          ...members,
          requestId: `req-${chunk}`,
          acceptedRequestId: rng.chance(0.2) ? `req-first-${chunk}` : null,
        },
      };
    }
    case 'ActivateCampaign': {
      const sms = state.status === 'NONE' ? null : state.sms;
      return sms && rng.chance(0.9)
        ? { type, ...base, charge: { key: `campaign:${ID}`, amount: sms.totalCost } }
        : { type, ...base };
    }
    case 'StartBuild':
      return { type, ...base, staleAfterMs: STALE_AFTER_MS };
    case 'AddRecipients': {
      const attempt = state.status === 'NONE' ? 0 : (state.sms?.buildAttempt ?? 0);
      const recipients = rng.int(0, 5);
      return {
        type,
        ...base,
        ...(attempt > 0 ? { buildAttempt: attempt } : {}),
        recipients,
        segments: recipients * rng.int(1, 3),
        cost: `${recipients}.25`,
        rejected: rng.chance(0.3) ? rng.int(1, 3) : 0,
      };
    }
    case 'RecordDispatch': {
      const progress = state.status === 'NONE' ? null : (state.sms?.progress ?? null);
      const fromPending = progress ? rng.int(0, progress.pending) : 1;
      const fromDeferred = progress ? rng.int(0, progress.deferred) : 0;
      const submittedFromPending = rng.int(0, fromPending);
      const submittedFromDeferred = rng.int(0, fromDeferred);
      const submitted = submittedFromPending + submittedFromDeferred;
      return {
        type,
        ...base,
        epoch,
        submittedFromPending,
        submittedFromDeferred,
        deferredFromPending: fromPending - submittedFromPending,
        deferredAgain: fromDeferred - submittedFromDeferred,
        submissions: submitted === 0 ? 0 : rng.int(1, submitted),
      };
    }
    case 'RecordDeliveryReports': {
      // Part 2: a roll-up batch of at most the submitted recipients, costing 0.25 each.
      const submitted = state.status === 'NONE' ? 1 : (state.sms?.progress.submitted ?? 1);
      const retryPending = rng.chance(0.4) ? rng.int(0, submitted) : 0;
      const delivered = rng.int(0, submitted - retryPending);
      const failed = rng.int(0, submitted - retryPending - delivered);
      const unconfirmed = rng.int(0, failed);
      const cost = (n: number) => (n * 0.25).toFixed(2);
      return {
        type,
        ...base,
        delivered,
        deliveredCost: cost(delivered),
        failed,
        failedCost: cost(failed),
        unconfirmed,
        unconfirmedCost: cost(unconfirmed),
        retryPending,
      };
    }
    case 'ReleaseRetries': {
      const retryPending = state.status === 'NONE' ? 1 : (state.sms?.progress.retryPending ?? 1);
      return { type, ...base, recipients: rng.int(1, Math.max(1, retryPending)) };
    }
    case 'RecordRefunds': {
      const p = state.status === 'NONE' ? null : (state.sms?.progress ?? null);
      const left = p ? p.failed - p.unconfirmed - p.refunded : 1;
      const recipients = rng.int(1, Math.max(1, left));
      return { type, ...base, recipients, amount: (recipients * 0.25).toFixed(2) };
    }
    case 'WithdrawUnsent': {
      const reason = state.status === 'EXPIRED' ? 'expired' : 'cancelled';
      const sms = state.status === 'NONE' ? null : state.sms;
      const recipients = withdrawable(sms);
      return {
        type,
        ...base,
        reason,
        recipients,
        amount: (recipients * 0.25).toFixed(2),
        key: withdrawalKey(ID, reason, state.status === 'NONE' ? 0 : state.resendAttempt),
      };
    }
    case 'RecordWithdrawalRefund': {
      const w = state.status === 'NONE' ? null : (state.sms?.withdrawal ?? null);
      return { type, ...base, key: w?.key ?? `cancel:${ID}:0`, amount: w?.amount ?? '0' };
    }
    case 'ResendFailed': {
      const sms = state.status === 'NONE' ? null : state.sms;
      if (!sms || state.status === 'NONE') return { type, ...base };
      return {
        type,
        ...base,
        charge: { key: resendChargeKey(ID, state.resendAttempt + 1), amount: sms.failedCost },
      };
    }
    case 'ScheduleCampaign':
    case 'RescheduleCampaign':
      return { type, ...base, startAt: iso(startAt), dispatchDeadline: deadline() };
    case 'DeferCampaign':
      return {
        type,
        ...base,
        epoch,
        startAt: iso(startAt),
        dispatchDeadline: deadline(),
        reason: 'window closed',
      };
    case 'ReclaimCampaign':
      return { type, ...base, staleAfterMs: STALE_AFTER_MS };
    case 'Heartbeat':
    case 'CompleteCampaign':
    case 'FinishPartially':
      return { type, ...base, epoch };
    case 'FailCampaign':
      return { type, ...base, reason: 'failed', ...(state.status === 'DISPATCHING' ? { epoch } : {}) };
    case 'CancelCampaign':
    case 'RequeueCampaign':
      return { type, ...base, ...(rng.chance(0.5) ? { reason: 'random walk' } : {}) };
    default:
      return { type, ...base };
  }
}

describe('campaign decider: replay property (invariant 8)', () => {
  it('for random legal command sequences, step-by-step state equals fold(all events)', () => {
    const reached = new Set<Status>();
    const emittedTypes = new Set<string>();
    for (let seed = 1; seed <= 100; seed++) {
      const rng = prng(seed);
      let now = T0;
      let state = campaignDecider.initialState();
      const events: CampaignEvent[] = [];
      let accepted = 0;
      for (let step = 0; step < 400 && accepted < 60; step++) {
        // Mostly small steps, sometimes a long gap (a scanner outage) so deadlines and stale claims happen.
        // A day now and then lets a LINE chunk's retry key age past its validity (given up as unconfirmed).
        now +=
          (rng.chance(0.03)
            ? rng.int(23 * 60, 30 * 60)
            : rng.chance(0.1)
              ? rng.int(120, 600)
              : rng.int(0, 45)) * 60_000;
        // An SMS campaign with a definition moves through its own commands often enough to be walked.
        const smsTypes: CampaignCommandType[] = [
          'AddRecipients',
          'StartBuild',
          'ActivateCampaign',
          'ClaimCampaign',
          'RecordDispatch',
        ];
        // Part 2: delivery reports, retries, refunds, withdrawal and resend, once there is something to count.
        const deliveryTypes: CampaignCommandType[] = [
          'RecordDeliveryReports',
          'RecordDeliveryReports',
          'ReleaseRetries',
          'RecordRefunds',
          'WithdrawUnsent',
          'RecordWithdrawalRefund',
          'SettleCancellation',
          'ResendFailed',
          'CancelCampaign',
        ];
        const sms = state.status === 'NONE' ? null : state.sms;
        // What the facts make possible now is tried more often, so the walk reaches every part 2 event.
        const p = sms?.progress;
        const due: CampaignCommandType[] = p
          ? [
              ...(state.status === 'DRAFT' || state.status === 'BUILDING'
                ? (['StartBuild', 'AddRecipients', 'ActivateCampaign'] as const)
                : []),
              ...(state.status === 'QUEUED' ? (['ClaimCampaign'] as const) : []),
              ...(state.status === 'DISPATCHING' && p.pending > 0 ? (['RecordDispatch'] as const) : []),
              ...(p.submitted > 0 ? (['RecordDeliveryReports'] as const) : []),
              ...(p.retryPending > 0 ? (['ReleaseRetries'] as const) : []),
              ...(p.failed - p.unconfirmed - p.refunded > 0 ? (['RecordRefunds'] as const) : []),
            ]
          : [];
        // A dispatching LINE campaign steps through its delivery plan often enough to finish it.
        if (state.status === 'DISPATCHING' && state.line !== null) {
          due.push('AdvanceLineDelivery', 'AdvanceLineDelivery', 'AdvanceLineDelivery', 'CompleteCampaign');
        }
        const type =
          due.length > 0 && rng.chance(0.4)
            ? rng.pick(due)
            : sms && rng.chance(0.4)
              ? rng.pick(smsTypes)
              : sms?.chargeKey && rng.chance(0.3)
                ? rng.pick(deliveryTypes)
                : rng.pick(CAMPAIGN_COMMAND_TYPES);
        const command = randomCommand(type, state, now, rng);
        let emitted: CampaignEvent[];
        try {
          emitted = campaignDecider.decide(command, state);
        } catch (error) {
          if (error instanceof IllegalStateError || error instanceof ValidationError) continue;
          throw error;
        }
        accepted++;
        for (const event of emitted) {
          state = campaignDecider.evolve(state, event);
          emittedTypes.add(event.type);
        }
        events.push(...emitted);
        reached.add(state.status);
        expect(state, `seed ${seed}, step ${step}`).toEqual(fold(campaignDecider, events));
      }
      // The stored form: events read back from jsonb and validated, state row read back from jsonb.
      const stored = JSON.parse(JSON.stringify(events)) as unknown[];
      expect(fold(campaignDecider, stored.map(parseCampaignEvent)), `seed ${seed}`).toStrictEqual(state);
      expect(JSON.parse(JSON.stringify(state)), 'state must be plain JSON').toStrictEqual(state);
    }
    // The walk is only worth something if it goes everywhere.
    expect([...reached].sort()).toEqual([...ALL_STATUSES].filter((s) => s !== 'NONE').sort());
    expect([...emittedTypes].sort()).toEqual([...CAMPAIGN_EVENT_TYPES].sort());
  });
});
