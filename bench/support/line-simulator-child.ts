/**
 * The LINE test server for bench:line, in a process of its own (so its CPU — JSON parsing and the
 * OpenAPI validation of every request — is not the benchmark's, and both sides call it over loopback
 * the same way). It is `startLineSimulator`, exactly what `herald line-simulator` runs, with the
 * channels given in BENCH_LINE_CHANNELS (JSON: LineChannelOptions[], rate limits included), driven
 * over IPC:
 *   → ready { url }                       once listening
 *   ← verify { channelId, members }       → verified: the channel's counters, and whether every one of
 *                                           the `members` test users (lineUserId(0 … members − 1)) was
 *                                           counted exactly once and nobody else was counted
 *   ← reset                               → reset: every channel's records forgotten
 *   ← cpu                                 → cpu { ms }: this process's CPU time so far
 *   ← stop                                → stopped, then exit
 */
import {
  type LineChannelOptions,
  type LineChannelSummary,
  startLineSimulator,
} from '../../src/aggregates/campaign/line/simulator/index.js';
import { lineUserId } from '../../test/support/line.js';

export type SimulatorRequest =
  | { type: 'verify'; channelId: string; members: number }
  | { type: 'reset' }
  | { type: 'cpu' }
  | { type: 'stop' };

export interface Verification {
  summary: LineChannelSummary;
  violationCount: number;
  /** Members whose receipt count is not exactly 1 (the first few, with their counts). */
  wrong: { userId: string; times: number }[];
  wrongCount: number;
  /** Users counted that are not among the members. */
  strangers: number;
}

export type SimulatorReply =
  | { type: 'ready'; url: string }
  | { type: 'verified'; verification: Verification }
  | { type: 'reset' }
  | { type: 'cpu'; ms: number }
  | { type: 'stopped' };

const channels = JSON.parse(process.env.BENCH_LINE_CHANNELS ?? '[]') as LineChannelOptions[];
const simulator = await startLineSimulator({ host: '127.0.0.1', port: 0, channels });
const send = (reply: SimulatorReply) => process.send!(reply);

process.on('message', (request: SimulatorRequest) => {
  switch (request.type) {
    case 'verify': {
      const wrong: Verification['wrong'] = [];
      let wrongCount = 0;
      let missing = 0;
      for (let i = 0; i < request.members; i++) {
        const userId = lineUserId(i);
        const times = simulator.timesReceived(request.channelId, userId);
        if (times !== 1) {
          wrongCount++;
          if (times === 0) missing++;
          if (wrong.length < 10) wrong.push({ userId, times });
        }
      }
      const summary = simulator.stats().channels[request.channelId]!;
      send({
        type: 'verified',
        verification: {
          summary,
          violationCount: simulator.violationCount,
          wrong,
          wrongCount,
          // Users counted beyond the members that were: anyone else who received something.
          strangers: summary.distinctRecipients - (request.members - missing),
        },
      });
      break;
    }
    case 'reset':
      simulator.reset();
      send({ type: 'reset' });
      break;
    case 'cpu': {
      const cpu = process.cpuUsage();
      send({ type: 'cpu', ms: (cpu.user + cpu.system) / 1000 });
      break;
    }
    case 'stop':
      simulator.close().then(() => {
        send({ type: 'stopped' });
        process.disconnect();
      });
      break;
  }
});

send({ type: 'ready', url: simulator.url });
