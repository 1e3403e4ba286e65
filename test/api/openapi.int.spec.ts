/**
 * The OpenAPI document (`/openapi.json`) validates as OpenAPI 3.1 and matches the server: every route
 * the server serves is in it and every operation in it is served; every `/v1` operation documents a
 * success response with a schema and its errors as problem documents; every component schema is used.
 * Router refusals, the bulk upload's body, boolean flags, cursors and the event stream are described as
 * the server behaves. The docs page is served too.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, expectProblem, startTestApi } from './support/api.js';

let api: ApiFixture;
// biome-ignore lint/suspicious/noExplicitAny: the document is walked generically
let doc: any;

beforeAll(async () => {
  api = await startTestApi();
  const r = await api.request('GET', '/openapi.json');
  expect(r.status).toBe(200);
  doc = r.body;
});
afterAll(async () => {
  await api?.close();
});

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];
const openapiPath = (url: string) => url.replace(/:([A-Za-z]+)/g, '{$1}');

function refsIn(value: unknown, into = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const v of value) refsIn(v, into);
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') into.add(v);
      else refsIn(v, into);
    }
  }
  return into;
}

describe('/openapi.json', () => {
  it('validates as OpenAPI 3.1', async () => {
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    expect(doc.openapi).toBe('3.1.0');
  });

  it('lists every route the server serves, and nothing it does not', () => {
    const served = api.server.app.heraldRoutes.filter((r) => r.documented && r.method !== 'HEAD');
    expect(served.length).toBeGreaterThan(45);
    for (const route of served) {
      expect(
        doc.paths[openapiPath(route.url)]?.[route.method.toLowerCase()],
        `${route.method} ${route.url}`,
      ).toBeDefined();
    }
    const servedKeys = new Set(served.map((r) => `${r.method.toLowerCase()} ${openapiPath(r.url)}`));
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(item).filter((m) => METHODS.includes(m))) {
        expect(servedKeys.has(`${method} ${path}`), `${method} ${path} is documented but not served`).toBe(
          true,
        );
      }
    }
  });

  it('documents each /v1 operation: a success schema, problem documents for errors, the API key', () => {
    // biome-ignore lint/suspicious/noExplicitAny: operations are walked generically
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
      if (!path.startsWith('/v1/')) continue;
      for (const [method, operation] of Object.entries(item)) {
        if (!METHODS.includes(method)) continue;
        const where = `${method} ${path}`;
        const statuses = Object.keys(operation.responses);
        // The sign-in through an OpenID Connect issuer answers redirects (302) instead.
        const success = statuses.filter((s) => s.startsWith('2') || s === '302');
        expect(success, where).toHaveLength(1);
        // JSON, but the live stream is an event stream and sign-out a 204 without a body.
        const content = operation.responses[success[0]!].content;
        if (success[0] === '204' || success[0] === '302') expect(content, where).toBeUndefined();
        else
          expect((content['application/json'] ?? content['text/event-stream']).schema, where).toBeDefined();
        for (const status of ['400', '401', '403', '500']) {
          expect(
            operation.responses[status]?.content['application/problem+json'].schema.$ref,
            `${where} ${status}`,
          ).toBe('#/components/schemas/Problem');
        }
        if (method !== 'get') expect(statuses, where).toEqual(expect.arrayContaining(['409', '422']));
        if (path.includes('{')) {
          expect(
            operation.parameters.some((p: { in: string }) => p.in === 'path'),
            where,
          ).toBe(true);
        }
        expect(operation.summary, where).toBeTruthy();
      }
    }
    expect(doc.components.securitySchemes.apiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.components.securitySchemes.bearerJwt).toMatchObject({
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
    });
    expect(doc.security).toEqual([{ apiKey: [] }, { bearerJwt: [] }]);
  });

  it('uses every component schema it defines', () => {
    const used = refsIn(doc.paths);
    // Components referring to components count as used through them.
    for (const ref of [...used]) refsIn(doc.components.schemas[ref.split('/').at(-1)!], used);
    const defined = Object.keys(doc.components.schemas);
    expect(defined).toEqual(
      expect.arrayContaining(['Campaign', 'ScheduledAction', 'CronJob', 'JobRun', 'OutboxRow', 'Problem']),
    );
    for (const name of defined)
      expect(used.has(`#/components/schemas/${name}`), `${name} is never used`).toBe(true);
  });

  it('documents what the router refuses before any route: each a problem document (the fixture checks it)', async () => {
    const key = await api.key('org-openapi', 'viewer');
    // A path parameter over 512 characters: 414 on an operation with one.
    expectProblem(await api.request('GET', `/v1/line/channels/${'a'.repeat(600)}`, { key }), 414);
    expect(doc.paths['/v1/line/channels/{lineOaId}'].get.responses['414']).toBeDefined();
    expect(doc.paths['/v1/line/channels'].get.responses['414']).toBeUndefined();
    // A malformed percent-encoding in the path: 400.
    expectProblem(await api.request('GET', '/v1/cron-jobs/%/upcoming', { key }), 400);
  });

  it('describes the bulk upload, boolean flags, cursors and the event stream', () => {
    const bulk = doc.paths['/v1/campaigns/bulk'].post.requestBody.content['multipart/form-data'].schema;
    const upload = doc.components.schemas[bulk.$ref.split('/').at(-1)];
    expect(upload.required).toEqual(['meta', 'file']);
    expect(upload.properties.file).toMatchObject({ type: 'string', contentMediaType: 'text/csv' });
    const parameter = (path: string, method: string, name: string) =>
      doc.paths[path][method].parameters.find((p: { name: string }) => p.name === name).schema;
    expect(parameter('/v1/campaigns', 'get', 'includeDeleted')).toMatchObject({ type: 'boolean' });
    expect(parameter('/v1/cron-jobs/{id}/backfill', 'post', 'dryRun')).toMatchObject({ type: 'boolean' });
    expect(parameter('/v1/api-keys', 'get', 'includeRevoked')).toMatchObject({ type: 'boolean' });
    expect(parameter('/v1/campaigns', 'get', 'cursor')).toMatchObject({
      type: 'string',
      pattern: expect.any(String),
    });
    const stream = doc.paths['/v1/stream'].get.responses['200'].content['text/event-stream'].schema;
    const frames = new RegExp(stream.pattern, 'u');
    expect(
      frames.test(
        'retry: 5000\n: connected\n\nevent: campaigns\ndata: {"at":"2026-01-01T00:00:00.000Z"}\n\n',
      ),
    ).toBe(true);
    expect(frames.test('event: nope\ndata: {}\n\n')).toBe(false);
  });

  it('serves the docs page', async () => {
    const page = await fetch(`${api.url}/docs/`, { redirect: 'follow' });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('swagger');
  });
});
