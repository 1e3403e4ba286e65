// `scripts/services heal kafka-cluster <n>` (ADR 0038): exits 0 when every broker given, asked on its
// own, says every partition of every topic has a leader and all of its replicas in sync (a healed node
// caught up and is back in every ISR), 1 otherwise. One client per broker: a broker that was cut off
// serves its stale metadata (all in sync) until it catches up, so no single answer is trusted.
// Usage: node scripts/ha-kafka-whole.mjs <broker,broker,…>
import { Kafka, logLevel } from 'kafkajs';

async function wholeSaysBroker(broker) {
  const admin = new Kafka({
    clientId: 'herald-services-heal',
    brokers: [broker],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 2_000,
    requestTimeout: 5_000,
    retry: { retries: 0 },
  }).admin();
  try {
    await admin.connect();
    const { topics } = await admin.fetchTopicMetadata({ topics: await admin.listTopics() });
    return topics.every((t) =>
      t.partitions.every((p) => p.leader >= 0 && p.isr.length === p.replicas.length),
    );
  } catch {
    return false;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

const answers = await Promise.all(process.argv[2].split(',').map(wholeSaysBroker));
process.exit(answers.every(Boolean) ? 0 : 1);
