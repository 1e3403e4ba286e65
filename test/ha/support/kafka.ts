/**
 * kafka-cluster as the HA tests see it (ADR 0038): which broker leads which partitions, and whether the
 * cluster is whole again (every partition led, every replica in sync) after a broker came back.
 */
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Kafka, logLevel } from 'kafkajs';
import { requireHa } from '../support.js';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** Leader broker (node id 1..3, -1 while none) per partition of `topics`, asked of broker `ask`. */
export async function kafkaLeaders(topics: readonly string[], ask: number): Promise<number[]> {
  const brokers = requireHa('HERALD_HA_KAFKA_BROKERS').split(',');
  const admin = new Kafka({
    clientId: 'herald-ha-leaders',
    brokers: [brokers[ask - 1]!],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 1_000,
    requestTimeout: 5_000,
  }).admin();
  await admin.connect();
  try {
    const { topics: listed } = await admin.fetchTopicMetadata({ topics: [...topics] });
    return listed.flatMap((t) => t.partitions.map((p) => p.leader));
  } finally {
    await admin.disconnect();
  }
}

/** Every broker, asked on its own, says each partition has a leader and all replicas in sync. */
export async function kafkaWhole(): Promise<boolean> {
  return promisify(execFile)('node', ['scripts/ha-kafka-whole.mjs', requireHa('HERALD_HA_KAFKA_BROKERS')], {
    cwd: REPO,
  }).then(
    () => true,
    () => false,
  );
}
