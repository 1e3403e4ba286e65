/**
 * Cron job decider: every legal and illegal (status × command) pair, validation at creation (an
 * unknown job type is refused), the DST policy on explicit dates (a daily 02:30 job across New York's
 * spring-forward gap, a 01:30 job across its fall-back overlap; every combination), the catch-up
 * policies after downtime (with the cap and the window), the overlap policies, pause/resume records and
 * backfill — all with explicit times: the decider never reads a clock.
 */
import { describe, expect, it } from 'vitest';
import {
  type CronJobCommand,
  type CronJobEvent,
  type CronJobState,
  cronJobDecider,
  defaultDstPolicy,
  isFixedTime,
  parseCronJobEvent,
  Schedule,
} from '../../src/domain/cron-job.js';
import { fold } from '../../src/domain/decider.js';
import { runIdFor } from '../../src/domain/job-run.js';
import { IllegalStateError, ValidationError } from '../../src/errors.js';
import { specFor } from '../../src/testing/given-when-then.js';

const { given } = specFor(cronJobDecider);
const ID = '6c1f5a2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b';
const T0 = '2030-01-01T00:00:00.000Z';
const at = (seconds: number) => new Date(Date.parse(T0) + seconds * 1000).toISOString();

function create(overrides: Record<string, unknown> = {}): CronJobCommand {
  return {
    type: 'CreateCronJob',
    jobId: ID,
    now: T0,
    organizationId: 'org-1',
    name: 'heartbeat',
    schedule: '*/10 * * * * *',
    timezone: 'UTC',
    jobType: 'ping',
    payload: { url: 'https://example.com/health' },
    ...overrides,
  } as CronJobCommand;
}

function run(commands: readonly CronJobCommand[]): CronJobEvent[] {
  const history: CronJobEvent[] = [];
  let state = fold(cronJobDecider, history);
  for (const command of commands) {
    const emitted = cronJobDecider.decide(command, state);
    for (const event of emitted) state = cronJobDecider.evolve(state, event);
    history.push(...emitted);
  }
  return history;
}

const cmd = {
  update: (now = at(1)): CronJobCommand => ({
    type: 'UpdateCronJob',
    jobId: ID,
    now,
    changes: { name: 'renamed' },
  }),
  pause: (now = at(2)): CronJobCommand => ({
    type: 'PauseCronJob',
    jobId: ID,
    now,
    reason: 'vendor down',
    by: 'alice',
  }),
  resume: (now = at(3)): CronJobCommand => ({ type: 'ResumeCronJob', jobId: ID, now, by: 'bob' }),
  delete: (now = at(4)): CronJobCommand => ({ type: 'DeleteCronJob', jobId: ID, now, by: 'carol' }),
  materialize: (now = at(10), active = 0, buffered = 0): CronJobCommand => ({
    type: 'MaterializeDue',
    jobId: ID,
    now,
    activeRuns: active,
    bufferedRuns: buffered,
  }),
  trigger: (now = at(5)): CronJobCommand => ({
    type: 'TriggerCronJob',
    jobId: ID,
    now,
    runId: '7d2e6b3f-4c5e-4f6a-9b0c-1d2e3f4a5b6c',
    by: 'dave',
  }),
  backfill: (now = at(60)): CronJobCommand => ({
    type: 'BackfillCronJob',
    jobId: ID,
    now,
    from: at(-30),
    to: at(0),
    alreadyRun: [],
    maxRuns: 100,
    by: 'erin',
  }),
};

const histories: Record<CronJobState['status'], CronJobEvent[]> = {
  NONE: [],
  active: run([create()]),
  paused: run([create(), cmd.pause()]),
  deleted: run([create(), cmd.delete()]),
};

type Name = keyof typeof cmd | 'create';
const LEGAL: Record<CronJobState['status'], Name[]> = {
  NONE: ['create'],
  active: ['update', 'pause', 'delete', 'materialize', 'trigger', 'backfill'],
  paused: ['update', 'resume', 'delete', 'trigger', 'backfill'],
  deleted: [],
};

describe('cron job decider: transitions', () => {
  for (const status of Object.keys(histories) as CronJobState['status'][]) {
    for (const name of ['create', ...Object.keys(cmd)] as Name[]) {
      const command = name === 'create' ? create() : cmd[name as keyof typeof cmd]();
      const legal = LEGAL[status].includes(name);
      it(`${status} × ${name}: ${legal ? 'accepted' : 'refused'}`, () => {
        const when = given(histories[status]).when(command);
        if (legal) expect(when.thenSucceeds().events.length).toBeGreaterThan(0);
        else when.thenThrows(IllegalStateError);
      });
    }
  }

  it('create: next occurrence after now, policies defaulted and stored explicitly', () => {
    const state = given([]).when(create()).thenSucceeds().state;
    expect(state).toMatchObject({
      status: 'active',
      nextRunAt: at(10),
      overlap: 'skip',
      catchUp: { mode: 'skip-missed', graceMs: 60_000, windowMs: 86_400_000, cap: 10 },
      retry: { maxRetries: 3, delayMs: 30_000, maxDelayMs: 600_000 },
      dst: { ambiguous: 'both', missing: 'skip' },
      payload: { url: 'https://example.com/health', method: 'GET' },
    });
    expect(
      given([])
        .when(create({ paused: true }))
        .thenSucceeds().state,
    ).toMatchObject({
      status: 'paused',
      pausedReason: 'created paused',
    });
  });

  it('create: unknown type, bad payload, expression or zone are ValidationErrors', () => {
    given([])
      .when(create({ jobType: 'fax' }))
      .thenThrows(ValidationError, /unknown job type 'fax'/);
    given([])
      .when(create({ payload: { url: 'file:///etc/passwd' } }))
      .thenThrows(ValidationError, /http/);
    given([])
      .when(create({ jobType: 'email', payload: { to: 'not-an-email', subject: 's', text: 't' } }))
      .thenThrows(ValidationError);
    given([])
      .when(create({ jobType: 'webhook', payload: { url: 'https://x.test', signingSecret: 'short' } }))
      .thenThrows(ValidationError);
    given([])
      .when(create({ schedule: '61 * * * *' }))
      .thenThrows(ValidationError, /invalid cron expression/);
    given([])
      .when(create({ schedule: '* * * * * * *' }))
      .thenThrows(ValidationError, /5 fields/);
    given([])
      .when(create({ timezone: 'Europe/Atlantis' }))
      .thenThrows(ValidationError, /unknown time zone/);
    given([])
      .when(create({ catchUp: { graceMs: 10_000, windowMs: 5_000 } }))
      .thenThrows(ValidationError, /windowMs/);
  });

  it('materialize before the next occurrence is due is refused', () => {
    given(histories.active)
      .when(cmd.materialize(at(9)))
      .thenThrows(IllegalStateError, /nothing is due/);
  });

  it('update: a new schedule starts from now with its own DST default; other changes keep the next run', () => {
    const renamed = given(histories.active).when(cmd.update()).thenSucceeds().state;
    expect(renamed).toMatchObject({ name: 'renamed', nextRunAt: at(10) });
    const rescheduled = given(histories.active)
      .when({ type: 'UpdateCronJob', jobId: ID, now: at(1), changes: { schedule: '0 12 * * *' } })
      .thenSucceeds().state;
    expect(rescheduled).toMatchObject({
      schedule: '0 12 * * *',
      nextRunAt: '2030-01-01T12:00:00.000Z',
      dst: { ambiguous: 'first', missing: 'shift' },
    });
    given(histories.active)
      .when({ type: 'UpdateCronJob', jobId: ID, now: at(1), changes: { jobType: 'email' } })
      .thenThrows(ValidationError, /needs its payload/);
  });

  it('pause with reason and actor; resume records the occurrences the pause held back', () => {
    const paused = given(histories.active).when(cmd.pause()).thenSucceeds().state;
    expect(paused).toMatchObject({ status: 'paused', pausedReason: 'vendor down', pausedBy: 'alice' });
    const [resumed] = given(histories.paused)
      .when(cmd.resume(at(35)))
      .thenSucceeds().events;
    expect(resumed).toEqual({
      type: 'CronJobResumed',
      data: { by: 'bob', at: at(35), nextRunAt: at(40), paused: { first: at(10), last: at(30), count: 3 } },
    });
    const [early] = given(histories.paused)
      .when(cmd.resume(at(5)))
      .thenSucceeds().events;
    expect(early!.data).toMatchObject({ nextRunAt: at(10), paused: null });
  });

  it('events validate when replayed', () => {
    for (const event of run([
      create(),
      cmd.materialize(),
      cmd.trigger(at(11)),
      cmd.backfill(),
      cmd.pause(at(61)),
      cmd.resume(at(95)),
      cmd.delete(at(96)),
    ])) {
      expect(parseCronJobEvent(event)).toEqual(event);
    }
  });
});

// ─── DST, on explicit dates in America/New_York (2026-03-08 02:00 → 03:00; 2026-11-01 02:00 → 01:00) ───

function dailyJob(
  schedule: string,
  dst: { ambiguous: 'first' | 'last' | 'both'; missing: 'shift' | 'skip' },
  now: string,
) {
  return run([create({ schedule, timezone: 'America/New_York', dst, now })]);
}

/** Materializes the job's occurrences one at a time (each just after it is due) and returns their times. */
function firings(history: CronJobEvent[], count: number): string[] {
  const times: string[] = [];
  let events = [...history];
  for (let i = 0; i < count; i++) {
    const state = fold(cronJobDecider, events);
    if (state.status !== 'active' || !state.nextRunAt) break;
    const now = new Date(Date.parse(state.nextRunAt) + 1_000).toISOString();
    const emitted = cronJobDecider.decide(cmd.materialize(now), state);
    const data = emitted[0]!.data as { occurrences: { scheduledFor: string }[] };
    times.push(...data.occurrences.map((o) => o.scheduledFor));
    events = [...events, ...emitted];
  }
  return times;
}

describe('cron job decider: DST policy (explicit dates)', () => {
  const beforeSpring = '2026-03-06T12:00:00.000Z';
  const beforeFall = '2026-10-30T12:00:00.000Z';

  it('02:30 daily across the spring-forward gap: shift fires at 03:30 EDT, skip does not fire that day', () => {
    expect(
      firings(dailyJob('30 2 * * *', { ambiguous: 'first', missing: 'shift' }, beforeSpring), 3),
    ).toEqual([
      '2026-03-07T07:30:00.000Z', // 02:30 EST
      '2026-03-08T07:30:00.000Z', // 02:30 does not exist: 03:30 EDT (moved by the gap's hour)
      '2026-03-09T06:30:00.000Z', // 02:30 EDT
    ]);
    expect(firings(dailyJob('30 2 * * *', { ambiguous: 'first', missing: 'skip' }, beforeSpring), 2)).toEqual(
      ['2026-03-07T07:30:00.000Z', '2026-03-09T06:30:00.000Z'],
    );
  });

  it('01:30 daily across the fall-back overlap: first, last or both passes', () => {
    const fall = (ambiguous: 'first' | 'last' | 'both', n: number) =>
      firings(dailyJob('30 1 * * *', { ambiguous, missing: 'shift' }, beforeFall), n);
    expect(fall('first', 3)).toEqual([
      '2026-10-31T05:30:00.000Z',
      '2026-11-01T05:30:00.000Z',
      '2026-11-02T06:30:00.000Z',
    ]);
    expect(fall('last', 3)).toEqual([
      '2026-10-31T05:30:00.000Z',
      '2026-11-01T06:30:00.000Z',
      '2026-11-02T06:30:00.000Z',
    ]);
    expect(fall('both', 4)).toEqual([
      '2026-10-31T05:30:00.000Z',
      '2026-11-01T05:30:00.000Z', // 01:30 EDT
      '2026-11-01T06:30:00.000Z', // 01:30 EST, an hour later
      '2026-11-02T06:30:00.000Z',
    ]);
  });

  it('interval jobs keep their rhythm in real time by default (both passes, nothing in the gap)', () => {
    expect(isFixedTime('30 2 * * *')).toBe(true);
    expect(isFixedTime('*/20 * * * *')).toBe(false);
    expect(defaultDstPolicy('*/20 * * * *')).toEqual({ ambiguous: 'both', missing: 'skip' });
    const s = new Schedule({
      expression: '*/20 * * * *',
      timezone: 'America/New_York',
      dst: defaultDstPolicy('*/20 * * * *'),
    });
    const fall = s
      .upcoming(Date.parse('2026-11-01T05:50:00Z'), 6)
      .map((o) => [new Date(o.at).toISOString().slice(11, 16), o.kind]);
    expect(fall).toEqual([
      ['06:00', 'ambiguous-second'],
      ['06:20', 'ambiguous-second'],
      ['06:40', 'ambiguous-second'],
      ['07:00', 'regular'],
      ['07:20', 'regular'],
      ['07:40', 'regular'],
    ]);
    const spring = s
      .upcoming(Date.parse('2026-03-08T06:30:00Z'), 3)
      .map((o) => new Date(o.at).toISOString().slice(11, 16));
    expect(spring).toEqual(['06:40', '07:00', '07:20']); // 01:40 EST, then 03:00 EDT: every 20 min of real time
  });
});

// ─── catch-up and overlap ──────────────────────────────────────────────────────────────────────────

function materialized(history: CronJobEvent[], command: CronJobCommand) {
  const [event] = given(history).when(command).thenSucceeds().events;
  if (event?.type !== 'CronOccurrencesMaterialized') throw new Error('expected a materialization');
  return {
    fired: event.data.occurrences.map((o) => [o.scheduledFor, o.fate, o.late]),
    missed: event.data.missed,
    next: event.data.nextRunAt,
  };
}

describe('cron job decider: catch-up after downtime', () => {
  // Every 10 s from T0+10; the scanners come back at T0+65 (6 occurrences due: 10 … 60).
  const job = (catchUp: Record<string, unknown>) =>
    run([create({ overlap: 'allow', catchUp: { graceMs: 2_000, ...catchUp } })]);

  it('skip-missed: the late ones are missed (one record of all), only on-time ones run', () => {
    expect(materialized(job({ mode: 'skip-missed' }), cmd.materialize(at(65)))).toEqual({
      fired: [],
      missed: {
        first: at(10),
        last: at(60),
        count: 6,
        reason: 'late (skip-missed)',
        runId: runIdFor(ID, at(10), 'schedule'),
      },
      next: at(70),
    });
    // Reached 1 s after its time (within the grace): on time.
    expect(materialized(job({ mode: 'skip-missed' }), cmd.materialize(at(61))).fired).toEqual([
      [at(60), 'fired', false],
    ]);
  });

  it('run-latest: the most recent occurrence runs once, the others are missed', () => {
    const { fired, missed } = materialized(job({ mode: 'run-latest' }), cmd.materialize(at(65)));
    expect(fired).toEqual([[at(60), 'fired', true]]);
    expect(missed).toMatchObject({ first: at(10), last: at(50), count: 5 });
  });

  it('run-all: late occurrences run, at most cap of them (the most recent); the cap holds', () => {
    const { fired, missed } = materialized(job({ mode: 'run-all', cap: 3 }), cmd.materialize(at(65)));
    expect(fired).toEqual([
      [at(40), 'fired', true],
      [at(50), 'fired', true],
      [at(60), 'fired', true],
    ]);
    expect(missed).toMatchObject({
      first: at(10),
      last: at(30),
      count: 3,
      reason: 'late beyond the catch-up cap (3)',
    });
  });

  it('the window: occurrences older than it are missed in every mode', () => {
    const { fired, missed } = materialized(
      job({ mode: 'run-all', cap: 100, windowMs: 30_000 }),
      cmd.materialize(at(65)),
    );
    expect(fired.map(([t]) => t)).toEqual([at(40), at(50), at(60)]);
    expect(missed).toMatchObject({ first: at(10), last: at(30), count: 3 });
    expect(missed!.reason).toMatch(/catch-up window/);
  });

  it('a long outage is decided in bounded passes: at most maxRuns runs each, the rest stays due', () => {
    const history = job({ mode: 'run-all', cap: 1_000, windowMs: 86_400_000 });
    const [event] = given(history)
      .when({
        type: 'MaterializeDue',
        jobId: ID,
        now: at(10_005),
        activeRuns: 0,
        bufferedRuns: 0,
        maxRuns: 100,
      })
      .thenSucceeds().events;
    const data = event!.data as {
      occurrences: { scheduledFor: string }[];
      missed: unknown;
      nextRunAt: string;
    };
    // 1,000 late occurrences within the cap: the oldest 100 run now, the job stays due for the others.
    expect(data.occurrences).toHaveLength(100);
    expect(data.occurrences[0]!.scheduledFor).toBe(at(10));
    expect(data.missed).toBeNull();
    expect(data.nextRunAt).toBe(at(1_010));
  });
});

describe('cron job decider: overlap', () => {
  const job = (overlap: string) => run([create({ overlap, catchUp: { graceMs: 60_000 } })]);

  it('skip: an occurrence due while a run is active is recorded as skipped', () => {
    expect(materialized(job('skip'), cmd.materialize(at(31), 1)).fired).toEqual([
      [at(10), 'skipped-overlap', false],
      [at(20), 'skipped-overlap', false],
      [at(30), 'skipped-overlap', false],
    ]);
    expect(materialized(job('skip'), cmd.materialize(at(21), 0)).fired).toEqual([
      [at(10), 'fired', false],
      [at(20), 'skipped-overlap', false],
    ]);
  });

  it('buffer-one: one occurrence waits for the active run, further ones are skipped', () => {
    expect(materialized(job('buffer-one'), cmd.materialize(at(31), 1, 0)).fired).toEqual([
      [at(10), 'buffered', false],
      [at(20), 'skipped-overlap', false],
      [at(30), 'skipped-overlap', false],
    ]);
    expect(materialized(job('buffer-one'), cmd.materialize(at(11), 1, 1)).fired).toEqual([
      [at(10), 'skipped-overlap', false],
    ]);
  });

  it('allow: every occurrence fires', () => {
    expect(materialized(job('allow'), cmd.materialize(at(21), 5)).fired.map(([, fate]) => fate)).toEqual([
      'fired',
      'fired',
    ]);
  });
});

describe('cron job decider: backfill and trigger', () => {
  it('backfill: a run per occurrence of [from, to] not already run; to in the future or too many refused', () => {
    const [event] = given(histories.active)
      .when({ ...(cmd.backfill() as object), alreadyRun: [at(-20)] } as CronJobCommand)
      .thenSucceeds().events;
    expect(event!.data).toMatchObject({
      runs: [at(-30), at(-10), at(0)].map((scheduledFor) => ({
        scheduledFor,
        runId: runIdFor(ID, scheduledFor, 'backfill'),
      })),
      skipped: [at(-20)],
    });
    given(histories.active)
      .when({ ...(cmd.backfill(at(-5)) as object) } as CronJobCommand)
      .thenThrows(ValidationError, /future/);
    given(histories.active)
      .when({ ...(cmd.backfill() as object), maxRuns: 2 } as CronJobCommand)
      .thenThrows(ValidationError, /more than 2/);
  });

  it('trigger: a manual run at now, on an active or paused job', () => {
    expect(given(histories.paused).when(cmd.trigger()).thenSucceeds().events[0]!.data).toMatchObject({
      at: at(5),
      by: 'dave',
    });
  });
});
