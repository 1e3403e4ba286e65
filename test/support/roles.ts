/** Runs Herald's long-running roles in the test process, stopped through one AbortController. */
import { HERALD_QUEUES } from '../../src/campaigns/topology.js';
import type { HeraldConfig } from '../../src/config.js';
import { createLogger, silentLogger } from '../../src/logger.js';
import { runRelay } from '../../src/outbox/relay-role.js';
import { runProjector } from '../../src/roles/projector-role.js';
import { runScanner } from '../../src/roles/scanner-role.js';
import { runWorker } from '../../src/roles/worker-role.js';

export interface RunningRoles {
  stop(): Promise<void>;
}

export function startRoles(
  config: HeraldConfig,
  roles: { relay?: boolean; scanner?: boolean; worker?: boolean; projector?: boolean },
): RunningRoles {
  const controller = new AbortController();
  // HERALD_TEST_LOG=debug shows the roles' logs when a test needs investigating.
  const logger = process.env.HERALD_TEST_LOG
    ? createLogger({ level: process.env.HERALD_TEST_LOG, pod: 'test' })
    : silentLogger;
  const running: Promise<void>[] = [];
  if (roles.relay) running.push(runRelay(config, logger, controller.signal, { queues: HERALD_QUEUES }));
  if (roles.scanner) running.push(runScanner(config, logger, controller.signal));
  if (roles.worker) running.push(runWorker(config, logger, controller.signal));
  if (roles.projector) running.push(runProjector(config, logger, controller.signal));
  const all = Promise.all(running);
  all.catch(() => {}); // surfaced by stop()
  return {
    async stop() {
      controller.abort();
      await all;
    },
  };
}
