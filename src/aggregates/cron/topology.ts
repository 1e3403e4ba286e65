/**
 * The cron aggregates' wire names, each defined once: the queue run messages go to (seed 004's
 * `cron_events`, declared durable by the relay), the executors' inbox name and the side stream their
 * destination re-check records discards on.
 */

/** Seed 004's queue: one message per claim of a run (creation, buffer release, retry). */
export const CRON_EVENTS_QUEUE = 'cron_events';
/** The executors' inbox name. */
export const CRON_EXECUTOR_CONSUMER = 'cron-executor';
/** Side stream: one `JobRunMessageDiscarded` event per message the destination re-check refused, keyed by message id. */
export const CRON_DELIVERY_STREAM_TYPE = 'cron_delivery';
