/**
 * The campaign decider's SMS part 2 (ADR 0019), given/when/then, legal and illegal: delivery reports
 * (and the recount to COMPLETED / PARTIAL / FAILED in the same decision), retries released, refunds,
 * pause/resume/reschedule/cancel/resend with reasons and auto-pause, cancel during dispatch (epoch
 * bump), withdrawal of the unsent recipients and its refund, settling a cancellation, and an SMS resend's
 * charge. A (fixture × command) table covers every new command in every status, and a fast-check
 * property walks random delivery histories: step-by-step state equals the fold, recipients are conserved
 * and the money invariant holds at the end. Histories come from the decider itself, never forged.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type CampaignCommand,
  type CampaignCommandType,
  type CampaignEvent,
  type CampaignState,
  type CreateCampaign,
  campaignDecider,
  EMPTY_PROGRESS,
  newSmsFacts,
  normalizeSmsFacts,
  parseCampaignEvent,
  recipientRefundKey,
  resendChargeKey,
  type SmsCampaignFacts,
  type SmsDefinition,
  smsCampaignFactsSchema,
  withdrawable,
  withdrawalKey,
} from '../../src/domain/campaign.js';
import { fold } from '../../src/domain/decider.js';
import { toUnits } from '../../src/domain/sms/money.js';
import { IllegalStateError, ValidationError } from '../../src/errors.js';
import { specFor } from '../../src/testing/given-when-then.js';

const { given } = specFor(campaignDecider);
const ID = '5e2a9c10-4d3b-4a7e-8f21-0c9b8a7d6e5f';
const T0 = Date.parse('2030-04-01T00:00:00.000Z');
const at = (minutes: number) => new Date(T0 + minutes * 60_000).toISOString();
const KEY = `campaign:${ID}`;
/** Every recipient costs 0.25 (one segment at 0.25). */
const cost = (n: number) => (n * 0.25).toFixed(4);

const definition = (overrides: Partial<SmsDefinition> = {}): SmsDefinition => ({
  messageType: 'PROMOTIONAL',
  lang: 'en',
  operatorCampaignId: 'BTRC-7',
  templateType: 'GENERIC',
  template: 'Eid offer',
  source: 'inline',
  sendWindow: null,
  ...overrides,
});

function create(overrides: Partial<CreateCampaign> = {}, sms: SmsDefinition = definition()): CreateCampaign {
  return {
    type: 'CreateCampaign',
    campaignId: ID,
    now: at(0),
    mode: sms.source === 'csv' ? 'building' : 'draft',
    organizationId: 'org-1',
    channel: 'sms',
    name: 'Eid offer',
    startAt: null,
    dispatchDeadline: null,
    sms,
    ...overrides,
  };
}

type Counts = {
  delivered?: number;
  failed?: number;
  unconfirmed?: number;
  retryPending?: number;
};

const base = (type: string, now: string) => ({ type, campaignId: ID, now });
const cmd = {
  add: (n = 4): CampaignCommand => ({
    ...base('AddRecipients', at(1)),
    type: 'AddRecipients',
    recipients: n,
    segments: n,
    cost: cost(n),
    rejected: 0,
  }),
  activate: (n = 4): CampaignCommand => ({
    type: 'ActivateCampaign',
    campaignId: ID,
    now: at(2),
    charge: { key: KEY, amount: cost(n) },
  }),
  claim: (now = at(3)): CampaignCommand => ({ type: 'ClaimCampaign', campaignId: ID, now }),
  dispatch: (epoch: number, submitted: number, now = at(4)): CampaignCommand => ({
    type: 'RecordDispatch',
    campaignId: ID,
    now,
    epoch,
    submittedFromPending: submitted,
    submittedFromDeferred: 0,
    deferredFromPending: 0,
    deferredAgain: 0,
    submissions: 1,
  }),
  report: (counts: Counts, now = at(5)): CampaignCommand => {
    const { delivered = 0, failed = 0, unconfirmed = 0, retryPending = 0 } = counts;
    return {
      type: 'RecordDeliveryReports',
      campaignId: ID,
      now,
      delivered,
      deliveredCost: cost(delivered),
      failed,
      failedCost: cost(failed),
      unconfirmed,
      unconfirmedCost: cost(unconfirmed),
      retryPending,
    };
  },
  release: (recipients: number, now = at(6)): CampaignCommand => ({
    type: 'ReleaseRetries',
    campaignId: ID,
    now,
    recipients,
  }),
  refund: (recipients: number, now = at(7)): CampaignCommand => ({
    type: 'RecordRefunds',
    campaignId: ID,
    now,
    recipients,
    amount: cost(recipients),
  }),
  pause: (extra: object = {}, now = at(8)): CampaignCommand =>
    ({ type: 'PauseCampaign', campaignId: ID, now, ...extra }) as CampaignCommand,
  resume: (extra: object = {}, now = at(9)): CampaignCommand =>
    ({ type: 'ResumeCampaign', campaignId: ID, now, ...extra }) as CampaignCommand,
  cancel: (extra: object = {}, now = at(10)): CampaignCommand =>
    ({ type: 'CancelCampaign', campaignId: ID, now, ...extra }) as CampaignCommand,
  withdraw: (
    reason: 'cancelled' | 'expired',
    recipients: number,
    extra: object = {},
    now = at(11),
    resendAttempt = 0,
  ): CampaignCommand =>
    ({
      type: 'WithdrawUnsent',
      campaignId: ID,
      now,
      reason,
      recipients,
      amount: cost(recipients),
      key: withdrawalKey(ID, reason, resendAttempt),
      ...extra,
    }) as CampaignCommand,
  withdrawalRefund: (key: string, amount: string, now = at(12)): CampaignCommand => ({
    type: 'RecordWithdrawalRefund',
    campaignId: ID,
    now,
    key,
    amount,
  }),
  settle: (now = at(13)): CampaignCommand => ({ type: 'SettleCancellation', campaignId: ID, now }),
  expire: (now = at(800)): CampaignCommand => ({ type: 'ExpireCampaign', campaignId: ID, now }),
  defer: (epoch: number, now = at(14)): CampaignCommand => ({
    type: 'DeferCampaign',
    campaignId: ID,
    now,
    epoch,
    startAt: at(600),
    dispatchDeadline: at(700),
    reason: 'promotional window closed',
  }),
  resend: (charge: { key: string; amount: string } | undefined, extra: object = {}, now = at(900)) =>
    ({
      type: 'ResendFailed',
      campaignId: ID,
      now,
      ...(charge ? { charge } : {}),
      ...extra,
    }) as CampaignCommand,
};

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
const stateOf = (events: readonly CampaignEvent[]) => fold(campaignDecider, events);
const smsOf = (events: readonly CampaignEvent[]): SmsCampaignFacts => {
  const state = stateOf(events);
  if (state.status === 'NONE' || state.sms === null) throw new Error('no sms facts');
  return state.sms;
};

/** 4 recipients charged 1.0000, claimed (epoch 1). */
const dispatching = () => run([create(), cmd.add(), cmd.activate(), cmd.claim()]);
/** All 4 submitted. */
const allSubmitted = () => run([cmd.dispatch(1, 4)], dispatching());
/**
 * Mid-flight: 3 submitted of 4 (1 pending), reports so far: 1 failed (refundable), 1 retry pending;
 * 1 still submitted.
 */
const midFlight = () => run([cmd.dispatch(1, 3), cmd.report({ failed: 1, retryPending: 1 })], dispatching());

/** Named fixtures: every status, and CANCELLING/EXPIRED before and after their withdrawal. */
const FIXTURES = {
  NONE: () => [],
  DRAFT: () => run([create()]),
  BUILDING: () => run([create({}, definition({ source: 'csv' }))]),
  QUEUED: () => run([cmd.pause(), cmd.resume()], midFlight()),
  SCHEDULED: () => run([cmd.defer(1)], midFlight()),
  DISPATCHING: midFlight,
  PAUSED: () => run([cmd.pause()], midFlight()),
  CANCELLING: () => run([cmd.cancel()], midFlight()),
  CANCELLING_WITHDRAWN: () => run([cmd.cancel(), cmd.withdraw('cancelled', 2)], midFlight()),
  CANCELLED: () =>
    run(
      [
        cmd.cancel(),
        cmd.withdraw('cancelled', 2),
        cmd.withdrawalRefund(withdrawalKey(ID, 'cancelled', 0), cost(2)),
        cmd.settle(),
      ],
      midFlight(),
    ),
  EXPIRED: () => run([cmd.defer(1), cmd.expire()], midFlight()),
  EXPIRED_WITHDRAWN: () =>
    run([cmd.defer(1), cmd.expire(), cmd.withdraw('expired', 2, {}, at(801))], midFlight()),
  COMPLETED: () => run([cmd.report({ delivered: 4 })], allSubmitted()),
  PARTIAL: () => run([cmd.report({ delivered: 2, failed: 2, unconfirmed: 1 })], allSubmitted()),
  FAILED: () => run([cmd.report({ failed: 4 })], allSubmitted()),
} satisfies Record<string, () => CampaignEvent[]>;
type Fixture = keyof typeof FIXTURES;

const NEW_COMMANDS = [
  'RecordDeliveryReports',
  'ReleaseRetries',
  'RecordRefunds',
  'WithdrawUnsent',
  'RecordWithdrawalRefund',
] as const satisfies readonly CampaignCommandType[];
type NewCommand = (typeof NEW_COMMANDS)[number];

/** A well-formed command of each new type, valid for the fixture where it is legal. */
function sample(type: NewCommand, state: CampaignState): CampaignCommand {
  const sms = state.status === 'NONE' ? null : state.sms;
  switch (type) {
    case 'RecordDeliveryReports':
      return cmd.report({ delivered: 1 }, at(850));
    case 'ReleaseRetries':
      return cmd.release(1, at(850));
    case 'RecordRefunds':
      return cmd.refund(1, at(850));
    case 'WithdrawUnsent': {
      const reason = state.status === 'EXPIRED' ? 'expired' : 'cancelled';
      return cmd.withdraw(reason, withdrawable(sms), {}, at(850));
    }
    case 'RecordWithdrawalRefund':
      return cmd.withdrawalRefund(
        sms?.withdrawal?.key ?? withdrawalKey(ID, 'cancelled', 0),
        sms?.withdrawal?.amount ?? '0',
        at(850),
      );
  }
}

/** Where each new command is legal, written independently of the decider (contract "Commands → events"). */
const LEGAL: Record<NewCommand, readonly Fixture[]> = {
  // Any activated status with submitted recipients (COMPLETED/PARTIAL/FAILED have none left).
  RecordDeliveryReports: [
    'QUEUED',
    'SCHEDULED',
    'DISPATCHING',
    'PAUSED',
    'CANCELLING',
    'CANCELLING_WITHDRAWN',
    'CANCELLED',
    'EXPIRED',
    'EXPIRED_WITHDRAWN',
  ],
  ReleaseRetries: ['QUEUED', 'SCHEDULED', 'DISPATCHING', 'PAUSED'],
  // Any status with a failed, unrefunded, confirmed recipient (COMPLETED has none).
  RecordRefunds: [
    'QUEUED',
    'SCHEDULED',
    'DISPATCHING',
    'PAUSED',
    'CANCELLING',
    'CANCELLING_WITHDRAWN',
    'CANCELLED',
    'EXPIRED',
    'EXPIRED_WITHDRAWN',
    'PARTIAL',
    'FAILED',
  ],
  WithdrawUnsent: ['CANCELLING', 'EXPIRED'],
  RecordWithdrawalRefund: ['CANCELLING_WITHDRAWN', 'EXPIRED_WITHDRAWN'],
};

describe('SMS part 2: every (fixture × new command) pair', () => {
  const fixtures = Object.keys(FIXTURES) as Fixture[];
  const rows = fixtures.flatMap((fixture) => NEW_COMMANDS.map((type) => ({ fixture, type })));
  const statusOf = (f: Fixture) => stateOf(FIXTURES[f]()).status;

  it('the fixtures reach the statuses they are named after', () => {
    for (const f of fixtures) expect(statusOf(f)).toBe(f.replace('_WITHDRAWN', ''));
  });

  it.each(rows.filter((r) => !LEGAL[r.type].includes(r.fixture)))(
    '$fixture × $type → IllegalStateError naming both',
    ({ fixture, type }) => {
      const history = FIXTURES[fixture]();
      const error = given(history)
        .when(sample(type, stateOf(history)))
        .thenThrows(IllegalStateError);
      expect(error.message).toContain(type);
      expect(error.message).toContain(`status ${statusOf(fixture)}`);
    },
  );

  it.each(rows.filter((r) => LEGAL[r.type].includes(r.fixture)))(
    '$fixture × $type is accepted',
    ({ fixture, type }) => {
      const history = FIXTURES[fixture]();
      const { events } = given(history)
        .when(sample(type, stateOf(history)))
        .thenSucceeds();
      expect(events.length).toBeGreaterThan(0);
    },
  );

  it('a LINE campaign (and an sms campaign without a definition) refuses every SMS-only command', () => {
    const line = run([
      {
        type: 'CreateCampaign',
        campaignId: ID,
        now: at(0),
        mode: 'draft',
        organizationId: 'org-1',
        channel: 'line',
        castType: 'broadcast',
        lineOaId: 'oa-1',
        line: { messages: [{ type: 'text', text: 'hello' }] },
        name: 'LINE',
      },
      { type: 'ActivateCampaign', campaignId: ID, now: at(1) },
      cmd.claim(),
    ]);
    for (const type of NEW_COMMANDS) {
      given(line)
        .when(sample(type, stateOf(line)))
        .thenThrows(IllegalStateError, /status DISPATCHING/);
    }
    given(line)
      .when(cmd.cancel())
      .thenThrows(IllegalStateError, /allowed only in QUEUED, SCHEDULED, PAUSED/);
    given(line)
      .when(cmd.pause({ auto: { rate: 0.5, window: 100, maxFailureRate: 0.2 } }))
      .thenThrows(ValidationError, /auto applies only to an SMS campaign/);
  });
});

describe('SMS part 2: RecordDeliveryReports', () => {
  it('moves submitted → delivered / failed (unconfirmed) / retry pending, with their costs', () => {
    const state = given(allSubmitted())
      .when(cmd.report({ delivered: 1, failed: 1, unconfirmed: 1, retryPending: 1 }))
      .then([
        {
          type: 'CampaignDeliveryReported',
          data: {
            delivered: 1,
            deliveredCost: '0.2500',
            failed: 1,
            failedCost: '0.2500',
            unconfirmed: 1,
            unconfirmedCost: '0.2500',
            retryPending: 1,
            at: at(5),
          },
        },
      ]);
    expect(state).toMatchObject({
      status: 'DISPATCHING',
      sms: {
        actualCost: '0.2500',
        failedCost: '0.2500',
        unconfirmedCost: '0.2500',
        refundedCost: '0.0000',
        progress: { submitted: 1, delivered: 1, failed: 1, unconfirmed: 1, retryPending: 1 },
      },
    });
  });

  it('the recount: all delivered → COMPLETED with the claim epoch', () => {
    given(allSubmitted())
      .when(cmd.report({ delivered: 4 }))
      .then([
        {
          type: 'CampaignDeliveryReported',
          data: {
            delivered: 4,
            deliveredCost: '1.0000',
            failed: 0,
            failedCost: '0.0000',
            unconfirmed: 0,
            unconfirmedCost: '0.0000',
            retryPending: 0,
            at: at(5),
          },
        },
        { type: 'CampaignCompleted', data: { epoch: 1, at: at(5) } },
      ]);
  });

  it('the recount: none delivered → FAILED "every recipient failed"', () => {
    const { events, state } = given(run([cmd.report({ failed: 2 })], allSubmitted()))
      .when(cmd.report({ failed: 2, unconfirmed: 2 }, at(6)))
      .thenSucceeds();
    expect(events[1]).toEqual({
      type: 'CampaignFailed',
      data: { reason: 'every recipient failed', epoch: 1, at: at(6) },
    });
    expect(state).toMatchObject({
      status: 'FAILED',
      failureReason: 'every recipient failed',
      claimedAt: null,
    });
  });

  it('the recount: a terminal mix → PARTIAL; not before the last recipient is final', () => {
    const { events, state } = given(allSubmitted())
      .when(cmd.report({ delivered: 3, failed: 1 }))
      .thenSucceeds();
    expect(events.map((e) => e.type)).toEqual(['CampaignDeliveryReported', 'CampaignPartiallyCompleted']);
    expect(state).toMatchObject({ status: 'PARTIAL', sms: { progress: { delivered: 3, failed: 1 } } });
    // A retry pending, a pending or a submitted recipient keeps it DISPATCHING.
    for (const history of [allSubmitted(), run([cmd.dispatch(1, 3)], dispatching())]) {
      const open = given(history)
        .when(cmd.report({ delivered: 2, retryPending: 1 }))
        .thenSucceeds();
      expect(open.events).toHaveLength(1);
      expect(open.state.status).toBe('DISPATCHING');
    }
  });

  it('no recount outside DISPATCHING; a claim of a campaign with nothing left recounts at once', () => {
    const paused = run([cmd.pause()], allSubmitted());
    const { events, state } = given(paused)
      .when(cmd.report({ delivered: 4 }))
      .thenSucceeds();
    expect(events).toHaveLength(1);
    expect(state.status).toBe('PAUSED');
    const done = run([cmd.report({ delivered: 4 }), cmd.resume()], paused);
    given(done)
      .when(cmd.claim(at(20)))
      .then([
        { type: 'CampaignClaimed', data: { epoch: 3, claimedAt: at(20), trigger: 'scanner' } },
        { type: 'CampaignCompleted', data: { epoch: 3, at: at(20) } },
      ]);
  });

  it('counts beyond the submitted recipients, unconfirmed beyond failed and odd costs are refused', () => {
    given(run([cmd.dispatch(1, 2)], dispatching()))
      .when(cmd.report({ delivered: 2, failed: 1 }))
      .thenThrows(IllegalStateError, /3 reports counted, 2 recipients submitted/);
    given(dispatching())
      .when(cmd.report({ delivered: 1 }))
      .thenThrows(IllegalStateError, /1 reports counted, 0 recipients submitted/);
    given(allSubmitted())
      .when(cmd.report({ failed: 1, unconfirmed: 2 }))
      .thenThrows(ValidationError, /unconfirmed: 2 unconfirmed of 1 failed/);
    given(allSubmitted())
      .when(cmd.report({}))
      .thenThrows(ValidationError, /an empty delivery report batch/);
    given(allSubmitted())
      .when({ ...cmd.report({ failed: 1, unconfirmed: 1 }), unconfirmedCost: '0.5' } as CampaignCommand)
      .thenThrows(ValidationError, /unconfirmedCost 0.5 exceeds failedCost/);
    given(allSubmitted())
      .when({ ...cmd.report({ delivered: 1 }), failedCost: '0.1' } as CampaignCommand)
      .thenThrows(ValidationError, /failedCost 0.1 but failed is 0/);
    given(allSubmitted())
      .when({ ...cmd.report({ delivered: 1 }), deliveredCost: '1.23456' } as CampaignCommand)
      .thenThrows(ValidationError, /deliveredCost/);
  });

  it('refused in DRAFT/BUILDING, and no retries once the unsent are withdrawn', () => {
    given(FIXTURES.DRAFT())
      .when(cmd.report({ delivered: 1 }))
      .thenThrows(IllegalStateError, /status DRAFT/);
    given(FIXTURES.BUILDING())
      .when(cmd.report({ delivered: 1 }))
      .thenThrows(IllegalStateError, /status BUILDING/);
    for (const f of ['CANCELLING_WITHDRAWN', 'CANCELLED', 'EXPIRED_WITHDRAWN'] as const) {
      given(FIXTURES[f]())
        .when(cmd.report({ retryPending: 1 }))
        .thenThrows(IllegalStateError, /1 recipients to retry, but its unsent recipients are withdrawn/);
    }
    // Before its withdrawal a CANCELLING campaign may still get one (the withdrawal takes it).
    const cancelling = given(FIXTURES.CANCELLING())
      .when(cmd.report({ retryPending: 1 }))
      .thenSucceeds();
    expect(withdrawable(cancelling.state.status === 'NONE' ? null : cancelling.state.sms)).toBe(3);
  });

  it('a CANCELLED campaign still counts its late reports (and their refunds)', () => {
    const { state } = given(FIXTURES.CANCELLED())
      .when(cmd.report({ failed: 1 }, at(30)))
      .thenSucceeds();
    expect(state).toMatchObject({ status: 'CANCELLED', sms: { progress: { submitted: 0, failed: 2 } } });
  });
});

describe('SMS part 2: ReleaseRetries', () => {
  const withRetries = () => run([cmd.report({ delivered: 2, retryPending: 2 })], allSubmitted());

  it('DISPATCHING → QUEUED (to QUEUED, claim released); the next claim bumps the epoch', () => {
    const state = given(withRetries())
      .when(cmd.release(2))
      .then([{ type: 'CampaignRetriesReleased', data: { recipients: 2, to: 'QUEUED', at: at(6) } }]);
    expect(state).toMatchObject({
      status: 'QUEUED',
      claimedAt: null,
      claimEpoch: 1,
      sms: { progress: { retryPending: 0, pending: 2 } },
    });
    const reclaimed = run([cmd.release(2), cmd.claim(at(7))], withRetries());
    expect(stateOf(reclaimed)).toMatchObject({ status: 'DISPATCHING', claimEpoch: 2 });
    given(reclaimed)
      .when(cmd.dispatch(1, 2, at(8)))
      .thenThrows(IllegalStateError, /epoch 1 is stale/);
  });

  it('PAUSED / QUEUED / SCHEDULED: the status is unchanged (to null); part of the retries at a time', () => {
    const paused = run([cmd.pause()], withRetries());
    const state = given(paused)
      .when(cmd.release(1))
      .then([{ type: 'CampaignRetriesReleased', data: { recipients: 1, to: null, at: at(6) } }]);
    expect(state).toMatchObject({ status: 'PAUSED', sms: { progress: { retryPending: 1, pending: 1 } } });
  });

  it('beyond the retry pending recipients, or none, is refused', () => {
    given(withRetries())
      .when(cmd.release(3))
      .thenThrows(IllegalStateError, /3 retries released, 2 retry pending/);
    given(withRetries())
      .when(cmd.release(0))
      .thenThrows(ValidationError, /recipients/);
  });
});

describe('SMS part 2: RecordRefunds', () => {
  it('refunds failed, confirmed recipients only, once each', () => {
    const partial = FIXTURES.PARTIAL(); // 2 failed, 1 of them unconfirmed
    const state = given(partial)
      .when(cmd.refund(1))
      .then([{ type: 'CampaignRecipientsRefunded', data: { recipients: 1, amount: '0.2500', at: at(7) } }]);
    expect(state).toMatchObject({ sms: { refundedCost: '0.2500', progress: { refunded: 1 } } });
    given(partial)
      .when(cmd.refund(2))
      .thenThrows(IllegalStateError, /2 refunds recorded, 1 refundable recipients left/);
    given(run([cmd.refund(1)], partial))
      .when(cmd.refund(1))
      .thenThrows(IllegalStateError, /0 refundable recipients left/);
    given(FIXTURES.COMPLETED())
      .when(cmd.refund(1))
      .thenThrows(IllegalStateError, /status COMPLETED/);
  });
});

describe('SMS part 2: pause, resume, reschedule, cancel with reasons; auto-pause', () => {
  it('PauseCampaign carries its reason; state.pauseReason is set while PAUSED, cleared by resume', () => {
    const state = given(midFlight())
      .when(cmd.pause({ reason: 'customer asked' }))
      .then([
        {
          type: 'CampaignPaused',
          data: { pausedFrom: 'DISPATCHING', epoch: 2, at: at(8), reason: 'customer asked' },
        },
      ]);
    expect(state).toMatchObject({ status: 'PAUSED', pauseReason: 'customer asked' });
    const resumed = given(run([cmd.pause({ reason: 'customer asked' })], midFlight()))
      .when(cmd.resume({ reason: 'go on' }))
      .then([{ type: 'CampaignResumed', data: { to: 'QUEUED', at: at(9), reason: 'go on' } }]);
    expect(resumed).toMatchObject({ status: 'QUEUED', pauseReason: null });
    const plain = given(midFlight()).when(cmd.pause()).thenSucceeds();
    expect(plain.state).toMatchObject({ status: 'PAUSED', pauseReason: null });
  });

  it('auto-pause records the measured rate (as the reason unless one is given)', () => {
    const auto = { rate: 0.25, window: 500, maxFailureRate: 0.2 };
    const state = given(midFlight())
      .when(cmd.pause({ auto }))
      .then([
        {
          type: 'CampaignPaused',
          data: {
            pausedFrom: 'DISPATCHING',
            epoch: 2,
            at: at(8),
            reason: 'auto-pause: 25.0% of the last 500 delivery reports failed (threshold 20.0%)',
            auto,
          },
        },
      ]);
    expect(state).toMatchObject({ pauseReason: expect.stringContaining('25.0%') });
    given(midFlight())
      .when(cmd.pause({ auto: { rate: 0.2, window: 500, maxFailureRate: 0.2 } }))
      .thenThrows(ValidationError, /auto.rate: an auto-pause needs a failure rate above maxFailureRate 0.2/);
    given(midFlight())
      .when(cmd.pause({ auto: { rate: 0.5, window: 500, maxFailureRate: 1 } }))
      .thenThrows(ValidationError, /auto.maxFailureRate/);
    given(midFlight())
      .when(cmd.pause({ reason: 'x'.repeat(1001) }))
      .thenThrows(ValidationError, /reason/);
  });

  it('CreateCampaign takes an autoPause threshold (validated); facts default it to null', () => {
    const { state } = given([])
      .when(create({}, definition({ autoPause: { maxFailureRate: 0.2, window: 500 } })))
      .thenSucceeds();
    expect(state).toMatchObject({ sms: { autoPause: { maxFailureRate: 0.2, window: 500 } } });
    expect(smsOf(run([create()])).autoPause).toBeNull();
    for (const autoPause of [
      { maxFailureRate: 0, window: 500 },
      { maxFailureRate: 1, window: 500 },
      { maxFailureRate: 0.2, window: 9 },
      { maxFailureRate: 0.2, window: 10_001 },
    ]) {
      given([])
        .when(create({}, definition({ autoPause })))
        .thenThrows(ValidationError, /sms.autoPause/);
    }
  });

  it('RescheduleCampaign carries its reason', () => {
    const scheduled = run([create({ startAt: at(60) }), cmd.add(), cmd.activate()]);
    given(scheduled)
      .when({ type: 'RescheduleCampaign', campaignId: ID, now: at(5), startAt: at(120), reason: 'later' })
      .then([
        {
          type: 'CampaignRescheduled',
          data: { startAt: at(120), dispatchDeadline: null, at: at(5), reason: 'later' },
        },
      ]);
  });

  it('CancelCampaign from DISPATCHING (SMS): bumps the epoch, fences the live batch, clears the claim', () => {
    const state = given(midFlight())
      .when(cmd.cancel({ reason: 'wrong audience' }))
      .then([
        {
          type: 'CampaignCancellationRequested',
          data: { from: 'DISPATCHING', reason: 'wrong audience', at: at(10), epoch: 2 },
        },
      ]);
    expect(state).toMatchObject({ status: 'CANCELLING', claimEpoch: 2, claimedAt: null, pauseReason: null });
    given(run([cmd.cancel()], midFlight()))
      .when(cmd.dispatch(1, 1))
      .thenThrows(IllegalStateError, /status CANCELLING/);
    // From PAUSED the cancellation clears the pause reason; no epoch on the event.
    const fromPaused = given(run([cmd.pause({ reason: 'hold' })], midFlight()))
      .when(cmd.cancel())
      .then([{ type: 'CampaignCancellationRequested', data: { from: 'PAUSED', reason: null, at: at(10) } }]);
    expect(fromPaused).toMatchObject({ status: 'CANCELLING', pauseReason: null, pausedFrom: null });
  });
});

describe('SMS part 2: withdrawal of the unsent recipients and its refund', () => {
  it('CANCELLING: WithdrawUnsent takes pending + deferred + retry pending at once, under the cancel key', () => {
    const key = withdrawalKey(ID, 'cancelled', 0);
    expect(key).toBe(`cancel:${ID}:0`);
    const state = given(FIXTURES.CANCELLING())
      .when(cmd.withdraw('cancelled', 2))
      .then([
        {
          type: 'CampaignUnsentWithdrawn',
          data: { reason: 'cancelled', recipients: 2, amount: '0.5000', key, at: at(11) },
        },
      ]);
    expect(state).toMatchObject({
      status: 'CANCELLING',
      sms: {
        cancelledCost: '0.5000',
        withdrawal: { key, reason: 'cancelled', recipients: 2, amount: '0.5000', refundedAt: null },
        progress: { pending: 0, deferred: 0, retryPending: 0, cancelled: 2, submitted: 1, failed: 1 },
      },
    });
  });

  it('EXPIRED: reason expired under the expire key; nothing unsent → a withdrawal of 0', () => {
    given(FIXTURES.EXPIRED())
      .when(cmd.withdraw('expired', 2, {}, at(801)))
      .then([
        {
          type: 'CampaignUnsentWithdrawn',
          data: { reason: 'expired', recipients: 2, amount: '0.5000', key: `expire:${ID}:0`, at: at(801) },
        },
      ]);
    const nothingLeft = run([cmd.cancel()], allSubmitted());
    given(nothingLeft)
      .when(cmd.withdraw('cancelled', 0))
      .then([
        {
          type: 'CampaignUnsentWithdrawn',
          data: { reason: 'cancelled', recipients: 0, amount: '0.0000', key: `cancel:${ID}:0`, at: at(11) },
        },
      ]);
  });

  it('refuses the wrong status or reason, a partial count, a second withdrawal, a wrong key or amount', () => {
    given(FIXTURES.CANCELLING())
      .when(cmd.withdraw('expired', 2, { key: withdrawalKey(ID, 'expired', 0) }))
      .thenThrows(IllegalStateError, /allowed only in EXPIRED/);
    given(FIXTURES.EXPIRED())
      .when(cmd.withdraw('cancelled', 2))
      .thenThrows(IllegalStateError, /allowed only in CANCELLING/);
    given(FIXTURES.CANCELLING())
      .when(cmd.withdraw('cancelled', 1))
      .thenThrows(IllegalStateError, /1 recipients withdrawn, 2 unsent/);
    given(FIXTURES.CANCELLING_WITHDRAWN())
      .when(cmd.withdraw('cancelled', 0))
      .thenThrows(IllegalStateError, /already withdrawn \(cancel:/);
    given(FIXTURES.CANCELLING())
      .when(cmd.withdraw('cancelled', 2, { key: `cancel:${ID}:1` }))
      .thenThrows(ValidationError, /key 'cancel:.*:1', expected 'cancel:.*:0'/);
    given(FIXTURES.CANCELLING())
      .when(cmd.withdraw('cancelled', 0, { amount: '0.25' }))
      .thenThrows(ValidationError, /amount 0.25 but recipients is 0/);
    given(FIXTURES.CANCELLING())
      .when(cmd.withdraw('cancelled', 2, { amount: '99' }))
      .thenThrows(ValidationError, /exceeds the campaign's total 1.0000/);
    given(FIXTURES.DISPATCHING())
      .when(cmd.withdraw('cancelled', 1))
      .thenThrows(IllegalStateError, /status DISPATCHING/);
  });

  it('RecordWithdrawalRefund: same key and amount, once; then the cancellation settles', () => {
    const key = withdrawalKey(ID, 'cancelled', 0);
    const withdrawn = FIXTURES.CANCELLING_WITHDRAWN();
    const state = given(withdrawn)
      .when(cmd.withdrawalRefund(key, '0.5'))
      .then([{ type: 'CampaignWithdrawalRefunded', data: { key, amount: '0.5000', at: at(12) } }]);
    expect(state).toMatchObject({ sms: { refundedCost: '0.5000', withdrawal: { refundedAt: at(12) } } });
    given(withdrawn)
      .when(cmd.withdrawalRefund(`expire:${ID}:0`, '0.5'))
      .thenThrows(ValidationError, /the withdrawal's is 'cancel:/);
    given(withdrawn)
      .when(cmd.withdrawalRefund(key, '0.25'))
      .thenThrows(ValidationError, /amount 0.25, the withdrawal's is 0.5000/);
    const refunded = run([cmd.withdrawalRefund(key, '0.5')], withdrawn);
    given(refunded)
      .when(cmd.withdrawalRefund(key, '0.5'))
      .thenThrows(IllegalStateError, /was refunded at/);
    given(FIXTURES.CANCELLING())
      .when(cmd.withdrawalRefund(key, '0.5'))
      .thenThrows(IllegalStateError, /no unsent recipients were withdrawn/);
    given(refunded)
      .when(cmd.settle())
      .then([{ type: 'CampaignCancelled', data: { at: at(13) } }]);
  });

  it('SettleCancellation of a charged SMS campaign waits for the withdrawal and its refund', () => {
    given(FIXTURES.CANCELLING())
      .when(cmd.settle())
      .thenThrows(IllegalStateError, /2 unsent recipients are not withdrawn yet/);
    given(run([cmd.cancel()], allSubmitted()))
      .when(cmd.settle())
      .thenThrows(IllegalStateError, /its unsent recipients are not withdrawn yet/);
    given(FIXTURES.CANCELLING_WITHDRAWN())
      .when(cmd.settle())
      .thenThrows(IllegalStateError, /the withdrawal refund cancel:.* is not recorded yet/);
    // An uncharged sms campaign (no definition) settles as before.
    const bare = run([
      { ...create(), sms: undefined } as CampaignCommand,
      { type: 'ActivateCampaign', campaignId: ID, now: at(1) },
      cmd.cancel(),
    ]);
    given(bare)
      .when(cmd.settle())
      .then([{ type: 'CampaignCancelled', data: { at: at(13) } }]);
  });
});

describe('SMS part 2: ResendFailed (charged the failed recipients cost)', () => {
  /** PARTIAL: 2 delivered, 2 failed (1 unconfirmed), the confirmed one refunded. */
  const settledPartial = () => run([cmd.refund(1)], FIXTURES.PARTIAL());
  const charge = (amount = '0.5', key = resendChargeKey(ID, 1)) => ({ key, amount });

  it('PARTIAL → QUEUED: failed back to pending, counters reset, totalCost += the charge', () => {
    expect(resendChargeKey(ID, 1)).toBe(`campaign:${ID}:resend:1`);
    const state = given(settledPartial())
      .when(cmd.resend(charge(), { reason: 'retry the failed' }))
      .then([
        {
          type: 'CampaignResendRequested',
          data: {
            resendAttempt: 1,
            at: at(900),
            reason: 'retry the failed',
            recipients: 2,
            charge: { key: resendChargeKey(ID, 1), amount: '0.5000' },
          },
        },
      ]);
    expect(state).toMatchObject({
      status: 'QUEUED',
      resendAttempt: 1,
      sms: {
        totalCost: '1.5000',
        failedCost: '0.0000',
        // Cumulative: the first cycle's unconfirmed charge stays accounted for.
        unconfirmedCost: '0.2500',
        refundedCost: '0.2500',
        actualCost: '0.5000',
        withdrawal: null,
        progress: { pending: 2, failed: 0, refunded: 0, unconfirmed: 0, delivered: 2 },
      },
    });
  });

  it('the resent cycle recounts to COMPLETED and the money invariant holds', () => {
    const history = run(
      [
        cmd.resend(charge()),
        cmd.claim(at(901)),
        cmd.dispatch(2, 2, at(902)),
        cmd.report({ delivered: 2 }, at(903)),
      ],
      settledPartial(),
    );
    const state = stateOf(history);
    expect(state.status).toBe('COMPLETED');
    const sms = smsOf(history);
    // charged = 1.0000 (activation) + 0.5000 (resend)
    expect(sms.totalCost).toBe('1.5000');
    expect(toUnits(sms.actualCost) + toUnits(sms.refundedCost) + toUnits(sms.unconfirmedCost)).toBe(
      toUnits(sms.totalCost),
    );
  });

  it('refused with refunds pending, without / with a wrong charge, with nothing failed', () => {
    given(FIXTURES.PARTIAL())
      .when(cmd.resend(charge()))
      .thenThrows(IllegalStateError, /1 refunds are still pending/);
    given(FIXTURES.FAILED())
      .when(cmd.resend(charge('1')))
      .thenThrows(IllegalStateError, /4 refunds are still pending/);
    given(settledPartial())
      .when(cmd.resend(undefined))
      .thenThrows(ValidationError, /an SMS resend carries its charge/);
    given(settledPartial())
      .when(cmd.resend(charge('0.25')))
      .thenThrows(ValidationError, /charged 0.25, the failed recipients cost 0.5000/);
    given(settledPartial())
      .when(cmd.resend(charge('0.5', resendChargeKey(ID, 2))))
      .thenThrows(ValidationError, /charge key '.*:resend:2', expected '.*:resend:1'/);
    given(settledPartial())
      .when(cmd.resend(charge('0.5', KEY)))
      .thenThrows(ValidationError, /charge key/);
    given(FIXTURES.COMPLETED())
      .when(cmd.resend(charge()))
      .thenThrows(IllegalStateError, /status COMPLETED/);
    const draftFailed = run([
      create(),
      cmd.add(),
      { type: 'FailCampaign', campaignId: ID, now: at(2), reason: 'charge failed', clearRecipients: true },
    ]);
    given(draftFailed)
      .when(cmd.resend(charge('0')))
      .thenThrows(IllegalStateError, /no failed recipients to resend/);
  });

  it('withdrawal and refund keys depend on the resend attempt', () => {
    expect(withdrawalKey(ID.toUpperCase(), 'expired', 2)).toBe(`expire:${ID}:2`);
    expect(recipientRefundKey(42, 1)).toBe('recipient:42:1');
    expect(recipientRefundKey('42', 0)).toBe('recipient:42:0');
  });
});

describe('SMS part 2: old events, stored facts, the view schema, evolve strictness', () => {
  it('events written before part 2 still parse and fold (no reasons, no resend charge)', () => {
    const history = allSubmitted();
    const oldPause = { type: 'CampaignPaused', data: { pausedFrom: 'DISPATCHING', epoch: 2, at: at(8) } };
    const paused = campaignDecider.evolve(stateOf(history), parseCampaignEvent(oldPause));
    expect(paused).toMatchObject({ status: 'PAUSED', pauseReason: null });
    // A part 1 resend of an SMS campaign carried no charge: only the status moved.
    const failed = FIXTURES.FAILED();
    const oldResend = { type: 'CampaignResendRequested', data: { resendAttempt: 1, at: at(900) } };
    const reopened = campaignDecider.evolve(stateOf(failed), parseCampaignEvent(oldResend));
    expect(reopened).toMatchObject({ status: 'QUEUED', sms: { progress: { failed: 4 } } });
    const oldCancel = {
      type: 'CampaignCancellationRequested',
      data: { from: 'QUEUED', reason: null, at: at(3) },
    };
    expect(parseCampaignEvent(oldCancel)).toEqual(oldCancel);
  });

  it('normalizeSmsFacts gives part 1 facts the defaults a replay gives; idempotent; null stays null', () => {
    const current = smsOf(midFlight());
    const {
      actualCost: _a,
      failedCost: _f,
      refundedCost: _r,
      unconfirmedCost: _u,
      cancelledCost: _c,
      withdrawal: _w,
      autoPause: _p,
      ...part1
    } = newSmsFacts(definition());
    const { retryPending: _rp, cancelled: _cn, unconfirmed: _un, ...oldProgress } = EMPTY_PROGRESS;
    const stored = JSON.parse(JSON.stringify({ ...part1, progress: oldProgress }));
    expect(normalizeSmsFacts(stored)).toStrictEqual(newSmsFacts(definition()));
    expect(normalizeSmsFacts(JSON.parse(JSON.stringify(current)))).toStrictEqual(current);
    expect(normalizeSmsFacts(null)).toBeNull();
  });

  it('smsCampaignFactsSchema (strict) validates the facts of every fixture and rejects unknown fields', () => {
    for (const fixture of Object.keys(FIXTURES) as Fixture[]) {
      const state = stateOf(FIXTURES[fixture]());
      if (state.status === 'NONE' || state.sms === null) continue;
      expect(smsCampaignFactsSchema.parse(state.sms)).toEqual(state.sms);
    }
    const facts = smsOf(FIXTURES.CANCELLING_WITHDRAWN());
    expect(() => smsCampaignFactsSchema.parse({ ...facts, extra: 1 })).toThrow();
    expect(() =>
      smsCampaignFactsSchema.parse({ ...facts, progress: { ...facts.progress, retryPending: undefined } }),
    ).toThrow();
  });

  it('evolve refuses part 2 events that cannot follow the state', () => {
    const evolve = campaignDecider.evolve;
    const reported = (data: Partial<Record<string, unknown>>) =>
      ({
        type: 'CampaignDeliveryReported',
        data: {
          delivered: 0,
          deliveredCost: '0.0000',
          failed: 0,
          failedCost: '0.0000',
          unconfirmed: 0,
          unconfirmedCost: '0.0000',
          retryPending: 0,
          at: at(5),
          ...data,
        },
      }) as CampaignEvent;
    const mid = stateOf(midFlight());
    expect(() => evolve(mid, reported({ delivered: 2 }))).toThrow(
      /2 reports counted, 1 recipients submitted/,
    );
    expect(() => evolve(mid, reported({ failed: 1, unconfirmed: 2 }))).toThrow(/unconfirmed/);
    expect(() => evolve(stateOf(FIXTURES.DRAFT()), reported({ delivered: 1 }))).toThrow(/status DRAFT/);
    expect(() =>
      evolve(mid, { type: 'CampaignRetriesReleased', data: { recipients: 1, to: null, at: at(6) } }),
    ).toThrow(/to is null/);
    expect(() =>
      evolve(mid, { type: 'CampaignRetriesReleased', data: { recipients: 2, to: 'QUEUED', at: at(6) } }),
    ).toThrow(/2 released, 1 retry pending/);
    expect(() =>
      evolve(mid, { type: 'CampaignRecipientsRefunded', data: { recipients: 2, amount: '0.5', at: at(6) } }),
    ).toThrow(/refundable/);
    const withdrawnEvent = {
      type: 'CampaignUnsentWithdrawn',
      data: { reason: 'cancelled', recipients: 2, amount: '0.5000', key: `cancel:${ID}:0`, at: at(11) },
    } as CampaignEvent;
    expect(() => evolve(stateOf(FIXTURES.CANCELLING_WITHDRAWN()), withdrawnEvent)).toThrow(
      /already withdrawn/,
    );
    expect(() => evolve(stateOf(FIXTURES.EXPIRED()), withdrawnEvent)).toThrow(/reason cancelled/);
    expect(() =>
      evolve(stateOf(FIXTURES.CANCELLING_WITHDRAWN()), {
        type: 'CampaignWithdrawalRefunded',
        data: { key: `cancel:${ID}:9`, amount: '0.5000', at: at(12) },
      }),
    ).toThrow(/withdrawal cancel:/);
    expect(() =>
      evolve(mid, {
        type: 'CampaignCancellationRequested',
        data: { from: 'DISPATCHING', reason: null, at: at(9) },
      }),
    ).toThrow(/expected epoch 2/);
    expect(() =>
      evolve(stateOf(FIXTURES.FAILED()), {
        type: 'CampaignResendRequested',
        data: { resendAttempt: 1, at: at(900), recipients: 4, charge: { key: 'k', amount: '1.0000' } },
      }),
    ).toThrow(/4 failed, 0 refunded/);
  });
});

/**
 * Property (invariant 8 and the money invariant): from a dispatching campaign, random sequences of the
 * delivery commands — dispatch, reports, retries released, refunds, pause/resume, claims, cancel with its
 * withdrawal, refund and settlement, resend — always fold step by step to the same state as a full
 * replay of the stored events; the recipients are conserved in every state; and once every recipient is
 * final and every refund recorded, charged = actualCost + refundedCost + unconfirmedCost.
 */
describe('SMS part 2: fold equals step (fast-check)', () => {
  const N = 12;
  type Step = { kind: number; a: number; b: number; c: number; d: number };
  const step = fc.record({
    // Dispatch, reports and refunds more often than the controls, so histories get somewhere.
    kind: fc.constantFrom(0, 0, 1, 1, 2, 3, 4, 4, 5, 6, 7, 7, 8, 9, 10, 10, 11),
    a: fc.nat(20),
    b: fc.nat(20),
    c: fc.nat(20),
    d: fc.nat(20),
  });

  function commandFor(s: CampaignState, { kind, a, b, c, d }: Step, now: string): CampaignCommand | null {
    if (s.status === 'NONE' || s.sms === null) return null;
    const p = s.sms.progress;
    const r = (x: number, max: number) => (max <= 0 ? 0 : x % (max + 1));
    switch (kind) {
      case 0:
        return p.pending > 0 && s.status === 'DISPATCHING'
          ? { ...cmd.dispatch(s.claimEpoch, 1 + r(a, p.pending - 1), now) }
          : null;
      case 1:
      case 2: {
        // Failures and retries in about a third of the batches, so some campaigns complete cleanly.
        const retryPending = retriesOk(s) && d > 13 ? r(d, p.submitted) : 0;
        const failed = b > 13 ? r(b, p.submitted - retryPending) : 0;
        const delivered =
          a > 3 ? p.submitted - retryPending - failed : r(a, p.submitted - retryPending - failed);
        return cmd.report({ delivered, failed, unconfirmed: r(c, failed), retryPending }, now);
      }
      case 3:
        return p.retryPending > 0 ? cmd.release(1 + r(a, p.retryPending - 1), now) : null;
      case 4: {
        const left = p.failed - p.unconfirmed - p.refunded;
        return left > 0 ? cmd.refund(1 + r(a, left - 1), now) : null;
      }
      case 5:
        return cmd.pause({}, now);
      case 6:
        return cmd.resume({}, now);
      case 7:
        return cmd.claim(now);
      case 8:
        return cmd.cancel({}, now);
      case 9:
        return s.status === 'CANCELLING' && s.sms.withdrawal === null
          ? cmd.withdraw('cancelled', withdrawable(s.sms), {}, now, s.resendAttempt)
          : null;
      case 10:
        if (s.sms.withdrawal && s.sms.withdrawal.refundedAt === null) {
          return cmd.withdrawalRefund(s.sms.withdrawal.key, s.sms.withdrawal.amount, now);
        }
        return cmd.settle(now);
      default:
        return cmd.resend(
          { key: resendChargeKey(ID, s.resendAttempt + 1), amount: s.sms.failedCost },
          {},
          now,
        );
    }
  }
  const retriesOk = (s: CampaignState) =>
    s.status !== 'NONE' &&
    s.sms?.withdrawal === null &&
    !['CANCELLED', 'EXPIRED', 'COMPLETED', 'PARTIAL', 'FAILED'].includes(s.status);

  it('step-by-step state equals the fold; recipients conserved; money balances when settled', () => {
    const seen = new Set<string>();
    let balanced = 0;
    fc.assert(
      fc.property(fc.array(step, { minLength: 10, maxLength: 80, size: 'max' }), (steps) => {
        const start = run([create(), cmd.add(N), cmd.activate(N), cmd.claim()]);
        let state = stateOf(start);
        const events = [...start];
        let minute = 10;
        for (const s of steps) {
          const command = commandFor(state, s, at(minute++));
          if (!command) continue;
          let emitted: CampaignEvent[];
          try {
            emitted = campaignDecider.decide(command, state);
          } catch (error) {
            if (error instanceof IllegalStateError || error instanceof ValidationError) continue;
            throw error;
          }
          for (const event of emitted) {
            state = campaignDecider.evolve(state, event);
            seen.add(event.type);
          }
          events.push(...emitted);
          expect(state).toStrictEqual(fold(campaignDecider, events));
          if (state.status === 'NONE' || state.sms === null) throw new Error('lost the campaign');
          const p = state.sms.progress;
          expect(
            p.pending + p.deferred + p.submitted + p.retryPending + p.delivered + p.failed + p.cancelled,
          ).toBe(N);
          expect(p.unconfirmed + p.refunded).toBeLessThanOrEqual(p.failed);
        }
        const stored = (JSON.parse(JSON.stringify(events)) as unknown[]).map(parseCampaignEvent);
        expect(fold(campaignDecider, stored)).toStrictEqual(state);
        if (state.status === 'NONE' || state.sms === null) throw new Error('lost the campaign');
        const sms = state.sms;
        const p = sms.progress;
        const allFinal = p.pending + p.deferred + p.submitted + p.retryPending === 0;
        const refundsDone = p.refunded + p.unconfirmed === p.failed;
        const withdrawalDone = sms.withdrawal === null || sms.withdrawal.refundedAt !== null;
        if (allFinal && refundsDone && withdrawalDone) {
          balanced++;
          expect(toUnits(sms.actualCost) + toUnits(sms.refundedCost) + toUnits(sms.unconfirmedCost)).toBe(
            toUnits(sms.totalCost),
          );
        }
        expect(sms.cancelledCost).toBe(cost(p.cancelled));
      }),
      { numRuns: 400, seed: 13 },
    );
    // Worth something only if the walk reaches the money check, the part 2 events and every final status.
    expect(balanced).toBeGreaterThan(20);
    for (const type of [
      'CampaignDeliveryReported',
      'CampaignRetriesReleased',
      'CampaignRecipientsRefunded',
      'CampaignUnsentWithdrawn',
      'CampaignWithdrawalRefunded',
      'CampaignCancelled',
      'CampaignResendRequested',
      'CampaignCompleted',
      'CampaignPartiallyCompleted',
      'CampaignFailed',
    ]) {
      expect(seen, type).toContain(type);
    }
  });
});
