/**
 * One release's role process for the side-by-side test (ADR 0039): the relay and worker roles of the
 * wallet fixture's release WALLET_RELEASE (N, N+1 or N+2), on queues prefixed WALLET_PREFIX, against the
 * database and broker of the environment — as `herald relay` and `herald worker` of that release would
 * run. SIGTERM stops both roles gracefully (in-flight work finishes), as a rollout does.
 */
import { createLogger } from '../../../src/logger.js';
import { AggregateRegistry } from '../../../src/registry/registry.js';
import { relayRole } from '../../../src/roles/relay-role.js';
import { runRole } from '../../../src/roles/runtime.js';
import { workerRole } from '../../../src/roles/worker-role.js';
import { RELEASES, type Release, walletRegistration } from '../wallet-releases.js';

const release = process.env.WALLET_RELEASE as Release;
if (!RELEASES.includes(release)) throw new Error(`WALLET_RELEASE must be one of ${RELEASES.join(', ')}`);
const registry = new AggregateRegistry([walletRegistration(release, process.env.WALLET_PREFIX ?? 'wallet')]);
const config = registry.loadConfig(process.env, { pod: `release-${release}` });
const logger = createLogger({ level: process.env.HERALD_TEST_LOG ?? 'silent', pod: `release-${release}` });
const controller = new AbortController();
process.once('SIGTERM', () => controller.abort());
const roles = [
  runRole('relay', relayRole, { config, logger, registry, signal: controller.signal }),
  runRole('worker', workerRole, { config, logger, registry, signal: controller.signal }),
];
await Promise.all(roles);
process.exit(0);
