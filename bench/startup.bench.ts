/**
 * How fast a role comes back (issue 23, item 9): spawn → `/readyz` answering 200, for each long-running
 * role, started as deployed (`node bin/herald.js <role>`, which runs the compiled dist/) and, for
 * comparison, from the source through tsx (`node --import tsx src/main.ts <role>`, how the roles ran
 * before). The baseline, measured in the same run: a bare `node` process that serves a 200 on a port
 * (Node's own start-up floor on this machine, the same way of waiting).
 *
 *   npm run bench:startup -- [--runs 5] [--roles relay,scanner,worker,projector,maintenance,api]
 *                            [--load 0,2] [--no-source]
 *
 * `--load` lists the numbers of busy CPU burners (one busy loop each) to measure under: 0 is an idle
 * machine, 2 keeps both cores of this machine busy. Each role runs `--runs` times per mode and load, one
 * process at a time, on a fresh migrated database, every service its role needs up (scripts/services);
 * its endpoint on a free port (HERALD_METRICS_PORT=0: the "listening" log line gives the port; the api
 * role's own HERALD_API_PORT). Printed per role and mode: p50 and max in ms, and `ratio` = p50 ÷ the
 * baseline's p50. Goal (issue 23): ≤ 2 s from the compiled build on an idle machine.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createTestDatabase, freePort } from '../test/support/services.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    roles: { type: 'string', default: 'relay,scanner,worker,projector,maintenance,api' },
    load: { type: 'string', default: '0,2' },
    'no-source': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  process.stdout.write(
    'npm run bench:startup -- [--runs 5] [--roles relay,scanner,…] [--load 0,2] [--no-source] (see bench/startup.bench.ts)\n',
  );
  process.exit(0);
}
const runs = Number(values.runs);
const roles = values.roles.split(',').filter(Boolean);
const loads = values.load.split(',').map(Number);
const log = (line: string) => process.stdout.write(`${line}\n`);

type Mode = 'dist' | 'source' | 'baseline';
const BASELINE = `require('node:http').createServer((q, s) => s.end('ok')).listen(Number(process.env.PORT), '127.0.0.1')`;

/** A 200 from `url`, or false (refused, not ready, timed out). */
async function ok(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
    await response.arrayBuffer();
    return response.status === 200;
  } catch {
    return false;
  }
}

async function stop(child: ChildProcess) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await exited;
  clearTimeout(timer);
}

/** Spawns one process and returns the ms from spawn to its `/readyz` (the baseline: `/`) answering 200. */
async function startOnce(mode: Mode, role: string, env: NodeJS.ProcessEnv): Promise<number> {
  const port = await freePort();
  const args =
    mode === 'baseline'
      ? ['-e', BASELINE]
      : mode === 'dist'
        ? [join(ROOT, 'bin', 'herald.js'), role]
        : ['--import', 'tsx', join(ROOT, 'src', 'main.ts'), role];
  const started = performance.now();
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...env, PORT: String(port), HERALD_API_PORT: String(port), HERALD_API_HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let url: string | undefined =
    mode === 'baseline'
      ? `http://127.0.0.1:${port}/`
      : role === 'api'
        ? `http://127.0.0.1:${port}/readyz`
        : undefined;
  let output = '';
  createInterface({ input: child.stdout! }).on('line', (line) => {
    output += `${line}\n`;
    if (url || !line.includes('health endpoint listening')) return;
    url = `${(JSON.parse(line) as { url: string }).url}/readyz`;
  });
  child.stderr!.on('data', (chunk) => {
    output += chunk;
  });
  try {
    const deadline = started + 120_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${role} (${mode}) exited ${child.exitCode}:\n${output}`);
      if (url && (await ok(url))) return performance.now() - started;
      if (performance.now() > deadline)
        throw new Error(`${role} (${mode}) not ready after 120 s:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  } finally {
    await stop(child);
  }
}

/** `n` processes that keep a core busy each until stopped. */
function burners(n: number): ChildProcess[] {
  return Array.from({ length: n }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

const database = await createTestDatabase();
const env: NodeJS.ProcessEnv = {
  ...process.env,
  DATABASE_URL: database.url,
  HERALD_SCHEMA: database.schema,
  HERALD_METRICS_HOST: '127.0.0.1',
  HERALD_METRICS_PORT: '0',
  HERALD_LOG_LEVEL: 'info',
  HERALD_POD: 'bench-startup',
};
const modes: Mode[] = values['no-source'] ? ['dist'] : ['dist', 'source'];
log(
  `startup: ${runs} runs per role and mode, one process at a time; roles ${roles.join(', ')}; loads ${loads.join(', ')} busy loops`,
);
try {
  for (const load of loads) {
    const burning = burners(load);
    try {
      const floor: number[] = [];
      for (let i = 0; i < runs; i++) floor.push(await startOnce('baseline', 'node', env));
      floor.sort((a, b) => a - b);
      const floorP50 = percentile(floor, 50);
      log(
        `load ${load}: baseline (bare node http server) p50=${floorP50.toFixed(0)} ms max=${floor.at(-1)!.toFixed(0)} ms`,
      );
      for (const role of roles) {
        for (const mode of modes) {
          const times: number[] = [];
          for (let i = 0; i < runs; i++) times.push(await startOnce(mode, role, env));
          times.sort((a, b) => a - b);
          const p50 = percentile(times, 50);
          log(
            `load ${load}: ${role.padEnd(11)} ${mode.padEnd(6)} p50=${p50.toFixed(0)} ms max=${times.at(-1)!.toFixed(0)} ms ratio=${(p50 / floorP50).toFixed(1)}`,
          );
        }
      }
    } finally {
      for (const burner of burning) burner.kill('SIGKILL');
    }
  }
} finally {
  await database.drop();
}
