/**
 * `npm run soak:ha` (issue 24 item 5, ADR 0038): every aggregate's work (test/ha/support/load.ts) for
 * HERALD_SOAK_HA_SECONDS (default 600 from the npm script) while faults are injected one at a time, at
 * random intervals, into all three clusters: a RabbitMQ node stopped or SIGKILLed, a Kafka broker
 * SIGKILLed, a RabbitMQ node or a Kafka broker partitioned (scripts/services partition), and the
 * PostgreSQL failover followed by `up postgres-ha` (the old primary rebuilt as the standby). Each fault is
 * repaired and the cluster whole again before the next. The seed (HERALD_SOAK_HA_SEED, printed) replays
 * the same faults in the same order at the same offsets. At the end: exactly-once, lost, duplicated,
 * money and `herald verify` figures; any of them off fails the run (invariants 2-4, 9).
 * Skipped unless HERALD_SOAK_HA_SECONDS is set (not part of `npm run test:ha`).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../src/testing/wait.js';
import { herald } from '../support/cli.js';
import { kafkaWhole } from './support/kafka.js';
import { formatReport, type HaLoad, type HaLoadReport, startHaLoad } from './support/load.js';
import { services } from './support.js';

const seconds = Number(process.env.HERALD_SOAK_HA_SECONDS ?? 0);
const seed = Number(process.env.HERALD_SOAK_HA_SEED ?? Math.floor(Math.random() * 2 ** 31));
/** Seconds between the end of one fault's repair and the next fault: uniform in this range. */
const GAP = [
  Number(process.env.HERALD_SOAK_HA_GAP_MIN ?? 10),
  Number(process.env.HERALD_SOAK_HA_GAP_MAX ?? 40),
];

/** mulberry32: a small seeded PRNG, so a seed replays the same faults. */
function prng(s: number): () => number {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const clusterWhole = async (): Promise<void> => {
  await waitFor(kafkaWhole, { timeoutMs: 180_000, intervalMs: 1_000, what: 'kafka-cluster whole' });
  // `up` starts what is missing and returns once every node (and the synchronous standby) answers.
  await services('up', 'rabbitmq-cluster', 'postgres-ha');
};

interface Fault {
  name: string;
  /** Injects the fault, holds it `holdMs`, repairs it; resolves with the cluster whole again. */
  run(node: number, holdMs: number): Promise<void>;
}

const FAULTS: Fault[] = [
  {
    name: 'rabbitmq node stop',
    async run(node, holdMs) {
      await services('node', 'stop', 'rabbitmq-cluster', String(node));
      await sleep(holdMs);
      await services('node', 'start', 'rabbitmq-cluster', String(node));
    },
  },
  {
    name: 'rabbitmq node SIGKILL',
    async run(node, holdMs) {
      await services('node', 'stop', '--kill', 'rabbitmq-cluster', String(node));
      await sleep(holdMs);
      await services('node', 'start', 'rabbitmq-cluster', String(node));
    },
  },
  {
    name: 'kafka broker SIGKILL',
    async run(node, holdMs) {
      await services('node', 'stop', '--kill', 'kafka-cluster', String(node));
      await sleep(holdMs);
      await services('node', 'start', 'kafka-cluster', String(node));
    },
  },
  {
    name: 'rabbitmq node partition',
    async run(node, holdMs) {
      await services('partition', 'rabbitmq-cluster', String(node));
      await sleep(holdMs + 12_000); // past net_ticktime: the node pauses
      await services('heal', 'rabbitmq-cluster', String(node));
    },
  },
  {
    name: 'kafka broker partition',
    async run(node, holdMs) {
      await services('partition', '--clients', 'kafka-cluster', String(node));
      await sleep(holdMs + 12_000); // past broker.session.timeout.ms: the broker is fenced
      await services('heal', 'kafka-cluster', String(node));
    },
  },
  {
    name: 'postgres failover',
    async run(_node, holdMs) {
      await services('failover', 'postgres-ha');
      await sleep(holdMs);
      await services('up', 'postgres-ha'); // the old primary rebuilt as the synchronous standby
    },
  },
];

let load: HaLoad | undefined;
afterAll(async () => {
  await load?.close();
  if (seconds > 0) await clusterWhole().catch(() => {});
}, 600_000);

describe.runIf(seconds > 0)('soak:ha', () => {
  it(`${seconds} s of every aggregate's work under random faults of all three clusters`, async () => {
    const random = prng(seed);
    console.log(`soak:ha seed ${seed} (HERALD_SOAK_HA_SEED=${seed} replays these faults), ${seconds} s`);
    load = await startHaLoad({ ratePerSecond: Number(process.env.HERALD_SOAK_HA_RATE ?? 8) });
    const running = load;
    const t0 = Date.now();
    const at = () => `${((Date.now() - t0) / 1_000).toFixed(1).padStart(6)} s`;
    const injected: string[] = [];
    running.start();
    while (Date.now() - t0 < seconds * 1_000) {
      const gapMs = (GAP[0]! + random() * (GAP[1]! - GAP[0]!)) * 1_000;
      const fault = FAULTS[Math.floor(random() * FAULTS.length)]!;
      const node = 1 + Math.floor(random() * 3);
      const holdMs = 3_000 + random() * 12_000;
      if (Date.now() - t0 + gapMs >= seconds * 1_000) break;
      await sleep(gapMs);
      const label = `${fault.name}${fault.name.startsWith('postgres') ? '' : ` (node ${node})`}`;
      console.log(`${at()} ${label}, held ${(holdMs / 1_000).toFixed(1)} s`);
      const started = Date.now();
      await fault.run(node, holdMs);
      await clusterWhole();
      injected.push(label);
      console.log(`${at()} repaired and whole again (${((Date.now() - started) / 1_000).toFixed(1)} s)`);
    }
    const remaining = seconds * 1_000 - (Date.now() - t0);
    if (remaining > 0) await sleep(remaining);
    await running.stop();
    const report: HaLoadReport = await running.report(180_000);
    const verify = await herald(running.t, ['verify']);

    const kinds = [report.line, report.action, report.cron, report.sms];
    const lost = kinds.reduce((n, k) => n + k.lost, 0);
    const duplicated = kinds.reduce((n, k) => n + k.duplicated, 0);
    const owed = kinds.reduce((n, k) => n + k.acknowledged, 0);
    const once = kinds.reduce((n, k) => n + k.delivered, 0) - duplicated;
    console.log(
      [
        `soak:ha seed ${seed}: ${seconds} s, ${injected.length} faults (${injected.join('; ')})`,
        formatReport(report),
        `exactly once: ${once} of ${owed} owed effects; lost ${lost}; duplicated ${duplicated}; money ${report.money.balanced ? 'balanced' : 'NOT balanced'}; herald verify exit ${verify.code}`,
      ].join('\n'),
    );
    expect(injected.length).toBeGreaterThan(0);
    expect(lost, formatReport(report)).toBe(0);
    expect(duplicated, formatReport(report)).toBe(0);
    expect(report.money.balanced, formatReport(report)).toBe(true);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
  });
});
