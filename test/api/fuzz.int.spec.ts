/**
 * Property-based fuzzing (fast-check) of EVERY operation the served `/openapi.json` lists, over a real
 * socket, with admin and viewer keys (issue 23, item 2). The operation list comes from the document, and
 * the test asserts it covered exactly the document's operations (and that the document lists every
 * documented route the server registered), so a new route cannot escape. Each operation with a request
 * body has a valid template here (the test fails naming any that lacks one); the fuzzer starts from it
 * and mutates it — drops, duplicates and retypes fields, puts hostile values anywhere in it: lone
 * surrogates, NUL, nesting past the limits, boundary and out-of-range instants (year 0000, 1969, 10000,
 * huge offsets), huge numbers (1e308, 1e400, -0, 2^53+1, big integers as strings), prototype-pollution
 * keys — or sends bytes that are not UTF-8, malformed JSON, other content types, a body over the limit.
 * Path and query parameters come from the document's parameter schemas: valid values, their boundaries
 * and hostile ones.
 *
 * The property, per answer: never a 5xx (nor a dropped connection), and every 4xx is a problem document
 * that names a field or a reason —
 *  - `content-type: application/problem+json`, a JSON body whose `status` is the answer's status, whose
 *    `type` is `urn:herald:problem:<kind>` (not `about:blank`) and whose `title` is not empty; and
 *  - it names a field: `errors` is a non-empty list whose every entry has a non-empty `field` and
 *    `message`; or it names a reason: a non-empty `detail` and a machine-readable `code`
 *    (`[A-Z][A-Z0-9_]*`, src/errors.ts or the HTTP layer's). A 422 and an `invalid-request` 400 (a
 *    schema refused the request) must name a field; a 405 must carry `Allow`.
 * Afterwards nothing is half-written: every stream folds to its state row (verify is green), and every
 * event has exactly the outbox rows its aggregate says it causes.
 *
 * Bounded for CI by HERALD_FUZZ_RUNS (default 1,000 runs over all operations, about 13 each: seconds);
 * `npm run fuzz:api` runs it long (HERALD_FUZZ_RUNS=50000). FUZZ_SEED replays a run; FUZZ_STATS=1
 * prints the statuses per operation.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readStream } from '../../src/adapters/postgres/event-queries.js';
import { campaignAggregate } from '../../src/aggregates/campaign/descriptor.js';
import { PostgresLedger } from '../../src/aggregates/campaign/sms/billing.js';
import { cronJobAggregate } from '../../src/aggregates/cron/job-descriptor.js';
import { jobRunAggregate } from '../../src/aggregates/cron/run-descriptor.js';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import {
  actionSignalAggregate,
  scheduledActionAggregate,
} from '../../src/aggregates/scheduled-action/descriptor.js';
import { createApiKey } from '../../src/api/auth.js';
import type { AggregateDescriptor } from '../../src/eventstore/aggregate.js';
import { verifyStates } from '../../src/projections/verify.js';
import { inlineRequest } from '../support/sms.js';
import { type ApiFixture, dbTime, lineCampaignBody, startTestApi } from './support/api.js';
import { checkConformance } from './support/conformance.js';

const RUNS = Number(process.env.HERALD_FUZZ_RUNS ?? 1_000);
const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
const ORG = 'org-fuzz';

let api: ApiFixture;
let admin: string;
let viewer: string;
// biome-ignore lint/suspicious/noExplicitAny: the served document, read field by field
let document: any;
/** Known resources per path parameter (the fuzzer also sends random and hostile ones). */
const known: Record<string, string[]> = {
  campaign: [],
  action: [],
  job: [],
  run: [],
  outbox: [],
  apiKey: [],
  lineOaId: ['oa-fz', 'oa-1'],
  audienceId: ['aud-fz', 'aud-1'],
  subjectId: ['customer-1'],
};

beforeAll(async () => {
  api = await startTestApi({
    HERALD_API_BODY_LIMIT_BYTES: '65536',
    // The garbled Authorization headers would block this address after 20 (ADR 0029), and every later
    // request would be the throttle's 429 instead of a route's answer: the throttle has its own tests.
    HERALD_API_AUTH_FAILURE_LIMIT: '0',
  });
  admin = await api.key(ORG, 'admin');
  viewer = await api.key(ORG, 'viewer');
  await new PostgresLedger(api.t.db).credit({ organizationId: ORG, key: 'fuzz-top-up', amount: '100000' });
  await api.lineChannel(ORG, 'oa-fz');
  await api.request('POST', '/v1/line/audiences', {
    key: admin,
    body: { audienceId: 'aud-fz', name: 'fuzz audience' },
  });
  for (let i = 0; i < 3; i++) {
    const c = await api.request('POST', '/v1/campaigns', {
      key: admin,
      body: lineCampaignBody({ startAt: await dbTime(api.t, 3600) }),
    });
    known.campaign!.push(c.body.campaignId);
    const a = await api.request('POST', '/v1/actions', {
      key: admin,
      body: { mode: 'normal', actionType: 'x', actionConfig: {}, delaySeconds: 3600 },
    });
    known.action!.push(a.body.actionId);
    const j = await api.request('POST', '/v1/cron-jobs', {
      key: admin,
      body: {
        name: `fuzz ${i}`,
        schedule: '0 * * * *',
        timezone: 'UTC',
        jobType: 'ping',
        payload: { url: 'https://example.com' },
      },
    });
    known.job!.push(j.body.jobId);
    const r = await api.request('POST', `/v1/cron-jobs/${j.body.jobId}/trigger`, { key: admin });
    known.run!.push(r.body.runId);
    // Keys the fuzzer may revoke (never its own).
    const spare = await createApiKey(api.t.db, { organizationId: ORG, role: 'viewer', createdBy: 'fuzz' });
    known.apiKey!.push(spare.record.id);
  }
  const sms = await api.request('POST', '/v1/campaigns', {
    key: admin,
    body: { channel: 'sms', ...inlineRequest() },
  });
  if (sms.body?.campaignId) known.campaign!.push(sms.body.campaignId);
  const { rows } = await api.t.db.query<{ id: number }>('select id from outbox order by id limit 3');
  known.outbox = rows.map((r) => String(r.id));
  document = (await api.request('GET', '/openapi.json')).body;
});
afterAll(async () => {
  await api?.close();
});

// --- hostile values ------------------------------------------------------------------------------

/**
 * JSON text written as is where a value stands: tokens JSON.stringify cannot make (`-0`, `1e400`,
 * `9007199254740993`) and nesting thousands of levels deep (kept as text, so that neither the generator
 * nor fast-check's report of a counterexample recurses through it). A value is the placeholder
 * `\u0001raw:<index>\u0001`, replaced by the text when the body is written.
 */
const rawTexts: string[] = [];
const RAW = '\u0001raw:';
const rawToken = (text: string) => `${RAW}${rawTexts.push(text) - 1}\u0001`;
/** An object key written twice: `{"name":…,"name":…}` (JSON.parse keeps the last). */
const DUP = '\u0001dup:';

/** The body as JSON text, raw texts and duplicated keys written out. */
function toJson(value: unknown): string {
  return (JSON.stringify(value) ?? 'null')
    .replace(/"\\u0001raw:(\d+)\\u0001"/g, (_, index: string) => rawTexts[Number(index)]!)
    .replaceAll('"\\u0001dup:', '"');
}

/** `{"a":{"a":…1}}`, `[[…"x"]]` or `{"and":[{"and":[…{"==":[1,1]}]}]}` (a JSON Logic condition), as text. */
const nestedObject = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
const nestedArray = (levels: number) => `${'['.repeat(levels)}"x"${']'.repeat(levels)}`;
const nestedCondition = (levels: number) => `${'{"and":['.repeat(levels)}{"==":[1,1]}${']}'.repeat(levels)}`;

const hostileStrings = [
  'x\ud800',
  '\udc00',
  '\udc00\ud800',
  'a\u0000b',
  '',
  ' ',
  '\u202eevil',
  '\ufeff',
  'x'.repeat(5_000),
  '🎉'.repeat(300),
  '../../etc/passwd',
  '%00',
  '{{name}}',
  "'; drop table campaign; --",
  '<script>alert(1)</script>',
  '0 0 30 2 *',
  '* * * * * * *',
  'Mars/Olympus_Mons',
];
const hostileInstants = [
  '0000-01-01T00:00:00Z',
  '0000-12-31T23:59:59+00:00',
  '1969-12-31T23:59:59Z',
  '1970-01-01T00:00:00Z',
  '9999-12-31T23:59:59.999Z',
  '10000-01-01T00:00:00Z',
  '+010000-01-01T00:00:00Z',
  '-000001-01-01T00:00:00Z',
  '+275760-09-13T00:00:00Z',
  '2026-02-30T00:00:00Z',
  '2026-01-01T24:00:00Z',
  '2026-12-31T23:59:60Z',
  '2026-01-01T00:00:00+23:59',
  '2026-01-01T00:00:00-23:59',
  '2026-01-01T00:00:00+99:99',
  '9999-12-31T23:59:59-23:59',
  '0001-01-01T00:00:00+23:59',
  '2026-01-01',
  '2026-01-01T00:00:00',
];
const hostileNumbers = [
  rawToken('1e308'),
  rawToken('-1e308'),
  rawToken('1e400'),
  rawToken('-1e400'),
  rawToken('-0'),
  rawToken('1e-400'),
  rawToken('9007199254740993'),
  rawToken('-9007199254740993'),
  rawToken('123456789012345678901234567890'),
  rawToken('0.1e1'),
  2_147_483_648,
  -2_147_483_649,
  0,
  -1,
  1.5,
  '99999999999999999999',
  '9007199254740993',
  '1e308',
  '-0',
  'NaN',
  'Infinity',
];
const hostileNesting = [
  nestedObject(64),
  nestedObject(65),
  nestedObject(10_000),
  nestedArray(5_000),
  nestedCondition(31),
  nestedCondition(33),
  nestedCondition(3_000),
].map(rawToken);
const hostile = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom<unknown>(...hostileStrings) },
  { weight: 3, arbitrary: fc.constantFrom<unknown>(...hostileInstants) },
  { weight: 3, arbitrary: fc.constantFrom<unknown>(...hostileNumbers) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(...hostileNesting) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, true, false, [], {}, [[]], { '': '' }) },
);

// --- valid bodies ------------------------------------------------------------------------------------

const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString();
const cronJob = () => ({
  name: 'n',
  schedule: '*/5 * * * *',
  timezone: 'UTC',
  jobType: 'ping',
  payload: { url: 'https://example.com' },
});
const bulkMeta = () => ({
  name: 'fuzz upload',
  messageType: 'PROMOTIONAL',
  lang: 'bn',
  campaignId: 'BTRC-FUZZ-1',
  templateType: 'GENERIC',
  template: 'বৈশাখী অফার!',
});

/** A valid body per operation with a request body (`METHOD /path` as the document spells them). */
const templates: Record<string, () => Record<string, unknown>> = {
  'POST /v1/campaigns': () => lineCampaignBody({ startAt: inAnHour() }),
  'PATCH /v1/campaigns/{id}': () => ({ name: 'renamed', castType: 'broadcast' }),
  'POST /v1/campaigns/{id}/schedule': () => ({ startAt: inAnHour() }),
  'POST /v1/campaigns/{id}/pause': () => ({ reason: 'fuzz' }),
  'POST /v1/campaigns/{id}/resume': () => ({}),
  'POST /v1/campaigns/{id}/reschedule': () => ({
    startAt: new Date(Date.now() + 7_200_000).toISOString(),
    dispatchDeadline: null,
  }),
  'POST /v1/campaigns/{id}/cancel': () => ({ reason: 'fuzz' }),
  'POST /v1/campaigns/{id}/resend': () => ({ reason: 'fuzz' }),
  'POST /v1/campaigns/preview': () => ({ ...inlineRequest() }),
  'POST /v1/campaigns/bulk': bulkMeta,
  'POST /v1/line/channels': () => ({ lineOaId: 'oa-new', channelId: 'ch-new', channelAccessToken: 't' }),
  'POST /v1/line/audiences': () => ({ audienceId: 'aud-new', name: 'n' }),
  'POST /v1/line/audiences/{audienceId}/members': () => ({ userIds: [`U${'a'.repeat(32)}`] }),
  'POST /v1/actions': () => ({
    mode: 'waitForSignal',
    actionType: 'x',
    actionConfig: { nested: { list: [1, 'two'] } },
    expiresSeconds: 60,
    wait: { names: ['clicked'], correlationKey: 'k' },
    condition: { '==': [{ var: 'payload.a' }, 1] },
  }),
  'POST /v1/actions/{id}/cancel': () => ({ reason: 'fuzz' }),
  'POST /v1/actions/{id}/fire': () => ({ reason: 'fuzz' }),
  'POST /v1/actions/{id}/reschedule': () => ({ executeAt: inAnHour() }),
  'POST /v1/signals': () => ({ correlationKey: 'k', name: 'clicked', payload: { a: 1 } }),
  'PUT /v1/subjects/{subjectId}': () => ({ attributes: { a: 1, tier: 'gold' } }),
  'POST /v1/cron-jobs': cronJob,
  'POST /v1/cron-jobs/preview': () => ({ expression: '*/5 * * * *', timezone: 'Asia/Dhaka', count: 5 }),
  'PATCH /v1/cron-jobs/{id}': () => ({ schedule: '0 0 * * *', timezone: 'Asia/Tokyo' }),
  'POST /v1/cron-jobs/{id}/pause': () => ({ reason: 'fuzz' }),
  'POST /v1/cron-jobs/{id}/backfill': () => ({
    from: new Date(Date.now() - 7_200_000).toISOString(),
    to: new Date(Date.now() - 60_000).toISOString(),
  }),
  'POST /v1/outbox/{id}/skip': () => ({ reason: 'fuzz' }),
  'POST /v1/outbox/requeue': () => ({ ids: known.outbox!.map(Number) }),
  'POST /v1/outbox/skip': () => ({ ids: known.outbox!.map(Number), reason: 'fuzz' }),
  'POST /v1/api-keys': () => ({ role: 'viewer', name: 'fuzz' }),
  'POST /v1/session': () => ({ apiKey: viewer }),
};

// --- mutations ---------------------------------------------------------------------------------------

type Path = (string | number)[];

/** Every path in `value` (containers and leaves), the root excluded. */
function pathsOf(value: unknown, at: Path = [], into: Path[] = []): Path[] {
  if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      const path = [...at, Array.isArray(value) ? Number(key) : key];
      into.push(path);
      if (path.length < 6) pathsOf(item, path, into);
    }
  }
  return into;
}

const clone = <T>(value: T): T => structuredClone(value);

function valueAt(root: unknown, path: Path): unknown {
  let node = root;
  for (const step of path) {
    if (!node || typeof node !== 'object') return undefined;
    node = (node as Record<string | number, unknown>)[step];
  }
  return node;
}

function parentOf(root: unknown, path: Path): Record<string | number, unknown> | undefined {
  let node = root as Record<string | number, unknown>;
  for (const step of path.slice(0, -1)) {
    node = node?.[step] as Record<string | number, unknown>;
    if (!node || typeof node !== 'object') return undefined;
  }
  return node;
}

type Mutation =
  | { op: 'replace'; pick: number; value: unknown }
  | { op: 'drop'; pick: number }
  | { op: 'duplicate'; pick: number; value: unknown }
  | { op: 'add'; pick: number; key: string; value: unknown };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({ op: fc.constant('replace' as const), pick: fc.nat(), value: hostile }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('drop' as const), pick: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('duplicate' as const), pick: fc.nat(), value: hostile }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('add' as const),
      pick: fc.nat(),
      key: fc.constantFrom('extra', 'organizationId', '__proto__', 'constructor', 'x\ud800', 'a\u0000'),
      value: fc.oneof(hostile, fc.constant({ prototype: { polluted: true } })),
    }),
  },
);

function mutate(template: Record<string, unknown>, mutations: Mutation[]): unknown {
  const body = clone(template);
  for (const m of mutations) {
    const paths = pathsOf(body);
    if (m.op === 'add') {
      const objects = [[], ...paths].filter((p) => {
        const v = valueAt(body, p);
        return v !== null && typeof v === 'object' && !Array.isArray(v);
      });
      const target = valueAt(body, objects[m.pick % objects.length]!) as object;
      // An own property even for __proto__ (an object literal would set the prototype instead).
      Object.defineProperty(target, m.key, {
        value: clone(m.value),
        enumerable: true,
        writable: true,
        configurable: true,
      });
      continue;
    }
    if (paths.length === 0) continue;
    const path = paths[m.pick % paths.length]!;
    const parent = parentOf(body, path);
    if (!parent) continue;
    const last = path.at(-1)!;
    if (m.op === 'replace') parent[last] = clone(m.value);
    else if (m.op === 'drop') {
      if (Array.isArray(parent)) parent.splice(Number(last), 1);
      else delete parent[last];
    } else if (!Array.isArray(parent)) parent[`${DUP}${String(last)}`] = clone(m.value);
  }
  return body;
}

// --- requests ----------------------------------------------------------------------------------------

type FuzzBody =
  | { kind: 'json'; value: unknown }
  | { kind: 'bytes'; bytes: Uint8Array; type: string }
  | { kind: 'multipart'; meta: string | undefined; file: Uint8Array | undefined; fileFirst: boolean }
  | { kind: 'huge' }
  | { kind: 'none' };

const utf8 = (text: string) => new TextEncoder().encode(text);

/** The template's JSON with random bytes (often not UTF-8) spliced in, or cut short. */
const brokenJson = (template: () => unknown) =>
  fc.tuple(fc.nat(), fc.uint8Array({ minLength: 1, maxLength: 6 }), fc.boolean()).map(([at, junk, cut]) => {
    const text = utf8(toJson(template()));
    const i = at % (text.length + 1);
    const bytes = cut ? text.slice(0, i) : new Uint8Array([...text.slice(0, i), ...junk, ...text.slice(i)]);
    return { kind: 'bytes' as const, bytes, type: 'application/json' };
  });

const csvFiles = fc.oneof(
  fc
    .constantFrom(
      '\uFEFFmsisdn\n01712345678\n01812345678\n',
      'msisdn\n"01712345678\n',
      '01712345678,"unbalanced\n',
      '',
      `msisdn\n${'01712345678\n'.repeat(50)}`,
      'msisdn\nx\ud800\n',
    )
    .map(utf8),
  fc.uint8Array({ maxLength: 200 }),
);

function bodyFor(method: string, key: string) {
  if (method === 'GET' || method === 'DELETE') return fc.constant<FuzzBody>({ kind: 'none' });
  const template = templates[key];
  if (key === 'POST /v1/campaigns/bulk') {
    return fc
      .record({
        meta: fc.option(
          fc.oneof(
            fc.constant(toJson(bulkMeta())),
            fc.array(mutation, { minLength: 1, maxLength: 3 }).map((ms) => toJson(mutate(bulkMeta(), ms))),
            fc.string({ maxLength: 40 }),
          ),
          { nil: undefined, freq: 8 },
        ),
        file: fc.option(csvFiles, { nil: undefined, freq: 8 }),
        fileFirst: fc.boolean(),
      })
      .map((parts) => ({ kind: 'multipart' as const, ...parts }));
  }
  const valid = template ?? (() => ({}));
  return fc.oneof(
    {
      weight: 6,
      arbitrary: fc
        .array(mutation, { minLength: 1, maxLength: 3 })
        .map((ms) => ({ kind: 'json' as const, value: mutate(valid(), ms) })),
    },
    { weight: 2, arbitrary: fc.constant(null).map(() => ({ kind: 'json' as const, value: valid() })) },
    { weight: 1, arbitrary: brokenJson(valid) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          fc.constantFrom(
            'text/plain',
            'application/xml',
            'application/x-www-form-urlencoded',
            'multipart/form-data',
            'application/json; charset=latin1',
            'application/problem+json',
          ),
          fc.string({ maxLength: 50 }),
        )
        .map(([type, text]) => ({ kind: 'bytes' as const, bytes: utf8(text), type })),
    },
    { weight: 1, arbitrary: fc.constant({ kind: 'huge' as const }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'none' as const }) },
  );
}

/** encodeURIComponent, a lone surrogate written as the three bytes a careless encoder makes of it (CESU-8). */
function encodeLoose(text: string): string {
  return text
    .split(/([\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF])/)
    .map((part) => {
      if (part.length === 1 && /[\uD800-\uDFFF]/.test(part)) {
        const c = part.charCodeAt(0);
        return [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)]
          .map((b) => `%${b.toString(16).toUpperCase()}`)
          .join('');
      }
      return encodeURIComponent(part);
    })
    .join('');
}

const percentEncoded = fc
  .uint8Array({ minLength: 1, maxLength: 30 })
  .map((bytes) => [...bytes].map((b) => `%${b.toString(16).padStart(2, '0')}`).join(''));
const hostileParam = fc.oneof(
  fc.uuid().map(String),
  percentEncoded,
  fc.constantFrom(...hostileStrings, ...hostileInstants).map((s) => encodeLoose(s.slice(0, 300))),
  fc.constantFrom(
    '0',
    '-1',
    '-0',
    '1e3',
    '99999999999999999999',
    '9007199254740992',
    '9007199254740993',
    '%',
    '%zz',
    '%ED%A0%80',
    '%C0%AF',
    '..',
    '%2F',
    'x'.repeat(600),
  ),
);

function pathParam(name: string, path: string, method: string) {
  const ids =
    name !== 'id'
      ? (known[name] ?? []).filter((v) => !(method === 'DELETE' && v === 'oa-1'))
      : path.startsWith('/v1/campaigns')
        ? known.campaign!
        : path.startsWith('/v1/actions')
          ? known.action!
          : path.startsWith('/v1/cron-runs')
            ? known.run!
            : path.startsWith('/v1/cron-jobs')
              ? known.job!
              : path.startsWith('/v1/outbox')
                ? known.outbox!
                : path.startsWith('/v1/api-keys')
                  ? known.apiKey!
                  : [];
  return ids.length > 0
    ? fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...ids) }, { weight: 2, arbitrary: hostileParam })
    : hostileParam;
}

// biome-ignore lint/suspicious/noExplicitAny: a parameter's JSON Schema from the document
function validQueryValue(schema: any): fc.Arbitrary<string> {
  const valid =
    schema?.enum?.length > 0
      ? fc.constantFrom<string>(...schema.enum)
      : schema?.type === 'integer'
        ? fc.integer({ min: schema.minimum ?? 1, max: schema.maximum ?? 100 }).map(String)
        : schema?.format === 'date-time'
          ? fc
              .date({
                min: new Date('1970-01-01T00:00:00Z'),
                max: new Date('9999-12-31T23:59:59Z'),
                noInvalidDate: true,
              })
              .map((d) => d.toISOString())
          : fc.constantFrom('true', 'false', 'k', 'clicked', '01712345678', 'campaigns');
  return valid.map(encodeLoose);
}

// biome-ignore lint/suspicious/noExplicitAny: a parameter's JSON Schema from the document
function queryValue(schema: any): fc.Arbitrary<string> {
  const boundary =
    schema?.type === 'integer'
      ? fc.constantFrom(
          String((schema.minimum ?? 0) - 1),
          String((schema.maximum ?? 100) + 1),
          '1e3',
          '-0',
          '9007199254740993',
          '',
        )
      : schema?.format === 'date-time'
        ? fc.constantFrom(...hostileInstants)
        : fc.string({ maxLength: 20 });
  return fc.oneof(
    { weight: 2, arbitrary: validQueryValue(schema) },
    { weight: 2, arbitrary: boundary.map(encodeLoose) },
    { weight: 1, arbitrary: fc.constantFrom(...hostileStrings).map((s) => encodeLoose(s.slice(0, 300))) },
    {
      weight: 1,
      arbitrary: fc.oneof(percentEncoded, fc.constantFrom('%', '%zz', '%ED%A0%80', 'a&b', 'a=b')),
    },
  );
}

// biome-ignore lint/suspicious/noExplicitAny: an operation's parameters from the document
function queryFor(parameters: any[]) {
  const names = parameters.filter((p) => p.in === 'query');
  const pick = (value: (schema: unknown) => fc.Arbitrary<string>) =>
    fc.tuple(
      ...names.map((p) =>
        fc.option(
          value(p.schema).map((v) => [p.name as string, v] as const),
          { nil: undefined, freq: 2 },
        ),
      ),
    );
  const join = (entries: readonly (readonly [string, string] | undefined)[]) =>
    entries
      .filter((e): e is readonly [string, string] => e !== undefined)
      .map(([k, v]) => `${k}=${v}`)
      .join('&');
  return fc.oneof(
    // Valid values (boundaries included), so that the handlers are reached.
    { weight: 2, arbitrary: pick(validQueryValue).map(join) },
    // Hostile values, and keys the operation does not declare (or declares twice).
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          pick(queryValue),
          fc.option(
            fc.constantFrom(['x', '1'] as const, ['limit', '1'] as const, ['__proto__', 'a'] as const),
            {
              nil: undefined,
            },
          ),
        )
        .map(([given, extra]) => join([...given, extra])),
    },
  );
}

async function send(
  method: string,
  path: string,
  body: FuzzBody,
  headers: Record<string, string>,
): Promise<{ status: number; type: string; allow: string | null; text: string }> {
  let payload: string | Uint8Array | FormData | undefined;
  if (body.kind === 'json') {
    headers['content-type'] = 'application/json';
    payload = toJson(body.value);
  } else if (body.kind === 'bytes') {
    headers['content-type'] = body.type;
    payload = body.bytes;
  } else if (body.kind === 'huge') {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify({ name: 'x'.repeat(70_000) });
  } else if (body.kind === 'multipart') {
    const form = new FormData();
    const file = () => body.file && form.append('file', new Blob([body.file], { type: 'text/csv' }), 'n.csv');
    if (body.fileFirst) file();
    if (body.meta !== undefined) form.append('meta', body.meta);
    if (!body.fileFirst) file();
    payload = form;
  }
  const aborter = new AbortController();
  const response = await fetch(`${api.url}${path}`, {
    method,
    headers,
    signal: aborter.signal,
    ...(payload !== undefined ? { body: payload } : {}),
  });
  const type = response.headers.get('content-type') ?? '';
  // The live stream never ends: its answer is its status and headers.
  if (type.startsWith('text/event-stream')) {
    aborter.abort();
    return { status: response.status, type, allow: null, text: '' };
  }
  const text = await response.text();
  // Whatever the input, the answer is one the document describes.
  await checkConformance(api.url, { method, path, status: response.status, contentType: type, text });
  return { status: response.status, type, allow: response.headers.get('allow'), text };
}

/** Headers a client may garble: the session cookie, the CSRF token, the key, the request id, the trace. */
const hostileHeaders = fc
  .tuple(
    fc.constantFrom(
      'cookie',
      'x-csrf-token',
      'authorization',
      'x-request-id',
      'traceparent',
      'accept',
      'content-encoding',
    ),
    fc.constantFrom(
      'herald_session=%zz',
      `herald_session=${'a'.repeat(43)}`,
      `herald_session=${'a'.repeat(5_000)}`,
      'herald_session=; herald_session=x',
      'Bearer ',
      'Bearer hk_00000000_',
      `Bearer hk_${'f'.repeat(8)}_${'A'.repeat(5_000)}`,
      'Basic YWRtaW46YWRtaW4=',
      '00-zzzz-zzzz-01',
      'gzip',
      '\u00ff\u00fe',
      ' ',
    ),
  )
  .map(([name, value]) => ({ [name]: value }));

/** The property's verdict on one answer: undefined when it holds, else what is wrong. */
function answerProblem(
  method: string,
  reply: { status: number; type: string; allow: string | null; text: string },
): string | undefined {
  if (reply.status === 0 || reply.status >= 500) return 'a 5xx (or no answer)';
  if (reply.status < 400) return undefined;
  if (reply.status === 405 && !reply.allow) return 'a 405 without Allow';
  if (method === 'HEAD') return undefined;
  if (!reply.type.startsWith('application/problem+json')) return `a ${reply.status} that is not problem+json`;
  let body: { [key: string]: unknown };
  try {
    body = JSON.parse(reply.text);
  } catch {
    return 'a problem that is not JSON';
  }
  if (body.status !== reply.status) return 'a problem whose status is not the answer’s';
  if (typeof body.type !== 'string' || !/^urn:herald:problem:[a-z0-9]+(-[a-z0-9]+)*$/.test(body.type))
    return `a problem type that is not urn:herald:problem:<kind> (${String(body.type)})`;
  if (typeof body.title !== 'string' || body.title.length === 0) return 'a problem without a title';
  const errors = body.errors;
  const namesField =
    Array.isArray(errors) &&
    errors.length > 0 &&
    errors.every(
      (e: { field?: unknown; message?: unknown }) =>
        typeof e.field === 'string' &&
        e.field.length > 0 &&
        typeof e.message === 'string' &&
        e.message.length > 0,
    );
  const namesReason =
    typeof body.detail === 'string' &&
    body.detail.trim().length > 0 &&
    typeof body.code === 'string' &&
    /^[A-Z][A-Z0-9_]*$/.test(body.code);
  if (reply.status === 422 && !namesField) return 'a 422 that names no field';
  // A request that failed its schema names the field (a validator that threw instead does not).
  if (body.type === 'urn:herald:problem:invalid-request' && !namesField)
    return 'an invalid-request that names no field';
  if (!namesField && !namesReason) return 'a 4xx that names neither a field nor a reason';
  return undefined;
}

describe("the fuzzer's property", () => {
  const problemReply = (status: number, body: Record<string, unknown>, extra: { allow?: string } = {}) => ({
    status,
    type: 'application/problem+json; charset=utf-8',
    allow: extra.allow ?? null,
    text: JSON.stringify({ title: 'T', status, ...body }),
  });
  const kind = 'urn:herald:problem:validation-failed';

  it('holds for a problem naming a field or a reason, and fails for anything less', () => {
    const field = { type: kind, errors: [{ field: 'body.name', message: 'too long' }] };
    const reason = {
      type: 'urn:herald:problem:route-not-found',
      detail: 'no route',
      code: 'ROUTE_NOT_FOUND',
    };
    expect(answerProblem('POST', problemReply(422, field))).toBe(undefined);
    expect(answerProblem('GET', problemReply(404, reason))).toBe(undefined);
    expect(answerProblem('GET', { status: 200, type: 'application/json', allow: null, text: '{}' })).toBe(
      undefined,
    );
    expect(answerProblem('GET', problemReply(500, reason))).toBe('a 5xx (or no answer)');
    expect(answerProblem('GET', { status: 0, type: '', allow: null, text: '' })).toBe('a 5xx (or no answer)');
    expect(answerProblem('GET', problemReply(404, { ...reason, type: 'about:blank' }))).toMatch(/urn:herald/);
    expect(answerProblem('POST', problemReply(422, { ...reason, type: kind }))).toBe(
      'a 422 that names no field',
    );
    expect(answerProblem('POST', problemReply(400, { type: kind, detail: 'bad' }))).toMatch(/names neither/);
    const threw = {
      type: 'urn:herald:problem:invalid-request',
      detail: 'Invalid time value',
      code: 'FST_ERR_VALIDATION',
    };
    expect(answerProblem('GET', problemReply(400, threw))).toBe('an invalid-request that names no field');
    expect(
      answerProblem('POST', problemReply(400, { type: kind, errors: [{ field: '', message: 'x' }] })),
    ).toMatch(/names neither/);
    expect(answerProblem('DELETE', problemReply(405, { ...reason, code: 'METHOD_NOT_ALLOWED' }))).toBe(
      'a 405 without Allow',
    );
    expect(
      answerProblem('GET', {
        status: 400,
        type: 'application/json',
        allow: null,
        text: '{"error":"Bad Request"}',
      }),
    ).toBe('a 400 that is not problem+json');
    expect(answerProblem('GET', { ...problemReply(404, reason), text: '{"status":404' })).toBe(
      'a problem that is not JSON',
    );
  });
});

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

describe('fuzzing every operation of /openapi.json', () => {
  it('never answers 5xx, every 4xx names a field or a reason, and nothing is half-written', async () => {
    const operations: { method: string; path: string; key: string; parameters: unknown[] }[] = [];
    for (const [path, item] of Object.entries<Record<string, { parameters?: unknown[] }>>(document.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        if (!HTTP_METHODS.includes(method)) continue;
        const key = `${method.toUpperCase()} ${path}`;
        operations.push({ method: method.toUpperCase(), path, key, parameters: operation.parameters ?? [] });
      }
    }
    // The document lists every documented route the server serves (HEAD is GET's twin).
    const served = api.server.app.heraldRoutes
      .filter((r) => r.documented && r.method !== 'HEAD')
      .map((r) => `${r.method} ${r.url.replace(/:([A-Za-z]+)/g, '{$1}')}`);
    expect([...new Set(served)].sort()).toEqual(operations.map((o) => o.key).sort());
    // Every operation that takes a body has a valid one here, and no template is stale.
    const withBody = operations
      .filter(
        (o) => (document.paths[o.path][o.method.toLowerCase()] as { requestBody?: unknown }).requestBody,
      )
      .map((o) => o.key);
    expect(
      withBody.filter((k) => !templates[k]),
      'operations with a body but no template',
    ).toEqual([]);
    expect(Object.keys(templates).filter((k) => !operations.some((o) => o.key === k))).toEqual([]);

    const perOperation = Math.max(4, Math.ceil(RUNS / operations.length));
    const statuses = new Map<number, number>();
    const covered = new Map<string, Map<number, number>>();
    for (const operation of operations) {
      const names = [...operation.path.matchAll(/\{([A-Za-z]+)\}/g)].map((m) => m[1]!);
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            params: fc.tuple(...names.map((n) => pathParam(n, operation.path, operation.method))),
            query: queryFor(operation.parameters),
            body: bodyFor(operation.method, operation.key),
            key: fc.oneof(
              { weight: 6, arbitrary: fc.constant(admin) },
              { weight: 3, arbitrary: fc.constant(viewer) },
              { weight: 1, arbitrary: fc.constantFrom<string | null>(null, 'hk_00000000_x') },
            ),
            extraHeaders: fc.option(hostileHeaders, { nil: undefined, freq: 6 }),
            idempotencyKey: fc.option(fc.constantFrom('fz-1', 'fz-2', 'x'.repeat(300), 'ü'), {
              nil: undefined,
            }),
          }),
          async ({ params, query, body, key, extraHeaders, idempotencyKey }) => {
            let path = operation.path;
            names.forEach((n, i) => {
              path = path.replace(`{${n}}`, String(params[i]));
            });
            const target = `${path}${query ? `?${query}` : ''}`;
            const headers: Record<string, string> = {};
            if (key) headers.authorization = `Bearer ${key}`;
            if (idempotencyKey) headers['idempotency-key'] = encodeLoose(idempotencyKey);
            Object.assign(headers, extraHeaders);
            const reply = await send(operation.method, target, body, headers).catch((error: unknown) => ({
              status: 0,
              type: '',
              allow: null,
              text: String(error),
            }));
            statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
            const mine = covered.get(operation.key) ?? new Map<number, number>();
            mine.set(reply.status, (mine.get(reply.status) ?? 0) + 1);
            covered.set(operation.key, mine);
            const wrong = answerProblem(operation.method, reply);
            if (wrong) {
              throw new Error(
                `${operation.method} ${target} → ${wrong}: ${reply.status} ${reply.text.slice(0, 600)}`,
              );
            }
          },
        ),
        { numRuns: perOperation, seed: SEED },
      );
    }
    if (process.env.FUZZ_STATS) {
      for (const [op, counts] of covered)
        process.stdout.write(`${op}: ${JSON.stringify([...counts].sort())}\n`);
    }
    // Every operation of the document was fuzzed, and nothing else.
    expect([...covered.keys()].sort()).toEqual(operations.map((o) => o.key).sort());
    // The fuzzer reached the handlers, not only the validators.
    const count = (from: number, to: number) =>
      [...statuses].filter(([s]) => s >= from && s <= to).reduce((n, [, c]) => n + c, 0);
    expect(count(200, 299)).toBeGreaterThan(0);
    // (Statuses every run reaches whatever its seed; 413 and 415 come from rarer draws and are
    // asserted deterministically in test/api/faults.int.spec.ts.)
    for (const status of [400, 401, 403, 404, 422]) {
      expect(statuses.get(status) ?? 0, `answers ${status}`).toBeGreaterThan(0);
    }

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
