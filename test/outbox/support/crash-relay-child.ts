/**
 * Child-process relay for the crash test. It publishes normally, and its `beforeMark` hook reports the
 * confirmed message ids on stdout and then never returns: the process sits exactly in the window
 * between the broker's confirm and the outbox mark, where the parent SIGKILLs it.
 * Configuration comes from the environment the parent passes (DATABASE_URL, HERALD_SCHEMA, AMQP_URL,
 * HERALD_RELAY_*), read through loadConfig like the real role.
 */
import { childRelay } from './child-relay.js';

const { relay } = childRelay('crash-child', {
  beforeMark: async (batch) => {
    process.stdout.write(`${JSON.stringify({ confirmed: batch.messageIds })}\n`);
    await new Promise(() => {}); // wait here for SIGKILL
  },
});
await relay.start();
process.stdout.write(`${JSON.stringify({ started: true })}\n`);
