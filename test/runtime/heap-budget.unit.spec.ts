/**
 * HeapBudget (ADR 0033): a full collection once the old generation grew past the budget since the last
 * one, none before; what V8 collects on its own lowers the floor. The policy is checked on a scripted
 * probe (V8's own heap moves with whatever else the process ran); that the collector is V8's full
 * collection is checked on the real heap, by an object only a full collection can free.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { HeapBudget, type HeapProbe } from '../../src/runtime/heap-budget.js';

const MB = 1024 * 1024;

/** A probe whose old generation is what the test sets; a collection leaves `afterCollection`. */
function scripted(start: number, afterCollection: number) {
  const heap = { used: start, collections: 0 };
  const probe: HeapProbe = {
    oldGenerationUsed: () => heap.used,
    fullCollection: () => () => {
      heap.collections++;
      heap.used = afterCollection;
    },
  };
  return { heap, probe };
}

describe('HeapBudget', () => {
  it('collects once the old generation grew by the budget since the last collection, and not before', () => {
    const { heap, probe } = scripted(40 * MB, 42 * MB);
    const budget = new HeapBudget(16 * MB, probe);
    heap.used = 55 * MB; // 15 MB above the floor
    expect(budget.check()).toBe(false);
    heap.used = 56 * MB; // 16 MB above it
    expect(budget.check()).toBe(true);
    expect([budget.collections, heap.collections, heap.used]).toEqual([1, 1, 42 * MB]);
    // The floor is what the collection left: another 16 MB from there, not from the start.
    heap.used = 57 * MB;
    expect(budget.check()).toBe(false);
    heap.used = 58 * MB;
    expect(budget.check()).toBe(true);
    expect(budget.collections).toBe(2);
  });

  it('takes what V8 collected on its own as the new floor', () => {
    const { heap, probe } = scripted(60 * MB, 30 * MB);
    const budget = new HeapBudget(16 * MB, probe);
    heap.used = 35 * MB; // V8 collected: the floor is now 35
    expect(budget.check()).toBe(false);
    heap.used = 50 * MB; // 15 above the new floor (it would be under the old one)
    expect(budget.check()).toBe(false);
    heap.used = 51 * MB;
    expect(budget.check()).toBe(true);
    expect(heap.collections).toBe(1);
  });

  it('does nothing where no collector can be had', () => {
    const budget = new HeapBudget(0, { oldGenerationUsed: () => 100 * MB, fullCollection: () => null });
    expect(budget.check()).toBe(false);
    expect(budget.collections).toBe(0);
  });

  it("runs V8's full collection: an unreachable object is gone afterwards", async () => {
    const dropped = (() => new WeakRef({ payload: new Array(1024).fill('x') }))();
    // A WeakRef's target stays alive until the turn that made it ends.
    await nextTurn();
    const budget = new HeapBudget(0); // any growth, even none, is past a budget of 0
    expect(budget.check()).toBe(true);
    expect(budget.collections).toBe(1);
    expect(dropped.deref()).toBeUndefined();
  });
});
