/**
 * The campaign decider's SMS transitions (seed 003, part 1), given/when/then, legal and illegal: an
 * SMS definition at creation, recipients added (inline in DRAFT, per build batch in BUILDING), CSV build
 * attempts as a fencing token, activation by the charge, failure with the recipients cleared, and the
 * dispatch batches that move the progress counters. Histories come from the decider itself.
 */
import { describe, expect, it } from 'vitest';
import {
  type CampaignCommand,
  type CampaignEvent,
  type CreateCampaign,
  campaignDecider,
  parseCampaignEvent,
  type SmsDefinition,
} from '../../src/domain/campaign.js';
import { fold } from '../../src/domain/decider.js';
import { IllegalStateError, ValidationError } from '../../src/errors.js';
import { specFor } from '../../src/testing/given-when-then.js';

const { given } = specFor(campaignDecider);
const ID = '7d1c2a44-3b5e-4f60-9a1b-2c3d4e5f6a7b';
const T0 = Date.parse('2030-03-01T00:00:00.000Z');
const at = (minutes: number) => new Date(T0 + minutes * 60_000).toISOString();
const KEY = `campaign:${ID}`;

const definition = (overrides: Partial<SmsDefinition> = {}): SmsDefinition => ({
  messageType: 'PROMOTIONAL',
  lang: 'bn',
  operatorCampaignId: 'BTRC-42',
  templateType: 'PERSONALIZED',
  template: 'প্রিয় {{name}}, অফার!',
  source: 'inline',
  sendWindow: null,
  ...overrides,
});

function create(
  overrides: Partial<CreateCampaign> = {},
  sms: SmsDefinition | null = definition(),
): CreateCampaign {
  return {
    type: 'CreateCampaign',
    campaignId: ID,
    now: at(0),
    mode: sms?.source === 'csv' ? 'building' : 'draft',
    organizationId: 'org-1',
    channel: 'sms',
    name: 'Eid offer',
    startAt: null,
    dispatchDeadline: null,
    ...(sms ? { sms } : {}),
    ...overrides,
  };
}

const cmd = {
  add: (recipients = 3, extra: Partial<CampaignCommand> = {}): CampaignCommand =>
    ({
      type: 'AddRecipients',
      campaignId: ID,
      now: at(1),
      recipients,
      segments: recipients * 2,
      cost: (recipients * 0.6).toFixed(4),
      rejected: 0,
      ...extra,
    }) as CampaignCommand,
  activate: (amount = '1.8000', now = at(2)): CampaignCommand => ({
    type: 'ActivateCampaign',
    campaignId: ID,
    now,
    charge: { key: KEY, amount },
  }),
  claim: (now = at(3)): CampaignCommand => ({ type: 'ClaimCampaign', campaignId: ID, now }),
  startBuild: (now = at(1)): CampaignCommand => ({
    type: 'StartBuild',
    campaignId: ID,
    now,
    staleAfterMs: 5 * 60_000,
  }),
  dispatch: (epoch: number, counts: Partial<Record<string, number>> = {}, now = at(4)): CampaignCommand =>
    ({
      type: 'RecordDispatch',
      campaignId: ID,
      now,
      epoch,
      submittedFromPending: 2,
      submittedFromDeferred: 0,
      deferredFromPending: 1,
      deferredAgain: 0,
      submissions: 1,
      ...counts,
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

const draft = () => run([create()]);
const withRecipients = () => run([create(), cmd.add()]);
const queued = () => run([create(), cmd.add(), cmd.activate()]);
const dispatching = () => run([create(), cmd.add(), cmd.activate(), cmd.claim()]);
const building = () => run([create({}, definition({ source: 'csv' }))]);
const stateOf = (events: CampaignEvent[]) => fold(campaignDecider, events);

describe('SMS campaign: creation with a definition', () => {
  it('[*] → DRAFT: the definition is recorded and the facts start empty', () => {
    const state = given([])
      .when(create())
      .then([
        {
          type: 'CampaignCreated',
          data: {
            campaignId: ID,
            organizationId: 'org-1',
            channel: 'sms',
            castType: null,
            audienceId: null,
            lineOaId: null,
            name: 'Eid offer',
            startAt: null,
            dispatchDeadline: null,
            idempotencyKey: null,
            mode: 'draft',
            at: at(0),
            sms: definition(),
          },
        },
      ]);
    expect(state).toMatchObject({
      status: 'DRAFT',
      sms: {
        ...definition(),
        recipients: 0,
        totalCost: '0.0000',
        chargeKey: null,
        buildAttempt: 0,
        progress: { pending: 0, deferred: 0, submitted: 0, delivered: 0, failed: 0, refunded: 0 },
        deferrals: 0,
        submissions: 0,
      },
    });
  });

  it('[*] → BUILDING: a CSV campaign', () => {
    const { state } = given([])
      .when(create({}, definition({ source: 'csv' })))
      .thenSucceeds();
    expect(state).toMatchObject({ status: 'BUILDING', sms: { source: 'csv', buildAttempt: 0 } });
  });

  it('refuses an SMS definition on a LINE campaign and a source that does not fit the mode', () => {
    given([])
      .when(create({ channel: 'line', castType: 'broadcast', lineOaId: 'oa-1' }))
      .thenThrows(ValidationError, /sms: only for sms campaigns/);
    given([])
      .when(create({ mode: 'building' }))
      .thenThrows(ValidationError, /a csv campaign is created building/);
    given([])
      .when(create({ mode: 'draft' }, definition({ source: 'csv' })))
      .thenThrows(ValidationError, /a csv campaign is created building/);
  });
});

describe('SMS campaign: AddRecipients', () => {
  it('DRAFT (inline): the frozen totals and the pending counter, once', () => {
    const state = given(draft())
      .when(cmd.add(3))
      .then([
        {
          type: 'CampaignRecipientsAdded',
          data: { buildAttempt: null, recipients: 3, segments: 6, cost: '1.8000', rejected: 0, at: at(1) },
        },
      ]);
    expect(state).toMatchObject({
      status: 'DRAFT',
      sms: { recipients: 3, segments: 6, totalCost: '1.8000', progress: { pending: 3 } },
    });
    given(withRecipients())
      .when(cmd.add(1))
      .thenThrows(IllegalStateError, /already saved/);
  });

  it('DRAFT refuses rejected rows and build attempts; a campaign without a definition refuses it all', () => {
    given(draft())
      .when(cmd.add(1, { rejected: 2 }))
      .thenThrows(IllegalStateError, /rejects invalid recipients as a whole/);
    given(draft())
      .when(cmd.add(1, { buildAttempt: 1 }))
      .thenThrows(IllegalStateError, /no build attempt/);
    given(run([create({}, null)]))
      .when(cmd.add(1))
      .thenThrows(IllegalStateError, /not an SMS campaign with a definition/);
  });

  it('BUILDING: only batches of the current build attempt (the fencing token)', () => {
    given(building())
      .when(cmd.add(2, { buildAttempt: 1 }))
      .thenThrows(IllegalStateError, /build attempt 1 is not the current one \(0\)/);
    const started = run([cmd.startBuild()], building());
    const state = given(started)
      .when(cmd.add(2, { buildAttempt: 1, rejected: 4 }))
      .then([
        {
          type: 'CampaignRecipientsAdded',
          data: { buildAttempt: 1, recipients: 2, segments: 4, cost: '1.2000', rejected: 4, at: at(1) },
        },
      ]);
    expect(state).toMatchObject({
      sms: { recipients: 2, rejected: 4, buildHeartbeatAt: at(1), progress: { pending: 2 } },
    });
    given(started)
      .when(cmd.add(2))
      .thenThrows(IllegalStateError, /build attempt none is not the current one/);
    const taken = run([cmd.startBuild(at(10))], started);
    given(taken)
      .when(cmd.add(2, { buildAttempt: 1 }))
      .thenThrows(IllegalStateError, /not the current one \(2\)/);
  });

  it('refused once the campaign is activated, and malformed counts are invalid', () => {
    given(queued())
      .when(cmd.add(1))
      .thenThrows(IllegalStateError, /status QUEUED/);
    given(draft())
      .when(cmd.add(0))
      .thenThrows(ValidationError, /nothing added/);
    given(draft())
      .when(cmd.add(2, { segments: 1 }))
      .thenThrows(ValidationError, /at least one segment/);
  });
});

describe('SMS campaign: StartBuild', () => {
  it('BUILDING → BUILDING with attempt 1, refused while that attempt is alive, taken over when stale', () => {
    const first = given(building())
      .when(cmd.startBuild(at(1)))
      .then([{ type: 'CampaignBuildStarted', data: { attempt: 1, previousHeartbeatAt: null, at: at(1) } }]);
    expect(first).toMatchObject({ status: 'BUILDING', sms: { buildAttempt: 1, buildHeartbeatAt: at(1) } });
    const started = run([cmd.startBuild(at(1))], building());
    given(started)
      .when(cmd.startBuild(at(5)))
      .thenThrows(IllegalStateError, /build attempt 1 is alive/);
    given(started)
      .when(cmd.startBuild(at(7)))
      .then([{ type: 'CampaignBuildStarted', data: { attempt: 2, previousHeartbeatAt: at(1), at: at(7) } }]);
  });

  it('refused for inline campaigns, campaigns without a definition and every other status', () => {
    given(draft())
      .when(cmd.startBuild())
      .thenThrows(IllegalStateError, /status DRAFT/);
    given(run([create({ mode: 'building' }, null)]))
      .when(cmd.startBuild())
      .thenThrows(IllegalStateError, /not an SMS campaign with a definition/);
    given(queued())
      .when(cmd.startBuild())
      .thenThrows(IllegalStateError, /status QUEUED/);
  });
});

describe('SMS campaign: activation by its charge', () => {
  it('DRAFT → QUEUED (instant) and → SCHEDULED (future start), recording the charge', () => {
    const state = given(withRecipients())
      .when(cmd.activate())
      .then([
        {
          type: 'CampaignActivated',
          data: { to: 'QUEUED', at: at(2), charge: { key: KEY, amount: '1.8000' } },
        },
      ]);
    expect(state).toMatchObject({ status: 'QUEUED', sms: { chargeKey: KEY, chargedAt: at(2) } });
    const scheduled = run([create({ startAt: at(60) }), cmd.add()]);
    given(scheduled)
      .when(cmd.activate())
      .then([
        {
          type: 'CampaignActivated',
          data: { to: 'SCHEDULED', at: at(2), charge: { key: KEY, amount: '1.8000' } },
        },
      ]);
  });

  it('BUILDING → QUEUED once built', () => {
    const built = run([cmd.startBuild(), cmd.add(3, { buildAttempt: 1 })], building());
    const { state } = given(built).when(cmd.activate()).thenSucceeds();
    expect(state).toMatchObject({ status: 'QUEUED', sms: { chargeKey: KEY, recipients: 3 } });
  });

  it('needs the charge of exactly the total, and recipients; a LINE campaign carries none', () => {
    given(withRecipients())
      .when({ type: 'ActivateCampaign', campaignId: ID, now: at(2) })
      .thenThrows(ValidationError, /activated by its charge/);
    given(withRecipients())
      .when(cmd.activate('1.7999'))
      .thenThrows(ValidationError, /total is 1.8000/);
    given(draft())
      .when(cmd.activate('0'))
      .thenThrows(IllegalStateError, /no saved recipients/);
    const line = run([
      create(
        {
          channel: 'line',
          castType: 'broadcast',
          lineOaId: 'oa-1',
          line: { messages: [{ type: 'text', text: 'hi' }] },
        },
        null,
      ),
    ]);
    given(line)
      .when(cmd.activate())
      .thenThrows(ValidationError, /only an SMS campaign with recipients is charged/);
  });

  it('an SMS draft is neither scheduled nor sent before its charge; once charged it may be sent now', () => {
    given(withRecipients())
      .when({ type: 'ScheduleCampaign', campaignId: ID, now: at(2), startAt: at(60) })
      .thenThrows(IllegalStateError, /activated by its charge/);
    given(withRecipients())
      .when({ type: 'SendNow', campaignId: ID, now: at(2) })
      .thenThrows(IllegalStateError, /not charged yet/);
    given(queued())
      .when({ type: 'SendNow', campaignId: ID, now: at(3) })
      .then([{ type: 'CampaignClaimed', data: { epoch: 1, claimedAt: at(3), trigger: 'send_now' } }]);
  });

  it('evolve refuses an activation that does not fit the campaign (a corrupt log)', () => {
    const state = stateOf(withRecipients());
    expect(() =>
      campaignDecider.evolve(state, { type: 'CampaignActivated', data: { to: 'QUEUED', at: at(2) } }),
    ).toThrow(/activated by its charge/);
  });
});

describe('SMS campaign: failure with the recipients cleared', () => {
  it('DRAFT/BUILDING → FAILED, recipients and cost back to 0, rejected rows kept', () => {
    const built = run([cmd.startBuild(), cmd.add(3, { buildAttempt: 1, rejected: 2 })], building());
    const state = given(built)
      .when({
        type: 'FailCampaign',
        campaignId: ID,
        now: at(3),
        reason: 'charge failed',
        clearRecipients: true,
      })
      .then([
        {
          type: 'CampaignFailed',
          data: { reason: 'charge failed', epoch: null, at: at(3), recipientsCleared: true },
        },
      ]);
    expect(state).toMatchObject({
      status: 'FAILED',
      sms: { recipients: 0, segments: 0, totalCost: '0.0000', rejected: 2, progress: { pending: 0 } },
    });
    const kept = given(withRecipients())
      .when({ type: 'FailCampaign', campaignId: ID, now: at(3), reason: 'insufficient balance' })
      .then([{ type: 'CampaignFailed', data: { reason: 'insufficient balance', epoch: null, at: at(3) } }]);
    expect(kept).toMatchObject({ status: 'FAILED', sms: { recipients: 3 } });
  });

  it('clearRecipients only for an SMS draft or build', () => {
    given(dispatching())
      .when({
        type: 'FailCampaign',
        campaignId: ID,
        now: at(5),
        reason: 'x',
        epoch: 1,
        clearRecipients: true,
      })
      .thenThrows(ValidationError, /clearRecipients applies only/);
    given(run([create({}, null)]))
      .when({ type: 'FailCampaign', campaignId: ID, now: at(5), reason: 'x', clearRecipients: true })
      .thenThrows(ValidationError, /clearRecipients applies only/);
  });
});

describe('SMS campaign: RecordDispatch', () => {
  it('DISPATCHING: moves pending → submitted / deferred, counts deferrals and submissions, refreshes claimedAt', () => {
    const state = given(dispatching())
      .when(cmd.dispatch(1))
      .then([
        {
          type: 'CampaignRecipientsDispatched',
          data: {
            epoch: 1,
            submittedFromPending: 2,
            submittedFromDeferred: 0,
            deferredFromPending: 1,
            deferredAgain: 0,
            submissions: 1,
            at: at(4),
          },
        },
      ]);
    expect(state).toMatchObject({
      status: 'DISPATCHING',
      claimedAt: at(4),
      sms: { progress: { pending: 0, deferred: 1, submitted: 2 }, deferrals: 1, submissions: 1 },
    });
    const later = run([cmd.dispatch(1)], dispatching());
    const again = given(later)
      .when(
        cmd.dispatch(
          1,
          { submittedFromPending: 0, deferredFromPending: 0, deferredAgain: 1, submissions: 0 },
          at(5),
        ),
      )
      .thenSucceeds();
    expect(again.state).toMatchObject({ sms: { progress: { deferred: 1, submitted: 2 }, deferrals: 2 } });
    const sent = given(later)
      .when(
        cmd.dispatch(1, { submittedFromPending: 0, submittedFromDeferred: 1, deferredFromPending: 0 }, at(6)),
      )
      .thenSucceeds();
    expect(sent.state).toMatchObject({
      sms: { progress: { pending: 0, deferred: 0, submitted: 3 }, submissions: 2 },
    });
  });

  it('refused with a stale epoch (paused meanwhile), beyond the counters, outside DISPATCHING', () => {
    const paused = run([{ type: 'PauseCampaign', campaignId: ID, now: at(4) }], dispatching());
    given(paused)
      .when(cmd.dispatch(1))
      .thenThrows(IllegalStateError, /status PAUSED/);
    const resumed = run([{ type: 'ResumeCampaign', campaignId: ID, now: at(5) }, cmd.claim(at(6))], paused);
    given(resumed)
      .when(cmd.dispatch(1))
      .thenThrows(IllegalStateError, /epoch 1 is stale, the current claim epoch is 3/);
    given(dispatching())
      .when(cmd.dispatch(1, { submittedFromPending: 3, deferredFromPending: 1 }))
      .thenThrows(IllegalStateError, /4 pending recipients dispatched, 3 pending/);
    given(dispatching())
      .when(cmd.dispatch(1, { submittedFromPending: 0, deferredFromPending: 0, submittedFromDeferred: 1 }))
      .thenThrows(IllegalStateError, /1 deferred recipients dispatched, 0 deferred/);
    given(queued())
      .when(cmd.dispatch(1))
      .thenThrows(IllegalStateError, /status QUEUED/);
  });

  it('an empty batch or a chunk count that does not fit is invalid', () => {
    given(dispatching())
      .when(cmd.dispatch(1, { submittedFromPending: 0, deferredFromPending: 0, submissions: 0 }))
      .thenThrows(ValidationError, /empty dispatch batch/);
    given(dispatching())
      .when(cmd.dispatch(1, { submissions: 3 }))
      .thenThrows(ValidationError, /1..submitted chunks/);
    given(dispatching())
      .when(cmd.dispatch(1, { submittedFromPending: 0, submissions: 1 }))
      .thenThrows(ValidationError, /1..submitted chunks/);
  });

  it('the promotional window closing: DISPATCHING → SCHEDULED at the next opening, counters kept', () => {
    const partly = run([cmd.dispatch(1)], dispatching());
    const state = given(partly)
      .when({
        type: 'DeferCampaign',
        campaignId: ID,
        now: at(5),
        epoch: 1,
        startAt: at(600),
        reason: 'outside the promotional window 09:00–21:00 Asia/Dhaka (BTRC)',
      })
      .thenSucceeds().state;
    expect(state).toMatchObject({
      status: 'SCHEDULED',
      startAt: at(600),
      sms: { progress: { deferred: 1, submitted: 2 } },
    });
  });

  it('a CSV build without a saved recipient is cancelled at once (nothing charged); with one, refused', () => {
    const started = run([cmd.startBuild()], building());
    const state = given(started)
      .when({ type: 'CancelCampaign', campaignId: ID, now: at(2), reason: 'wrong file' })
      .then([
        {
          type: 'CampaignCancellationRequested',
          data: { from: 'BUILDING', reason: 'wrong file', at: at(2) },
        },
        { type: 'CampaignCancelled', data: { at: at(2) } },
      ]);
    expect(state).toMatchObject({ status: 'CANCELLED', sms: { recipients: 0, chargeKey: null } });
    // The fenced attempt's next batch is refused.
    given(run([{ type: 'CancelCampaign', campaignId: ID, now: at(2) }], started))
      .when(cmd.add(2, { buildAttempt: 1 }))
      .thenThrows(IllegalStateError);
    // A batch saved: the build is about to charge; it activates or fails on its own.
    given(run([cmd.add(2, { buildAttempt: 1 })], started))
      .when({ type: 'CancelCampaign', campaignId: ID, now: at(2) })
      .thenThrows(IllegalStateError, /its build has saved 2 recipients/);
  });

  it('a charged SMS campaign cancelled waits in CANCELLING for its refunds (part 2)', () => {
    given(queued())
      .when({ type: 'CancelCampaign', campaignId: ID, now: at(3) })
      .then([{ type: 'CampaignCancellationRequested', data: { from: 'QUEUED', reason: null, at: at(3) } }]);
  });
});

describe('SMS campaign: replay (invariant 8)', () => {
  it('the stored form of a whole history folds to the same state', () => {
    const history = run(
      [
        cmd.dispatch(1),
        cmd.dispatch(1, { submittedFromPending: 0, deferredFromPending: 0, submittedFromDeferred: 1 }, at(6)),
      ],
      dispatching(),
    );
    const stored = JSON.parse(JSON.stringify(history)) as unknown[];
    expect(fold(campaignDecider, stored.map(parseCampaignEvent))).toStrictEqual(stateOf(history));
    expect(JSON.parse(JSON.stringify(stateOf(history)))).toStrictEqual(stateOf(history));
  });

  it('events written before SMS definitions existed still parse (no sms, no charge)', () => {
    const old = {
      type: 'CampaignCreated',
      data: {
        campaignId: ID,
        organizationId: 'org-1',
        channel: 'sms',
        castType: null,
        audienceId: null,
        lineOaId: null,
        name: 'old',
        startAt: null,
        dispatchDeadline: null,
        idempotencyKey: null,
        mode: 'draft',
        at: at(0),
      },
    };
    expect(fold(campaignDecider, [parseCampaignEvent(old)])).toMatchObject({ status: 'DRAFT', sms: null });
  });
});
