/**
 * Herald as an npm package (ADR 0020): `npm pack` of a copy of this checkout (its `prepack` builds
 * dist/ and the dashboard), the tarball installed into an empty project, its entries imported
 * from TypeScript under `--strict` with the library types checked (no skipLibCheck), and the installed
 * `herald` bin run: `--help`, and `migrate` against a test database. Catches what only the package
 * gets wrong: a file left out of `files`, a runtime import of a dev dependency, a type the entries
 * leak without its declarations, a bin that needs the source. Under `npm test` (HERALD_TEST_FROM_DIST=1,
 * dist/ and the dashboard built by it just before, with the scripts `prepack` runs) the copy gets that
 * dist/ and is packed without running `prepack` again.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/services.js';
import { CONSUMER_COMPILER_OPTIONS } from '../support/typescript.js';

const ROOT = join(import.meta.dirname, '..', '..');
const work = mkdtempSync(join(tmpdir(), 'herald-package-'));
const app = join(work, 'app');
let t: TestDatabase;

const run = (command: string, args: string[], cwd: string, env: Record<string, string> = {}) =>
  execFileSync(command, args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });

beforeAll(async () => {
  t = await createTestDatabase({ migrate: false });
  // A copy of the checkout's files (committed and new, not ignored), sharing its node_modules: packing
  // builds dist/ there, never in the checkout other tests serve the dashboard from.
  const copy = join(work, 'checkout');
  const files = run('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], ROOT)
    .split('\0')
    .filter(Boolean);
  for (const file of files) {
    mkdirSync(dirname(join(copy, file)), { recursive: true });
    try {
      cpSync(join(ROOT, file), join(copy, file));
    } catch {
      // A file deleted in the working tree but not yet in the index.
    }
  }
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
  if (process.env.HERALD_TEST_FROM_DIST === '1') {
    cpSync(join(ROOT, 'dist'), join(copy, 'dist'), { recursive: true });
    run('npm', ['pack', '--ignore-scripts', '--pack-destination', work], copy);
  } else run('npm', ['pack', '--pack-destination', work], copy);
  const tarball = readdirSync(work).find((name) => name.endsWith('.tgz'));
  if (!tarball) throw new Error('npm pack made no tarball');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  run('npm', ['install', join(work, tarball), '@types/node@20', '--prefer-offline'], app);
}, 600_000);

afterAll(async () => {
  rmSync(work, { recursive: true, force: true });
  await t?.drop();
});

describe('the npm package', () => {
  it('ships compiled code, the dashboard and the migrations, and no source or tests', () => {
    const shipped = join(app, 'node_modules', 'herald');
    const entries = readdirSync(shipped);
    expect(entries).toEqual(expect.arrayContaining(['bin', 'dist', 'migrations', 'package.json']));
    expect(entries).not.toContain('src');
    expect(entries).not.toContain('test');
    // The references the README links to and the package's users read offline (ADR 0036).
    expect(readdirSync(join(shipped, 'docs', 'reference')).sort()).toEqual(['cli.md', 'configuration.md']);
    expect(readdirSync(join(shipped, 'dist'))).toEqual(
      expect.arrayContaining([
        'index.js',
        'index.d.ts',
        'api.js',
        'testing.js',
        'client',
        'main.js',
        'herald.js',
        'ui',
        'contracts',
      ]),
    );
    // `herald line-simulator` validates against LINE's OpenAPI documents: shipped with their licence.
    expect(readdirSync(join(shipped, 'dist', 'contracts', 'line-openapi')).sort()).toEqual(
      expect.arrayContaining(['LICENSE', 'README.md', 'channel-access-token.yml', 'messaging-api.yml']),
    );
  });

  it('its entries type-check under --strict, library types included', () => {
    writeFileSync(
      join(app, 'check.ts'),
      `import { AggregateRegistry, defineModule, type HeraldConfig, heraldRegistry, loadConfig } from 'herald';
import { buildApiServer, type RouteDeps } from 'herald/api';
import type { FencedHandlerFixture } from 'herald/testing';
import { createHeraldClient, HeraldProblemError, type Schemas } from 'herald/client';

const config = loadConfig({ DATABASE_URL: 'postgres://herald@127.0.0.1:5432/herald' });
const zone: string = config.sms.zone;
const generic: HeraldConfig = config;
const registry = new AggregateRegistry([...heraldRegistry.modules]);
const slice = defineModule({ name: 'empty', aggregates: [] });
export const used: unknown[] = [zone, generic, registry, slice, buildApiServer];
export type Used = [RouteDeps, FencedHandlerFixture, Schemas['Campaign']];
const herald = createHeraldClient({ baseUrl: 'http://127.0.0.1:8080', credential: async () => 'hk_test' });
export const read = (id: string): Promise<string> =>
  herald.GET('/v1/campaigns/{id}', { params: { path: { id } } }).then((c) => c.status, (e: unknown) => {
    if (e instanceof HeraldProblemError) return e.kind;
    throw e;
  });
`,
    );
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { ...CONSUMER_COMPILER_OPTIONS, skipLibCheck: false },
        files: ['check.ts'],
      }),
    );
    expect(() =>
      run(
        process.execPath,
        [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'],
        app,
      ),
    ).not.toThrow();
  }, 120_000);

  it('the installed bin answers --help and migrates a database', () => {
    expect(run('npx', ['herald', '--help'], app)).toMatch(/^usage: herald <role>/);
    const migrated = run('npx', ['herald', 'migrate'], app, {
      DATABASE_URL: t.url,
      HERALD_SCHEMA: t.schema,
      HERALD_LOG_LEVEL: 'silent',
    });
    expect(migrated).toMatch(/^migrations applied: 000001_core\.sql, /);
  }, 120_000);
});
