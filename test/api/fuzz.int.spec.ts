/**
 * Property-based fuzzing of every `/v1` route (fast-check) over a real socket: arbitrary and
 * nearly-valid bodies built around the routes' input schemas, malformed JSON, bodies over the size
 * limit, other content types, random bytes in path parameters and query strings. The property: never
 * a 5xx, and never a half-written command — afterwards every stream folds to its state row (verify is
 * green), no row lacks its events, and every event has exactly the outbox rows its aggregate says it
 * causes.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readStream } from '../../src/adapters/postgres/event-queries.js';
import { campaignAggregate } from '../../src/aggregates/campaign/descriptor.js';
import { cronJobAggregate } from '../../src/aggregates/cron/job-descriptor.js';
import { jobRunAggregate } from '../../src/aggregates/cron/run-descriptor.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import {
  actionSignalAggregate,
  scheduledActionAggregate,
} from '../../src/aggregates/scheduled-action/descriptor.js';
import type { AggregateDescriptor } from '../../src/eventstore/aggregate.js';
import { verifyStates } from '../../src/projections/verify.js';
import { type ApiFixture, dbTime, lineCampaignBody, startTestApi } from './support/api.js';
import { checkConformance } from './support/conformance.js';

let api: ApiFixture;
let operator: string;
let admin: string;
const ids: Record<string, string[]> = { campaign: [], action: [], job: [], run: [], outbox: [] };

beforeAll(async () => {
  api = await startTestApi({ HERALD_API_BODY_LIMIT_BYTES: '65536' });
  operator = await api.key('org-fuzz', 'operator');
  admin = await api.key('org-fuzz', 'admin');
  for (let i = 0; i < 3; i++) {
    const c = await api.request('POST', '/v1/campaigns', {
      key: operator,
      body: lineCampaignBody({ startAt: await dbTime(api.t, 3600) }),
    });
    ids.campaign!.push(c.body.campaignId);
    const a = await api.request('POST', '/v1/actions', {
      key: operator,
      body: { mode: 'normal', actionType: 'x', actionConfig: {}, delaySeconds: 3600 },
    });
    ids.action!.push(a.body.actionId);
    const j = await api.request('POST', '/v1/cron-jobs', {
      key: operator,
      body: {
        name: `fuzz ${i}`,
        schedule: '0 * * * *',
        timezone: 'UTC',
        jobType: 'ping',
        payload: { url: 'https://example.com' },
      },
    });
    ids.job!.push(j.body.jobId);
    const r = await api.request('POST', `/v1/cron-jobs/${j.body.jobId}/trigger`, { key: operator });
    ids.run!.push(r.body.runId);
  }
  const { rows } = await api.t.db.query<{ id: number }>('select id from outbox order by id limit 3');
  ids.outbox = rows.map((r) => String(r.id));
});
afterAll(async () => {
  await api?.close();
});

/** Nearly valid bodies per route: the fuzzer replaces, drops and adds fields of these. */
const templates = (): Record<string, Record<string, unknown>> => ({
  '/v1/campaigns': lineCampaignBody({ startAt: new Date(Date.now() + 3_600_000).toISOString() }),
  '/v1/campaigns/:id/schedule': { startAt: new Date(Date.now() + 3_600_000).toISOString() },
  '/v1/campaigns/:id/reschedule': {
    startAt: new Date(Date.now() + 7_200_000).toISOString(),
    dispatchDeadline: null,
  },
  '/v1/campaigns/:id/cancel': { reason: 'fuzz' },
  '/v1/actions': {
    mode: 'waitForSignal',
    actionType: 'x',
    actionConfig: {},
    expiresSeconds: 60,
    wait: { names: ['clicked'], correlationKey: 'k' },
  },
  '/v1/actions/:id/cancel': { reason: 'fuzz' },
  '/v1/actions/:id/fire': { reason: 'fuzz' },
  '/v1/actions/:id/reschedule': { executeAt: new Date(Date.now() + 3_600_000).toISOString() },
  '/v1/signals': { correlationKey: 'k', name: 'clicked', payload: {} },
  '/v1/subjects/:subjectId': { attributes: { a: 1 } },
  '/v1/cron-jobs': {
    name: 'n',
    schedule: '*/5 * * * *',
    timezone: 'UTC',
    jobType: 'ping',
    payload: { url: 'https://example.com' },
  },
  '/v1/cron-jobs/:id': { schedule: '0 0 * * *' },
  '/v1/cron-jobs/:id/pause': { reason: 'fuzz' },
  '/v1/cron-jobs/:id/backfill': {
    from: new Date(Date.now() - 7_200_000).toISOString(),
    to: new Date(Date.now() - 60_000).toISOString(),
  },
  '/v1/outbox/:id/skip': { reason: 'fuzz' },
  '/v1/api-keys': { role: 'viewer', name: 'fuzz' },
});

const json = fc.jsonValue({ maxDepth: 3 });
const weird = fc.oneof(
  json,
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.constantFrom(
    '',
    ' ',
    '0',
    '-1',
    'null',
    'true',
    '1e309',
    '2026-13-45T99:99:99Z',
    '\u0000',
    '%00',
    '../',
  ),
  fc.integer(),
  fc.double(),
);
const percentEncoded = fc
  .uint8Array({ minLength: 1, maxLength: 40 })
  .map((bytes) => [...bytes].map((b) => `%${b.toString(16).padStart(2, '0')}`).join(''));

function bodyFor(url: string) {
  const template = templates()[url];
  const mutated = template
    ? fc
        .tuple(
          fc.subarray(Object.keys(template)),
          fc.dictionary(
            fc.constantFrom(...Object.keys(template), 'extra', 'organizationId', '__proto__'),
            weird,
            { maxKeys: 3 },
          ),
        )
        .map(([kept, replaced]) => ({
          ...Object.fromEntries(kept.map((k) => [k, template[k]])),
          ...replaced,
        }))
    : json;
  return fc.oneof(
    { weight: 4, arbitrary: mutated.map((value) => ({ kind: 'json' as const, value })) },
    { weight: 1, arbitrary: json.map((value) => ({ kind: 'json' as const, value })) },
    {
      weight: 1,
      arbitrary: fc
        .string({ unit: 'binary', maxLength: 200 })
        .map((text) => ({ kind: 'raw' as const, text, type: 'application/json' })),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          fc.constantFrom(
            'text/plain',
            'application/xml',
            'application/x-www-form-urlencoded',
            'multipart/form-data',
            'image/png',
          ),
          fc.string({ maxLength: 50 }),
        )
        .map(([type, text]) => ({ kind: 'raw' as const, text, type })),
    },
    { weight: 1, arbitrary: fc.constant({ kind: 'huge' as const }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'none' as const }) },
  );
}

function paramFor(name: string, url: string) {
  const known =
    name === 'subjectId'
      ? ['customer-1']
      : url.startsWith('/v1/campaigns')
        ? ids.campaign!
        : url.startsWith('/v1/actions')
          ? ids.action!
          : url.startsWith('/v1/cron-runs')
            ? ids.run!
            : url.startsWith('/v1/cron-jobs')
              ? ids.job!
              : url.startsWith('/v1/outbox')
                ? ids.outbox!
                : [crypto.randomUUID()];
  return fc.oneof(
    fc.constantFrom(...known),
    fc.uuid(),
    percentEncoded,
    fc.string({ maxLength: 20 }).map(encodeURIComponent),
    fc.constantFrom('0', '-1', '99999999999999999999', '1e3', '%', '%zz', '..', ' '),
  );
}

const query = fc.dictionary(
  fc.constantFrom(
    'limit',
    'cursor',
    'status',
    'from',
    'to',
    'dryRun',
    'includeDeleted',
    'count',
    'channel',
    'x',
  ),
  fc.oneof(
    fc.string({ maxLength: 20 }),
    percentEncoded,
    fc.constantFrom('true', '0', '500', '501', 'DRAFT', '2026-01-01T00:00:00Z'),
  ),
  { maxKeys: 3 },
);

type FuzzBody =
  | { kind: 'json'; value: unknown }
  | { kind: 'raw'; text: string; type: string }
  | { kind: 'huge' }
  | { kind: 'none' };

async function send(
  method: string,
  path: string,
  body: FuzzBody,
  key: string,
  idempotencyKey: string | undefined,
) {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (idempotencyKey) headers['idempotency-key'] = idempotencyKey;
  let payload: string | undefined;
  if (body.kind === 'json') {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(body.value) ?? 'null';
  } else if (body.kind === 'raw') {
    headers['content-type'] = body.type;
    payload = body.text;
  } else if (body.kind === 'huge') {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify({ name: 'x'.repeat(70_000) });
  }
  const noBody = method === 'GET' || method === 'HEAD';
  const response = await fetch(`${api.url}${path}`, {
    method,
    headers,
    ...(payload !== undefined && !noBody ? { body: payload } : {}),
  });
  const text = await response.text();
  // Whatever the input, the answer is one the document describes.
  await checkConformance(api.url, {
    method,
    path,
    status: response.status,
    contentType: response.headers.get('content-type'),
    text,
  });
  return { status: response.status, text };
}

describe('fuzzing every /v1 route', () => {
  it('never answers 5xx, and leaves no half-written command', async () => {
    // The live stream never ends (test/api/stream.int.spec.ts covers it).
    const routes = api.server.app.heraldRoutes.filter(
      (r) => r.url.startsWith('/v1') && r.method !== 'HEAD' && r.url !== '/v1/stream',
    );
    expect(routes.length).toBeGreaterThan(40);
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...routes).chain((route) => {
          const names = [...route.url.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]!);
          return fc.record({
            route: fc.constant(route),
            params: fc.tuple(...names.map((n) => paramFor(n, route.url))),
            names: fc.constant(names),
            query,
            body: bodyFor(route.url),
            idempotencyKey: fc.option(fc.constantFrom('fz-1', 'fz-2', 'fz-3'), { nil: undefined }),
          });
        }),
        async ({ route, params, names, query: q, body, idempotencyKey }) => {
          let path = route.url;
          names.forEach((n, i) => {
            path = path.replace(`:${n}`, String(params[i]));
          });
          const search = Object.entries(q)
            .map(([k, v]) => `${k}=${v}`)
            .join('&');
          const reply = await send(
            route.method,
            `${path}${search ? `?${search}` : ''}`,
            body,
            route.url.startsWith('/v1/api-keys') ? admin : operator,
            idempotencyKey,
          ).catch((error: unknown) => ({ status: 0, text: String(error) }));
          statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
          if (reply.status >= 500 || reply.status === 0) {
            throw new Error(
              `${route.method} ${path}?${search} → ${reply.status}: ${reply.text.slice(0, 500)}`,
            );
          }
        },
      ),
      { numRuns: 1_500, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31) },
    );
    if (process.env.FUZZ_STATS) process.stdout.write(`statuses: ${JSON.stringify([...statuses].sort())}\n`);
    // The fuzzer reached the handlers, not only the validators.
    expect(statuses.get(200) ?? 0).toBeGreaterThan(0);
    expect(statuses.get(400) ?? 0).toBeGreaterThan(0);
    expect(statuses.get(413) ?? 0).toBeGreaterThan(0);
    expect(statuses.get(415) ?? 0).toBeGreaterThan(0);

    const report = await verifyStates(api.t.db, heraldRegistry);
    expect(report.drifts).toEqual([]);
    expect(report.streams).toBeGreaterThan(10);
    await expectOutboxRowsOfEveryEvent();
  });
});

/** Every event has exactly the outbox rows its aggregate's `messagesFor` says it causes. */
async function expectOutboxRowsOfEveryEvent() {
  const descriptors = [
    campaignAggregate,
    scheduledActionAggregate,
    actionSignalAggregate,
    cronJobAggregate,
    jobRunAggregate,
  ] as readonly AggregateDescriptor<unknown, unknown, { type: string; data: unknown }>[];
  const { rows } = await api.t.db.query<{ event_position: number; n: number }>(
    'select event_position, count(*)::int as n from outbox group by event_position',
  );
  const actual = new Map(rows.map((r) => [Number(r.event_position), r.n]));
  let checked = 0;
  for (const descriptor of descriptors) {
    const { rows: streams } = await api.t.db.query<{ stream_id: string }>(
      'select distinct stream_id from event where stream_type = $1',
      [descriptor.streamType],
    );
    for (const { stream_id } of streams) {
      let state = descriptor.decider.initialState();
      for (const stored of await readStream(api.t.db, descriptor.streamType, stream_id)) {
        const event = descriptor.stateTable.parseEvent(stored);
        state = descriptor.decider.evolve(state, event);
        const expected =
          descriptor.messagesFor?.({ streamId: stream_id, event, state, version: stored.version })?.length ??
          0;
        expect(
          actual.get(stored.position) ?? 0,
          `${descriptor.streamType}/${stream_id} v${stored.version} ${stored.type}`,
        ).toBe(expected);
        checked++;
      }
    }
  }
  expect(checked).toBeGreaterThan(20);
}
