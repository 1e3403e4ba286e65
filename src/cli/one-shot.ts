/**
 * What every one-shot `herald` command shares: strict option parsing (a typo is a usage error, exit 2)
 * and a small pool of its own, closed when the command ends. Other errors propagate to the entry point
 * (exit 1 with the message).
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { createDatabase } from '../adapters/postgres/database.js';
import { ValidationError } from '../errors.js';
import { CommandHandler } from '../eventstore/command-handler.js';
import type { Database } from '../ports/database.js';
import type { WakeupSignal } from '../ports/wakeups.js';
import type { Role, RoleContext } from '../registry/role.js';

export class UsageError extends ValidationError {}

export const out = (line = '') => process.stdout.write(`${line}\n`);
export const json = (value: unknown) => JSON.stringify(value, null, 2);

type StrictConfig<T> = { args: string[]; options: T; allowPositionals: true; strict: true };

/** Every command names an organization the same way: `--organization <id>` (`--org` for short). */
export const ORGANIZATION_OPTION = { organization: { type: 'string' } } as const;

export function parse<T extends NonNullable<ParseArgsConfig['options']>>(
  argv: string[],
  options: T,
): ReturnType<typeof parseArgs<StrictConfig<T>>> {
  const args =
    'organization' in options ? argv.map((arg) => arg.replace(/^--org(?==|$)/, '--organization')) : argv;
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** Runs a one-shot command with its own small pool; usage errors exit 2, other errors propagate (exit 1). */
export function oneShot(
  usage: string,
  run: (context: RoleContext, db: Database) => Promise<number>,
): Role['run'] {
  return async (context) => {
    let db: Database | undefined;
    try {
      db = createDatabase({
        url: context.config.databaseUrl,
        schema: context.config.schema,
        poolSize: 2,
        applicationName: 'herald-cli',
      });
      return await run(context, db);
    } catch (error) {
      if (error instanceof UsageError || (error instanceof ValidationError && error.details.option)) {
        process.stderr.write(`herald: ${error.message}\nusage: ${usage}\n`);
        return 2;
      }
      throw error;
    } finally {
      await db?.close();
    }
  };
}

/**
 * The registered slices' services on a command's pool, with their ports as registered (a command uses
 * the same services, and so the same adapters, as the API).
 */
export function servicesOn<Services>(
  context: Pick<RoleContext, 'config' | 'registry' | 'logger'>,
  db: Database,
  options: { wakeups?: WakeupSignal } = {},
): Services {
  const { config } = context;
  const handler = new CommandHandler(
    options.wakeups
      ? { db, pod: config.pod, wakeups: options.wakeups, wakeHorizonMs: config.scanner.pollMs, config }
      : { db, pod: config.pod, config },
  );
  return context.registry.services({ db, handler, config, logger: context.logger }) as Services;
}
