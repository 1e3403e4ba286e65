/**
 * The runtime every role is wired from, the same way: the database pool, the coalescing NOTIFY
 * sender, the LISTEN connection, the command handler and the aggregate registry, built once per role
 * from the validated config and closed together on shutdown. The command handler wakes the scanners
 * for states due within their poll interval and the relays after outbox writes (invariant 7: wake-ups
 * only cut latency). `runRole` also gives every long-running role its process's metrics and health
 * endpoint (src/observability/role-endpoint.ts), shared by all the roles one process runs.
 */
import { startTracing } from '../adapters/otel/sdk.js';
import { createDatabase } from '../adapters/postgres/database.js';
import { CoalescingNotifier, PgWakeupListener } from '../adapters/postgres/notifications.js';
import { CommandHandler } from '../eventstore/command-handler.js';
import { ReadinessProbes } from '../health/readiness.js';
import { acquireRoleEndpoint } from '../health/role-endpoint.js';
import type { Logger } from '../logger.js';
import type { AggregateRegistry } from '../registry/registry.js';
import type { RoleDefinition, Runtime } from '../registry/role.js';
import type { HeraldConfig } from '../settings/core.js';
import { startInlinePublish } from './inline-publish.js';

export interface RuntimeOptions {
  registry: AggregateRegistry;
  /** Shown by PostgreSQL (pg_stat_activity.application_name). */
  applicationName: string;
  /** Pool size; default HERALD_DB_POOL_SIZE. */
  poolSize?: number;
}

export function createRuntime<Config extends HeraldConfig>(
  config: Config,
  logger: Logger,
  options: RuntimeOptions,
): Runtime<Config> {
  const databaseOptions = {
    url: config.databaseUrl,
    schema: config.schema,
    poolSize: options.poolSize ?? config.dbPoolSize,
    applicationName: options.applicationName,
  };
  const db = createDatabase(databaseOptions);
  const notifier = new CoalescingNotifier(db, config.notifyCoalesceMs, logger);
  const listener = new PgWakeupListener(databaseOptions, logger);
  const handler = new CommandHandler({
    db,
    wakeups: notifier,
    pod: config.pod,
    wakeHorizonMs: config.scanner.pollMs,
    config,
  });
  return {
    config,
    logger,
    registry: options.registry,
    db,
    databaseOptions,
    notifier,
    listener,
    handler,
    probes: new ReadinessProbes(),
    async close() {
      notifier.close();
      await listener.close();
      await db.close();
    },
  };
}

/** Runs a role on a runtime of its own, built from the config, and closes the runtime afterwards. */
export async function runRole(
  name: string,
  role: RoleDefinition,
  context: { config: HeraldConfig; logger: Logger; registry: AggregateRegistry; signal: AbortSignal },
): Promise<void> {
  const logger = context.logger.child({ role: name });
  for (const warning of context.config.warnings) logger.warn({ setting: true }, warning);
  const { tracing: tracingSettings } = context.config;
  const tracing = startTracing({
    ...tracingSettings,
    serviceName: tracingSettings.serviceName ?? `herald-${name}`,
  });
  const runtime = createRuntime(context.config, logger, {
    registry: context.registry,
    applicationName: `herald-${name}`,
  });
  let endpoint: Awaited<ReturnType<typeof acquireRoleEndpoint>>;
  try {
    endpoint = await acquireRoleEndpoint(context.config, logger, {
      role: name,
      registry: context.registry,
      probes: runtime.probes,
    });
  } catch (error) {
    await runtime.close();
    await tracing.shutdown();
    throw error;
  }
  runtime.endpoint = { url: endpoint.url };
  // Stopping (SIGTERM): not ready, so traffic and rollouts move on while in-flight work finishes.
  runtime.probes.add(`role:${name}`, () =>
    context.signal.aborted ? { ok: false, detail: 'stopping' } : { ok: true, detail: 'running' },
  );
  const inline = role.inlinePublish === false ? undefined : startInlinePublish(runtime, name, context.signal);
  try {
    await role.run(runtime, context.signal);
  } finally {
    await inline?.stop();
    await endpoint.release();
    await runtime.close();
    await tracing.shutdown(); // exports what is buffered
  }
}

/** Resolves when the signal aborts (at once if it already has). */
export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

/**
 * Runs several long-running roles in one process (`herald all`, the demo). They share one stop
 * signal; when one fails, the others are stopped too and the first error is rethrown, so a broken
 * role never leaves the process half-running.
 */
export async function runTogether(
  signal: AbortSignal,
  roles: readonly ((signal: AbortSignal) => Promise<void>)[],
): Promise<void> {
  const shared = new AbortController();
  const stop = () => shared.abort();
  signal.addEventListener('abort', stop, { once: true });
  let firstError: unknown;
  try {
    await Promise.all(
      roles.map((run) =>
        run(shared.signal).catch((error: unknown) => {
          firstError ??= error;
          shared.abort();
        }),
      ),
    );
  } finally {
    signal.removeEventListener('abort', stop);
  }
  if (firstError !== undefined) throw firstError;
}
