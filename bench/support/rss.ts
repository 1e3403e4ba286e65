/**
 * Resident memory of a child process from /proc/<pid>/status: VmRSS sampled every `intervalMs`, and
 * VmHWM (the kernel's own high-water mark of the resident set, which no sampling can miss) on demand.
 */
import { readFileSync } from 'node:fs';

/** A field of /proc/<pid>/status in MB (its value is in kB), or NaN when the process is gone. */
export function procStatusMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(
      readFileSync(`/proc/${pid}/status`, 'utf8'),
    );
    return match ? Number(match[1]) / 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

export class RssSampler {
  private readonly timer: NodeJS.Timeout;
  readonly samples: { atMs: number; mb: number }[] = [];
  private readonly started = performance.now();

  constructor(
    readonly pid: number,
    intervalMs = 100,
  ) {
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
    this.sample();
  }

  private sample() {
    const mb = procStatusMb(this.pid, 'VmRSS');
    if (!Number.isNaN(mb)) this.samples.push({ atMs: performance.now() - this.started, mb });
  }

  /** The largest VmRSS sampled. */
  get maxSampledMb(): number {
    return this.samples.reduce((max, s) => Math.max(max, s.mb), 0);
  }

  /** VmRSS samples about every `everyMs`, rounded (for the report). */
  every(everyMs: number): number[] {
    const out: number[] = [];
    let next = 0;
    for (const s of this.samples) {
      if (s.atMs >= next) {
        out.push(Math.round(s.mb));
        next = s.atMs + everyMs;
      }
    }
    return out;
  }

  stop() {
    clearInterval(this.timer);
  }
}
