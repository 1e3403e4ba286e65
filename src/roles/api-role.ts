/**
 * `herald api`: the HTTP API as a long-running role. It serves on HERALD_API_HOST:HERALD_API_PORT until
 * SIGTERM/SIGINT, then stops accepting connections, lets in-flight requests finish (bounded by
 * HERALD_API_SHUTDOWN_TIMEOUT_SECONDS) and returns, so the process exits 0. `/readyz` is the shared
 * readiness check (src/observability/readiness.ts) over a pool of its own — the database, the role's
 * probes (not ready once stopping) and seed 003's lease-age check — so a busy request pool never makes
 * the probe time out. Any number of API replicas may run (they share nothing but PostgreSQL).
 */
import { createDatabase } from '../adapters/postgres/database.js';
import { type RunningApiServer, startApiServer } from '../api/server.js';
import { processReadiness } from '../health/readiness.js';
import type { RoleDefinition, Runtime } from '../registry/role.js';
import { aborted } from './runtime.js';

/** Starts the API on a runtime (the role, the demo and the tests); closing it also closes its probe pool. */
export async function startApi(runtime: Runtime): Promise<RunningApiServer> {
  const { config, logger, registry } = runtime;
  const probeDb = createDatabase({
    url: config.databaseUrl,
    schema: config.schema,
    poolSize: 1,
    applicationName: 'herald-api-health',
  });
  let server: RunningApiServer;
  try {
    server = await startApiServer({
      db: runtime.db,
      wakeups: runtime.notifier,
      listener: runtime.listener,
      config,
      registry,
      logger,
      readiness: processReadiness(config.observability, {
        db: probeDb,
        registries: () => [registry],
        probes: () => runtime.probes.list(),
      }),
    });
  } catch (error) {
    await probeDb.close();
    throw error;
  }
  return {
    ...server,
    async close() {
      try {
        await server.close();
      } finally {
        await probeDb.close();
      }
    },
  };
}

export const apiRole: RoleDefinition = {
  summary:
    'the HTTP API on HERALD_API_HOST:HERALD_API_PORT (/v1, /openapi.json, /docs, /healthz, /readyz, /metrics)',
  async run(runtime, signal) {
    const server = await startApi(runtime);
    try {
      await aborted(signal);
      runtime.logger.info('HTTP API stopping: finishing in-flight requests');
    } finally {
      await server.close();
    }
  },
};
