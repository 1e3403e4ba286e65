/**
 * The `herald` command's entry point: parses the role name and dispatches to the role table
 * (roles.ts) with Herald's registry. Configuration comes from the environment through loadConfig (an
 * invalid value exits 2 with the variable's name); long-running roles stop gracefully on
 * SIGTERM/SIGINT and exit 0.
 */
import { parseArgs } from 'node:util';
import { heraldRegistry } from './aggregates/registry.js';
import { commandHelp, commandsUsage } from './cli/help.js';
import { roleTable } from './cli/roles.js';
import { loadConfig } from './config.js';
import { HeraldError } from './errors.js';
import { createLogger, redactUrlCredentials, secretScrubber } from './logger.js';
import type { HeraldConfig } from './settings/core.js';

const roles = roleTable(heraldRegistry);

const USAGE = commandsUsage(roles);

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: false,
    options: { help: { type: 'boolean', short: 'h' } },
  });
  const [roleName, ...args] = positionals;
  const role = roleName ? roles[roleName] : undefined;
  if (role && values.help) {
    process.stdout.write(`${commandHelp(roleName!, role)}\n`);
    return 0;
  }
  if (!role || values.help) {
    (values.help ? process.stdout : process.stderr).write(`${USAGE}\n`);
    return values.help ? 0 : 2;
  }
  let config: HeraldConfig;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    process.stderr.write(`herald: ${redactUrlCredentials((error as Error).message)}\n`);
    return 2;
  }
  // Each role binds its own `role` field (`herald all` runs several in one process). Neither the log
  // nor the messages below print a secret of the configuration (ADR 0015).
  const logger = createLogger({ level: config.logLevel, pod: config.pod, secrets: config.secrets });
  const scrub = secretScrubber(config.secrets);
  const controller = new AbortController();
  const shutdown = (signalName: string) => {
    if (controller.signal.aborted) {
      logger.warn({ signal: signalName }, 'second signal: exiting now');
      process.exit(1);
    }
    logger.info({ signal: signalName }, 'shutting down');
    controller.abort();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  try {
    return await role.run({
      config,
      logger,
      registry: heraldRegistry,
      args,
      options: values as Record<string, string | boolean | undefined>,
      argv: argv.slice(argv.indexOf(roleName!) + 1),
      signal: controller.signal,
    });
  } catch (error) {
    const code = error instanceof HeraldError ? error.code : 'UNEXPECTED';
    logger.error({ err: error, code }, 'herald failed');
    process.stderr.write(scrub(`herald ${roleName}: ${(error as Error).message}\n`));
    return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Pools and sockets are closed by the roles; do not wait on stray timers.
    setTimeout(() => process.exit(code), 200).unref();
  },
  (error) => {
    process.stderr.write(`herald: ${String(error)}\n`);
    process.exit(1);
  },
);
