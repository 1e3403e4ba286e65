/**
 * `herald maintenance`: every upkeep service (src/maintenance/tasks.ts) on its own interval — outbox
 * dead-row recovery and ordered-head wake-ups, sent and skipped row pruning, receipt and inbox
 * retention, idempotency-key expiry, side-stream retention. Any number of replicas is safe (each
 * statement is guarded and skips locked rows); run at least one.
 */
import { MaintenanceService } from '../maintenance/maintenance-service.js';
import { maintenanceTasks } from '../maintenance/tasks.js';
import type { RoleDefinition } from '../registry/role.js';
import { aborted } from './runtime.js';

export const maintenanceRole: RoleDefinition = {
  summary: 'upkeep: outbox recovery and pruning, receipt/inbox retention, key expiry, side-stream retention',
  async run(runtime, signal) {
    const { config, logger: log } = runtime;
    const services = maintenanceTasks(config, runtime.registry, runtime.notifier).map(
      (task) =>
        new MaintenanceService(task, {
          db: runtime.db,
          logger: log,
          batchSize: config.maintenance.batchSize,
        }),
    );
    try {
      for (const service of services) service.start();
      log.info(
        { services: services.map((s) => s.name), settings: config.maintenance },
        'maintenance started',
      );
      await aborted(signal);
    } finally {
      await Promise.all(services.map((s) => s.stop()));
      log.info({ services: services.map((s) => ({ name: s.name, ...s.stats })) }, 'maintenance stopped');
    }
  },
};
