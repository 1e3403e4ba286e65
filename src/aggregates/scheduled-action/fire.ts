/**
 * Firing a claimed action, as a configuration of the fenced handler (src/worker/fenced-handler.ts),
 * in both of seed 002's deployment shapes with the same outcomes:
 * - queue: `herald worker` consumes `scheduled_action_fire` (claims the scanner published);
 * - in-process: `herald worker` claims due actions itself and runs each claim through the same handler.
 * The handler acts only while the action is processing with the message's epoch (invariant 5);
 * anything else is a quiet discard recorded as `ActionFireDiscarded` on `action_fire/<message id>`.
 * processAction runs inside the transaction that records the outcome (executed, cancelled because the
 * conditions no longer hold, a retry with backoff, or failed), so an action is executed once.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type {
  ExistingAction,
  ScheduledActionCommand,
  ScheduledActionEvent,
  ScheduledActionState,
} from '../../domain/scheduled-action.js';
import { errorMessage } from '../../errors.js';
import type { CommandHandler, CommandResult } from '../../eventstore/command-handler.js';
import type { Logger } from '../../logger.js';
import type { Database, SqlClient } from '../../ports/database.js';
import { retryDelayMs } from '../../runtime/backoff.js';
import type { BatchingHandler, ConsumedMessage, Handler } from '../../worker/delivery-policy.js';
import { type FencedHandlerDefinition, fencedHandler } from '../../worker/fenced-handler.js';
import { type ActionFirePayload, fireMessageId, scheduledActionAggregate } from './descriptor.js';
import { type ActionPorts, defaultActionPorts, type ProcessOutcome, processAction } from './processing.js';
import type { ActionSettings } from './settings.js';
import { ACTION_FIRE_CONSUMER, ACTION_RUNNER_ACTOR } from './topology.js';

export const actionFirePayload = z.strictObject({
  actionId: z.uuid(),
  organizationId: z.string().min(1),
  epoch: z.number().int().positive(),
}) satisfies z.ZodType<ActionFirePayload>;

export type FireSettings = Pick<ActionSettings, 'retryBaseMs' | 'retryMaxMs'>;

export function actionFire(
  ports: ActionPorts,
  settings: FireSettings,
  consumer = ACTION_FIRE_CONSUMER,
): FencedHandlerDefinition<
  ScheduledActionState,
  ScheduledActionCommand,
  ScheduledActionEvent,
  ActionFirePayload,
  ProcessOutcome
> {
  return {
    consumer,
    aggregate: scheduledActionAggregate,
    effect: ({ state, tx }) => processAction(state as ExistingAction, tx, ports),
    // The batch form: several claims in one transaction (a transient failure in any sends the batch
    // through the single form, where it becomes that action's retry).
    async effectMany(contexts) {
      const outcomes: ProcessOutcome[] = [];
      for (const { state, tx } of contexts)
        outcomes.push(await processAction(state as ExistingAction, tx, ports));
      return outcomes;
    },
    heartbeat: ({ streamId, epoch }, now) => ({ type: 'HeartbeatAction', actionId: streamId, epoch, now }),
    complete({ streamId, epoch }, now, outcome) {
      if (outcome?.kind === 'cancelled') {
        return { type: 'CancelAction', actionId: streamId, epoch, reason: outcome.reason, now };
      }
      return {
        type: 'CompleteAction',
        actionId: streamId,
        epoch,
        published: outcome?.published ?? true,
        now,
      };
    },
    fail: ({ streamId, epoch }, error, now) => ({
      type: 'FailAction',
      actionId: streamId,
      epoch,
      error,
      now,
    }),
    retry: ({ streamId, epoch }, error, now, state) => ({
      type: 'RetryAction',
      actionId: streamId,
      epoch,
      error: errorMessage(error).slice(0, 2000) || 'failed',
      delayMs: retryDelayMs((state as ExistingAction).retryCount + 1, {
        baseMs: settings.retryBaseMs,
        maxMs: settings.retryMaxMs,
        jitter: 'equal',
      }),
      now,
    }),
  };
}

export interface ActionFireOptions {
  handler: CommandHandler;
  logger: Logger;
  settings: FireSettings & Pick<ActionSettings, 'heartbeatMs'>;
  ports?: Partial<ActionPorts>;
}

/** The fire handler the worker consumes `scheduled_action_fire` with. */
export function actionFireHandler(
  options: ActionFireOptions,
  consumer = ACTION_FIRE_CONSUMER,
): Handler<ActionFirePayload> {
  return fencedHandler(actionFire({ ...defaultActionPorts, ...options.ports }, options.settings, consumer), {
    handler: options.handler,
    logger: options.logger,
    heartbeatMs: options.settings.heartbeatMs,
  });
}

/**
 * The in-process shape: runs claims the worker just made through the same fenced handler, `batchSize`
 * claims per transaction in its batch form (HERALD_CONSUMER_BATCH_SIZE, as the fire consumer records
 * its deliveries), `concurrency` transactions at a time. A batch the batch form declines or fails goes
 * one claim per transaction, so one failing action cannot hold back the others; a claim whose run
 * cannot commit (database trouble) stays processing and is recovered after the stale window, like a
 * crashed worker's.
 *
 * Claims and runs overlap: while more is due (the claim came back full), `run` returns once the last
 * of its batches has a lane, so the next claim transaction runs while the lanes work (at most
 * `concurrency` batches claimed ahead of a free lane); the pass's last claim waits for every run, and
 * `drain` (the sweeper's stop) for whatever is still running.
 */
export interface InProcessRunner {
  run(
    results: readonly CommandResult<ScheduledActionState, ScheduledActionEvent>[],
    pass: { more: boolean },
  ): Promise<void>;
  drain(): Promise<void>;
}

export function inProcessRunner(
  options: ActionFireOptions & { db: Database; concurrency: number; batchSize: number },
): InProcessRunner {
  const handle = actionFireHandler(options, ACTION_RUNNER_ACTOR) as Handler<ActionFirePayload> &
    Partial<BatchingHandler<ActionFirePayload>>;
  const messageOf = (
    state: ExistingAction,
    callbacks: (() => void)[],
  ): ConsumedMessage<ActionFirePayload> => ({
    messageId: fireMessageId(state.actionId, state.claimEpoch),
    payload: { actionId: state.actionId, organizationId: state.organizationId, epoch: state.claimEpoch },
    headers: {},
    attempt: 1,
    queue: 'in-process',
    redelivered: false,
    correlationId: randomUUID(),
    aggregateId: state.actionId,
    afterCommit: (callback) => callbacks.push(callback),
  });
  /** Runs `work` in a transaction; the after-commit callbacks only once it committed. */
  const inTransaction = async (work: (tx: SqlClient, callbacks: (() => void)[]) => Promise<unknown>) => {
    const callbacks: (() => void)[] = [];
    const result = await options.db.transaction((tx) => work(tx, callbacks));
    for (const callback of callbacks) callback();
    return result;
  };
  const runOne = async (state: ExistingAction) => {
    try {
      await inTransaction((tx, callbacks) => handle(messageOf(state, callbacks), tx));
    } catch (error) {
      options.logger.error(
        { err: error, aggregateId: state.actionId, epoch: state.claimEpoch },
        `in-process action run failed; recovered after the stale window: ${errorMessage(error)}`,
      );
    }
  };
  const runBatch = async (states: readonly ExistingAction[]) => {
    const batch = handle.batch;
    if (states.length > 1 && batch) {
      try {
        const outcomes = await inTransaction((tx, callbacks) =>
          batch(
            states.map((state) => messageOf(state, callbacks)),
            tx,
          ),
        );
        if (outcomes !== null) return;
      } catch (error) {
        options.logger.warn(
          { err: error, actions: states.length },
          `in-process batch failed; running its actions one at a time: ${errorMessage(error)}`,
        );
      }
    }
    for (const state of states) await runOne(state);
  };
  const running = new Set<Promise<void>>();
  const drain = async () => {
    while (running.size > 0) await Promise.all(running);
  };
  return {
    async run(results, { more }) {
      const claimed = results
        .map((r) => r.state)
        .filter((s): s is ExistingAction => s.status === 'processing' && s.delivery === 'in-process');
      for (let i = 0; i < claimed.length; i += options.batchSize) {
        while (running.size >= options.concurrency) await Promise.race(running);
        const lane: Promise<void> = runBatch(claimed.slice(i, i + options.batchSize)).finally(() =>
          running.delete(lane),
        );
        running.add(lane);
      }
      if (!more) await drain();
    },
    drain,
  };
}
