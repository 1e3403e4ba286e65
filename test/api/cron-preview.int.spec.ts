/**
 * POST /v1/cron-jobs/preview over a real socket: the next fire times of an expression in a zone with the
 * DST policy the job would get (shifted out of the spring gap, first / both passes of the repeated autumn
 * hour), the same instants a created job's /upcoming lists, 422 naming `expression` or `timezone` with
 * the parser's message, 400 for the shape; a viewer may call it (a read), nobody without a key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, expectProblem, startTestApi } from './support/api.js';

let api: ApiFixture;
let operator: string;
let viewer: string;

beforeAll(async () => {
  api = await startTestApi();
  operator = await api.key('org-preview');
  viewer = await api.key('org-preview', 'viewer');
});
afterAll(async () => {
  await api?.close();
});

const preview = (body: unknown, key = operator) =>
  api.request('POST', '/v1/cron-jobs/preview', { key, body });

interface Preview {
  valid: true;
  dst: { ambiguous: string; missing: string };
  next: { at: string; local: string; wall: string; kind: string; note?: string }[];
}

describe('POST /v1/cron-jobs/preview', () => {
  it('spring gap: a fixed-time job is shifted by the gap (default), or skips the day with missing=skip', async () => {
    // Europe/Berlin, 2026-03-29: 02:00 CET → 03:00 CEST (01:00 UTC); 02:30 does not exist that night.
    const after = '2026-03-27T12:00:00Z';
    const shifted = await preview({ expression: '30 2 * * *', timezone: 'Europe/Berlin', after, count: 3 });
    expect(shifted.status, shifted.text).toBe(200);
    const body = shifted.body as Preview;
    expect(body.valid).toBe(true);
    expect(body.dst).toEqual({ ambiguous: 'first', missing: 'shift' });
    expect(body.next).toEqual([
      {
        at: '2026-03-28T01:30:00.000Z',
        local: '2026-03-28T02:30:00+01:00',
        wall: '2026-03-28T02:30:00',
        kind: 'regular',
      },
      {
        at: '2026-03-29T01:30:00.000Z',
        local: '2026-03-29T03:30:00+02:00',
        wall: '2026-03-29T02:30:00',
        kind: 'shifted',
        note: 'dst-shifted',
      },
      {
        at: '2026-03-30T00:30:00.000Z',
        local: '2026-03-30T02:30:00+02:00',
        wall: '2026-03-30T02:30:00',
        kind: 'regular',
      },
    ]);

    const skipped = await preview({
      expression: '30 2 * * *',
      timezone: 'Europe/Berlin',
      dst: { ambiguous: 'first', missing: 'skip' },
      after,
      count: 2,
    });
    expect(skipped.status, skipped.text).toBe(200);
    expect((skipped.body as Preview).next.map((o) => o.at)).toEqual([
      '2026-03-28T01:30:00.000Z',
      '2026-03-30T00:30:00.000Z',
    ]);
  });

  it('autumn repeat: the first pass by default for a fixed time, both passes with ambiguous=both', async () => {
    // Europe/Berlin, 2026-10-25: 03:00 CEST → 02:00 CET (01:00 UTC); 02:30 happens twice.
    const after = '2026-10-24T12:00:00Z';
    const first = await preview({ expression: '30 2 * * *', timezone: 'Europe/Berlin', after, count: 2 });
    expect(first.status, first.text).toBe(200);
    expect((first.body as Preview).next.map((o) => [o.at, o.local, o.note])).toEqual([
      ['2026-10-25T00:30:00.000Z', '2026-10-25T02:30:00+02:00', 'dst-repeated-first'],
      ['2026-10-26T01:30:00.000Z', '2026-10-26T02:30:00+01:00', undefined],
    ]);
    const both = await preview({
      expression: '30 2 * * *',
      timezone: 'Europe/Berlin',
      dst: { ambiguous: 'both', missing: 'shift' },
      after,
      count: 2,
    });
    expect((both.body as Preview).next.map((o) => [o.local, o.note])).toEqual([
      ['2026-10-25T02:30:00+02:00', 'dst-repeated-first'],
      ['2026-10-25T02:30:00+01:00', 'dst-repeated-second'],
    ]);
    // An interval job keeps its rhythm: both passes of the repeated hour by default.
    const hourly = await preview({
      expression: '0 * * * *',
      timezone: 'Europe/Berlin',
      after: '2026-10-24T23:30:00Z',
      count: 4,
    });
    expect((hourly.body as Preview).dst).toEqual({ ambiguous: 'both', missing: 'skip' });
    expect((hourly.body as Preview).next.map((o) => o.local)).toEqual([
      '2026-10-25T02:00:00+02:00',
      '2026-10-25T02:00:00+01:00',
      '2026-10-25T03:00:00+01:00',
      '2026-10-25T04:00:00+01:00',
    ]);
  });

  it('lists from now (database time) the same instants a job created with the schedule will fire at', async () => {
    const schedule = { expression: '30 2 * * *', timezone: 'America/New_York' };
    const r = await preview({ ...schedule, count: 10 });
    expect(r.status, r.text).toBe(200);
    const created = await api.request('POST', '/v1/cron-jobs', {
      key: operator,
      body: {
        name: 'preview twin',
        schedule: schedule.expression,
        timezone: schedule.timezone,
        jobType: 'ping',
        payload: { url: 'https://example.com/health' },
      },
    });
    expect(created.status, created.text).toBe(201);
    const upcoming = await api.request('GET', `/v1/cron-jobs/${created.body.jobId}/upcoming?count=10`, {
      key: operator,
    });
    expect(upcoming.status).toBe(200);
    expect((r.body as Preview).next.map((o) => o.at)).toEqual(
      upcoming.body.occurrences.map((o: { at: string }) => o.at),
    );
    expect(created.body.nextRunAt).toBe((r.body as Preview).next[0]!.at);
    // Five by default.
    const five = await preview(schedule);
    expect((five.body as Preview).next).toHaveLength(5);
  });

  it("422 naming expression or timezone with the parser's message; 400 for the shape", async () => {
    const bad = await preview({ expression: 'every minute', timezone: 'UTC' });
    expectProblem(bad, 422, 'expression');
    expect(bad.body.detail).toContain("invalid cron expression 'every minute'");
    const range = await preview({ expression: '61 * * * *', timezone: 'UTC' });
    expectProblem(range, 422, 'expression');
    expect(range.body.errors[0].message).toMatch(/invalid cron expression '61 \* \* \* \*': .+/);
    expectProblem(await preview({ expression: '0 * * * *', timezone: 'Mars/Olympus' }), 422, 'timezone');
    // 30 February parses but never fires: refused by the preview and by the create alike.
    const never = await preview({ expression: '0 0 30 2 *', timezone: 'UTC' });
    expectProblem(never, 422, 'expression');
    expect(never.body.detail).toContain('never fires');
    const created = await api.request('POST', '/v1/cron-jobs', {
      key: operator,
      body: {
        name: 'never',
        schedule: '0 0 31 4 *',
        timezone: 'UTC',
        jobType: 'ping',
        payload: { url: 'https://example.com/' },
      },
    });
    expectProblem(created, 422, 'schedule');
    expectProblem(await preview({ expression: '', timezone: 'UTC' }), 400, 'expression');
    expectProblem(await preview({ expression: '0 * * * *', timezone: 'UTC', count: 0 }), 400, 'count');
    expectProblem(
      await preview({
        expression: '0 * * * *',
        timezone: 'UTC',
        dst: { ambiguous: 'sometimes', missing: 'skip' },
      }),
      400,
    );
    expectProblem(await preview({ expression: '0 * * * *', timezone: 'UTC', schedule: 'x' }), 400);
  });

  it('a viewer may preview (a read); without a key it is 401', async () => {
    const r = await preview({ expression: '*/15 * * * *', timezone: 'UTC', count: 2 }, viewer);
    expect(r.status, r.text).toBe(200);
    expect((r.body as Preview).next).toHaveLength(2);
    const anonymous = await api.request('POST', '/v1/cron-jobs/preview', {
      body: { expression: '*/15 * * * *', timezone: 'UTC' },
    });
    expect(anonymous.status).toBe(401);
  });
});
