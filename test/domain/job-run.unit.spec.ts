/**
 * Job run decider: every legal and illegal (status × command) pair, the claim-epoch fence (invariant
 * 5), retries decided by the run itself (a delay, a fresh claim; after 3 retries permanently_failed),
 * stale reclaims, and the event schemas — with explicit times.
 */
import { describe, expect, it } from 'vitest';
import { fold } from '../../src/domain/decider.js';
import {
  type JobRunCommand,
  type JobRunEvent,
  type JobRunState,
  jobRunDecider,
  parseJobRunEvent,
  RUN_STATUSES,
  type RunFate,
} from '../../src/domain/job-run.js';
import { IllegalStateError } from '../../src/errors.js';
import { specFor } from '../../src/testing/given-when-then.js';

const { given } = specFor(jobRunDecider);
const RUN = '8e3f7c4a-5d6e-4f7a-8b9c-0d1e2f3a4b5c';
const JOB = '6c1f5a2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b';
const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();

const createRun = (fate: RunFate = 'fired', overrides: Record<string, unknown> = {}): JobRunCommand =>
  ({
    type: 'CreateRun',
    runId: RUN,
    now: at(0),
    jobId: JOB,
    organizationId: 'org-1',
    jobType: 'ping',
    scheduledFor: at(0),
    trigger: fate === 'manual' ? 'manual' : fate === 'backfilled' ? 'backfill' : 'schedule',
    triggerKey: 'schedule',
    fate,
    retry: { maxRetries: 3, delayMs: 1_000, maxDelayMs: 4_000 },
    overlap: 'skip',
    ...overrides,
  }) as JobRunCommand;

const report = { responseStatus: 503, output: 'down', durationMs: 12 };
const cmd = {
  claim: (now = at(100)): JobRunCommand => ({ type: 'ClaimRun', runId: RUN, now }),
  start: (epoch = 1, now = at(1)): JobRunCommand => ({ type: 'StartRun', runId: RUN, epoch, now }),
  heartbeat: (epoch = 1, now = at(2)): JobRunCommand => ({ type: 'HeartbeatRun', runId: RUN, epoch, now }),
  complete: (epoch = 1, now = at(3)): JobRunCommand => ({
    type: 'CompleteRun',
    runId: RUN,
    epoch,
    now,
    report: { responseStatus: 200, output: 'ok', durationMs: 40 },
  }),
  failAttempt: (epoch = 1, now = at(3)): JobRunCommand => ({
    type: 'FailAttempt',
    runId: RUN,
    epoch,
    now,
    error: 'HTTP 503',
    report,
  }),
  fail: (epoch = 1, now = at(3)): JobRunCommand => ({
    type: 'FailRun',
    runId: RUN,
    epoch,
    now,
    error: 'target refused',
    report,
  }),
  reclaim: (now = at(1_000)): JobRunCommand => ({
    type: 'ReclaimRun',
    runId: RUN,
    now,
    staleAfterMs: 60_000,
    reason: 'lost',
  }),
  cancel: (now = at(4)): JobRunCommand => ({
    type: 'CancelRun',
    runId: RUN,
    now,
    reason: 'the job was deleted',
  }),
  cancelClaim: (epoch = 1, now = at(4)): JobRunCommand => ({
    type: 'CancelRun',
    runId: RUN,
    now,
    reason: 'the job was deleted',
    epoch,
  }),
};

function run(commands: readonly JobRunCommand[], before: readonly JobRunEvent[] = []): JobRunEvent[] {
  const history: JobRunEvent[] = [...before];
  let state = fold(jobRunDecider, history);
  for (const command of commands) {
    const emitted = jobRunDecider.decide(command, state);
    for (const event of emitted) state = jobRunDecider.evolve(state, event);
    history.push(...emitted);
  }
  return history;
}

const histories: Record<JobRunState['status'], JobRunEvent[]> = {
  NONE: [],
  buffered: run([createRun('buffered')]),
  queued: run([createRun()]),
  running: run([createRun(), cmd.start()]),
  retry_scheduled: run([createRun(), cmd.start(), cmd.failAttempt()]),
  completed: run([createRun(), cmd.start(), cmd.complete()]),
  failed: run([createRun(), cmd.fail()]),
  permanently_failed: run([
    createRun('fired', { retry: { maxRetries: 0, delayMs: 1_000, maxDelayMs: 1_000 } }),
    cmd.failAttempt(),
  ]),
  skipped: run([createRun('skipped-overlap')]),
  missed: run([createRun('missed', { span: { last: at(50), count: 6 }, reason: 'late' })]),
  paused: run([createRun('paused', { span: { last: at(50), count: 6 } })]),
  cancelled: run([createRun('buffered'), cmd.cancel()]),
};

type Name = keyof typeof cmd | 'create';
const CLAIMED: Name[] = ['start', 'heartbeat', 'complete', 'failAttempt', 'fail', 'reclaim', 'cancelClaim'];
const LEGAL: Record<JobRunState['status'], Name[]> = {
  NONE: ['create'],
  buffered: ['claim', 'cancel'],
  queued: CLAIMED,
  running: CLAIMED,
  retry_scheduled: ['claim', 'cancel'],
  completed: [],
  failed: [],
  permanently_failed: [],
  skipped: [],
  missed: [],
  paused: [],
  cancelled: [],
};

describe('job run decider: transitions', () => {
  it('covers every status', () => {
    expect(Object.keys(histories).sort()).toEqual(['NONE', ...RUN_STATUSES].sort());
    for (const [status, history] of Object.entries(histories)) {
      expect(fold(jobRunDecider, history).status).toBe(status);
    }
  });
  for (const status of Object.keys(histories) as JobRunState['status'][]) {
    for (const name of ['create', ...Object.keys(cmd)] as Name[]) {
      const command = name === 'create' ? createRun() : cmd[name as keyof typeof cmd]();
      const legal = LEGAL[status].includes(name);
      it(`${status} × ${name}: ${legal ? 'accepted' : 'refused'}`, () => {
        const when = given(histories[status]).when(command);
        if (legal) when.thenSucceeds();
        else when.thenThrows(IllegalStateError);
      });
    }
  }

  it('creation: runs that go out are queued with epoch 1 and attempt 1; records never run', () => {
    expect(given([]).when(createRun()).thenSucceeds().state).toMatchObject({
      status: 'queued',
      claimEpoch: 1,
      attempts: 1,
      maxAttempts: 4,
      claimedAt: at(0),
    });
    expect(
      given([])
        .when(createRun('missed', { span: { last: at(50), count: 6 } }))
        .thenSucceeds().state,
    ).toMatchObject({
      status: 'missed',
      claimEpoch: 0,
      attempts: 0,
      spanLast: at(50),
      spanCount: 6,
    });
  });

  it('the fence: every command of a claim needs the live epoch', () => {
    for (const make of [cmd.start, cmd.heartbeat, cmd.complete, cmd.failAttempt, cmd.fail, cmd.cancelClaim]) {
      given(histories.running)
        .when(make(2))
        .thenThrows(IllegalStateError, /stale epoch 2/);
    }
  });

  it('a redelivered start of the same claim changes nothing', () => {
    expect(given(histories.running).when(cmd.start()).then([])).toMatchObject({ status: 'running' });
  });
});

describe('job run decider: retries', () => {
  it('3 retries after growing delays, each a fresh claim with a new epoch, then permanently_failed', () => {
    let history = run([createRun(), cmd.start()]);
    const delays: number[] = [];
    for (let attempt = 1; attempt <= 3; attempt++) {
      const now = at(attempt * 100);
      const state = given(history).when(cmd.failAttempt(attempt, now)).thenSucceeds().state;
      if (state.status !== 'retry_scheduled') throw new Error(`attempt ${attempt}: ${state.status}`);
      delays.push(Date.parse(state.nextAttemptAt!) - Date.parse(now));
      expect(state).toMatchObject({ responseStatus: 503, output: 'down', error: 'HTTP 503' });
      history = run([cmd.failAttempt(attempt, now)], history);
      given(history)
        .when(cmd.claim(now))
        .thenThrows(IllegalStateError, /retry is due at/);
      const due = state.nextAttemptAt!;
      history = run([cmd.claim(due), cmd.start(attempt + 1, due)], history);
      expect(fold(jobRunDecider, history)).toMatchObject({
        status: 'running',
        claimEpoch: attempt + 1,
        attempts: attempt + 1,
      });
    }
    expect(delays).toEqual([1_000, 2_000, 4_000]); // delay × 2^(n−1), capped at maxDelayMs
    const last = given(history)
      .when(cmd.failAttempt(4, at(1_000)))
      .thenSucceeds().state;
    expect(last).toMatchObject({ status: 'permanently_failed', attempts: 4, error: 'HTTP 503' });
  });

  it('a permanent failure fails at once', () => {
    expect(given(histories.running).when(cmd.fail()).thenSucceeds().state).toMatchObject({
      status: 'failed',
      attempts: 1,
    });
  });

  it('a buffered run is released with its first claim', () => {
    expect(
      given(histories.buffered)
        .when(cmd.claim(at(5)))
        .thenSucceeds().state,
    ).toMatchObject({ status: 'queued', claimEpoch: 1, attempts: 1 });
  });
});

describe('job run decider: stale recovery', () => {
  it('a stale claim is taken back with a new epoch: a retry at once while attempts remain', () => {
    const state = given(histories.running).when(cmd.reclaim()).thenSucceeds().state;
    expect(state).toMatchObject({
      status: 'retry_scheduled',
      claimEpoch: 2,
      nextAttemptAt: at(1_000),
      error: 'lost',
    });
    given(histories.running)
      .when(cmd.reclaim(at(30)))
      .thenThrows(IllegalStateError, /not stale/);
  });

  it('the last attempt lost is permanently_failed', () => {
    const history = run([
      createRun('fired', { retry: { maxRetries: 0, delayMs: 1_000, maxDelayMs: 1_000 } }),
    ]);
    expect(given(history).when(cmd.reclaim()).thenSucceeds().state).toMatchObject({
      status: 'permanently_failed',
      claimEpoch: 2,
    });
  });
});

describe('job run decider: events', () => {
  it('every event validates when replayed', () => {
    const events = [
      ...run([
        createRun(),
        cmd.start(),
        cmd.heartbeat(),
        cmd.failAttempt(),
        cmd.claim(at(10)),
        cmd.reclaim(at(1_000)),
        cmd.cancel(at(1_001)),
      ]),
      ...run([createRun('buffered'), cmd.claim(at(1)), cmd.start(1, at(2)), cmd.complete(1, at(3))]),
      ...run([createRun(), cmd.fail()]),
    ];
    for (const event of events) expect(parseJobRunEvent(event)).toEqual(event);
  });
});
