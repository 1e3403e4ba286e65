/**
 * In-process publish (ADR 0024): a role process that commits outbox rows publishes them itself right
 * after the commit, through a relay of its own that never claims (OutboxRelay.inlinePublisher), instead
 * of waking a relay to claim them: one hop less on every chain (signal → fire → execute). The outbox
 * invariants stay the relay's: the rows are written leased to this process (invariant 7), marked sent only
 * after the broker's confirm (invariant 3), carry their one message id (invariant 4); ordered rows and
 * anything this process does not mark (it died between commit and publish, the broker was away) are the
 * relays' when the lease ends. Attached once the registry's queues are declared, so a first publish never
 * meets a missing queue; until then, and without a broker in the config, rows wait for the relays.
 */
import { errorMessage } from '../errors.js';
import type { Logger } from '../logger.js';
import { OutboxRelay } from '../outbox/relay.js';
import type { Runtime } from '../registry/role.js';
import { closeSinks, createSinks, declareRegistryQueues } from './sinks.js';

export interface InlinePublish {
  /** Stops taking rows, waits for the publishes in flight and closes the sinks. */
  stop(): Promise<void>;
}

export function startInlinePublish(
  runtime: Runtime,
  name: string,
  signal: AbortSignal,
): InlinePublish | undefined {
  const { config, db, registry } = runtime;
  if (!config.relay.inlinePublish || !db.publishOutboxInline) return undefined;
  if (!config.amqpUrl && config.kafkaBrokers.length === 0) return undefined;
  const logger: Logger = runtime.logger.child({ component: 'inline-publish' });
  const sinks = createSinks(config, logger, `herald-${name}-${config.pod}`);
  const relay = new OutboxRelay({
    db,
    sinks,
    settings: config.relay,
    owner: config.pod,
    changes: runtime.notifier,
    logger,
  });
  const stopped = new AbortController();
  const abort = () => stopped.abort();
  signal.addEventListener('abort', abort, { once: true });
  const attached = declareRegistryQueues(
    config,
    registry.amqpQueues,
    logger,
    stopped.signal,
    `herald-${name}-topology`,
  )
    .then((ready) => {
      if (ready) db.publishOutboxInline!(relay.inlinePublisher());
    })
    .catch((error: unknown) =>
      logger.warn({ err: errorMessage(error) }, 'cannot declare the queues: rows wait for the relays'),
    );
  return {
    async stop() {
      signal.removeEventListener('abort', abort);
      stopped.abort();
      await attached;
      db.publishOutboxInline!(undefined);
      await relay.stop();
      await closeSinks(sinks);
    },
  };
}
