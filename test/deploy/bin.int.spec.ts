/**
 * The `herald` bin (bin/herald.js) starts the compiled build only (issue 23: roles come back from
 * dist/, never through tsx): without dist/ it exits 1 saying what to run, in a checkout and in a package
 * built without it; with it, it runs the CLI.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const work = mkdtempSync(join(tmpdir(), 'herald-bin-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const run = (bin: string, args: string[]) =>
  promisify(execFile)(process.execPath, [bin, ...args], { encoding: 'utf8' }).then(
    (r) => ({ code: 0, ...r }),
    (e: { code: number; stdout: string; stderr: string }) => ({
      code: e.code,
      stdout: e.stdout,
      stderr: e.stderr,
    }),
  );

/** A folder with the bin and, as asked, a src/ and a dist/main.js that prints its arguments. */
function layout(name: string, parts: { src?: boolean; dist?: boolean }) {
  const dir = join(work, name);
  mkdirSync(join(dir, 'bin'), { recursive: true });
  cpSync(join(ROOT, 'bin', 'herald.js'), join(dir, 'bin', 'herald.js'));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  if (parts.src) {
    mkdirSync(join(dir, 'src'));
    writeFileSync(join(dir, 'src', 'main.ts'), '');
  }
  if (parts.dist) {
    mkdirSync(join(dir, 'dist'));
    writeFileSync(
      join(dir, 'dist', 'main.js'),
      'console.log("compiled", process.argv.slice(2).join(" "));\n',
    );
  }
  return join(dir, 'bin', 'herald.js');
}

describe('bin/herald.js', () => {
  it('in a checkout without dist/ it exits 1 and names the build to run (no tsx fallback)', async () => {
    const result = await run(layout('checkout', { src: true }), ['scanner']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/dist\/main\.js is missing: run `npm run build:server`/);
  });

  it('in a package without dist/ it exits 1 and says the package lacks it', async () => {
    const result = await run(layout('package', {}), ['scanner']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/the package was built without its dist\//);
  });

  it('runs dist/ with the arguments; warns when src/ is newer than the build', async () => {
    const packaged = await run(layout('built', { dist: true }), ['relay', '--help']);
    expect(packaged).toMatchObject({ code: 0, stdout: 'compiled relay --help\n', stderr: '' });
    const bin = layout('stale', { dist: true });
    const later = new Date(Date.now() + 60_000);
    mkdirSync(join(work, 'stale', 'src'));
    writeFileSync(join(work, 'stale', 'src', 'main.ts'), '');
    utimesSync(join(work, 'stale', 'src', 'main.ts'), later, later);
    const stale = await run(bin, ['relay']);
    expect(stale.stdout).toBe('compiled relay\n');
    expect(stale.stderr).toMatch(/src\/ changed after the last build/);
  });
});
