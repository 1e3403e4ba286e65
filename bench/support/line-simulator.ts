/**
 * bench:line's side of the LINE test server process (bench/support/line-simulator-child.ts): starts it
 * with its channels, and asks it over IPC to verify a channel's receipts, reset, report its CPU time,
 * and stop.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LineChannelOptions } from '../../src/aggregates/campaign/line/simulator/index.js';
import type { SimulatorReply, SimulatorRequest, Verification } from './line-simulator-child.js';

const CHILD = join(dirname(fileURLToPath(import.meta.url)), 'line-simulator-child.ts');

export interface SimulatorProcess {
  readonly url: string;
  readonly pid: number;
  verify(channelId: string, members: number): Promise<Verification>;
  reset(): Promise<void>;
  cpuMs(): Promise<number>;
  stop(): Promise<void>;
  kill(): void;
}

export async function startSimulatorProcess(
  channels: readonly LineChannelOptions[],
): Promise<SimulatorProcess> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', CHILD], {
    env: { ...process.env, BENCH_LINE_CHANNELS: JSON.stringify(channels) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting: ((reply: SimulatorReply) => void)[] = [];
  let exited = false;
  const exit = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      exited = true;
      resolve(code);
    }),
  );
  const ready = new Promise<string>((resolve, reject) => {
    exit.then((code) => reject(new Error(`the LINE simulator exited with ${code}`)));
    child.on('message', (reply: SimulatorReply) => {
      if (reply.type === 'ready') resolve(reply.url);
      else waiting.shift()?.(reply);
    });
  });
  ready.catch(() => {});
  const ask = <T extends SimulatorReply['type']>(request: SimulatorRequest, expect: T) =>
    new Promise<Extract<SimulatorReply, { type: T }>>((resolve, reject) => {
      if (exited) return reject(new Error('the LINE simulator is gone'));
      waiting.push((reply) =>
        reply.type === expect
          ? resolve(reply as Extract<SimulatorReply, { type: T }>)
          : reject(new Error(`LINE simulator: expected ${expect}, got ${reply.type}`)),
      );
      child.send(request);
    });
  const url = await ready;
  return {
    url,
    pid: child.pid!,
    verify: async (channelId, members) =>
      (await ask({ type: 'verify', channelId, members }, 'verified')).verification,
    reset: async () => {
      await ask({ type: 'reset' }, 'reset');
    },
    cpuMs: async () => (await ask({ type: 'cpu' }, 'cpu')).ms,
    async stop() {
      if (exited) return;
      await ask({ type: 'stop' }, 'stopped');
      await exit;
    },
    kill() {
      if (!exited) child.kill('SIGTERM');
    },
  };
}
