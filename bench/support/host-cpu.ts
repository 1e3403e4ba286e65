/**
 * Where the CPU went over a stretch of time: the whole host's busy share, from the first line of
 * /proc/stat (the share of all cores' time spent neither idle nor waiting for I/O: PostgreSQL,
 * RabbitMQ, the benchmark and other people's jobs alike), and the CPU time of the PostgreSQL server the
 * benchmark talks to (its postmaster and every process it forked, backends and WAL writer included).
 */
import { readdirSync, readFileSync } from 'node:fs';
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
 * CPU time of the PostgreSQL server behind `db` (found from one of its backends' parent). `since()`
 * sums, over the server's processes alive at that moment, the CPU each used since `postgresCpu` was
 * called (all of it for processes forked since); processes that ended in between are missed (the
 * benchmarks' connections live through the measured stretch).
 */
export async function postgresCpu(db: Database) {
  const backend = (await db.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
  const postmaster = parentPid(backend);
  if (postmaster === undefined) throw new Error('cannot find the PostgreSQL server process (another host?)');
  const sample = () => {
    const cpu = new Map<number, number>([[postmaster, processCpuMs(postmaster)]]);
    for (const entry of readdirSync('/proc')) {
      const pid = Number(entry);
      if (!Number.isInteger(pid) || parentPid(pid) !== postmaster) continue;
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
    /** CPU ms the server used since the call. */
    since(): number {
      let total = 0;
      for (const [pid, ms] of sample()) total += ms - (start.get(pid) ?? 0);
      return total;
    },
  };
}
