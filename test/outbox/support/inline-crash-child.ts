/**
 * Child process for the in-process publish crash test (ADR 0024): its database publishes the rows it
 * commits itself, and the publisher's `beforePublish` hook reports the committed message ids on stdout
 * and SIGKILLs the process: it dies after the commit and before anything reached the broker.
 */
import { childRelay } from './child-relay.js';
import { seedOutbox } from './fixtures.js';

const { db, relay } = childRelay('inline-crash-child', {
  beforePublish: (rows) => {
    process.stdout.write(`${JSON.stringify({ committed: rows.map((row) => row.messageId) })}\n`, () =>
      process.kill(process.pid, 'SIGKILL'),
    );
    return new Promise(() => {}); // never publishes
  },
});
db.publishOutboxInline?.(relay.inlinePublisher());
await seedOutbox(db, { count: 1, destination: process.env.TEST_QUEUE! });
