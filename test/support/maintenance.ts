/** One maintenance service by task name, on a test database, for tests that run upkeep explicitly. */
import { heraldRegistry } from '../../src/aggregates/registry.js';
import type { HeraldSettings as HeraldConfig } from '../../src/config.js';
import { silentLogger } from '../../src/logger.js';
import { MaintenanceService } from '../../src/maintenance/maintenance-service.js';
import { maintenanceTasks } from '../../src/maintenance/tasks.js';
import type { Database } from '../../src/ports/database.js';
import type { WakeupSignal } from '../../src/ports/wakeups.js';
import type { AggregateRegistry } from '../../src/registry/registry.js';

const noWakeups: WakeupSignal = { signal: () => {} };

export function maintenanceService(
  config: HeraldConfig,
  db: Database,
  name: string,
  options: { registry?: AggregateRegistry; wakeups?: WakeupSignal; batchSize?: number } = {},
): MaintenanceService {
  const task = maintenanceTasks(
    config,
    options.registry ?? heraldRegistry,
    options.wakeups ?? noWakeups,
  ).find((t) => t.name === name);
  if (!task) throw new Error(`no maintenance task named ${name}`);
  return new MaintenanceService(task, {
    db,
    logger: silentLogger,
    batchSize: options.batchSize ?? config.maintenance.batchSize,
  });
}
