/**
 * Where the CPU went over a stretch of time: the whole host's busy share, from the first line of
 * /proc/stat (the share of all cores' time spent neither idle nor waiting for I/O: PostgreSQL,
 * RabbitMQ, the benchmark and other people's jobs alike), and the CPU time of the PostgreSQL server the
 * benchmark talks to (its postmaster and every process it forked, backends and WAL writer included)
 * and of the RabbitMQ broker (the process listening on the AMQP port, found on this host).
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { Database } from '../../src/ports/database.js';
import { processCpuMs } from './dispatch-roles.js';

export interface HostCpuSample {
  busy: number;
  total: number;
}

export function hostCpu(): HostCpuSample {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((sum, value) => sum + value, 0);
  return { busy: total - fields[3]! - fields[4]!, total };
}

/** Share (0..1) of all cores busy since `from`. */
export function hostBusySince(from: HostCpuSample): number {
  const to = hostCpu();
  return (to.busy - from.busy) / (to.total - from.total);
}

/** The parent pid of `pid` (field 4 of /proc/<pid>/stat), or undefined when it is gone. */
function parentPid(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/**
 * CPU time of a server process and every process it forked: `since()` sums, over those alive at that
 * moment, the CPU each used since `processTreeCpu` was called (all of it for processes forked since);
 * processes that ended in between are missed (the benchmarks' connections live through the measured
 * stretch).
 */
export function processTreeCpu(root: number) {
  const sample = () => {
    const cpu = new Map<number, number>([[root, processCpuMs(root)]]);
    for (const entry of readdirSync('/proc')) {
      const pid = Number(entry);
      if (!Number.isInteger(pid) || parentPid(pid) !== root) continue;
      try {
        cpu.set(pid, processCpuMs(pid));
      } catch {
        // ended between the two reads
      }
    }
    return cpu;
  };
  const start = sample();
  return {
    /** CPU ms the processes used since the call. */
    since(): number {
      let total = 0;
      for (const [pid, ms] of sample()) total += ms - (start.get(pid) ?? 0);
      return total;
    },
  };
}

/** The PostgreSQL server behind `db` (its postmaster, the parent of one of its backends). */
export async function postgresCpu(db: Database) {
  const backend = (await db.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
  const postmaster = parentPid(backend);
  if (postmaster === undefined) throw new Error('cannot find the PostgreSQL server process (another host?)');
  return processTreeCpu(postmaster);
}

/** The process listening on TCP `port`, from /proc/net/tcp{,6} and the processes' open sockets. */
export function listeningPid(port: number): number | undefined {
  const inodes = new Set<string>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is hex ip:port; state 0A is LISTEN; field 10 is the socket's inode.
      if (f.length > 9 && Number.parseInt(f[1]!.split(':')[1]!, 16) === port && f[3] === '0A')
        inodes.add(f[9]!);
    }
  }
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
        if (target.startsWith('socket:[') && inodes.has(target.slice(8, -1))) return pid;
      }
    } catch {
      // gone, or not ours to read
    }
  }
  return undefined;
}

/** The RabbitMQ broker at `amqpUrl` (the process listening on its port: this host only), or undefined. */
export function rabbitmqCpu(amqpUrl: string) {
  const url = new URL(amqpUrl);
  const pid = listeningPid(Number(url.port || (url.protocol === 'amqps:' ? 5671 : 5672)));
  return pid === undefined ? undefined : processTreeCpu(pid);
}
