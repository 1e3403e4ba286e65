/**
 * Runs the real `herald` CLI as a child process against a test database: from source through tsx (as
 * `npm run herald` does), or, when HERALD_TEST_FROM_DIST=1 (set by `npm test`, which builds first), from
 * `dist/herald.js` (the bundle bin/herald.js starts), as deployed: the same code compiled, without tsx's
 * second of start-up per process.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import type { TestDatabase } from './services.js';

const FROM_DIST = process.env.HERALD_TEST_FROM_DIST === '1';
if (FROM_DIST && !existsSync('dist/herald.js'))
  throw new Error('HERALD_TEST_FROM_DIST=1 but dist/herald.js is missing: run `npm run build:server` first');

/** node's arguments for `herald <args>` (run them with process.execPath, from the repository's root). */
export function heraldArgs(args: readonly string[]): string[] {
  return FROM_DIST ? ['dist/herald.js', ...args] : ['--import', 'tsx', 'src/main.ts', ...args];
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function herald(
  t: Pick<TestDatabase, 'url' | 'schema'>,
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<CliResult> {
  const env = {
    ...process.env,
    DATABASE_URL: t.url,
    HERALD_SCHEMA: t.schema,
    HERALD_LOG_LEVEL: 'silent',
    ...extraEnv,
  };
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      heraldArgs(args),
      { env, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

export interface RunningHerald {
  process: ChildProcess;
  /** stdout and stderr so far, interleaved as they arrived. */
  output(): string;
  /** SIGTERM (SIGKILL after `timeoutMs`); resolves with the exit code. */
  stop(timeoutMs?: number): Promise<number | null>;
  /** Resolves with the exit code once the process ends by itself. */
  exited(): Promise<number | null>;
}

/** Starts `herald <args>` as a child process with exactly `env` (nothing inherited beyond PATH and HOME). */
export function spawnHerald(args: string[], env: Record<string, string>): RunningHerald {
  const child = spawn(process.execPath, heraldArgs(args), {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  return {
    process: child,
    output: () => output,
    exited: () => exit,
    async stop(timeoutMs = 30_000) {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      try {
        return await exit;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
