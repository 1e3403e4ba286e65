/** Runs the real `herald` CLI from source (as `npm run herald` does) against a test database. */
import { execFile } from 'node:child_process';
import type { TestDatabase } from './services.js';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function herald(t: Pick<TestDatabase, 'url' | 'schema'>, args: string[]): Promise<CliResult> {
  const env = { ...process.env, DATABASE_URL: t.url, HERALD_SCHEMA: t.schema, HERALD_LOG_LEVEL: 'silent' };
  return new Promise((resolve) => {
    execFile(
      'node',
      ['--import', 'tsx', 'src/cli/main.ts', ...args],
      { env, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
