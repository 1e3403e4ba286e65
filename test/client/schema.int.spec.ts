/**
 * `herald/client`'s generated sources (src/client/generated/, committed so that `tsc` of a fresh clone
 * needs no running server) come from the document the server serves: each records the sha256 of the
 * document it was generated from (key order aside), and a route, a schema, an Idempotency-Key parameter
 * or a stream topic changed without `npm run generate:clients` fails here. Comparing hashes rather than
 * regenerating keeps the check to milliseconds.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentHash } from '../../scripts/openapi-clients.js';
import { DOCUMENT_SHA256 } from '../../src/client/generated/operations.js';
import { type ApiFixture, startTestApi } from '../api/support/api.js';

const ROOT = join(import.meta.dirname, '..', '..');
let api: ApiFixture;

beforeAll(async () => {
  api = await startTestApi();
}, 60_000);
afterAll(async () => api?.close());

describe('the client generated from /openapi.json', () => {
  it('was generated from the document the server serves (npm run generate:clients)', async () => {
    const served = await api.request('GET', '/openapi.json');
    expect(served.status).toBe(200);
    expect(DOCUMENT_SHA256, 'src/client/generated/ is stale: run npm run generate:clients').toBe(
      documentHash(served.body),
    );
    // Both files of one generation.
    const schema = readFileSync(join(ROOT, 'src/client/generated/schema.ts'), 'utf8');
    expect(schema.slice(0, 500)).toContain(`sha256 ${DOCUMENT_SHA256}`);
    // Another document, another hash (a route's summary changed).
    const changed = structuredClone(served.body);
    changed.paths['/v1/campaigns'].get.summary += '.';
    expect(documentHash(changed)).not.toBe(DOCUMENT_SHA256);
  });
});
