/**
 * The cron job aggregate's descriptor: the pure decider, its state table (the inline projection and the
 * mapping replay, verify and the sandbox use) and when a job is due (its next occurrence, while
 * active). A job's events cause no messages themselves: the runs they create (job_run streams, in the
 * same transaction) do.
 */
import { cronJobTable } from '../../adapters/postgres/cron-queries.js';
import { tableBackedState } from '../../adapters/postgres/state-table.js';
import {
  CRON_JOB_STREAM_TYPE,
  type CronJobCommand,
  type CronJobEvent,
  type CronJobState,
  cronJobDecider,
  parseCronJobEvent,
} from '../../domain/cron-job.js';
import type { AggregateDescriptor } from '../../eventstore/aggregate.js';
import type { StateStore } from '../../ports/state-store.js';
import { canonicalJson } from './canonical.js';

const backed = tableBackedState<CronJobState, CronJobEvent>(cronJobTable, parseCronJobEvent);

/**
 * jsonb keeps object keys in its own order, zod's parse of a replayed event in the schema's: the
 * nested policies are rebuilt in one order so a row and a replay compare equal (invariant 8).
 */
function canonical(state: CronJobState): CronJobState {
  if (state.status === 'NONE') return state;
  return {
    ...state,
    dst: { ambiguous: state.dst.ambiguous, missing: state.dst.missing },
    catchUp: {
      mode: state.catchUp.mode,
      graceMs: state.catchUp.graceMs,
      windowMs: state.catchUp.windowMs,
      cap: state.catchUp.cap,
    },
    retry: canonicalJson.retry(state.retry),
  };
}

const rows = <T extends { state: CronJobState }>(map: Map<string, T>) => {
  for (const row of map.values()) row.state = canonical(row.state);
  return map;
};

export const cronJobStore: StateStore<CronJobState> = {
  ...backed.store,
  load: async (sql, id, options) => {
    const row = await backed.store.load(sql, id, options);
    return row && { ...row, state: canonical(row.state) };
  },
};

export const cronJobAggregate: AggregateDescriptor<CronJobState, CronJobCommand, CronJobEvent> = {
  streamType: CRON_JOB_STREAM_TYPE,
  decider: cronJobDecider,
  store: cronJobStore,
  dueAt: (state) => (state.status === 'active' ? state.nextRunAt : null),
  stateTable: {
    ...backed.stateTable,
    loadRows: async (sql, ids) => rows(await backed.stateTable.loadRows(sql, ids)),
  },
};
