/**
 * A heap budget for long streaming work inside a shared process (the CSV build of `herald worker`,
 * issue 22 item 5): bounded memory without a Node flag for the user to know. V8 lets the old
 * generation fill with dead objects up to a limit it sets at 3–4× what the last full collection left
 * (a million-row build peaked at ~160 MB of heap over ~40 MB live), and a running process cannot lower
 * that limit: `--max-old-space-size` and its kin are read when the isolate is created. So the work calls
 * `check()` between batches; once the old generation has grown more than `budgetBytes` above what the
 * last full collection left, it runs one (V8's own collector, taken from a fresh vm context once
 * `--expose-gc` is on: the process's global scope gets no `gc`). Memory only, never correctness: where the collector
 * cannot be had, `check()` does nothing. ADR 0033.
 */
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type Collect = () => void;
let collector: Collect | null | undefined;

/** V8's full collection: `globalThis.gc` when node runs with --expose-gc, else one exposed to a vm context. */
function fullCollection(): Collect | null {
  if (collector !== undefined) return collector;
  const exposed = (globalThis as { gc?: unknown }).gc;
  if (typeof exposed === 'function') {
    collector = exposed as Collect;
    return collector;
  }
  try {
    // Left on: turning it off again could take `gc` from code that turned it on before (tests do).
    setFlagsFromString('--expose-gc');
    collector = runInNewContext('gc') as Collect;
  } catch {
    collector = null;
  }
  return collector;
}

/**
 * The heap V8 keeps past its young generation: where what outlives a few scavenges piles up until a
 * full collection (the young generation empties itself every few megabytes and is not counted).
 */
export function oldGenerationUsed(): number {
  let used = 0;
  for (const space of getHeapSpaceStatistics()) {
    if (space.space_name !== 'new_space' && space.space_name !== 'new_large_object_space') {
      used += space.space_used_size;
    }
  }
  return used;
}

/** What the budget reads and runs: V8's by default; a test gives its own to check the policy exactly. */
export interface HeapProbe {
  oldGenerationUsed(): number;
  fullCollection(): Collect | null;
}

const v8Probe: HeapProbe = { oldGenerationUsed, fullCollection };

export class HeapBudget {
  /** The old generation after the last full collection (at first: when the budget was made). */
  private floor: number;
  /** Full collections this budget ran. */
  collections = 0;

  constructor(
    private readonly budgetBytes: number,
    private readonly probe: HeapProbe = v8Probe,
  ) {
    this.floor = probe.oldGenerationUsed();
  }

  /** Runs a full collection if the old generation grew past the budget since the last one; true if it did. */
  check(): boolean {
    const used = this.probe.oldGenerationUsed();
    // V8 collected on its own since: what it left is the new floor.
    if (used < this.floor) this.floor = used;
    if (used - this.floor < this.budgetBytes) return false;
    const collect = this.probe.fullCollection();
    if (!collect) return false;
    collect();
    this.collections++;
    this.floor = this.probe.oldGenerationUsed();
    return true;
  }
}
