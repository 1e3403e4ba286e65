/**
 * The CLI's role table. Each entry wires configuration to one long-running process or one command.
 */
import { migrate } from '../adapters/postgres/migrator.js';
import type { Role } from './main.js';

export const roles: Record<string, Role> = {
  migrate: {
    summary: 'apply pending migrations (safe to run from several pods at once)',
    async run({ config, logger }) {
      const result = await migrate({ url: config.databaseUrl, schema: config.schema });
      for (const name of result.applied) logger.info({ migration: name }, 'applied migration');
      process.stdout.write(
        `migrations applied: ${result.applied.length ? result.applied.join(', ') : 'none'} (already applied: ${result.alreadyApplied})\n`,
      );
      return 0;
    },
  },
};
