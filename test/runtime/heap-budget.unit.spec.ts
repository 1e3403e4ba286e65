/**
 * HeapBudget (ADR 0033): a full collection once the used heap grew past the budget since the last one,
 * none before; what V8 collects on its own lowers the floor.
 */
import { getHeapStatistics } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { HeapBudget } from '../../src/runtime/heap-budget.js';

/** Objects that stay reachable until the returned array is dropped. */
function allocate(mb: number): unknown[] {
  const kept: unknown[] = [];
  for (let i = 0; i < mb * 1024; i++) kept.push(new Array(128).fill(i));
  return kept;
}

describe('HeapBudget', () => {
  it('collects once the heap grew past the budget, and the dead objects are gone afterwards', () => {
    const budget = new HeapBudget(8 * 1024 * 1024);
    let garbage: unknown[] | null = allocate(16);
    expect(garbage.length).toBeGreaterThan(0);
    garbage = null;
    const before = getHeapStatistics().used_heap_size;
    expect(budget.check()).toBe(true);
    expect(budget.collections).toBe(1);
    // The ~16 MB allocated above were dead: a full collection freed them.
    expect(getHeapStatistics().used_heap_size).toBeLessThan(before - 8 * 1024 * 1024);
    // Just collected: nothing grew past the budget since.
    expect(budget.check()).toBe(false);
    expect(budget.collections).toBe(1);
  });

  it('leaves the heap alone while it stays within the budget', () => {
    const budget = new HeapBudget(512 * 1024 * 1024);
    const kept = allocate(8);
    expect(budget.check()).toBe(false);
    expect(budget.collections).toBe(0);
    expect(kept.length).toBe(8 * 1024);
  });
});
