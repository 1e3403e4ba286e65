/**
 * The campaign decider's LINE delivery (ADR 0021) and CMS edits, given/when/then: the plan and its
 * retry keys (the plan's epoch, kept across reclaims and resends), chunks recorded strictly in order
 * under the live claim, LINE's 409 counted as accepted, failed calls that never advance, the 24 h
 * key window (a chunk in doubt for 23 h is given up, never re-sent), completion only once the plan is
 * done, resends that resume the plan, and edits only before the first claim. Histories come from the
 * decider itself.
 */
import { describe, expect, it } from 'vitest';
import { LINE_RETRY_KEY_SAFE_MS, type LineMessage, lineRetryKey } from '../../src/domain/campaign/line.js';
import {
  type CampaignCommand,
  type CampaignEvent,
  type CampaignState,
  type CreateCampaign,
  campaignDecider,
  parseCampaignEvent,
} from '../../src/domain/campaign.js';
import { fold } from '../../src/domain/decider.js';
import { IllegalStateError, ValidationError } from '../../src/errors.js';
import { specFor } from '../../src/testing/given-when-then.js';

const { given } = specFor(campaignDecider);

const ID = '5d0c2a8e-1b7f-4e3a-9c6d-7f8e9a0b1c2d';
const T0 = Date.parse('2030-03-01T00:00:00.000Z');
const at = (minutes: number) => new Date(T0 + minutes * 60_000).toISOString();
const HOUR = 60;

const TEXT = [{ type: 'text' as const, text: 'Spring sale: 20% off' }];

function create(overrides: Partial<CreateCampaign> = {}): CreateCampaign {
  return {
    type: 'CreateCampaign',
    campaignId: ID,
    now: at(0),
    mode: 'draft',
    organizationId: 'org-1',
    channel: 'line',
    castType: 'multicast',
    audienceId: 'aud-1',
    lineOaId: 'oa-1',
    line: { messages: TEXT },
    name: 'Spring sale',
    startAt: null,
    dispatchDeadline: null,
    ...overrides,
  };
}

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

const stateOf = (events: readonly CampaignEvent[]): CampaignState => fold(campaignDecider, events);
const lineOf = (events: readonly CampaignEvent[]) => {
  const s = stateOf(events);
  if (s.status === 'NONE' || s.line === null) throw new Error('no LINE facts');
  return s.line;
};

const cursorOf = (chunk: number) => `U${String(chunk).padStart(32, '0')}`;
const cmd = {
  activate: (now = at(1)): CampaignCommand => ({ type: 'ActivateCampaign', campaignId: ID, now }),
  schedule: (now = at(1)): CampaignCommand => ({
    type: 'ScheduleCampaign',
    campaignId: ID,
    now,
    startAt: at(60),
  }),
  claim: (now = at(2)): CampaignCommand => ({ type: 'ClaimCampaign', campaignId: ID, now }),
  reclaim: (now: string): CampaignCommand => ({
    type: 'ReclaimCampaign',
    campaignId: ID,
    now,
    staleAfterMs: 15 * 60_000,
  }),
  pause: (now: string): CampaignCommand => ({ type: 'PauseCampaign', campaignId: ID, now }),
  resume: (now: string): CampaignCommand => ({ type: 'ResumeCampaign', campaignId: ID, now }),
  complete: (epoch: number, now = at(10)): CampaignCommand => ({
    type: 'CompleteCampaign',
    campaignId: ID,
    now,
    epoch,
  }),
  fail: (epoch: number, now = at(10)): CampaignCommand => ({
    type: 'FailCampaign',
    campaignId: ID,
    now,
    epoch,
    reason: 'LINE refused chunk 1 (400): The request body has 1 error(s)',
  }),
  resend: (now = at(20)): CampaignCommand => ({ type: 'ResendFailed', campaignId: ID, now }),
  edit: (fields: Record<string, unknown>, now = at(1)): CampaignCommand =>
    ({ type: 'EditCampaign', campaignId: ID, now, ...fields }) as CampaignCommand,
  plan: (epoch: number, recipients: number | null = 1_234, now = at(3)): CampaignCommand => ({
    type: 'AdvanceLineDelivery',
    campaignId: ID,
    now,
    epoch,
    step: {
      type: 'plan',
      chunks: recipients === null ? 1 : Math.ceil(recipients / 500),
      recipients,
    },
  }),
  accepted: (
    epoch: number,
    chunk: number,
    options: { recipients?: number | null; now?: string; acceptedRequestId?: string } = {},
  ): CampaignCommand => {
    const recipients = options.recipients === undefined ? 500 : options.recipients;
    return {
      type: 'AdvanceLineDelivery',
      campaignId: ID,
      now: options.now ?? at(4 + chunk),
      epoch,
      step: {
        type: 'accepted',
        chunk,
        recipients,
        cursor: recipients === null ? null : cursorOf(chunk),
        requestId: `req-${epoch}-${chunk}`,
        acceptedRequestId: options.acceptedRequestId ?? null,
      },
    };
  },
  unconfirmed: (epoch: number, chunk: number, now: string): CampaignCommand => ({
    type: 'AdvanceLineDelivery',
    campaignId: ID,
    now,
    epoch,
    step: { type: 'unconfirmed', chunk, recipients: 500, cursor: cursorOf(chunk) },
  }),
  failed: (
    epoch: number,
    chunk: number,
    kind: 'throttled' | 'transient' | 'rejected' | 'quota' = 'transient',
    now = at(8),
  ): CampaignCommand => ({
    type: 'AdvanceLineDelivery',
    campaignId: ID,
    now,
    epoch,
    step: {
      type: 'failed',
      chunk,
      failure: {
        kind,
        status: kind === 'transient' ? 503 : kind === 'rejected' ? 400 : 429,
        requestId: kind === 'transient' ? null : `req-failed-${chunk}`,
        message: `LINE said ${kind}`,
      },
    },
  }),
};

/** A multicast of 1,234 members (3 chunks: 500, 500, 234), claimed under epoch 1. */
const dispatching = () => run([create(), cmd.activate(), cmd.claim()]);
const planned = () => run([cmd.plan(1)], dispatching());
/** The first moment chunk 1 may be given up, when chunk 0 was recorded at(4). */
const KEY_EXPIRED = new Date(T0 + 4 * 60_000 + LINE_RETRY_KEY_SAFE_MS).toISOString();
/** Chunk 0 accepted at(4), then chunk 1 given up as unconfirmed a day later. */
const chunkOneGivenUp = () =>
  run([cmd.accepted(1, 0, { now: at(4) }), cmd.unconfirmed(1, 1, KEY_EXPIRED)], planned());

describe('LINE delivery: the plan', () => {
  it('is made once, under the live claim: chunks of ≤ 500 members, the plan epoch, nothing in doubt before it', () => {
    const state = given(dispatching())
      .when(cmd.plan(1))
      .then([{ type: 'LineDeliveryPlanned', data: { epoch: 1, chunks: 3, recipients: 1_234, at: at(3) } }]);
    if (state.status === 'NONE') throw new Error();
    expect(state.line?.plan).toEqual({ epoch: 1, chunks: 3, recipients: 1_234, plannedAt: at(3) });
    expect(state.line?.progress).toMatchObject({ chunksDone: 0, inDoubtSince: at(3), cursor: null });
  });

  it('a broadcast is one call without recipients', () => {
    const history = run([create({ castType: 'broadcast', audienceId: null }), cmd.activate(), cmd.claim()]);
    given(history)
      .when(cmd.plan(1, null))
      .then([{ type: 'LineDeliveryPlanned', data: { epoch: 1, chunks: 1, recipients: null, at: at(3) } }]);
    given(history)
      .when(cmd.plan(1, 10))
      .thenThrows(ValidationError, /step\.chunks|chunk/);
  });

  it('refuses a chunk count that does not match the members, an empty audience, and a multicast without members', () => {
    const wrong: CampaignCommand = {
      type: 'AdvanceLineDelivery',
      campaignId: ID,
      now: at(3),
      epoch: 1,
      step: { type: 'plan', chunks: 2, recipients: 1_234 },
    };
    given(dispatching())
      .when(wrong)
      .thenThrows(ValidationError, /takes 3 chunk\(s\), not 2/);
    given(dispatching()).when(cmd.plan(1, 0)).thenThrows(ValidationError);
    given(dispatching()).when(cmd.plan(1, null)).thenThrows(ValidationError);
  });

  it('is never made twice (a reclaim keeps the first plan, and its keys)', () => {
    given(planned())
      .when(cmd.plan(1))
      .thenThrows(IllegalStateError, /planned under epoch 1/);
    const reclaimed = run([cmd.reclaim(at(30)), cmd.claim(at(31))], planned());
    given(reclaimed)
      .when(cmd.plan(3))
      .thenThrows(IllegalStateError, /planned under epoch 1/);
  });

  it('is refused under a stale epoch, outside DISPATCHING, and for an SMS campaign', () => {
    given(dispatching())
      .when(cmd.plan(2))
      .thenThrows(IllegalStateError, /epoch 2/);
    const paused = run([cmd.pause(at(5))], dispatching());
    given(paused)
      .when(cmd.plan(1))
      .thenThrows(IllegalStateError, /status PAUSED/);
    const sms = run([
      {
        type: 'CreateCampaign',
        campaignId: ID,
        now: at(0),
        mode: 'draft',
        organizationId: 'org-1',
        channel: 'sms',
        name: 'sms',
        startAt: null,
        dispatchDeadline: null,
      },
      cmd.activate(),
      cmd.claim(),
    ]);
    given(sms)
      .when(cmd.plan(1))
      .thenThrows(IllegalStateError, /no LINE content/);
  });
});

describe('LINE delivery: chunks', () => {
  it('an accepted chunk is recorded with its planned retry key and LINE request id, and refreshes the claim', () => {
    const state = given(planned())
      .when(cmd.accepted(1, 0, { now: at(4) }))
      .then([
        {
          type: 'LineChunkAccepted',
          data: {
            epoch: 1,
            chunk: 0,
            retryKey: lineRetryKey(ID, 1, 0),
            recipients: 500,
            cursor: cursorOf(0),
            requestId: 'req-1-0',
            acceptedRequestId: null,
            at: at(4),
          },
        },
      ]);
    if (state.status === 'NONE') throw new Error();
    expect(state.claimedAt).toBe(at(4));
    expect(state.line?.progress).toMatchObject({
      chunksDone: 1,
      chunksAccepted: 1,
      recipientsAccepted: 500,
      duplicates: 0,
      cursor: cursorOf(0),
      inDoubtSince: at(4),
      lastRequestId: 'req-1-0',
    });
  });

  it('retry keys are deterministic, distinct per chunk and per plan epoch, and UUIDs', () => {
    const keys = [0, 1, 2].map((k) => lineRetryKey(ID, 1, k));
    expect(new Set(keys).size).toBe(3);
    expect(lineRetryKey(ID, 1, 0)).toBe(keys[0]);
    expect(lineRetryKey(ID.toUpperCase(), 1, 0)).toBe(keys[0]);
    expect(lineRetryKey(ID, 2, 0)).not.toBe(keys[0]);
    for (const key of keys)
      expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('LINE’s 409 (accepted earlier under the same key) is recorded as accepted and counted as a duplicate', () => {
    const state = given(planned())
      .when(cmd.accepted(1, 0, { acceptedRequestId: 'req-first' }))
      .thenSucceeds().state;
    if (state.status === 'NONE') throw new Error();
    expect(state.line?.progress).toMatchObject({ chunksAccepted: 1, recipientsAccepted: 500, duplicates: 1 });
  });

  it('chunks go strictly in order: none twice, none skipped, none beyond the plan', () => {
    const one = run([cmd.accepted(1, 0)], planned());
    given(planned())
      .when(cmd.accepted(1, 1))
      .thenThrows(IllegalStateError, /chunk 1 is not the next one/);
    given(one)
      .when(cmd.accepted(1, 0))
      .thenThrows(IllegalStateError, /chunk 0 is not the next one/);
    const all = run([cmd.accepted(1, 1), cmd.accepted(1, 2, { recipients: 234 })], one);
    given(all)
      .when(cmd.accepted(1, 3))
      .thenThrows(IllegalStateError, /3 of 3 chunks done/);
    given(all).when(cmd.failed(1, 3)).thenThrows(IllegalStateError);
  });

  it('is refused before the plan, under a stale epoch, and once the claim moved on', () => {
    given(dispatching())
      .when(cmd.accepted(1, 0))
      .thenThrows(IllegalStateError, /not planned/);
    given(planned())
      .when(cmd.accepted(2, 0))
      .thenThrows(IllegalStateError, /epoch 2/);
    const reclaimed = run([cmd.reclaim(at(30))], planned());
    given(reclaimed)
      .when(cmd.accepted(1, 0))
      .thenThrows(IllegalStateError, /status SCHEDULED|status QUEUED/);
    const reclaimedThenClaimed = run([cmd.claim(at(31))], reclaimed);
    given(reclaimedThenClaimed)
      .when(cmd.accepted(1, 0))
      .thenThrows(IllegalStateError, /epoch 1 is stale/);
  });

  it('a multicast chunk names its recipients and cursor; a broadcast chunk none; an accepted chunk carries a request id', () => {
    given(planned())
      .when(cmd.accepted(1, 0, { recipients: null }))
      .thenThrows(ValidationError, /recipients/);
    const broadcast = run([
      create({ castType: 'broadcast', audienceId: null }),
      cmd.activate(),
      cmd.claim(),
      cmd.plan(1, null),
    ]);
    given(broadcast)
      .when(cmd.accepted(1, 0))
      .thenThrows(ValidationError, /has no recipients/);
    given(broadcast)
      .when(cmd.accepted(1, 0, { recipients: null }))
      .thenSucceeds();
    const noIds: CampaignCommand = {
      type: 'AdvanceLineDelivery',
      campaignId: ID,
      now: at(4),
      epoch: 1,
      step: {
        type: 'accepted',
        chunk: 0,
        recipients: 500,
        cursor: cursorOf(0),
        requestId: null,
        acceptedRequestId: null,
      },
    };
    given(planned())
      .when(noIds)
      .thenThrows(ValidationError, /request id/);
    const tooMany = cmd.accepted(1, 0, { recipients: 501 });
    given(planned()).when(tooMany).thenThrows(ValidationError);
  });

  it('a failed call is recorded (kind, status, LINE’s message) and does not advance; the same chunk goes next', () => {
    const state = given(planned())
      .when(cmd.failed(1, 0, 'rejected'))
      .then([
        {
          type: 'LineCallFailed',
          data: {
            epoch: 1,
            chunk: 0,
            retryKey: lineRetryKey(ID, 1, 0),
            kind: 'rejected',
            status: 400,
            requestId: 'req-failed-0',
            message: 'LINE said rejected',
            at: at(8),
          },
        },
      ]);
    if (state.status === 'NONE') throw new Error();
    expect(state.line?.progress).toMatchObject({
      chunksDone: 0,
      failedCalls: 1,
      inDoubtSince: at(3),
      lastError: { kind: 'rejected', status: 400, message: 'LINE said rejected', requestId: 'req-failed-0' },
    });
    given(run([cmd.failed(1, 0)], planned()))
      .when(cmd.accepted(1, 0))
      .thenSucceeds();
  });
});

describe('LINE delivery: reclaims keep the plan’s keys', () => {
  it('after a reclaim, the next epoch sends the next chunk under the key the plan gave it', () => {
    const reclaimed = run([cmd.accepted(1, 0), cmd.reclaim(at(30)), cmd.claim(at(31))], planned());
    const s = stateOf(reclaimed);
    if (s.status === 'NONE') throw new Error();
    expect(s.claimEpoch).toBe(3);
    expect(s.line?.plan?.epoch).toBe(1);
    const { events } = given(reclaimed)
      .when(cmd.accepted(3, 1, { now: at(32) }))
      .thenSucceeds();
    expect(events[0]).toMatchObject({
      type: 'LineChunkAccepted',
      data: { epoch: 3, chunk: 1, retryKey: lineRetryKey(ID, 1, 1) },
    });
  });
});

describe('LINE delivery: the 24 h retry-key window (ADR 0021)', () => {
  const justBefore = new Date(Date.parse(KEY_EXPIRED) - 1).toISOString();

  it('a chunk whose key is still valid is re-sent, never given up', () => {
    const one = run([cmd.accepted(1, 0, { now: at(4) })], planned());
    given(one)
      .when(cmd.unconfirmed(1, 1, justBefore))
      .thenThrows(IllegalStateError, /still valid/);
  });

  it('after 23 h in doubt the chunk is given up as unconfirmed (never re-sent), and the campaign ends PARTIAL', () => {
    const one = run([cmd.accepted(1, 0, { now: at(4) })], planned());
    const state = given(one)
      .when(cmd.unconfirmed(1, 1, KEY_EXPIRED))
      .then([
        {
          type: 'LineChunkUnconfirmed',
          data: {
            epoch: 1,
            chunk: 1,
            retryKey: lineRetryKey(ID, 1, 1),
            recipients: 500,
            cursor: cursorOf(1),
            at: KEY_EXPIRED,
          },
        },
      ]);
    if (state.status === 'NONE') throw new Error();
    expect(state.line?.progress).toMatchObject({
      chunksDone: 2,
      chunksUnconfirmed: 1,
      recipientsUnconfirmed: 500,
    });
    const later = new Date(Date.parse(KEY_EXPIRED) + 60_000).toISOString();
    const done = run([cmd.accepted(1, 2, { recipients: 234, now: later })], chunkOneGivenUp());
    given(done)
      .when(cmd.complete(1, later))
      .then([{ type: 'CampaignPartiallyCompleted', data: { epoch: 1, at: later } }]);
  });

  it('a failed call does not move the window: only a recorded chunk proves the next was not sent yet', () => {
    const failed = run([cmd.failed(1, 0, 'throttled', at(600))], planned());
    expect(lineOf(failed).progress.inDoubtSince).toBe(at(3));
  });
});

describe('LINE delivery: completion', () => {
  it('is refused until every planned chunk is done, then COMPLETED', () => {
    given(dispatching())
      .when(cmd.complete(1))
      .thenThrows(IllegalStateError, /no chunks of its LINE delivery/);
    const two = run([cmd.accepted(1, 0), cmd.accepted(1, 1)], planned());
    given(two)
      .when(cmd.complete(1))
      .thenThrows(IllegalStateError, /2 of 3 chunks/);
    const all = run([cmd.accepted(1, 2, { recipients: 234 })], two);
    given(all)
      .when(cmd.complete(1, at(9)))
      .then([{ type: 'CampaignCompleted', data: { epoch: 1, at: at(9) } }]);
    expect(lineOf(all).progress).toMatchObject({ chunksAccepted: 3, recipientsAccepted: 1_234 });
  });
});

describe('LINE delivery: resend', () => {
  it('a FAILED campaign resumes its plan: the accepted chunks stay done, the next goes under its planned key', () => {
    const failed = run([cmd.accepted(1, 0), cmd.failed(1, 1, 'rejected'), cmd.fail(1)], planned());
    const state = given(failed).when(cmd.resend()).thenSucceeds().state;
    expect(state).toMatchObject({ status: 'QUEUED', resendAttempt: 1 });
    const resumed = run([cmd.resend(), cmd.claim(at(21))], failed);
    expect(lineOf(resumed).plan?.epoch).toBe(1);
    expect(lineOf(resumed).progress.chunksDone).toBe(1);
    given(resumed)
      .when(cmd.accepted(2, 0))
      .thenThrows(IllegalStateError, /chunk 0 is not the next one/);
    const { events } = given(resumed)
      .when(cmd.accepted(2, 1, { now: at(22) }))
      .thenSucceeds();
    expect(events[0]).toMatchObject({ data: { retryKey: lineRetryKey(ID, 1, 1) } });
  });

  it('a campaign that failed before its plan is resent whole', () => {
    given(run([cmd.fail(1)], dispatching()))
      .when(cmd.resend())
      .thenSucceeds();
  });

  it('a campaign whose plan is done has nothing to resend (an unconfirmed chunk is never re-sent)', () => {
    const later = at(25 * HOUR);
    const partial = run(
      [cmd.accepted(1, 2, { recipients: 234, now: later }), cmd.complete(1, later)],
      chunkOneGivenUp(),
    );
    expect(stateOf(partial).status).toBe('PARTIAL');
    given(partial)
      .when(cmd.resend(at(26 * HOUR)))
      .thenThrows(IllegalStateError, /every chunk of its LINE delivery is done/);
  });
});

describe('CMS edits (seed 000)', () => {
  it('DRAFT: records only the fields that change', () => {
    const state = given(run([create()]))
      .when(cmd.edit({ name: 'Summer sale', lineOaId: 'oa-1' }))
      .then([{ type: 'CampaignEdited', data: { changes: { name: 'Summer sale' }, at: at(1) } }]);
    expect(state).toMatchObject({ status: 'DRAFT', name: 'Summer sale', lineOaId: 'oa-1' });
  });

  it('SCHEDULED: content, cast type, audience and official account; the edited content is what the plan sends', () => {
    const scheduled = run([create(), cmd.schedule()]);
    const messages: LineMessage[] = [
      { type: 'text', text: 'Edited: 30% off' },
      { type: 'sticker', packageId: '446', stickerId: '1988' },
    ];
    const state = given(scheduled)
      .when(cmd.edit({ messages, castType: 'broadcast', audienceId: null, lineOaId: 'oa-2' }, at(2)))
      .then([
        {
          type: 'CampaignEdited',
          data: {
            changes: { castType: 'broadcast', audienceId: null, lineOaId: 'oa-2', messages },
            at: at(2),
          },
        },
      ]);
    expect(state).toMatchObject({
      status: 'SCHEDULED',
      castType: 'broadcast',
      audienceId: null,
      lineOaId: 'oa-2',
    });
    if (state.status === 'NONE') throw new Error();
    expect(state.line?.messages).toEqual(messages);
  });

  it('an edit that changes nothing records nothing; an empty edit is refused naming a field', () => {
    given(run([create()]))
      .when(cmd.edit({ name: 'Spring sale', messages: TEXT }))
      .then([]);
    const error = given(run([create()]))
      .when(cmd.edit({}))
      .thenThrows(ValidationError, /at least one field/);
    expect(error.details).toMatchObject({ type: 'EditCampaign', issues: [{ path: ['name'] }] });
  });

  it('checks the result against the LINE rules: a multicast needs an audience, a narrowcast a LINE audience group id', () => {
    const broadcast = run([create({ castType: 'broadcast', audienceId: null })]);
    given(broadcast)
      .when(cmd.edit({ castType: 'multicast' }))
      .thenThrows(ValidationError, /needs an audienceId/);
    given(broadcast)
      .when(cmd.edit({ castType: 'narrowcast', audienceId: 'aud-1' }))
      .thenThrows(ValidationError, /audience group id/);
    given(broadcast)
      .when(cmd.edit({ castType: 'narrowcast', audienceId: '1234567' }))
      .thenSucceeds();
    given(broadcast)
      .when(cmd.edit({ messages: [] }))
      .thenThrows(ValidationError, /messages/);
  });

  it('an SMS campaign has no LINE fields to edit', () => {
    const sms = run([
      {
        type: 'CreateCampaign',
        campaignId: ID,
        now: at(0),
        mode: 'draft',
        organizationId: 'org-1',
        channel: 'sms',
        name: 'sms',
        startAt: null,
        dispatchDeadline: null,
      },
    ]);
    given(sms)
      .when(cmd.edit({ messages: TEXT }))
      .thenThrows(ValidationError, /only for line campaigns/);
    given(sms)
      .when(cmd.edit({ name: 'renamed' }))
      .thenSucceeds();
  });

  it('is refused once queued or claimed (the plan fixes content and keys), and on a deleted campaign', () => {
    for (const history of [
      run([create(), cmd.activate()]),
      dispatching(),
      planned(),
      run([cmd.pause(at(5))], dispatching()),
      run([create(), cmd.schedule(), cmd.pause(at(2))]),
    ]) {
      const status = stateOf(history).status;
      given(history)
        .when(cmd.edit({ name: 'late' }, at(6)))
        .thenThrows(IllegalStateError, new RegExp(`status ${status}`));
    }
    const deleted = run([create(), { type: 'DeleteCampaign', campaignId: ID, now: at(1) }]);
    given(deleted)
      .when(cmd.edit({ name: 'late' }, at(2)))
      .thenThrows(IllegalStateError);
  });
});

describe('LINE events: stored form', () => {
  it('every LINE event decide emits parses back to itself', () => {
    const history = [
      ...run([cmd.edit({ name: 'edited' })], run([create()])),
      ...run([cmd.failed(1, 0)], planned()).slice(1),
    ];
    const delivered = run([cmd.failed(1, 2, 'quota', KEY_EXPIRED)], chunkOneGivenUp());
    const types = new Set([...history, ...delivered].map((e) => e.type));
    for (const t of [
      'CampaignEdited',
      'LineDeliveryPlanned',
      'LineChunkAccepted',
      'LineCallFailed',
      'LineChunkUnconfirmed',
    ]) {
      expect(types).toContain(t);
    }
    for (const event of [...history, ...delivered]) {
      expect(parseCampaignEvent(JSON.parse(JSON.stringify(event)))).toEqual(event);
    }
  });
});
