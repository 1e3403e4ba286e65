/**
 * The scheduled-action aggregate's wire names, each defined once (seed 002's queue names, spelled as
 * the existing trigger workers consume them): the fire queue the scanner publishes claims to, the
 * execute queue the default executor publishes to, the fire consumer's inbox name and the side stream
 * of its destination discards.
 */

/** Claims of due actions (the seed's cron-scheduler profile → trigger worker). */
export const SCHEDULED_ACTION_FIRE_QUEUE = 'scheduled_action_fire';
/** What a fired action asks the trigger engine to run (the seed's ExecuteAction), with the claim epoch. */
export const ACTION_EXECUTE_QUEUE = 'action_execute';
export const ACTION_QUEUES = [SCHEDULED_ACTION_FIRE_QUEUE, ACTION_EXECUTE_QUEUE] as const;

/** The fire worker's inbox name, and the actor of the events it appends. */
export const ACTION_FIRE_CONSUMER = 'scheduled-action-fire';
/** The in-process runner's actor (`herald worker` with HERALD_ACTIONS_DISPATCH=in-process). */
export const ACTION_RUNNER_ACTOR = 'scheduled-action-runner';

/** Side stream: one `ActionFireDiscarded` per fire message the destination re-check refused, keyed by message id. */
export const ACTION_FIRE_STREAM_TYPE = 'action_fire';
