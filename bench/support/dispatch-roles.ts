/**
 * Herald's scanner, relay and worker roles as separate processes, exactly as `herald scanner` / `herald
 * relay` / `herald worker` run from source (`node --import tsx src/main.ts <role>`), configured through the environment.
 * A role counts as ready when it logs its "started" line (pino JSON on stdout, level info: the
 * production default, so the per-claim log lines are part of what is measured). Stopped with SIGTERM,
 * which every long-running role answers by finishing in-flight work and exiting 0.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const MAIN = join(HERE, '..', '..', 'src', 'main.ts');
const TRACE_PRELOAD = join(HERE, 'dispatch-trace.ts');
const READY: Record<RoleName, string> = {
  scanner: 'scanner started',
  relay: 'relay started',
  worker: 'worker started',
  'sms-gateway': 'sms gateway started',
};

/** Logged by the scanners, which run without AMQP_URL on purpose (see RoleEnvironment.amqpUrl). */
const EXPECTED_WARNING = 'AMQP_URL not set: wake-up messages';

export type RoleName = 'scanner' | 'relay' | 'worker' | 'sms-gateway';

export interface RoleProcess {
  readonly name: string;
  readonly role: RoleName;
  readonly pid: number;
  /** Resolves when the role logged its "started" line. */
  readonly ready: Promise<void>;
  /** Log lines at level warn or above, as they came (printed by the benchmark). */
  readonly problems: string[];
  /** True once the process ended. */
  readonly exited: boolean;
  /** CPU time (user + system) the process used so far, in ms, from /proc/<pid>/stat. */
  cpuMs(): number;
  stop(): Promise<void>;
}

/** Clock ticks per second of /proc's utime and stime (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** CPU time (user + system) process `pid` used so far, in ms, from /proc/<pid>/stat. */
export function processCpuMs(pid: number): number {
  // The command is in parentheses; utime and stime are fields 14 and 15 of the line.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
}

export interface RoleEnvironment {
  databaseUrl: string;
  schema: string;
  /** Relays and workers get it, scanners never: a scanner with AMQP_URL would also consume tick messages
   * from the shared process_campaign queue, taking them from anyone else's tests (ticks are wake-ups only). */
  amqpUrl?: string;
  /** Extra HERALD_* settings. */
  settings?: Record<string, string>;
  /** --trace: load bench/support/dispatch-trace.ts, which writes <pod>.json here at exit. */
  traceDirectory?: string;
  /** With traceDirectory: another preload instead of dispatch-trace.ts (bench:smpp's smpp-trace.ts). */
  tracePreload?: string;
}

export function startRole(
  role: RoleName,
  index: number,
  environment: RoleEnvironment,
  /**
   * `main`: a compiled entry (dist/main.js) run without the tsx loader, as the image runs `herald`;
   * `nodeFlags`: flags for node itself (e.g. --cpu-prof, --max-old-space-size=…).
   */
  options: { main?: string; nodeFlags?: readonly string[] } = {},
): RoleProcess {
  const name = `bench-${role}-${index}`;
  const trace = environment.traceDirectory ? ['--import', environment.tracePreload ?? TRACE_PRELOAD] : [];
  const flags = options.nodeFlags ?? [];
  const argv = options.main
    ? [...flags, ...trace, options.main, role]
    : [...flags, '--import', 'tsx', ...trace, MAIN, role];
  const child: ChildProcess = spawn(process.execPath, argv, {
    env: {
      ...process.env,
      DATABASE_URL: environment.databaseUrl,
      HERALD_SCHEMA: environment.schema,
      // Scanners too, as deployed: they publish the claims they commit themselves (ADR 0024).
      AMQP_URL: environment.amqpUrl ?? '',
      // LINE dispatch goes through RabbitMQ only: no Kafka sink beside it in the relays.
      KAFKA_BROKERS: '',
      HERALD_POD: name,
      HERALD_LOG_LEVEL: 'info',
      HERALD_BENCH_TRACE_DIR: environment.traceDirectory ?? '',
      // Several role processes on one host: each takes a free port for its metrics endpoint.
      HERALD_METRICS_PORT: '0',
      ...environment.settings,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const problems: string[] = [];
  let exited = false;
  const exit = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      exited = true;
      resolve(code);
    }),
  );
  const ready = new Promise<void>((resolve, reject) => {
    exit.then((code) => reject(new Error(`${name} exited with ${code} before it was ready`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.includes(`"msg":"${READY[role]}"`)) resolve();
      // pino levels by label: keep warnings and errors for the report (but the expected one about ticks).
      if (/"level":"(warn|error|fatal)"/.test(line) && !line.includes(EXPECTED_WARNING)) {
        problems.push(`${name}: ${line}`);
      }
    });
  });
  ready.catch(() => {});
  createInterface({ input: child.stderr! }).on('line', (line) => problems.push(`${name} (stderr): ${line}`));
  return {
    name,
    role,
    pid: child.pid!,
    ready,
    problems,
    get exited() {
      return exited;
    },
    cpuMs: () => processCpuMs(child.pid!),
    async stop() {
      if (!exited) child.kill('SIGTERM');
      const code = await exit;
      if (code !== 0) throw new Error(`${name} exited with ${code}`);
    },
  };
}

/** Starts `scanners` scanner, `relays` relay and `workers` worker processes and waits until all are ready. */
export async function startRoles(
  counts: { scanners: number; relays: number; workers?: number },
  environment: RoleEnvironment,
): Promise<RoleProcess[]> {
  const roles = [
    ...Array.from({ length: counts.scanners }, (_, i) => startRole('scanner', i + 1, environment)),
    ...Array.from({ length: counts.relays }, (_, i) => startRole('relay', i + 1, environment)),
    ...Array.from({ length: counts.workers ?? 0 }, (_, i) => startRole('worker', i + 1, environment)),
  ];
  try {
    await Promise.all(roles.map((role) => role.ready));
  } catch (error) {
    await stopRoles(roles).catch(() => {});
    throw error;
  }
  return roles;
}

export async function stopRoles(roles: readonly RoleProcess[]): Promise<void> {
  const results = await Promise.allSettled(roles.map((role) => role.stop()));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
