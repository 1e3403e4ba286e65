/**
 * The example runner's reading of the documentation (ADR 0036): which files and blocks are examples,
 * what their markers mean, that a misspelt marker is an error rather than a silently skipped block,
 * and that every shell example — the `no-run` ones too — is valid bash.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config.js';
import {
  allExamples,
  driverScript,
  type Example,
  examplesOf,
  inScope,
  outcomes,
  settingsOf,
} from './support/examples.js';

describe('documentation examples, as the runner reads them', () => {
  it('reads the language and the markers of each block', () => {
    const text = [
      '```sh',
      'herald verify',
      '```',
      '```bash exit=1',
      'false',
      '```',
      '```ts no-run',
      "import 'herald';",
      '```',
      '```console',
      '$ herald verify',
      '```',
      '```json',
      '{}',
      '```',
    ].join('\n');
    expect(examplesOf('x.md', text)).toEqual([
      { file: 'x.md', line: 1, language: 'sh', code: 'herald verify', run: true, exit: 0 },
      { file: 'x.md', line: 4, language: 'sh', code: 'false', run: true, exit: 1 },
      { file: 'x.md', line: 7, language: 'ts', code: "import 'herald';", run: false, exit: 0 },
    ]);
  });

  it('refuses an unknown marker, naming the file and line', () => {
    expect(() => examplesOf('docs/x.md', 'text\n```sh no_run\ntrue\n```')).toThrow(
      "docs/x.md:2: unknown marker 'no_run' (expected no-run, settings or exit=<code>)",
    );
  });

  it('runs README.md and docs/**, not the decision records nor the benchmarks', () => {
    expect(inScope('README.md')).toBe(true);
    expect(inScope('docs/guides/cron.md')).toBe(true);
    expect(inScope('docs/guides/client.md')).toBe(true);
    expect(inScope('docs/decisions/0010-scheduled-actions.md')).toBe(false);
    expect(inScope('docs/benchmarks.md')).toBe(false);
    const files = new Set(allExamples().map((e) => e.file));
    expect([...files]).toEqual(expect.arrayContaining(['README.md', 'docs/guides/scheduled-actions.md']));
  });

  it('every shell example is valid bash', () => {
    for (const example of allExamples().filter((e) => e.language === 'sh')) {
      try {
        execFileSync('bash', ['-n'], { input: example.code, stdio: ['pipe', 'pipe', 'pipe'] });
      } catch (error) {
        throw new Error(`${example.file}:${example.line}: ${(error as { stderr: Buffer }).stderr}`);
      }
    }
  });

  it('the driver stops at the first block that does not end as expected, and says which', () => {
    const examples = examplesOf(
      'x.md',
      '```sh\nexport A=1\n```\n```sh exit=3\nexit 3\n```\n```sh\n[ "$A" = 2 ]\n```\n```sh\ntrue\n```',
    );
    const dir = execFileSync('mktemp', ['-d'], { encoding: 'utf8' }).trim();
    const paths = { dir, tsx: 'tsx' };
    for (const [i, e] of examples.entries()) writeFileSync(`${dir}/block-${i}.sh`, e.code);
    const script = driverScript(examples, paths);
    let code = 0;
    try {
      execFileSync('bash', ['-c', script], { cwd: dir, stdio: 'ignore' });
    } catch (error) {
      code = (error as { status: number }).status;
    }
    expect(code).toBe(1);
    const status = execFileSync('cat', [`${dir}/status`], { encoding: 'utf8' });
    expect(outcomes(examples, status).map((o) => [o.started, o.code])).toEqual([
      [true, 0],
      [true, 3],
      [true, null],
      [false, null],
    ]);
    execFileSync('rm', ['-rf', dir]);
  });
});

/** The settings blocks of the documentation, by file, in the order they appear. */
const settingsBlocks = new Map<string, Example[]>();
for (const example of allExamples()) {
  if (example.settings)
    settingsBlocks.set(example.file, [...(settingsBlocks.get(example.file) ?? []), example]);
}

const standIns = mkdtempSync(join(tmpdir(), 'herald-docs-'));
let standInCount = 0;
function standIn(content: string): string {
  const path = join(standIns, `stand-in-${++standInCount}`);
  writeFileSync(path, content);
  return path;
}
/** A value of the kind a secret file holds: its connection URL, else an opaque secret. */
const secretLike = (name: string) =>
  name.startsWith('DATABASE_URL')
    ? 'postgres://herald:secret@db.internal:5432/herald'
    : name.startsWith('AMQP_URL')
      ? 'amqps://herald:secret@mq.internal:5671'
      : 'stand-in-secret';

describe('documentation settings blocks (```sh settings)', () => {
  it('reads NAME=value assignments, several to a line, quoted or not, and refuses anything else', () => {
    const [block] = examplesOf(
      'x.md',
      ['```sh settings', '# the issuer', "A_B=1 C='x y'   # two on a line", 'export D="q r"', '', '```'].join(
        '\n',
      ),
    );
    expect(block).toMatchObject({ run: false, settings: true });
    expect(settingsOf(block!)).toEqual({ A_B: '1', C: 'x y', D: 'q r' });
    const [command] = examplesOf('x.md', '```sh settings\nA=1\nherald api\n```');
    expect(() => settingsOf(command!)).toThrow('x.md:3: not NAME=value: herald api');
  });

  it('the guides have settings blocks to check', () => {
    expect([...settingsBlocks.keys()].length).toBeGreaterThan(0);
  });

  it.each([...settingsBlocks.keys()])(
    '%s: every variable is one Herald reads, and loadConfig accepts the blocks together',
    (file) => {
      const known = new Set(CONFIG_VARIABLES);
      let env: Record<string, string> = {};
      for (const block of settingsBlocks.get(file)!) {
        const variables = settingsOf(block);
        for (const name of Object.keys(variables)) {
          const base = name.replace(/_FILE$/, '');
          expect(known.has(base), `${file}:${block.line}: ${name} is not a variable Herald reads`).toBe(true);
        }
        // Paths of the reader's machine: a TLS file (X_PATH) and a secret's file (X_FILE) are stood in
        // for by files of this one, a secret's holding a value of its kind.
        const values = Object.entries(variables).map(([name, value]) => [
          name,
          name.endsWith('_PATH') ? standIn('') : name.endsWith('_FILE') ? standIn(secretLike(name)) : value,
        ]);
        env = { ...env, ...Object.fromEntries(values) };
        // The one variable every process needs, where the blocks do not give it.
        const database =
          'DATABASE_URL' in env || 'DATABASE_URL_FILE' in env
            ? {}
            : { DATABASE_URL: 'postgres://herald@127.0.0.1:5432/herald' };
        expect(() => loadConfig({ ...database, ...env }), `${file}:${block.line}`).not.toThrow();
      }
    },
  );
});
