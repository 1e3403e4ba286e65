/**
 * What a `herald` command is: a summary for the usage text and a run function that gets the validated
 * config, a logger, the aggregate registry and the stop signal, and returns the exit code. Shared by
 * the role table (roles.ts) and the commands it lists, so neither imports the entry point (main.ts).
 */
import type { HeraldConfig } from '../config.js';
import type { AggregateRegistry } from '../eventstore/registry.js';
import type { Logger } from '../logger.js';

export interface RoleContext {
  config: HeraldConfig;
  logger: Logger;
  registry: AggregateRegistry;
  args: string[];
  options: Record<string, string | boolean | undefined>;
  /** The raw arguments after the role name, for commands that parse their own options. */
  argv: string[];
  /** Aborted on SIGTERM/SIGINT: long-running roles finish in-flight work and return. */
  signal: AbortSignal;
}

export interface Role {
  summary: string;
  /** Returns the process exit code. */
  run(context: RoleContext): Promise<number>;
}
