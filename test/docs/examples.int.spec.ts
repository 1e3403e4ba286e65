/**
 * Every shell and TypeScript example of README.md and docs/** runs against real services (ADR 0036):
 * one `herald api` with a scanner, a relay and a worker (child processes of the real CLI, from dist/
 * under `npm test`), on a fresh database and a RabbitMQ vhost of this file's own, the LINE test server
 * behind LINE delivery, and SMS sent over that vhost (HERALD_SMS_SINK=amqp, so no shared Kafka topic).
 * Each documentation file's blocks run in order in one bash with these exported:
 *
 *   HERALD_API_URL, HERALD_API_KEY   the API and an admin key of organization `org-1`
 *   DATABASE_URL, HERALD_SCHEMA, AMQP_URL, REDIS_URL, HERALD_LINE_*, HERALD_SMS_SINK
 *   HERALD_API_PORT                  a free port, for a block that starts an API of its own
 *   PATH                             `herald` first: the CLI as the tests run it
 *
 * README.md's blocks run in the repository (its commands are the clone's); every other file's in an
 * empty directory of its own. TypeScript blocks run with tsx, `herald` imported from this package
 * (a node_modules/herald link to the checkout: its package.json exports, i.e. dist/). A block that
 * does not end with its expected code fails the test naming its file and line, with its output;
 * blocks marked `no-run` are counted and listed, so what is skipped stays visible.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lineEnv } from '../support/line.js';
import { freePort } from '../support/services.js';
import { CONSUMER_COMPILER_OPTIONS } from '../support/typescript.js';
import { type Dashboard, startDashboard } from '../ui/support/browser.js';
import {
  allExamples,
  blockFile,
  driverScript,
  type Example,
  exampleDir,
  outcomes,
  outputFile,
  statusFile,
} from './support/examples.js';
import { ROOT } from './support/markdown.js';

const FROM_DIST = process.env.HERALD_TEST_FROM_DIST === '1';
/** How long one file's blocks may take together (each polls with its own deadline too). */
const FILE_TIMEOUT_MS = 300_000;

const examples = allExamples();
const byFile = new Map<string, Example[]>();
for (const example of examples) byFile.set(example.file, [...(byFile.get(example.file) ?? []), example]);
/** HERALD_DOCS_EXAMPLES=README.md,docs/guides/cron.md runs only those files' examples (while writing them). */
const only = process.env.HERALD_DOCS_EXAMPLES?.split(',').filter(Boolean);
const runnable = [...byFile]
  .filter(([file, list]) => list.some((e) => e.run) && (!only || only.includes(file)))
  .map(([file]) => file);

let stack: Dashboard;
let scratch: string;
let env: Record<string, string>;

beforeAll(async () => {
  if (!existsSync(join(ROOT, 'dist', 'index.js'))) {
    throw new Error(
      'dist/ is missing: run `npm run build:server` first (TypeScript examples import the package)',
    );
  }
  scratch = mkdtempSync(join(tmpdir(), 'herald-examples-'));
  const stackEnv = { HERALD_SMS_SINK: 'amqp', KAFKA_BROKERS: '' };
  stack = await startDashboard({ roles: ['scanner', 'relay', 'worker'], env: stackEnv });
  const key = await stack.key('org-1', 'admin');
  // The LINE official account the campaigns guide registers (docs/README.md says so).
  stack.line.addChannel({
    channelId: '2001234567',
    tokens: ['a-long-lived-channel-access-token'],
    friends: [],
  });
  // `herald` on PATH: the CLI as the other tests run it (test/support/cli.ts: dist/'s bundle under npm
  // test, else the source).
  const bin = join(scratch, 'bin');
  mkdirSync(bin);
  const cli = FROM_DIST
    ? `exec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(ROOT, 'dist', 'herald.js'))} "$@"`
    : `exec ${JSON.stringify(process.execPath)} --import ${JSON.stringify(`file://${join(ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs')}`)} ${JSON.stringify(join(ROOT, 'src', 'main.ts'))} "$@"`;
  writeFileSync(join(bin, 'herald'), `#!/usr/bin/env bash\n${cli}\n`);
  chmodSync(join(bin, 'herald'), 0o755);
  // `import … from 'herald'` in a TypeScript block resolves to this package.
  mkdirSync(join(scratch, 'node_modules'));
  symlinkSync(ROOT, join(scratch, 'node_modules', 'herald'));
  mkdirSync(join(scratch, 'tmp'));
  env = {
    ...(Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined)) as Record<
      string,
      string
    >),
    ...lineEnv(stack.line),
    ...stackEnv,
    PATH: `${bin}:${process.env.PATH ?? ''}`,
    TMPDIR: join(scratch, 'tmp'),
    DATABASE_URL: stack.t.url,
    HERALD_SCHEMA: stack.t.schema,
    AMQP_URL: stack.amqpUrl,
    HERALD_API_URL: stack.url,
    HERALD_API_KEY: key,
    HERALD_API_PORT: String(await freePort()),
    HERALD_LOG_LEVEL: 'warn',
    HERALD_METRICS_HOST: '127.0.0.1',
    HERALD_METRICS_PORT: '0',
  };
  delete env.HERALD_TEST_LOG;
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** At most this many files' scripts at once (two cores; most of their time is spent waiting). */
const PARALLEL_FILES = 3;
let running = 0;
const waiting: (() => void)[] = [];
async function limited<T>(work: () => Promise<T>): Promise<T> {
  if (running >= PARALLEL_FILES) await new Promise<void>((resolve) => waiting.push(resolve));
  running++;
  try {
    return await work();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

/** Runs one file's runnable blocks in one bash; resolves with a failure message, or null. */
async function runFile(file: string): Promise<string | null> {
  const list = byFile.get(file)!.filter((e) => e.run);
  const paths = { dir: exampleDir(scratch, file), tsx: join(ROOT, 'node_modules', '.bin', 'tsx') };
  mkdirSync(paths.dir, { recursive: true });
  for (const [i, example] of list.entries()) writeFileSync(blockFile(paths, i, example), `${example.code}\n`);
  // Shell blocks run where the reader would; TypeScript blocks, under the scratch folder, find its
  // node_modules/herald.
  const cwd = file === 'README.md' ? ROOT : join(paths.dir, 'work');
  mkdirSync(join(paths.dir, 'work'), { recursive: true });
  const script = join(paths.dir, 'run.sh');
  writeFileSync(script, driverScript(list, paths));
  writeFileSync(statusFile(paths), '');
  // Its own process group: whatever a block leaves running (`herald all &`) ends with the file.
  const child = spawn('bash', [script], { cwd, env, detached: true, stdio: 'ignore' });
  const exited = once(child, 'exit');
  const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), FILE_TIMEOUT_MS);
  const [code] = (await exited) as [number | null];
  clearTimeout(timer);
  try {
    process.kill(-child.pid!, 'SIGTERM');
  } catch {
    // the group already ended
  }
  const ends = outcomes(list, readFileSync(statusFile(paths), 'utf8'));
  const failed = ends.find((o) => o.started && o.code !== o.example.exit);
  if (!failed && code === 0) return null;
  if (!failed) return `${file}: the examples' script exited ${code} before its blocks ended`;
  const i = ends.indexOf(failed);
  const output = readFileSync(outputFile(paths, i), 'utf8');
  const tail = output.length > 4_000 ? `…${output.slice(-4_000)}` : output;
  const how =
    failed.code === null
      ? `ended the script (exit ${code}${code === null ? ': timed out' : ''})`
      : `exited ${failed.code}`;
  return `${file}:${failed.example.line}: the \`\`\`${failed.example.language} block ${how}, expected exit ${failed.example.exit}\n--- its output ---\n${tail}`;
}

describe('documentation examples', () => {
  it('finds examples, and every skipped one is marked', () => {
    const skipped = examples.filter((e) => !e.run);
    const run = examples.filter((e) => e.run);
    process.stdout.write(
      `documentation examples: ${run.length} blocks to run (${runnable.length} files here), ${skipped.length} marked no-run:\n` +
        skipped.map((e) => `  ${e.file}:${e.line} (${e.language})\n`).join(''),
    );
    expect(run.length).toBeGreaterThan(10);
    if (!only)
      expect(runnable).toEqual(expect.arrayContaining(['README.md', 'docs/guides/scheduled-actions.md']));
  });

  it('the TypeScript examples type-check against the package (strict)', () => {
    // Running them catches a changed call that throws; this catches one that is merely ignored (a
    // renamed option) or no longer typed as the example uses it.
    const dir = join(scratch, 'typecheck');
    mkdirSync(dir);
    const names = new Map<string, Example>();
    for (const example of examples.filter((e) => e.run && e.language === 'ts')) {
      const name = `${example.file.replace(/[^A-Za-z0-9]+/g, '-')}-${example.line}.mts`;
      names.set(name, example);
      writeFileSync(join(dir, name), `${example.code}\n`);
    }
    expect(names.size).toBeGreaterThan(0);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          ...CONSUMER_COMPILER_OPTIONS,
          skipLibCheck: true,
          typeRoots: [join(ROOT, 'node_modules', '@types')],
        },
        include: ['*.mts'],
      }),
    );
    // The scratch folder's node_modules/herald is this package: its declarations in dist/.
    const tsc = spawnSync(
      process.execPath,
      [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir],
      {
        cwd: dir,
        encoding: 'utf8',
      },
    );
    const errors = tsc.stdout.replace(/^(\S+\.mts)\((\d+),(\d+)\)/gm, (_, name: string, line: string) => {
      const example = names.get(name);
      return example ? `${example.file}:${example.line + Number(line)}` : name;
    });
    expect(errors).toBe('');
    expect(tsc.status).toBe(0);
  }, 120_000);

  it.concurrent.each(runnable)(
    '%s: every example runs',
    async (file) => {
      const failure = await limited(() => runFile(file));
      if (failure) expect.fail(`${failure}\n--- herald api and roles ---\n${stack.output().slice(-3_000)}`);
    },
    // Files wait their turn (PARALLEL_FILES) inside their test's time.
    Math.ceil(runnable.length / PARALLEL_FILES) * FILE_TIMEOUT_MS + 30_000,
  );
});
