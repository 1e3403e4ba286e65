/**
 * `npm run build`'s output runs every role: the build's compiler settings (tsconfig.build.json) into a
 * scratch folder inside the repository (so dist/ of a working checkout is left alone and node_modules
 * still resolves) and its one-file bundle, then `node <out>/herald.js <role> --help` for every role of the CLI's table:
 * exit 0 and the command's own help (what docs/reference/cli.md shows). Catches what only the compiled output gets wrong (an import
 * that resolves under tsx only, a file missing from src/). Under `npm test` (HERALD_TEST_FROM_DIST=1) it
 * checks the dist/ that `npm run build:server` made just before, the same compiler run.
 */
import { execFile, execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { commandHelp } from '../../src/cli/help.js';
import { roleTable } from '../../src/cli/roles.js';

const ROOT = join(import.meta.dirname, '..', '..');
const FROM_DIST = process.env.HERALD_TEST_FROM_DIST === '1';
const table = roleTable(heraldRegistry);
const OUT = FROM_DIST ? join(ROOT, 'dist') : join(ROOT, '.cache', 'build-check', 'dist');

afterAll(() => rmSync(join(ROOT, '.cache', 'build-check'), { recursive: true, force: true }));

describe('the compiled build', () => {
  it('runs every role with --help', async () => {
    if (!FROM_DIST) {
      rmSync(OUT, { recursive: true, force: true });
      execFileSync(
        process.execPath,
        [
          join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
          '-p',
          'tsconfig.build.json',
          '--outDir',
          OUT,
        ],
        { cwd: ROOT, stdio: 'inherit' },
      );
      execFileSync(process.execPath, [join(ROOT, 'scripts', 'bundle-cli.mjs'), OUT], {
        cwd: ROOT,
        stdio: 'inherit',
      });
    }
    // The bundle bin/herald.js starts (every Herald module in one file; the packages external).
    const main = join(OUT, 'herald.js');
    const usage = execFileSync(process.execPath, [main, '--help'], { encoding: 'utf8' });
    const roles = [...usage.matchAll(/^ {2}(\S+) {2,}/gm)].map((m) => m[1]!);
    expect(roles).toEqual(expect.arrayContaining(['migrate', 'scanner', 'relay', 'worker', 'api', 'tick']));
    // Four at a time: each is a whole node start-up of the compiled output.
    const pending = [...roles];
    const runOne = async (): Promise<void> => {
      for (let role = pending.shift(); role !== undefined; role = pending.shift()) {
        const run = await new Promise<{ status: number | null; stdout: string; stderr: string }>(
          (resolve) => {
            const child = execFile(
              process.execPath,
              [main, role!, '--help'],
              { encoding: 'utf8', env: {} },
              (_, stdout, stderr) => resolve({ status: child.exitCode, stdout, stderr }),
            );
          },
        );
        expect({ role, status: run.status, stderr: run.stderr }).toEqual({ role, status: 0, stderr: '' });
        // The command's own help, as docs/reference/cli.md shows it (src/cli/help.ts).
        expect(run.stdout).toBe(`${commandHelp(role!, table[role!]!)}\n`);
      }
    };
    await Promise.all([runOne(), runOne(), runOne(), runOne()]);
  }, 300_000);
});
