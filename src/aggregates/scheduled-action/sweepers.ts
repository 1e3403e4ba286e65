/**
 * The scheduled action's sweeps (seed 002's per-pass loop, made durable), as definitions of the generic
 * sweepers (src/scanner/sweeper.ts):
 * - claim (the seed's claimBatch + handleExpired): pending actions due by now, 500 per transaction with
 *   FOR UPDATE SKIP LOCKED, each claimed with a new epoch; a wait past its deadline records its expiry
 *   and claims its expiry branch (or is done). Queue delivery writes one `scheduled_action_fire` message
 *   per claim in the same transaction; in-process delivery runs the claims after the commit.
 * - recover (the seed's recoverStaleProcessing): an action processing for over 5 minutes with no
 *   heartbeat and no fire message in flight goes back to pending with a new epoch (invariant 5), and
 *   the next claim takes it at once.
 * The claim loops while batches come back full (the seed's "loop until nothing is due").
 */
import {
  findStaleActions,
  lockDueActions,
  lockStaleActions,
  nextActionDueInMs,
} from '../../adapters/postgres/scheduled-action-queries.js';
import type {
  ActionDelivery,
  ExistingAction,
  ScheduledActionCommand,
  ScheduledActionEvent,
  ScheduledActionState,
} from '../../domain/scheduled-action.js';
import type { LoadedStream } from '../../eventstore/aggregate.js';
import type { CommandResult } from '../../eventstore/command-handler.js';
import {
  type ClaimSweepDefinition,
  defineClaimSweeper,
  defineStaleRecovery,
  type StaleRecoveryDefinition,
  type SweeperDeps,
  sweepInOrder,
} from '../../scanner/sweeper.js';
import { claimMessageIds, scheduledActionAggregate } from './descriptor.js';
import type { InProcessRunner } from './fire.js';

type Loaded = { state: ExistingAction; version: number };
const streamOf = (loaded: Loaded): LoadedStream<ScheduledActionState> => ({
  streamId: loaded.state.actionId,
  state: loaded.state,
  version: loaded.version,
});

function claimOutcome(result: CommandResult<ScheduledActionState, ScheduledActionEvent>) {
  const s = result.state;
  if (s.status === 'done')
    return {
      counter: 'expired',
      message: 'wait expired with no expiry branch: done',
      level: 'info' as const,
    };
  const expired = result.events.some((e) => e.type === 'ActionExpired');
  const epoch = s.status === 'NONE' ? undefined : s.claimEpoch;
  return expired
    ? {
        counter: 'expired',
        message: `wait expired: expiry branch claimed (epoch ${epoch})`,
        level: 'info' as const,
      }
    : { counter: 'claimed', message: `action claimed (epoch ${epoch})`, level: 'debug' as const };
}

export function actionClaimSweep(
  delivery: ActionDelivery,
  runner?: InProcessRunner,
): ClaimSweepDefinition<ScheduledActionState, ScheduledActionCommand, ScheduledActionEvent> {
  return {
    name: delivery === 'queue' ? 'scheduled_action.claim' : 'scheduled_action.run',
    aggregate: scheduledActionAggregate,
    actor: delivery === 'queue' ? 'scanner' : 'worker',
    lockDue: async (tx, limit) => (await lockDueActions(tx, limit)).map(streamOf),
    command: (stream, now) => ({ type: 'ClaimAction', actionId: stream.streamId, delivery, now }),
    nextDueInMs: nextActionDueInMs,
    outcome: claimOutcome,
    ...(runner ? { afterCommit: runner.run, stop: runner.drain } : {}),
  };
}

export const actionStaleRecovery: StaleRecoveryDefinition<
  ScheduledActionState,
  ScheduledActionCommand,
  ScheduledActionEvent
> = {
  name: 'scheduled_action.recover',
  aggregate: scheduledActionAggregate,
  actor: 'reaper',
  findStale: async (sql, { staleAfterMs, limit }) =>
    (await findStaleActions(sql, staleAfterMs, limit)).map(streamOf),
  lockStale: async (tx, found, staleAfterMs) =>
    (await lockStaleActions(tx, found, staleAfterMs)).map(streamOf),
  claimMessageIds,
  command: (stream, now, staleAfterMs) => ({
    type: 'ReclaimAction',
    actionId: stream.streamId,
    now,
    staleAfterMs,
    reason: `processing for over ${Math.round(staleAfterMs / 1000)} s with no heartbeat and no message in flight: worker presumed dead`,
  }),
  outcome: (result) => ({
    counter: 'reclaimed',
    message: `reclaimed stale action (epoch ${result.state.status === 'NONE' ? '?' : result.state.claimEpoch})`,
    level: 'warn',
  }),
};

export interface ActionSweeperOptions extends SweeperDeps {
  delivery: ActionDelivery;
  /** Seed 002: 5 minutes. */
  staleMs: number;
  messageLostAfterMs: number;
  maxReclaimsPerPass: number;
  /** In-process delivery: runs what a claim transaction claimed, after its commit. */
  run?: InProcessRunner;
}

/** Claim, then stale recovery, as one sweeper. */
export function actionSweeper(options: ActionSweeperOptions) {
  const claim = defineClaimSweeper(actionClaimSweep(options.delivery, options.run), options);
  const recover = defineStaleRecovery(actionStaleRecovery, options, {
    staleAfterMs: options.staleMs,
    messageLostAfterMs: options.messageLostAfterMs,
    maxReclaimsPerPass: options.maxReclaimsPerPass,
  });
  return Object.assign(sweepInOrder('scheduled_action', claim, recover), { claim, recover });
}
