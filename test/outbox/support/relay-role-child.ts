/**
 * Runs the relay role the way the CLI does: SIGTERM aborts the signal, runRelay returns, and the
 * process must then exit 0 on its own (no open handles left behind). Env: DATABASE_URL, HERALD_SCHEMA,
 * AMQP_URL, HERALD_RELAY_*, RELAY_QUEUES (comma-separated).
 */
import { loadConfig } from '../../../src/config.js';
import { createLogger } from '../../../src/logger.js';
import { runRelay } from '../../../src/outbox/relay-role.js';

const config = loadConfig(process.env, { pod: 'role-child' });
const logger = createLogger({ level: config.logLevel, pod: config.pod });
const controller = new AbortController();
process.once('SIGTERM', () => controller.abort());
process.stdout.write(`${JSON.stringify({ started: true })}\n`);
await runRelay(config, logger, controller.signal, { queues: (process.env.RELAY_QUEUES ?? '').split(',') });
process.stdout.write(`${JSON.stringify({ stopped: true })}\n`);
