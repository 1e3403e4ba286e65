/** withHeartbeat under fake timers: cadence, no overlap, no beat after the work settles, failures tolerated. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { withHeartbeat } from '../../src/worker/heartbeat.js';

/** A promise the test settles by hand. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('withHeartbeat', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('beats every interval while the work runs, not before the first interval, and returns its result', async () => {
    const work = deferred<string>();
    const beat = vi.fn(async () => {});
    const result = withHeartbeat(1_000, beat, () => work.promise);

    await vi.advanceTimersByTimeAsync(999);
    expect(beat).toHaveBeenCalledTimes(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(beat).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(beat).toHaveBeenCalledTimes(3);

    work.resolve('sent');
    await expect(result).resolves.toBe('sent');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(beat).toHaveBeenCalledTimes(3);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('stops beating when the work fails and rethrows the work error', async () => {
    const beat = vi.fn(async () => {});
    const work = deferred<never>();
    const result = withHeartbeat(500, beat, () => work.promise);
    const settled = expect(result).rejects.toThrow('send failed');

    await vi.advanceTimersByTimeAsync(1_200);
    expect(beat).toHaveBeenCalledTimes(2);
    work.reject(new Error('send failed'));
    await settled;
    await vi.advanceTimersByTimeAsync(5_000);
    expect(beat).toHaveBeenCalledTimes(2);
  });

  it('keeps beating after a failed beat and reports each failure', async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const beat = vi.fn(async () => {
      calls++;
      if (calls === 1) throw new Error('database unavailable');
    });
    const work = deferred<number>();
    const result = withHeartbeat(100, beat, () => work.promise, { onError: (error) => errors.push(error) });

    await vi.advanceTimersByTimeAsync(300);
    expect(beat).toHaveBeenCalledTimes(3);
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error).message).toBe('database unavailable');
    work.resolve(7);
    await expect(result).resolves.toBe(7);
  });

  it('never overlaps beats: a slow beat delays the next one', async () => {
    const gates: Array<ReturnType<typeof deferred<void>>> = [];
    let running = 0;
    let maxRunning = 0;
    const beat = vi.fn(async () => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      const gate = deferred<void>();
      gates.push(gate);
      await gate.promise;
      running--;
    });
    const work = deferred<void>();
    const result = withHeartbeat(100, beat, () => work.promise);

    await vi.advanceTimersByTimeAsync(100);
    expect(beat).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(1_000); // the first beat is still running
    expect(beat).toHaveBeenCalledTimes(1);
    gates[0]!.resolve();
    await vi.advanceTimersByTimeAsync(100);
    expect(beat).toHaveBeenCalledTimes(2);
    expect(maxRunning).toBe(1);
    gates[1]!.resolve();
    work.resolve();
    await result;
  });

  it('waits for a beat in progress before settling, so no beat lands after the work is done', async () => {
    const order: string[] = [];
    const beatGate = deferred<void>();
    const beat = async () => {
      order.push('beat-start');
      await beatGate.promise;
      order.push('beat-end');
    };
    const work = deferred<void>();
    const result = withHeartbeat(100, beat, () => work.promise).then(() => order.push('settled'));

    await vi.advanceTimersByTimeAsync(100);
    work.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(order).toEqual(['beat-start']);
    beatGate.resolve();
    await result;
    expect(order).toEqual(['beat-start', 'beat-end', 'settled']);
  });

  it('rejects a non-positive interval', async () => {
    await expect(
      withHeartbeat(
        0,
        async () => {},
        async () => 1,
      ),
    ).rejects.toThrow(RangeError);
  });
});
