/**
 * One periodic upkeep task as a service of its own on the shared service loop (River's maintenance
 * services): every `intervalMs` it runs its batch statement until a batch comes back short (at most
 * `maxRounds` statements per round, so a huge backlog cannot hold the loop), logs what it changed and
 * calls `afterChange` (e.g. NOTIFY the relays). Each statement is guarded in SQL and skips locked rows
 * (invariant 7: any number of replicas may run the same task); a failed round is retried with backoff.
 */
import type { Logger } from '../logger.js';
import type { Database } from '../ports/database.js';
import { ServiceLoop } from '../runtime/service-loop.js';

export interface MaintenanceTask {
  /** Named in logs and metrics, e.g. `outbox-recovery`. */
  readonly name: string;
  readonly intervalMs: number;
  /** Rows per statement for this task; default the service's batch size. */
  readonly batchSize?: number;
  /** One guarded statement over at most `limit` rows; returns how many it changed. */
  runBatch(db: Database, limit: number): Promise<number>;
  /** What the log line says happened, e.g. 'dead outbox rows re-queued after cooldown'. */
  readonly describe: string;
  /** Called after a round that changed rows (wake the relays, …). */
  afterChange?(changed: number): void;
  /** Log level of the round's summary line. Default info. */
  readonly level?: 'info' | 'warn' | 'debug';
}

export interface MaintenanceServiceOptions {
  db: Database;
  logger: Logger;
  /** Rows per statement (HERALD_MAINTENANCE_BATCH_SIZE). */
  batchSize: number;
  /** Statements per round at most. Default 50. */
  maxRounds?: number;
}

export class MaintenanceService {
  readonly stats = { rounds: 0, changed: 0 };
  private readonly loop: ServiceLoop;
  private readonly logger: Logger;

  constructor(
    readonly task: MaintenanceTask,
    private readonly options: MaintenanceServiceOptions,
  ) {
    this.logger = options.logger.child({ service: task.name });
    this.loop = new ServiceLoop({
      name: task.name,
      logger: this.logger,
      round: async () => {
        await this.runOnce();
        return task.intervalMs;
      },
      errorBackoff: { baseMs: 1_000, maxMs: Math.max(1_000, task.intervalMs), jitter: 'equal' },
    });
  }

  get name(): string {
    return this.task.name;
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Runs the task's statement until a batch comes back short; returns the rows changed. */
  async runOnce(): Promise<number> {
    const { db } = this.options;
    const batchSize = this.task.batchSize ?? this.options.batchSize;
    const maxRounds = this.options.maxRounds ?? 50;
    let changed = 0;
    for (let round = 0; round < maxRounds && !this.loop.stopping; round++) {
      const count = await this.task.runBatch(db, batchSize);
      changed += count;
      if (count < batchSize) break;
    }
    this.stats.rounds++;
    this.stats.changed += changed;
    if (changed > 0) {
      this.logger[this.task.level ?? 'info']({ changed }, this.task.describe);
      this.task.afterChange?.(changed);
    }
    return changed;
  }
}
