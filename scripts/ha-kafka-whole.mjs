// `scripts/services heal kafka-cluster <n>` (ADR 0038): exits 0 when every partition of every topic of
// the brokers given has all of its replicas in sync (a healed node caught up and is back in every ISR),
// 1 otherwise. Usage: node scripts/ha-kafka-whole.mjs <broker,broker,…>
import { Kafka, logLevel } from 'kafkajs';

const admin = new Kafka({
  clientId: 'herald-services-heal',
  brokers: process.argv[2].split(','),
  logLevel: logLevel.NOTHING,
  connectionTimeout: 2_000,
  requestTimeout: 5_000,
  retry: { retries: 0 },
}).admin();
let whole = false;
try {
  await admin.connect();
  const { topics } = await admin.fetchTopicMetadata();
  whole = topics.every((t) => t.partitions.every((p) => p.leader >= 0 && p.isr.length === p.replicas.length));
} catch {
  whole = false;
} finally {
  await admin.disconnect().catch(() => {});
}
process.exit(whole ? 0 : 1);
