/**
 * Runs the relay role the way the CLI does: SIGTERM aborts the signal, the role returns, and the
 * process must then exit 0 on its own (no open handles left behind). Env: DATABASE_URL, HERALD_SCHEMA,
 * AMQP_URL, HERALD_RELAY_*, RELAY_QUEUES (comma-separated: the test aggregate's queues).
 */
import { loadConfig } from '../../../src/config.js';
import { createLogger } from '../../../src/logger.js';
import { AggregateRegistry } from '../../../src/registry/registry.js';
import { relayRole } from '../../../src/roles/relay-role.js';
import { runRole } from '../../../src/roles/runtime.js';
import { ledgerRegistration } from '../../support/ledger-aggregate.js';

const config = loadConfig(process.env, { pod: 'role-child' });
const logger = createLogger({ level: config.logLevel, pod: config.pod });
const controller = new AbortController();
process.once('SIGTERM', () => controller.abort());
process.stdout.write(`${JSON.stringify({ started: true })}\n`);
const registry = new AggregateRegistry((process.env.RELAY_QUEUES ?? '').split(',').map(ledgerRegistration));
await runRole('relay', relayRole, { config, logger, registry, signal: controller.signal });
process.stdout.write(`${JSON.stringify({ stopped: true })}\n`);
