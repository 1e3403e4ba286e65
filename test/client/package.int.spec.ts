/**
 * `herald/client` as the package exports it: `import('herald/client')` resolved through package.json's
 * `exports` to the compiled dist/client/ (and its declarations beside it), run in a plain Node process
 * against a real `herald api`. Catches an export missing from package.json, a client that only runs
 * under tsx, a runtime import of a dev dependency or of the server's modules. Under `npm test`
 * (HERALD_TEST_FROM_DIST=1) it imports the dist/ that `npm run build:server` made; otherwise it compiles
 * src/client/ alone (emit only: the project's `tsc` checks its types) into a scratch copy of the package.
 */
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, startTestApi } from '../api/support/api.js';

const ROOT = join(import.meta.dirname, '..', '..');
const FROM_DIST = process.env.HERALD_TEST_FROM_DIST === '1';
const SCRATCH = join(ROOT, '.cache', `client-package-${process.pid}`);
const PACKAGE = FROM_DIST ? ROOT : SCRATCH;
let api: ApiFixture;

beforeAll(async () => {
  api = await startTestApi();
  mkdirSync(SCRATCH, { recursive: true });
  if (!FROM_DIST) {
    cpSync(join(ROOT, 'package.json'), join(SCRATCH, 'package.json'));
    symlinkSync(join(ROOT, 'node_modules'), join(SCRATCH, 'node_modules'));
    execFileSync(
      process.execPath,
      [
        join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
        ...['--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--target', 'ES2022'],
        ...['--lib', 'ES2023', '--types', 'node', '--strict', '--skipLibCheck', '--declaration', '--noCheck'],
        ...['--rootDir', join(ROOT, 'src'), '--outDir', join(SCRATCH, 'dist')],
        join(ROOT, 'src', 'client', 'index.ts'),
      ],
      { cwd: ROOT, stdio: 'inherit' },
    );
  }
}, 120_000);
afterAll(async () => {
  rmSync(SCRATCH, { recursive: true, force: true });
  await api?.close();
});

describe('the herald/client export', () => {
  it('resolves to the compiled client, which calls a real API', async () => {
    const key = await api.key('org-package');
    // Inside the package's folder: `herald/client` is the package referring to itself (its exports).
    const script = join(PACKAGE, `.client-check-${process.pid}.mjs`);
    writeFileSync(
      script,
      `import { createHeraldClient, HeraldNotFoundError } from 'herald/client';
const url = import.meta.resolve('herald/client');
const herald = createHeraldClient({ baseUrl: process.env.HERALD_API_URL, credential: process.env.HERALD_API_KEY });
const created = await herald.POST('/v1/actions', {
  body: { mode: 'normal', actionType: 'send_message', actionConfig: { template: 'hi' }, delaySeconds: 3600 },
});
const missing = await herald.GET('/v1/actions/{id}', { params: { path: { id: crypto.randomUUID() } } }).catch((e) => e);
console.log(JSON.stringify({ url, key: created.idempotencyKey, notFound: missing instanceof HeraldNotFoundError }));
`,
    );
    try {
      // Not execFileSync: the API answering it runs in this process.
      const { stdout } = await promisify(execFile)(process.execPath, [script], {
        encoding: 'utf8',
        env: { PATH: process.env.PATH, HERALD_API_URL: api.url, HERALD_API_KEY: key },
      });
      const result = JSON.parse(stdout.trim().split('\n').at(-1)!);
      expect(result.url).toBe(`file://${join(PACKAGE, 'dist', 'client', 'index.js')}`);
      expect(result.key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(result.notFound).toBe(true);
      expect(existsSync(join(PACKAGE, 'dist', 'client', 'index.d.ts'))).toBe(true);
    } finally {
      rmSync(script, { force: true });
    }
  });
});
