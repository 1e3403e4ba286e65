/**
 * Job run stream ids, derived from what the run is (RFC 4122 v5): the run of job J for occurrence T by
 * trigger K always has the same id. Two scanners materializing the same occurrence therefore append to
 * the same stream and the second one's append conflicts (invariant 7, besides the unique index on
 * (job_id, scheduled_for, trigger_key)). Pure: no clock, no randomness.
 */
import { v5 as uuidV5 } from 'uuid';

/** Herald's UUID v5 namespace for job run ids. */
const RUN_ID_NAMESPACE = '5d3f7c2e-8a41-4b6e-9f0d-2c7a1e9b4d63';

/** `schedule` and `backfill` runs are one per occurrence; manual runs carry their own key. */
export type TriggerKey = 'schedule' | 'backfill' | `manual:${string}`;

export function runIdFor(jobId: string, scheduledFor: string, triggerKey: TriggerKey): string {
  return uuidV5(
    `${jobId.toLowerCase()}/${new Date(scheduledFor).toISOString()}/${triggerKey}`,
    RUN_ID_NAMESPACE,
  );
}
