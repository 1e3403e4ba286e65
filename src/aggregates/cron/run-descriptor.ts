/**
 * The job run aggregate's descriptor: the pure decider, its state table, the message each claim of a
 * run causes — one to `cron_events` carrying the claim's epoch (invariant 5: the executor accepts it
 * only while the run is queued or running with that epoch), written in the claim's transaction
 * (invariant 1) with a derived id (so stale recovery can tell from the row whether it is in flight) —
 * and when a run is due for a sweep.
 */
import { jobRunTable } from '../../adapters/postgres/cron-queries.js';
import { tableBackedState } from '../../adapters/postgres/state-table.js';
import {
  JOB_RUN_STREAM_TYPE,
  type JobRunCommand,
  type JobRunEvent,
  type JobRunState,
  jobRunDecider,
  parseJobRunEvent,
} from '../../domain/job-run.js';
import type { ClaimedAggregate } from '../../eventstore/aggregate.js';
import { HEADER } from '../../messaging/headers.js';
import { derivedMessageId, type OutboxMessageSpec } from '../../outbox/outbox-writer.js';
import type { StateStore } from '../../ports/state-store.js';
import { canonicalJson } from './canonical.js';
import { CRON_DELIVERY_STREAM_TYPE, CRON_EVENTS_QUEUE } from './topology.js';

/** What an executor consumes from `cron_events`. */
export interface RunMessagePayload {
  runId: string;
  jobId: string;
  organizationId: string;
  jobType: string;
  scheduledFor: string;
  epoch: number;
  attempt: number;
}

/** Run messages rank with dispatch (priority 1 is campaign dispatch; reporting-style traffic is 5). */
export const RUN_MESSAGE_PRIORITY = 2;

const backed = tableBackedState<JobRunState, JobRunEvent>(jobRunTable, parseJobRunEvent);

function canonical(state: JobRunState): JobRunState {
  return state.status === 'NONE' ? state : { ...state, retry: canonicalJson.retry(state.retry) };
}

export const jobRunStore: StateStore<JobRunState> = {
  ...backed.store,
  load: async (sql, id, options) => {
    const row = await backed.store.load(sql, id, options);
    return row && { ...row, state: canonical(row.state) };
  },
};

/** The message of a run's claim at an epoch: derived from the claim, so it is unique and stable. */
export function runMessageId(runId: string, epoch: number): string {
  return derivedMessageId(JOB_RUN_STREAM_TYPE, runId.toLowerCase(), 'claim', epoch);
}

/** The messages a queued or running run's liveness rests on: its live claim's message. */
export function runClaimMessageIds(state: JobRunState): string[] {
  if (state.status !== 'queued' && state.status !== 'running') return [];
  return [runMessageId(state.runId, state.claimEpoch)];
}

export function runMessagesFor(event: JobRunEvent, state: JobRunState): OutboxMessageSpec[] {
  const claims =
    (event.type === 'JobRunCreated' && state.status === 'queued') || event.type === 'JobRunClaimed';
  if (!claims || state.status !== 'queued') return [];
  const payload: RunMessagePayload = {
    runId: state.runId,
    jobId: state.jobId,
    organizationId: state.organizationId,
    jobType: state.jobType,
    scheduledFor: state.scheduledFor,
    epoch: state.claimEpoch,
    attempt: state.attempts,
  };
  return [
    {
      messageId: runMessageId(state.runId, state.claimEpoch),
      destination: CRON_EVENTS_QUEUE,
      payload,
      priority: RUN_MESSAGE_PRIORITY,
      headers: { [HEADER.epoch]: state.claimEpoch, [HEADER.organizationId]: state.organizationId },
    },
  ];
}

/**
 * When a run needs a sweep: a retry at its time; a buffered run, and any run of a buffer-one job that
 * just ended, at once (the release sweep checks whether the job is idle). The command handler wakes the
 * scanners when a commit leaves one of these within their poll interval.
 */
export function runDueAt(state: JobRunState): string | null {
  switch (state.status) {
    case 'retry_scheduled':
      return state.nextAttemptAt;
    case 'buffered':
      return state.createdAt;
    case 'completed':
    case 'failed':
    case 'permanently_failed':
    case 'cancelled':
      return state.overlap === 'buffer-one' ? state.updatedAt : null;
    default:
      return null;
  }
}

export const jobRunAggregate: ClaimedAggregate<JobRunState, JobRunCommand, JobRunEvent> = {
  streamType: JOB_RUN_STREAM_TYPE,
  // A cron_events message executes its run only while the run is queued (or running, its start
  // recorded) with the message's epoch.
  claim: {
    noun: 'run',
    idField: 'runId',
    liveStatuses: ['queued', 'running'],
    liveLabel: 'queued',
    discard: {
      streamType: CRON_DELIVERY_STREAM_TYPE,
      eventType: 'JobRunMessageDiscarded',
      description:
        'JobRunMessageDiscarded: a cron_events message the destination re-check refused (stale epoch, run no longer queued)',
      keep: ['jobId'],
    },
  },
  decider: jobRunDecider,
  store: jobRunStore,
  messagesFor: ({ event, state }) => runMessagesFor(event, state),
  dueAt: runDueAt,
  stateTable: {
    ...backed.stateTable,
    loadRows: async (sql, ids) => {
      const rows = await backed.stateTable.loadRows(sql, ids);
      for (const row of rows.values()) row.state = canonical(row.state);
      return rows;
    },
  },
};
