/** Runs Herald's long-running roles in the test process, stopped through one AbortController. */
import { heraldRegistry } from '../../src/aggregates/registry.js';
import type { HeraldSettings as HeraldConfig } from '../../src/config.js';
import { createLogger, type Logger, silentLogger } from '../../src/logger.js';
import type { AggregateRegistry } from '../../src/registry/registry.js';
import type { RoleDefinition } from '../../src/registry/role.js';
import { maintenanceRole } from '../../src/roles/maintenance-role.js';
import { projectorRole } from '../../src/roles/projector-role.js';
import { relayRole } from '../../src/roles/relay-role.js';
import { runRole } from '../../src/roles/runtime.js';
import { scannerRole } from '../../src/roles/scanner-role.js';
import { workerRole } from '../../src/roles/worker-role.js';

export interface RunningRoles {
  stop(): Promise<void>;
}

const ROLES = {
  relay: relayRole,
  scanner: scannerRole,
  worker: workerRole,
  projector: projectorRole,
  maintenance: maintenanceRole,
  tick: heraldRegistry.roles.tick!,
} as const satisfies Record<string, RoleDefinition>;

/** HERALD_TEST_LOG=debug shows the roles' logs when a test needs investigating. */
export function testLogger(): Logger {
  return process.env.HERALD_TEST_LOG
    ? createLogger({ level: process.env.HERALD_TEST_LOG, pod: 'test' })
    : silentLogger;
}

/** Runs one role as the CLI would (its own runtime), until `signal` aborts. */
export function runTestRole(
  name: keyof typeof ROLES,
  config: HeraldConfig,
  signal: AbortSignal,
  options: { registry?: AggregateRegistry; logger?: Logger } = {},
): Promise<void> {
  return runRole(name, ROLES[name], {
    config,
    logger: options.logger ?? testLogger(),
    registry: options.registry ?? heraldRegistry,
    signal,
  });
}

export function startRoles(
  config: HeraldConfig,
  roles: Partial<Record<keyof typeof ROLES, boolean>>,
  options: { registry?: AggregateRegistry } = {},
): RunningRoles {
  const controller = new AbortController();
  const running = (Object.keys(ROLES) as (keyof typeof ROLES)[])
    .filter((name) => roles[name])
    .map((name) => runTestRole(name, config, controller.signal, options));
  const all = Promise.all(running);
  all.catch(() => {}); // surfaced by stop()
  return {
    async stop() {
      controller.abort();
      await all;
    },
  };
}
