/**
 * The CLI's role table: one-shot commands (migrate, outbox, replay, verify, export, projections,
 * api-keys), the long-running roles — the generic ones (relay, scanner, worker, projector,
 * maintenance), the HTTP API (api) and those the registered slices add (tick) — and the registered
 * slices' own commands (campaigns, actions, cron-jobs, …). Every long-running role runs the same way:
 * a runtime of its own built from the config (`runRole`), stopped by the signal (SIGTERM/SIGINT) after
 * finishing in-flight work. `herald all` runs every one of them in one process.
 */
import { createDatabase } from '../adapters/postgres/database.js';
import { migrate } from '../adapters/postgres/migrator.js';
import { ValidationError } from '../errors.js';
import { OUTBOX_USAGE, runOutboxCommand } from '../outbox/outbox-admin.js';
import type { AggregateRegistry } from '../registry/registry.js';
import type { Role, RoleContext, RoleDefinition } from '../registry/role.js';
import { apiRole } from '../roles/api-role.js';
import { maintenanceRole } from '../roles/maintenance-role.js';
import { projectorRole } from '../roles/projector-role.js';
import { relayRole } from '../roles/relay-role.js';
import { runRole, runTogether } from '../roles/runtime.js';
import { scannerRole } from '../roles/scanner-role.js';
import { workerRole } from '../roles/worker-role.js';
import { apiKeyRoles } from './api-key-commands.js';
import { incidentRoles } from './incident-commands.js';

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
  const roles: Record<string, RoleDefinition> = {
    relay: relayRole,
    scanner: scannerRole,
    worker: workerRole,
    projector: projectorRole,
    maintenance: maintenanceRole,
    api: apiRole,
  };
  return { ...roles, ...withoutClashes(roles, registry.roles) };
}

/** A slice's roles and commands may not shadow Herald's own. */
function withoutClashes<T>(own: Record<string, unknown>, added: Readonly<Record<string, T>>) {
  for (const name of Object.keys(added)) {
    if (name in own) {
      throw new ValidationError(`'${name}' of a registered slice clashes with Herald's own command`, {
        command: name,
      });
    }
  }
  return added;
}

const longRunning =
  (name: string, role: RoleDefinition): Role['run'] =>
  async ({ config, logger, registry, signal }) => {
    await runRole(name, role, { config, logger, registry, signal });
    return 0;
  };

export function roleTable(registry: AggregateRegistry): Record<string, Role> {
  const running = longRunningRoles(registry);
  const table: Record<string, Role> = {
    migrate: {
      summary: 'apply pending migrations (safe to run from several pods at once); --dry-run lists them',
      usage: 'herald migrate [--dry-run]',
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
      usage: OUTBOX_USAGE,
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
    ...apiKeyRoles,
  };
  // The registered slices' commands come last.
  return { ...table, ...withoutClashes(table, registry.commands) };
}
