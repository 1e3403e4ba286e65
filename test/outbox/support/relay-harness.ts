/** Builds OutboxRelay instances on a test database with real AMQP sinks, and cleans them up. */
import { AmqpSink } from '../../../src/adapters/amqp/amqp-sink.js';
import type { HeraldSettings as HeraldConfig } from '../../../src/config.js';
import { OutboxRelay, type OutboxRelayOptions } from '../../../src/outbox/relay.js';
import type { Database } from '../../../src/ports/database.js';
import { requireEnv, type TestDatabase } from '../../support/services.js';

export interface RelayUnderTest {
  relay: OutboxRelay;
  sink: AmqpSink;
  config: HeraldConfig;
}

export class RelayHarness {
  private readonly made: RelayUnderTest[] = [];

  constructor(private readonly database: TestDatabase) {}

  make(
    env: Record<string, string> = {},
    extra: Partial<Omit<OutboxRelayOptions, 'settings' | 'sinks'>> & { db?: Database } = {},
  ): RelayUnderTest {
    const config = this.database.config(env);
    const sink = new AmqpSink({
      url: requireEnv('AMQP_URL'),
      inFlight: config.relay.inFlight,
      name: 'herald-test',
    });
    const relay = new OutboxRelay({
      db: this.database.db,
      owner: `test-${this.made.length + 1}`,
      ...extra,
      sinks: { amqp: sink },
      settings: config.relay,
    });
    const made = { relay, sink, config };
    this.made.push(made);
    return made;
  }

  async close(): Promise<void> {
    for (const { relay, sink } of this.made) {
      await relay.stop();
      await sink.close();
    }
  }
}
