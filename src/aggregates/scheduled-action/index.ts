/**
 * The scheduled-action slice's registration (seed 002, ADR 0010, ADR 0020): the action and signal
 * descriptors (the action's claim fenced at its fire consumer), its settings and ports (conditions,
 * subjects, the executor), the sweeper that claims due actions (in `herald scanner` with queue
 * dispatch, in `herald worker` with in-process dispatch) and recovers stale ones, the fire consumer,
 * its queues, its service, routes (with the dashboard's signal look-up), live-stream topic, CLI verb
 * and demo.
 */

import type { AggregateContext } from '../../registry/module.js';
import { defineModule } from '../../registry/module.js';
import { defineConsumer } from '../../worker/consumer-definition.js';
import { actionRoles } from './cli.js';
import { actionsDemo } from './demo.js';
import { actionSignalAggregate, scheduledActionAggregate } from './descriptor.js';
import { actionFireHandler, actionFirePayload, inProcessRunner } from './fire.js';
import { type ActionPorts, defaultActionPorts } from './processing.js';
import { type ActionServices, actionRoutes } from './routes.js';
import { ScheduledActionService } from './service.js';
import { type ActionsConfig, actionSettings } from './settings.js';
import { signalLookupRoutes } from './signal-routes.js';
import { actionSweeper } from './sweepers.js';
import {
  ACTION_FIRE_CONSUMER,
  ACTION_QUEUES,
  ACTION_RUNNER_ACTOR,
  SCHEDULED_ACTION_FIRE_QUEUE,
} from './topology.js';

type ActionContext = AggregateContext<ActionsConfig, ActionPorts>;

function sweeperFor({ config, db, handler, logger, wakeups, ports }: ActionContext) {
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
            batchSize: config.consumer.batchSize,
            ports,
          }),
        }
      : {}),
  });
}

export const scheduledActionRegistration = defineModule({
  name: 'scheduled-action',
  aggregates: [scheduledActionAggregate, actionSignalAggregate],
  settings: [actionSettings],
  ports: {
    conditions: () => defaultActionPorts.conditions,
    subjects: () => defaultActionPorts.subjects,
    executor: () => defaultActionPorts.executor,
  },
  topology: { amqpQueues: ACTION_QUEUES },
  sweepers: (context) => (context.config.actions.dispatch === 'queue' ? [sweeperFor(context)] : []),
  workerSweepers: (context) =>
    context.config.actions.dispatch === 'in-process' ? [sweeperFor(context)] : [],
  // Consumed in both shapes: fire messages written before a switch to in-process still run.
  consumers: ({ config, handler, logger, ports }) => [
    defineConsumer({
      consumer: ACTION_FIRE_CONSUMER,
      transport: 'amqp',
      sources: [SCHEDULED_ACTION_FIRE_QUEUE],
      parse: (payload) => actionFirePayload.parse(payload),
      handler: actionFireHandler({ handler, logger, settings: config.actions, ports }),
    }),
  ],
  service: ({ config, db, handler }): ActionServices => ({
    actions: new ScheduledActionService({ db, handler, settings: config.actions }),
  }),
  api: {
    routes: async (app, deps) => {
      await app.register(actionRoutes, deps);
      await app.register(signalLookupRoutes, deps);
    },
    topics: { actions: [scheduledActionAggregate.streamType, actionSignalAggregate.streamType] },
  },
  cli: actionRoles,
  demo: actionsDemo,
});

// The slice's public surface (re-exported by the package's root entry).
export type { ActionSignalState, ReceivedSignal } from '../../domain/action-signal.js';
export {
  ACTION_OPERATIONS,
  type ActionMode,
  type ActionStatus,
  type ExistingAction,
  type ScheduledActionCommand,
  type ScheduledActionEvent,
  type ScheduledActionState,
} from '../../domain/scheduled-action.js';
export type { ActionExecutePayload, ActionFirePayload } from './descriptor.js';
export type {
  ActionExecutor,
  ActionPorts,
  ConditionsPort,
  ConditionsVerdict,
  ExecutionContext,
  Subject,
  SubjectPort,
} from './processing.js';
export type { ActionServices } from './routes.js';
export {
  type ScheduleActionParams,
  ScheduledActionService,
  type ScheduledActionServiceDeps,
  type SignalOutcome,
  type SignalParams,
} from './service.js';
export { type ActionSettings, type ActionsConfig, actionSettings } from './settings.js';
export { ACTION_EXECUTE_QUEUE, SCHEDULED_ACTION_FIRE_QUEUE } from './topology.js';
