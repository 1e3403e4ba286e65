/**
 * The scheduled-action aggregate's registration (seed 002): the action and signal descriptors, the
 * sweeper that claims due actions (in `herald scanner` with queue dispatch, in `herald worker` with
 * in-process dispatch) and recovers stale ones, the fire consumer, the queues it publishes to and the
 * side stream of fire discards.
 */

import type { AggregateContext } from '../../eventstore/registry.js';
import { defineAggregate, defineConsumer } from '../../eventstore/registry.js';
import { actionSignalAggregate, scheduledActionAggregate } from './descriptor.js';
import { actionFireHandler, actionFirePayload, inProcessRunner } from './fire.js';
import { actionSweeper } from './sweepers.js';
import {
  ACTION_FIRE_CONSUMER,
  ACTION_FIRE_STREAM_TYPE,
  ACTION_QUEUES,
  ACTION_RUNNER_ACTOR,
  SCHEDULED_ACTION_FIRE_QUEUE,
} from './topology.js';

function sweeperFor({ config, db, handler, logger, wakeups }: AggregateContext) {
  const { actions, scanner } = config;
  const inProcess = actions.dispatch === 'in-process';
  return actionSweeper({
    db,
    handler,
    wakeups,
    logger,
    batchSize: actions.batchSize,
    delivery: actions.dispatch,
    staleMs: actions.staleMs,
    messageLostAfterMs: scanner.messageLostAfterMs,
    maxReclaimsPerPass: scanner.maxReclaimsPerPass,
    ...(inProcess
      ? {
          run: inProcessRunner({
            db,
            handler,
            logger: logger.child({ consumer: ACTION_RUNNER_ACTOR }),
            settings: actions,
            concurrency: actions.concurrency,
          }),
        }
      : {}),
  });
}

export const scheduledActionRegistration = defineAggregate({
  aggregate: scheduledActionAggregate,
  sideStreams: [
    {
      streamType: ACTION_FIRE_STREAM_TYPE,
      description:
        'ActionFireDiscarded: a fire message the destination re-check refused (stale epoch, not processing)',
      effectsOfMessages: true,
    },
  ],
  topology: { amqpQueues: ACTION_QUEUES },
  sweepers: (context) => (context.config.actions.dispatch === 'queue' ? [sweeperFor(context)] : []),
  workerSweepers: (context) =>
    context.config.actions.dispatch === 'in-process' ? [sweeperFor(context)] : [],
  // Consumed in both shapes: fire messages written before a switch to in-process still run.
  consumers: ({ config, handler, logger }) => [
    defineConsumer({
      consumer: ACTION_FIRE_CONSUMER,
      transport: 'amqp',
      sources: [SCHEDULED_ACTION_FIRE_QUEUE],
      parse: (payload) => actionFirePayload.parse(payload),
      handler: actionFireHandler({ handler, logger, settings: config.actions }),
    }),
  ],
});

export const actionSignalRegistration = defineAggregate({ aggregate: actionSignalAggregate });

/** The two streams of seed 002: actions and the signals that unlock their waits. */
export const scheduledActionRegistrations = [scheduledActionRegistration, actionSignalRegistration];

export { ScheduledActionService } from './service.js';
