/**
 * The response-conformance check the API fixture runs on every response (support/conformance.ts): it
 * finds the operation the way the router does, and refuses an undocumented status, an undocumented
 * content type, a body its schema refuses (through the document's `$ref`s) and a body where none is
 * documented; it lets through what conforms and what no operation documents.
 */
import { describe, expect, it } from 'vitest';
import { type OpenApiDocument, ResponseConformance } from './support/conformance.js';

const problem = {
  content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
};
const document: OpenApiDocument = {
  paths: {
    '/v1/things/{id}': {
      get: {
        responses: {
          200: {
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['id', 'at'],
                  properties: {
                    id: { type: 'string', format: 'uuid' },
                    at: { type: 'string', format: 'date-time' },
                  },
                },
              },
            },
          },
          404: problem,
        },
      },
    },
    '/v1/things/preview': {
      get: {
        responses: { 200: { content: { 'text/plain': { schema: { type: 'string', pattern: '^ok$' } } } } },
      },
    },
    '/v1/things/{id}/gone': { delete: { responses: { 204: {} } } },
  },
  components: {
    schemas: {
      Problem: {
        type: 'object',
        required: ['type', 'title', 'status'],
        properties: { type: { type: 'string' }, title: { type: 'string' }, status: { type: 'integer' } },
      },
    },
  },
};

const id = '0b7e2d1c-6f0a-4c59-9d0e-3b8f5a1e2c44';
const ok = {
  method: 'GET',
  path: `/v1/things/${id}?x=1`,
  status: 200,
  contentType: 'application/json; charset=utf-8',
  text: JSON.stringify({ id, at: '2026-01-01T00:00:00.000Z' }),
};

describe('ResponseConformance', () => {
  const conformance = new ResponseConformance(document);

  it('finds the operation as the router does: a literal segment before a parameter', () => {
    expect(conformance.operationOf('GET', '/v1/things/preview')).toEqual({
      path: '/v1/things/preview',
      method: 'get',
    });
    expect(conformance.operationOf('HEAD', `/v1/things/${id}`)).toEqual({
      path: '/v1/things/{id}',
      method: 'get',
    });
    expect(conformance.operationOf('POST', `/v1/things/${id}`)).toBeUndefined();
    expect(conformance.operationOf('GET', '/v1/nothing')).toBeUndefined();
  });

  it('lets through what conforms, and what no operation documents', () => {
    expect(conformance.violations(ok)).toEqual([]);
    const notFound = { type: 'about:blank', title: 'Not Found', status: 404 };
    expect(
      conformance.violations({
        ...ok,
        status: 404,
        contentType: 'application/problem+json',
        text: JSON.stringify(notFound),
      }),
    ).toEqual([]);
    expect(
      conformance.violations({ ...ok, path: '/v1/things/preview', contentType: 'text/plain', text: 'ok' }),
    ).toEqual([]);
    expect(
      conformance.violations({
        ...ok,
        method: 'DELETE',
        path: `/v1/things/${id}/gone`,
        status: 204,
        text: '',
      }),
    ).toEqual([]);
    expect(conformance.violations({ ...ok, path: '/elsewhere', status: 500, text: 'boom' })).toEqual([]);
  });

  it('refuses an undocumented status', () => {
    expect(conformance.violations({ ...ok, status: 422 })).toEqual([
      expect.stringContaining('status 422 is not documented (documented: 200, 404)'),
    ]);
    expect(() => conformance.check({ ...ok, status: 500 })).toThrow(/does not conform.*status 500/s);
  });

  it('refuses an undocumented content type', () => {
    expect(conformance.violations({ ...ok, contentType: 'text/html' })).toEqual([
      expect.stringContaining('content type text/html is not documented'),
    ]);
  });

  it("refuses a body the schema refuses, through the document's $refs", () => {
    expect(conformance.violations({ ...ok, text: JSON.stringify({ id: 'not-a-uuid', at: 'soon' }) })).toEqual(
      [
        expect.stringContaining('/id must match format "uuid"'),
        expect.stringContaining('/at must match format "date-time"'),
      ],
    );
    expect(
      conformance.violations({
        ...ok,
        status: 404,
        contentType: 'application/problem+json',
        text: '{"title":"x","status":404}',
      }),
    ).toEqual([expect.stringContaining("must have required property 'type'")]);
    expect(
      conformance.violations({ ...ok, path: '/v1/things/preview', contentType: 'text/plain', text: 'no' }),
    ).toEqual([expect.stringContaining('must match pattern')]);
    expect(conformance.violations({ ...ok, text: '{' })).toEqual([expect.stringContaining('is not JSON')]);
  });

  it('refuses a body where none is documented', () => {
    expect(
      conformance.violations({
        ...ok,
        method: 'DELETE',
        path: `/v1/things/${id}/gone`,
        status: 204,
        text: 'x',
      }),
    ).toEqual([expect.stringContaining('documented without a body')]);
  });
});
