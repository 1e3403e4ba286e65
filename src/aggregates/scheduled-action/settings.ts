/**
 * The scheduled-action slice's settings (seed 002, ADR 0010): the deployment shape, claim batches,
 * stale recovery, retries and the early-signal lookback. Composed into the configuration by the
 * slice's registration (`config.actions`).
 */
import { z } from 'zod';
import { ConfigError } from '../../errors.js';
import type { HeraldConfig } from '../../settings/core.js';
import { describeSetting as d, defineSettings, type SettingsOf } from '../../settings/fragment.js';
import { nonNegativeInt, positiveInt } from '../../settings/validators.js';

/** Scheduled actions (seed 002, docs/decisions/0010-scheduled-actions.md). */
export interface ActionSettings {
  /**
   * queue: `herald scanner` claims due actions and publishes scheduled_action_fire, `herald worker`
   * consumes it (the seed's cron-scheduler profile); in-process: `herald worker` claims and runs them.
   */
  readonly dispatch: 'queue' | 'in-process';
  /** Actions claimed per transaction (seed 002: 500). */
  readonly batchSize: number;
  /** Seed 002: an action processing for longer than this (5 minutes) is recovered. */
  readonly staleMs: number;
  /** A running action refreshes its claim this often. */
  readonly heartbeatMs: number;
  /** Seed 002: 3 retries, then failed (the default for actions scheduled without maxRetries). */
  readonly maxRetries: number;
  readonly retryBaseMs: number;
  readonly retryMaxMs: number;
  /** A signal received this long before a wait is saved still unlocks it (the early-signal race). */
  readonly signalLookbackMs: number;
  /** In-process dispatch: actions a worker runs at once (default min(8, pool size - 1)). */
  readonly concurrency: number;
}

export const actionSettings = defineSettings({
  key: 'actions',
  title: 'Scheduled actions',
  env: {
    HERALD_ACTIONS_DISPATCH: d(
      z.enum(['queue', 'in-process']).default('queue'),
      '`queue`: `herald scanner` claims due actions and publishes `scheduled_action_fire` for `herald worker`; `in-process`: `herald worker` claims and runs them',
    ),
    HERALD_ACTIONS_BATCH_SIZE: d(
      positiveInt.max(10_000).default(500),
      'actions claimed per transaction (seed 002)',
    ),
    HERALD_ACTIONS_STALE_SECONDS: d(
      positiveInt.default(300),
      'an action processing this long without a heartbeat, whose fire message is no longer in flight, is recovered (seed 002: 5 min)',
    ),
    HERALD_ACTIONS_HEARTBEAT_SECONDS: d(
      positiveInt.default(60),
      'a running action refreshes its claim this often (below the stale window)',
    ),
    HERALD_ACTIONS_MAX_RETRIES: d(
      nonNegativeInt.max(100).default(3),
      'retries of a transient executor error, then `failed` (for actions scheduled without `maxRetries`)',
    ),
    HERALD_ACTIONS_RETRY_BASE_MS: d(
      positiveInt.default(5_000),
      'first retry delay (exponential, equal jitter)',
    ),
    HERALD_ACTIONS_RETRY_MAX_MS: d(positiveInt.default(300_000), 'longest retry delay'),
    HERALD_ACTIONS_SIGNAL_LOOKBACK_SECONDS: d(
      nonNegativeInt.default(86_400),
      'a signal received this long before its wait is saved still unlocks it',
    ),
    HERALD_ACTIONS_CONCURRENCY: d(
      positiveInt.max(1_000).optional(),
      'in-process dispatch: actions one worker runs at once; must be below `HERALD_DB_POOL_SIZE`',
      'min(8, pool − 1)',
    ),
  },
  map(e, base): ActionSettings {
    if (e.HERALD_ACTIONS_HEARTBEAT_SECONDS >= e.HERALD_ACTIONS_STALE_SECONDS) {
      throw new ConfigError(
        'HERALD_ACTIONS_HEARTBEAT_SECONDS',
        `(${e.HERALD_ACTIONS_HEARTBEAT_SECONDS}) must be shorter than HERALD_ACTIONS_STALE_SECONDS (${e.HERALD_ACTIONS_STALE_SECONDS}): ` +
          'a running action would go stale between two heartbeats',
      );
    }
    if (e.HERALD_ACTIONS_CONCURRENCY !== undefined && e.HERALD_ACTIONS_CONCURRENCY >= base.dbPoolSize) {
      throw new ConfigError(
        'HERALD_ACTIONS_CONCURRENCY',
        `(${e.HERALD_ACTIONS_CONCURRENCY}) must be below HERALD_DB_POOL_SIZE (${base.dbPoolSize}): ` +
          'each running action holds a connection for its transaction',
      );
    }
    if (e.HERALD_ACTIONS_RETRY_MAX_MS < e.HERALD_ACTIONS_RETRY_BASE_MS) {
      throw new ConfigError('HERALD_ACTIONS_RETRY_MAX_MS', 'must be >= HERALD_ACTIONS_RETRY_BASE_MS');
    }
    return {
      dispatch: e.HERALD_ACTIONS_DISPATCH,
      batchSize: e.HERALD_ACTIONS_BATCH_SIZE,
      staleMs: e.HERALD_ACTIONS_STALE_SECONDS * 1000,
      heartbeatMs: e.HERALD_ACTIONS_HEARTBEAT_SECONDS * 1000,
      maxRetries: e.HERALD_ACTIONS_MAX_RETRIES,
      retryBaseMs: e.HERALD_ACTIONS_RETRY_BASE_MS,
      retryMaxMs: e.HERALD_ACTIONS_RETRY_MAX_MS,
      signalLookbackMs: e.HERALD_ACTIONS_SIGNAL_LOOKBACK_SECONDS * 1000,
      concurrency: e.HERALD_ACTIONS_CONCURRENCY ?? Math.max(1, Math.min(8, base.dbPoolSize - 1)),
    };
  },
});

/** The configuration the scheduled-action slice runs with. */
export type ActionsConfig = HeraldConfig & SettingsOf<typeof actionSettings>;
