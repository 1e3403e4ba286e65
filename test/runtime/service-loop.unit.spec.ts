import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logger.js';
import { ServiceLoop } from '../../src/runtime/service-loop.js';
import { waitFor } from '../../src/testing/wait.js';

describe('ServiceLoop', () => {
  it('sleeps what a round asks for; wake() ends the sleep at once; stop() ends it too', async () => {
    let rounds = 0;
    const loop = new ServiceLoop({
      name: 'test',
      logger: silentLogger,
      round: async () => {
        rounds++;
        return 60_000;
      },
    });
    loop.start();
    await waitFor(() => loop.sleeping, { what: 'first sleep' });
    expect(rounds).toBe(1);
    loop.wake();
    await waitFor(() => rounds === 2 && loop.sleeping, { what: 'a second round after wake()' });
    const started = Date.now();
    await loop.stop();
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(loop.stats).toMatchObject({ rounds: 2, errors: 0, sleeps: 2 });
  });

  it('a wake-up during a round skips the next sleep; clearWake() forgets it', async () => {
    let rounds = 0;
    let release!: () => void;
    const loop = new ServiceLoop({
      name: 'test',
      logger: silentLogger,
      round: async () => {
        rounds++;
        if (rounds === 1) await new Promise<void>((resolve) => (release = resolve));
        if (rounds === 3) loop.clearWake();
        return 60_000;
      },
    });
    loop.start();
    await waitFor(() => release !== undefined, { what: 'round 1 running' });
    loop.wake();
    release();
    await waitFor(() => rounds === 2 && loop.sleeping, { what: 'round 2 without a sleep in between' });
    expect(loop.stats.sleeps).toBe(1);
    loop.wake();
    await waitFor(() => rounds === 3 && loop.sleeping, { what: 'round 3' });
    await loop.stop();
    expect(rounds).toBe(3);
  });

  it('backs off after failed rounds with growing delays and resets after a good one', async () => {
    const delays: number[] = [];
    const lines: LogLine[] = [];
    let rounds = 0;
    const loop = new ServiceLoop({
      name: 'test',
      errorBackoff: { baseMs: 5, maxMs: 40, jitter: 'equal' },
      random: () => 0.999,
      // The first failure of the outage goes to onError, the others are debug lines.
      logger: recording(lines),
      onError: (_error, _failures, retryInMs) => delays.push(retryInMs),
      round: async () => {
        rounds++;
        if (rounds <= 5) throw new Error(`down ${rounds}`);
        return 60_000;
      },
    });
    loop.start();
    await waitFor(() => loop.sleeping && rounds === 6, { what: 'recovery' });
    await loop.stop();
    delays.push(...lines.filter((l) => l.level === 20).map((l) => l.retryInMs as number));
    expect(delays).toEqual([5, 10, 20, 40, 40]);
    expect(loop.failures).toBe(0);
    expect(loop.stats).toMatchObject({ rounds: 1, errors: 5 });
  });

  it('an outage is two log lines: its first failure at error, the recovery at warn with its duration', async () => {
    const lines: LogLine[] = [];
    let clock = 1_000_000;
    let rounds = 0;
    const loop = new ServiceLoop({
      name: 'relay',
      logger: recording(lines),
      errorBackoff: { baseMs: 1, maxMs: 2, jitter: 'equal' },
      now: () => clock,
      round: async () => {
        rounds++;
        clock += 1_500;
        if (rounds === 1) return 0;
        if (rounds <= 9) throw new Error(rounds === 2 ? 'connection refused' : 'still down');
        return 60_000;
      },
    });
    loop.start();
    await waitFor(() => loop.sleeping && rounds === 10, { what: 'recovery' });
    await loop.stop();
    const loud = lines.filter((l) => (l.level as number) >= 40);
    expect(loud.map((l) => [l.level, l.msg])).toEqual([
      [50, 'relay round failed: connection refused'],
      [40, 'relay recovered after 12.0 s (8 failed rounds; first: connection refused)'],
    ]);
    expect(loud[1]).toMatchObject({ service: 'relay', outageMs: 12_000, failedRounds: 8 });
    expect(lines.filter((l) => l.level === 20)).toHaveLength(7);
  });

  it('delay() inside a round is ended by stop(), not by wake()', async () => {
    let delayed = false;
    const loop = new ServiceLoop({
      name: 'test',
      logger: silentLogger,
      round: async () => {
        await loop.delay(60_000);
        delayed = true;
        return 60_000;
      },
    });
    loop.start();
    loop.wake();
    await new Promise((resolve) => setImmediate(resolve));
    expect(delayed).toBe(false);
    await loop.stop();
    expect(delayed).toBe(true);
    expect(loop.stopping).toBe(true);
  });
});

type LogLine = Record<string, unknown>;

/** A debug-level logger that keeps every line it writes. */
function recording(lines: LogLine[]) {
  return pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
}
