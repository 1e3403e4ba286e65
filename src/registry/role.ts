/**
 * The contracts of Herald's processes, beside the registry whose slices contribute them: a
 * long-running role (`RoleDefinition`, run on a `Runtime`) and a `herald` command (`Role`, run with a
 * `RoleContext`). The runtime itself is built by the composition root (src/roles/runtime.ts); the
 * command table by src/cli/roles.ts.
 */
import type { DatabaseOptions } from '../adapters/postgres/database.js';
import type { CoalescingNotifier, PgWakeupListener } from '../adapters/postgres/notifications.js';
import type { CommandHandler } from '../eventstore/command-handler.js';
import type { ReadinessProbes } from '../health/readiness.js';
import type { Logger } from '../logger.js';
import type { Database } from '../ports/database.js';
import type { HeraldConfig } from '../settings/core.js';
import type { AggregateRegistry } from './registry.js';

/** What every role is wired from: built once per role from the validated config, closed together. */
export interface Runtime<Config extends HeraldConfig = HeraldConfig> {
  config: Config;
  logger: Logger;
  registry: AggregateRegistry;
  db: Database;
  databaseOptions: DatabaseOptions;
  notifier: CoalescingNotifier;
  listener: PgWakeupListener;
  handler: CommandHandler;
  /** What the role adds to its process's `/readyz` (broker connections, consumers). */
  probes: ReadinessProbes;
  /** The process's metrics and health endpoint, when the role runs through `runRole`. */
  endpoint?: { readonly url: string };
  close(): Promise<void>;
}

/** A long-running process role (`herald scanner`, `herald relay`, …, and roles slices add). */
export interface RoleDefinition<Config extends HeraldConfig = HeraldConfig> {
  readonly summary: string;
  /** False: the process does not publish the outbox rows it commits itself (the relay role). Default true (ADR 0024). */
  readonly inlinePublish?: boolean;
  /** Runs until `signal` aborts, then finishes in-flight work and resolves; the runtime is closed after. */
  run(runtime: Runtime<Config>, signal: AbortSignal): Promise<void>;
}

/** What a `herald` command gets: the validated config, a logger, the registry and the stop signal. */
export interface RoleContext<Config extends HeraldConfig = HeraldConfig> {
  config: Config;
  logger: Logger;
  registry: AggregateRegistry;
  args: string[];
  options: Record<string, string | boolean | undefined>;
  /** The raw arguments after the role name, for commands that parse their own options. */
  argv: string[];
  /** Aborted on SIGTERM/SIGINT: long-running roles finish in-flight work and return. */
  signal: AbortSignal;
}

/** A `herald` command: a summary for the usage text and a run function returning the exit code. */
export interface Role<Config extends HeraldConfig = HeraldConfig> {
  summary: string;
  /**
   * The command's synopsis (`herald cron list|show … | create …`, alternatives separated by ` | `),
   * printed by `herald <command> --help` and in docs/reference/cli.md (src/cli/help.ts).
   */
  usage?: string;
  run(context: RoleContext<Config>): Promise<number>;
}
