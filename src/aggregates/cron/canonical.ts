/**
 * Canonical key order for the policy objects stored in jsonb columns (jsonb orders keys its own way,
 * a replayed event's zod parse in schema order): rows and replays compare equal (invariant 8).
 */
import type { RetryPolicy } from '../../domain/cron-job.js';

export const canonicalJson = {
  retry: (retry: RetryPolicy): RetryPolicy => ({
    maxRetries: retry.maxRetries,
    delayMs: retry.delayMs,
    maxDelayMs: retry.maxDelayMs,
  }),
};
