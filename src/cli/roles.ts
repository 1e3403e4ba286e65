/**
 * The CLI's role table: one-shot commands (migrate, outbox, replay, verify, export, projections) and
 * the long-running roles — the generic ones (relay, scanner, worker, projector, maintenance), the HTTP
 * API (api) and those the registered aggregates add (tick). Every long-running role runs the same way:
 * a runtime of its own built from the config (`runRole`), stopped by the signal (SIGTERM/SIGINT) after
 * finishing in-flight work. `herald all` runs every one of them in one process.
 */
import { createDatabase } from '../adapters/postgres/database.js';
import { migrate } from '../adapters/postgres/migrator.js';
import { apiRole } from '../api/api-role.js';
import type { AggregateRegistry } from '../eventstore/registry.js';
import { runOutboxCommand } from '../outbox/outbox-admin.js';
import { maintenanceRole } from '../roles/maintenance-role.js';
import { projectorRole } from '../roles/projector-role.js';
import { relayRole } from '../roles/relay-role.js';
import { scannerRole } from '../roles/scanner-role.js';
import { workerRole } from '../roles/worker-role.js';
import { type RoleDefinition, runRole, runTogether } from '../runtime/runtime.js';
import { actionRoles } from './action-commands.js';
import { apiKeyRoles } from './api-key-commands.js';
import { campaignRoles } from './campaign-commands.js';
import { cronRoles } from './cron-commands.js';
import { incidentRoles } from './incident-commands.js';
import type { Role, RoleContext } from './role.js';

async function migrateCommand({ config, logger, argv }: RoleContext): Promise<number> {
  const unknown = argv.filter((arg) => arg !== '--dry-run');
  if (unknown.length > 0) {
    process.stderr.write(
      `herald migrate: unknown option ${unknown.join(' ')} (usage: herald migrate [--dry-run])\n`,
    );
    return 2;
  }
  if (argv.includes('--dry-run')) {
    const result = await migrate({ url: config.databaseUrl, schema: config.schema, dryRun: true });
    process.stdout.write(
      `would apply: ${result.pending.length ? result.pending.join(', ') : 'nothing'} (already applied: ${result.alreadyApplied})\n`,
    );
    return 0;
  }
  const result = await migrate({ url: config.databaseUrl, schema: config.schema });
  for (const name of result.applied) logger.info({ migration: name }, 'applied migration');
  process.stdout.write(
    `migrations applied: ${result.applied.length ? result.applied.join(', ') : 'none'} (already applied: ${result.alreadyApplied})\n`,
  );
  return 0;
}

async function outboxCommand({ config, logger, args, options }: RoleContext): Promise<number> {
  const db = createDatabase({
    url: config.databaseUrl,
    schema: config.schema,
    poolSize: 2,
    applicationName: 'herald-outbox',
  });
  try {
    return await runOutboxCommand({
      db,
      logger,
      args,
      options,
      defaultActor: `cli:${config.pod}`,
      write: (text) => process.stdout.write(text),
    });
  } finally {
    await db.close();
  }
}

/** The generic long-running roles, then those of the registered aggregates. */
export function longRunningRoles(registry: AggregateRegistry): Record<string, RoleDefinition> {
  return {
    relay: relayRole,
    scanner: scannerRole,
    worker: workerRole,
    projector: projectorRole,
    maintenance: maintenanceRole,
    api: apiRole,
    ...registry.roles,
  };
}

const longRunning =
  (name: string, role: RoleDefinition): Role['run'] =>
  async ({ config, logger, registry, signal }) => {
    await runRole(name, role, { config, logger, registry, signal });
    return 0;
  };

export function roleTable(registry: AggregateRegistry): Record<string, Role> {
  const running = longRunningRoles(registry);
  return {
    migrate: {
      summary: 'apply pending migrations (safe to run from several pods at once); --dry-run lists them',
      run: migrateCommand,
    },
    ...Object.fromEntries(
      Object.entries(running).map(([name, role]) => [
        name,
        { summary: role.summary, run: longRunning(name, role) },
      ]),
    ),
    outbox: {
      summary: 'operator commands: parked | requeue <id> | skip <id> [--reason=…] (ordered keys, dead rows)',
      run: outboxCommand,
    },
    all: {
      summary: 'migrate, then every long-running role in one process (development)',
      async run(context) {
        await migrateCommand(context);
        const { config, logger, signal } = context;
        await runTogether(
          signal,
          Object.entries(running).map(
            ([name, role]) =>
              (stop: AbortSignal) =>
                runRole(name, role, { config, logger, registry: context.registry, signal: stop }),
          ),
        );
        return 0;
      },
    },
    ...incidentRoles,
    ...actionRoles,
    ...cronRoles,
    ...campaignRoles,
    ...apiKeyRoles,
  };
}
