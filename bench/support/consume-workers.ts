/**
 * The consumer benchmark's side of its consumer processes (bench/support/consume-child.ts): spawns
 * them, waits until each has built everything, starts them all at once (`go`), and stops them (CPU
 * time and counters come back over IPC). Log lines at warn or above and stderr are kept for the report.
 * The children inherit this process's environment, so HERALD_* settings (HERALD_DB_POOL_SIZE,
 * HERALD_CONSUMER_PREFETCH, …) given to the benchmark apply to them. Also CPU time from /proc for the
 * other processes on the path: the PostgreSQL backends serving the consumers' pools (found by
 * application_name) and the RabbitMQ node (beam.smp, shared with anyone else using the broker).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Database } from '../../src/ports/database.js';
import type { ChildMessage, ParentMessage } from './consume-child.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const CHILD = join(HERE, 'consume-child.ts');

export type ConsumerMode = 'herald' | 'baseline';

export interface ConsumerEnvironment {
  databaseUrl: string;
  schema: string;
  amqpUrl: string;
  queue: string;
  logLevel: string;
  trace: boolean;
  /** --effect-ms: a stand-in remote call of this many ms inside each consumer's transaction (0: none). */
  effectMs: number;
  /** --cpu-prof: each consumer process writes a V8 CPU profile into this directory when it exits. */
  cpuProfileDirectory?: string;
}

type Stopped = Extract<ChildMessage, { type: 'stopped' }>;

export interface ConsumerProcess {
  readonly name: string;
  readonly problems: string[];
  /** Resolves once the child built everything and waits for `go`. */
  readonly ready: Promise<unknown>;
  /** Resolves once the child started consuming after `go`. */
  go(): Promise<void>;
  stop(): Promise<Stopped>;
  /** SIGTERM to this child (clean-up after a failure). */
  kill(): void;
  readonly exited: boolean;
}

/** Application names of the consumers' PostgreSQL connections start with this. */
export const POD_PREFIX = 'bench-consume';

function startConsumer(mode: ConsumerMode, index: number, environment: ConsumerEnvironment): ConsumerProcess {
  const name = `${POD_PREFIX}-${mode}-${index}`;
  const profile = environment.cpuProfileDirectory
    ? [
        '--cpu-prof',
        '--cpu-prof-dir',
        environment.cpuProfileDirectory,
        '--cpu-prof-name',
        `${name}.cpuprofile`,
      ]
    : [];
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', ...profile, CHILD], {
    env: {
      ...process.env,
      DATABASE_URL: environment.databaseUrl,
      HERALD_SCHEMA: environment.schema,
      AMQP_URL: environment.amqpUrl,
      KAFKA_BROKERS: '',
      HERALD_POD: name,
      HERALD_LOG_LEVEL: environment.logLevel,
      BENCH_MODE: mode,
      BENCH_QUEUE: environment.queue,
      BENCH_TRACE: environment.trace ? '1' : '',
      BENCH_EFFECT_MS: String(environment.effectMs),
    },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const problems: string[] = [];
  let exited = false;
  const exit = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      exited = true;
      resolve(code);
    }),
  );
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (/"level":"(warn|error|fatal)"/.test(line)) problems.push(`${name}: ${line}`);
  });
  createInterface({ input: child.stderr! }).on('line', (line) => problems.push(`${name} (stderr): ${line}`));
  const next = (type: ChildMessage['type']) =>
    new Promise<ChildMessage>((resolve, reject) => {
      const onMessage = (message: ChildMessage) => {
        if (message.type !== type) return;
        child.off('message', onMessage);
        resolve(message);
      };
      child.on('message', onMessage);
      exit.then((code) =>
        reject(new Error(`${name} exited with ${code} (waiting for ${type}): ${problems.join('; ')}`)),
      );
    });
  const ready = next('ready');
  ready.catch(() => {});
  const tell = (message: ParentMessage) => child.send(message);
  return {
    name,
    problems,
    get exited() {
      return exited;
    },
    ready,
    async go() {
      await ready;
      const consuming = next('consuming');
      tell({ type: 'go' });
      await consuming;
    },
    async stop() {
      const stopped = next('stopped');
      tell({ type: 'stop' });
      const result = (await stopped) as Stopped;
      // It exits once its connections are closed; one that does not within 30 s is stuck.
      const timer = setTimeout(() => {
        problems.push(`${name}: did not exit within 30 s of stopping; killed`);
        child.kill('SIGKILL');
      }, 30_000);
      const code = await exit;
      clearTimeout(timer);
      if (code !== 0) throw new Error(`${name} exited with ${code}`);
      return result;
    },
    kill() {
      if (!exited) child.kill('SIGTERM');
    },
  };
}

/** Starts `count` consumer processes and waits until each is ready for `go`. */
export async function startConsumers(
  mode: ConsumerMode,
  count: number,
  environment: ConsumerEnvironment,
): Promise<ConsumerProcess[]> {
  const consumers = Array.from({ length: count }, (_, i) => startConsumer(mode, i + 1, environment));
  try {
    await Promise.all(consumers.map((c) => c.ready));
  } catch (error) {
    for (const consumer of consumers) consumer.kill();
    throw error;
  }
  return consumers;
}

/**
 * CPU time of a process (all its threads) in ms, from /proc/<pid>/task/<tid>/schedstat: the
 * scheduler's run time in ns, exact where /proc/<pid>/stat's utime + stime are sampled at 100 Hz.
 * Threads that ended are not counted (the benchmark's processes keep theirs); 0 when it is gone.
 */
export function processCpuMs(pid: number): number {
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        // the thread ended
      }
    }
    return ns / 1e6;
  } catch {
    return 0;
  }
}

/** The main thread's CPU time in ms (schedstat; the pg driver runs on it). */
export function threadCpuMs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return 0;
  }
}

/** The RabbitMQ node's Erlang VM processes. */
export function beamPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'beam.smp') pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

/** PIDs of the backends serving the consumers' pools on this database. */
export async function consumerBackendPids(db: Database): Promise<number[]> {
  const { rows } = await db.query<{ pid: number }>(
    `select pid from pg_stat_activity where datname = current_database() and application_name like $1`,
    [`${POD_PREFIX}-%`],
  );
  return rows.map((r) => r.pid);
}

/**
 * CPU time of a changing set of processes between `start()` and `end()`: processes first seen at the
 * end count from 0 (the consumers' backends are forked after `go`).
 */
export class CpuMeter {
  private readonly before = new Map<number, number>();

  constructor(private readonly pids: () => Promise<number[]> | number[]) {}

  async start(): Promise<void> {
    for (const pid of await this.pids()) this.before.set(pid, processCpuMs(pid));
  }

  async end(): Promise<number> {
    let total = 0;
    for (const pid of await this.pids()) total += processCpuMs(pid) - (this.before.get(pid) ?? 0);
    return total;
  }
}
