/** Fixtures for scheduled-action tests: the library service, sweepers and runners on a test database. */

import { inProcessRunner } from '../../src/aggregates/scheduled-action/fire.js';
import type { ActionPorts } from '../../src/aggregates/scheduled-action/processing.js';
import {
  type ScheduleActionParams,
  ScheduledActionService,
} from '../../src/aggregates/scheduled-action/service.js';
import { actionSweeper } from '../../src/aggregates/scheduled-action/sweepers.js';
import type { HeraldSettings as HeraldConfig } from '../../src/config.js';
import type { ActionDelivery } from '../../src/domain/scheduled-action.js';
import { CommandHandler } from '../../src/eventstore/command-handler.js';
import { testLogger } from './roles.js';
import type { TestDatabase } from './services.js';

/** Short retries and a short stale window, so tests wait for seconds, not minutes. */
export const FAST_ACTIONS = {
  HERALD_ACTIONS_RETRY_BASE_MS: '50',
  HERALD_ACTIONS_RETRY_MAX_MS: '200',
  HERALD_ACTIONS_STALE_SECONDS: '2',
  HERALD_ACTIONS_HEARTBEAT_SECONDS: '1',
  HERALD_SCANNER_POLL_MS: '200',
  HERALD_RELAY_IDLE_POLL_MS: '200',
};

export function actionsHarness(
  t: TestDatabase,
  options: { dispatch?: ActionDelivery; env?: Record<string, string> } = {},
) {
  const dispatch = options.dispatch ?? 'in-process';
  const config: HeraldConfig = t.config({
    ...FAST_ACTIONS,
    HERALD_ACTIONS_DISPATCH: dispatch,
    ...options.env,
  });
  const handler = new CommandHandler({ db: t.db, pod: 'test' });
  const logger = testLogger();
  const service = new ScheduledActionService({ db: t.db, handler, settings: config.actions });
  /** A sweeper of its own (a scanner or an in-process worker), with optional port overrides. */
  const sweeper = (ports?: Partial<ActionPorts>) =>
    actionSweeper({
      db: t.db,
      handler,
      logger,
      batchSize: config.actions.batchSize,
      delivery: dispatch,
      staleMs: config.actions.staleMs,
      messageLostAfterMs: config.scanner.messageLostAfterMs,
      maxReclaimsPerPass: config.scanner.maxReclaimsPerPass,
      ...(dispatch === 'in-process'
        ? {
            run: inProcessRunner({
              db: t.db,
              handler,
              logger,
              settings: config.actions,
              concurrency: config.actions.concurrency,
              batchSize: config.consumer.batchSize,
              ...(ports ? { ports } : {}),
            }),
          }
        : {}),
    });
  /** Sweeps until a pass finds nothing due. */
  const drain = async (s = sweeper()) => {
    for (;;) {
      s.beginPass?.();
      const { processed, more } = await s.sweep();
      if (processed === 0 && !more) return;
    }
  };
  return { config, handler, service, sweeper, drain };
}

export const normalAction = (overrides: Partial<ScheduleActionParams> = {}): ScheduleActionParams => ({
  organizationId: 'org-1',
  mode: 'normal',
  actionType: 'send_message',
  actionConfig: { text: 'follow-up' },
  delaySeconds: 0,
  ...overrides,
});

export const waitAction = (
  correlationKey: string,
  overrides: Partial<ScheduleActionParams> = {},
): ScheduleActionParams => ({
  organizationId: 'org-1',
  mode: 'waitForSignal',
  actionType: 'send_message',
  actionConfig: { text: 'thanks for clicking' },
  expiresSeconds: 3600,
  wait: { names: ['clicked'], correlationKey },
  expiry: { actionType: 'send_message', actionConfig: { text: 'resend: not clicked' } },
  ...overrides,
});

/** The events of one action's stream, by type. */
export async function eventTypes(t: TestDatabase, actionId: string): Promise<string[]> {
  const { rows } = await t.db.query<{ type: string }>(
    `select type from event where stream_type = 'scheduled_action' and stream_id = $1 order by version`,
    [actionId],
  );
  return rows.map((r) => r.type);
}

/** action_execute messages written per action (the default executor's effect). */
export async function executeMessages(t: TestDatabase): Promise<Map<string, number>> {
  const { rows } = await t.db.query<{ action_id: string; n: number }>(
    `select payload->>'actionId' as action_id, count(*)::int as n from outbox
      where destination = 'action_execute' group by 1`,
  );
  return new Map(rows.map((r) => [r.action_id, r.n]));
}
