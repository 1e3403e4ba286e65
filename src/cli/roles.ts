/**
 * The CLI's role table. Each entry wires configuration to one long-running process or one command.
 * Long-running roles return when the signal aborts (SIGTERM/SIGINT) after finishing in-flight work.
 */
import { createDatabase } from '../adapters/postgres/database.js';
import { migrate } from '../adapters/postgres/migrator.js';
import { runTick } from '../campaigns/tick.js';
import { HERALD_QUEUES } from '../campaigns/topology.js';
import { runOutboxCommand } from '../outbox/outbox-admin.js';
import { runRelay } from '../outbox/relay-role.js';
import { runProjector } from '../roles/projector-role.js';
import { runTogether } from '../roles/runtime.js';
import { runScanner } from '../roles/scanner-role.js';
import { runWorker } from '../roles/worker-role.js';
import { incidentRoles } from './incident-commands.js';
import type { Role, RoleContext } from './main.js';

async function migrateCommand({ config, logger }: RoleContext): Promise<number> {
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

const longRunning = (run: (context: RoleContext) => Promise<void>) => async (context: RoleContext) => {
  await run(context);
  return 0;
};

export const roles: Record<string, Role> = {
  migrate: {
    summary: 'apply pending migrations (safe to run from several pods at once)',
    run: migrateCommand,
  },
  relay: {
    summary: 'publish outbox rows to the broker (any number of replicas)',
    run: longRunning(({ config, logger, signal }) =>
      runRelay(config, logger, signal, { queues: HERALD_QUEUES }),
    ),
  },
  scanner: {
    summary: 'claim due work (campaigns) and write it to the outbox (any number of replicas)',
    run: longRunning(({ config, logger, signal }) => runScanner(config, logger, signal)),
  },
  tick: {
    summary: 'publish one tick per minute to process_campaign (Redis SET NX; the event log de-duplicates)',
    run: longRunning(({ config, logger, signal }) => runTick(config, logger, signal)),
  },
  worker: {
    summary: 'built-in consumers: LINE campaign delivery',
    run: longRunning(({ config, logger, signal }) => runWorker(config, logger, signal)),
  },
  outbox: {
    summary: 'operator commands: parked | requeue <id> | skip <id> [--reason=…] (ordered keys, dead rows)',
    run: outboxCommand,
  },
  all: {
    summary: 'migrate, then every role in one process (development)',
    async run(context) {
      await migrateCommand(context);
      const { config, logger, signal } = context;
      await runTogether(signal, [
        (stop) => runRelay(config, logger, stop, { queues: HERALD_QUEUES }),
        (stop) => runScanner(config, logger, stop),
        (stop) => runWorker(config, logger, stop),
        (stop) => runTick(config, logger, stop),
        (stop) => runProjector(config, logger, stop),
      ]);
      return 0;
    },
  },
  ...incidentRoles,
};
