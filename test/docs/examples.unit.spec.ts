/**
 * The example runner's reading of the documentation (ADR 0036): which files and blocks are examples,
 * what their markers mean, that a misspelt marker is an error rather than a silently skipped block,
 * and that every shell example — the `no-run` ones too — is valid bash.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { allExamples, driverScript, examplesOf, inScope, outcomes } from './support/examples.js';

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
      "docs/x.md:2: unknown marker 'no_run' (expected no-run or exit=<code>)",
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
