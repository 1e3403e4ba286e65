/**
 * `herald projector`: runs every registered asynchronous projection, one Projector per projection.
 * Run as many replicas as you like: per projection one is active, through a lease on the database
 * clock; the others wait and take over when it stops or its lease expires (invariant 7). On SIGTERM
 * each projector finishes its batch, releases its lease and the process exits 0. (Receipt retention
 * is a maintenance service: `herald maintenance`.)
 */
import { Projector } from '../projections/projector.js';
import type { RoleDefinition } from '../registry/role.js';
import { aborted } from './runtime.js';

export const projectorRole: RoleDefinition = {
  summary: 'asynchronous projections from the event log and publish receipts (one active replica each)',
  async run(runtime, signal) {
    const { config, logger: log, registry } = runtime;
    const projectors = [...registry.projections.values()].map(
      (projection) =>
        new Projector({
          db: runtime.db,
          projection,
          pod: config.pod,
          batchSize: config.projector.batchSize,
          pollMs: config.projector.pollMs,
          leaseMs: config.projector.leaseMs,
          logger: log,
          upcast: (event) => registry.upcast(event),
        }),
    );
    try {
      for (const projector of projectors) projector.start();
      log.info(
        { projections: [...registry.projections.keys()], settings: config.projector },
        'projector started',
      );
      await aborted(signal);
    } finally {
      await Promise.all(projectors.map((p) => p.stop()));
    }
  },
};
