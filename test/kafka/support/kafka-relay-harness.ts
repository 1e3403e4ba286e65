/** Builds OutboxRelay instances with real Kafka sinks on a test database, and cleans them up. */
import { KafkaSink } from '../../../src/adapters/kafka/kafka-sink.js';
import type { HeraldSettings as HeraldConfig } from '../../../src/config.js';
import { OutboxRelay, type OutboxRelayOptions } from '../../../src/outbox/relay.js';
import { requireEnv, type TestDatabase } from '../../support/services.js';

export interface KafkaRelayUnderTest {
  relay: OutboxRelay;
  sink: KafkaSink;
  config: HeraldConfig;
}

export class KafkaRelayHarness {
  private readonly made: KafkaRelayUnderTest[] = [];

  constructor(private readonly database: TestDatabase) {}

  make(
    env: Record<string, string> = {},
    extra: Partial<Omit<OutboxRelayOptions, 'settings' | 'sinks'>> = {},
  ): KafkaRelayUnderTest {
    const config = this.database.config(env);
    const sink = new KafkaSink({
      brokers: requireEnv('KAFKA_BROKERS').split(','),
      clientId: `herald-test-relay-${this.made.length + 1}`,
      maxBatchMessages: config.relay.inFlight,
      connectionTimeoutMs: 1_000,
    });
    const relay = new OutboxRelay({
      db: this.database.db,
      owner: `kafka-test-${this.made.length + 1}`,
      ...extra,
      sinks: { kafka: sink },
      settings: config.relay,
    });
    const made = { relay, sink, config };
    this.made.push(made);
    return made;
  }

  async close(): Promise<void> {
    for (const { relay, sink } of this.made.splice(0)) {
      await relay.stop();
      await sink.close();
    }
  }
}
