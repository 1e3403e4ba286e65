/**
 * How busy the whole host was over a stretch of time, from the first line of /proc/stat: the share of
 * all cores' time spent neither idle nor waiting for I/O (everything counts: PostgreSQL, RabbitMQ, the
 * benchmark, other people's jobs).
 */
import { readFileSync } from 'node:fs';

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
