/**
 * Shared wiring for long-running roles: the database pool, the coalescing NOTIFY sender, the
 * LISTEN connection and the command handler, built once per process from the validated config and
 * closed together on shutdown.
 */
import { createDatabase, type DatabaseOptions } from '../adapters/postgres/database.js';
import { CoalescingNotifier, PgWakeupListener } from '../adapters/postgres/notifications.js';
import type { HeraldConfig } from '../config.js';
import { CommandHandler } from '../eventstore/command-handler.js';
import type { Logger } from '../logger.js';
import type { Database } from '../ports/database.js';

export interface Runtime {
  config: HeraldConfig;
  logger: Logger;
  db: Database;
  databaseOptions: DatabaseOptions;
  notifier: CoalescingNotifier;
  listener: PgWakeupListener;
  handler: CommandHandler;
  close(): Promise<void>;
}

export function createRuntime(config: HeraldConfig, logger: Logger, applicationName: string): Runtime {
  const databaseOptions = {
    url: config.databaseUrl,
    schema: config.schema,
    poolSize: config.dbPoolSize,
    applicationName,
  };
  const db = createDatabase(databaseOptions);
  const notifier = new CoalescingNotifier(db, config.notifyCoalesceMs, logger);
  const listener = new PgWakeupListener(databaseOptions, logger);
  const handler = new CommandHandler({ db, wakeups: notifier, pod: config.pod });
  return {
    config,
    logger,
    db,
    databaseOptions,
    notifier,
    listener,
    handler,
    async close() {
      notifier.close();
      await listener.close();
      await db.close();
    },
  };
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
