/**
 * `herald verify` on a million events (docs/benchmarks.md has results and how to read them).
 *
 *   npm run bench:verify -- [--campaigns 200000] [--corrupt-every 0] [--sandbox]
 *
 * Seeds N campaign streams × 5 events (1,000,000 events for the default 200,000 campaigns) and the
 * matching state rows with set-based SQL (bench/support/seed-campaign-streams.ts; not timed), then runs
 * the real CLI, `node --import tsx src/main.ts verify`, as a child process and reports its wall
 * time, events/s and peak RSS (VmHWM from /proc, sampled every 100 ms). With --corrupt-every k, every
 * k-th row is hand-corrupted first, so the drift path (re-reading each drifted stream) is measured too
 * and the exit code must be 1. --sandbox also times `replay --until … --into …` over the same log.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { createTestDatabase } from '../test/support/services.js';
import { corruptRows, seedCampaignStreams } from './support/seed-campaign-streams.js';

const { values } = parseArgs({
  options: {
    campaigns: { type: 'string', default: '200000' },
    'corrupt-every': { type: 'string', default: '0' },
    sandbox: { type: 'boolean', default: false },
  },
});
const campaigns = Number(values.campaigns);
const corruptEvery = Number(values['corrupt-every']);
const log = (line: string) => process.stdout.write(`${line}\n`);

function peakRssMb(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
    return kb / 1024;
  } catch {
    return 0;
  }
}

async function runCli(env: NodeJS.ProcessEnv, args: string[], quiet = false) {
  const started = Date.now();
  const child = spawn('node', ['--import', 'tsx', 'src/main.ts', ...args], {
    env,
    stdio: ['ignore', 'pipe', quiet ? 'ignore' : 'inherit'],
  });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  let peak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, peakRssMb(child.pid!));
  }, 100);
  const code = await new Promise<number>((resolve) => child.on('exit', (c) => resolve(c ?? 1)));
  clearInterval(sampler);
  return { code, ms: Date.now() - started, peakRssMb: peak, stdout };
}

async function main() {
  const database = await createTestDatabase();
  try {
    const env = {
      ...process.env,
      DATABASE_URL: database.url,
      HERALD_SCHEMA: database.schema,
      HERALD_LOG_LEVEL: 'warn',
    };
    log(`setup: ${campaigns} campaign streams × 5 events`);
    let t = Date.now();
    await seedCampaignStreams(database.db, campaigns);
    const { rows } = await database.db.query<{ events: number; mb: number }>(
      `select (select count(*) from event)::int as events,
              (pg_total_relation_size('event') / 1048576.0)::float8 as mb`,
    );
    const events = rows[0]!.events;
    log(
      `setup: ${events} events (${rows[0]!.mb.toFixed(0)} MB with indexes) + ${campaigns} rows in ${((Date.now() - t) / 1000).toFixed(1)} s`,
    );
    let corrupted = 0;
    if (corruptEvery > 0) {
      corrupted = await corruptRows(database.db, campaigns, corruptEvery);
      log(`setup: ${corrupted} rows hand-corrupted (status)`);
    }

    // A throwaway run of the CLI on an empty schema gives the process's baseline RSS (runtime + tsx).
    const baseline = await runCli({ ...env, HERALD_SCHEMA: 'herald_bench_empty' }, ['verify'], true);
    const verify = await runCli(env, ['verify']);
    const summary = verify.stdout.trim().split('\n').at(-1) ?? '';
    const expected = corrupted > 0 ? 1 : 0;
    if (verify.code !== expected)
      throw new Error(`verify exited ${verify.code}, expected ${expected}: ${summary}`);
    const drifts = verify.stdout.split('\n').filter((line) => line.startsWith('DRIFT')).length;
    if (drifts !== corrupted) throw new Error(`verify reported ${drifts} drifts, expected ${corrupted}`);
    log(`verify: ${summary}`);
    log(
      `verify wall=${(verify.ms / 1000).toFixed(1)}s events/s=${Math.round((events / verify.ms) * 1000)} drifts=${drifts} peak_rss_mb=${verify.peakRssMb.toFixed(0)} baseline_rss_mb=${baseline.peakRssMb.toFixed(0)}`,
    );

    if (values.sandbox) {
      t = Date.now();
      const sandbox = await runCli(env, [
        'replay',
        '--until',
        '2026-01-02T00:00:00Z',
        '--into',
        'bench_sandbox',
      ]);
      if (sandbox.code !== 0) throw new Error(`sandbox exited ${sandbox.code}`);
      log(`sandbox: ${sandbox.stdout.trim().split('\n')[1]?.trim()}`);
      log(
        `sandbox wall=${((Date.now() - t) / 1000).toFixed(1)}s peak_rss_mb=${sandbox.peakRssMb.toFixed(0)}`,
      );
    }
  } finally {
    await database.drop();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
