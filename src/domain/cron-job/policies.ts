/**
 * What a cron job is made of besides its schedule: its type and payload (what an executor does), and
 * its policies — overlap, catch-up, retries — as zod schemas with their defaults. Pure data: the
 * executors (src/aggregates/cron/executors.ts) and the decider read them; ADR 0011 has the examples.
 */
import { z } from 'zod';
import { AMBIGUOUS_TIME_POLICIES, MISSING_TIME_POLICIES } from './schedule.js';

// ─── job types and payloads ─────────────────────────────────────────────────────────────────────────

export const JOB_TYPES = ['ping', 'webhook', 'slack', 'email'] as const;
export type JobType = (typeof JOB_TYPES)[number];
export const isJobType = (value: string): value is JobType =>
  (JOB_TYPES as readonly string[]).includes(value);

const httpUrl = z
  .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
  .max(2_000, 'at most 2000 characters');
const headers = z
  .record(
    z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP header name'),
    z.string().max(8_000),
  )
  .refine((h) => Object.keys(h).length <= 50, 'at most 50 headers');
const email = z.email();

/** `ping`: an HTTP GET (or HEAD); any 2xx response is a success. */
export const pingPayload = z.strictObject({
  url: httpUrl,
  method: z.enum(['GET', 'HEAD']).default('GET'),
  headers: headers.optional(),
});

/**
 * `webhook`: an HTTP request (POST by default) with the JSON `body`; with `signingSecret`, the header
 * `x-herald-signature: sha256=<hex HMAC-SHA256 of "<run id>.<body>">` (receivers de-duplicate by the
 * `x-herald-run-id` header, so a signed request cannot be replayed as another run).
 */
export const webhookPayload = z.strictObject({
  url: httpUrl,
  method: z.enum(['POST', 'PUT', 'PATCH']).default('POST'),
  headers: headers.optional(),
  body: z.json().default({}),
  signingSecret: z.string().min(16, 'at least 16 characters').max(512).optional(),
});

/** `slack`: a message POSTed to a Slack incoming-webhook URL (`{ text, username?, icon_emoji?, channel? }`). */
export const slackPayload = z.strictObject({
  webhookUrl: httpUrl,
  text: z.string().min(1).max(40_000),
  username: z.string().min(1).max(80).optional(),
  iconEmoji: z.string().min(1).max(80).optional(),
  channel: z.string().min(1).max(80).optional(),
});

/** `email`: one message through the SMTP server of the configuration (HERALD_SMTP_URL). */
export const emailPayload = z.strictObject({
  to: z.union([email, z.array(email).min(1).max(50)]),
  cc: z.array(email).max(50).optional(),
  subject: z.string().min(1).max(998),
  text: z.string().min(1).max(1_000_000),
  from: email.optional(),
});

export const JOB_PAYLOADS = {
  ping: pingPayload,
  webhook: webhookPayload,
  slack: slackPayload,
  email: emailPayload,
} as const satisfies Record<JobType, z.ZodType>;

export type PingPayload = z.output<typeof pingPayload>;
export type WebhookPayload = z.output<typeof webhookPayload>;
export type SlackPayload = z.output<typeof slackPayload>;
export type EmailPayload = z.output<typeof emailPayload>;
export type JobPayload = PingPayload | WebhookPayload | SlackPayload | EmailPayload;

/** A job type with its payload, as executors receive them. */
export type ExecutableJob =
  | { jobType: 'ping'; payload: PingPayload }
  | { jobType: 'webhook'; payload: WebhookPayload }
  | { jobType: 'slack'; payload: SlackPayload }
  | { jobType: 'email'; payload: EmailPayload };

// ─── policies ───────────────────────────────────────────────────────────────────────────────────────

/**
 * An occurrence falls due while an earlier run of the job is still active (queued, running or waiting
 * for a retry): `allow` runs it anyway; `skip` records it as skipped; `buffer-one` keeps one such
 * occurrence waiting and runs it as soon as the active run ends (any further one is skipped).
 */
export const OVERLAP_POLICIES = ['allow', 'skip', 'buffer-one'] as const;
export type OverlapPolicy = (typeof OVERLAP_POLICIES)[number];

/**
 * What happens to occurrences the scanners reach late (after downtime). An occurrence reached within
 * `graceMs` of its time is on time and runs in every mode; later ones are late:
 * - `skip-missed`: late occurrences are missed (recorded, never run);
 * - `run-latest`: when every due occurrence is late, the most recent one runs, the others are missed;
 * - `run-all`: late occurrences run, the most recent `cap` of them; older ones are missed.
 * Occurrences more than `windowMs` late are missed in every mode.
 */
export const CATCH_UP_MODES = ['skip-missed', 'run-latest', 'run-all'] as const;
export type CatchUpMode = (typeof CATCH_UP_MODES)[number];

const DAY = 86_400_000;

export const catchUpPolicy = z
  .strictObject({
    mode: z.enum(CATCH_UP_MODES).default('skip-missed'),
    graceMs: z.number().int().min(0).max(DAY).default(60_000),
    windowMs: z
      .number()
      .int()
      .positive()
      .max(366 * DAY)
      .default(DAY),
    cap: z.number().int().min(1).max(1_000).default(10),
  })
  .refine((p) => p.windowMs >= p.graceMs, { message: 'windowMs must be >= graceMs', path: ['windowMs'] });
export type CatchUpPolicy = z.output<typeof catchUpPolicy>;

export const dstPolicy = z.strictObject({
  ambiguous: z.enum(AMBIGUOUS_TIME_POLICIES),
  missing: z.enum(MISSING_TIME_POLICIES),
});

/**
 * Seed 004: up to 3 retries, then `permanently_failed`. Retry n waits `delayMs × 2^(n−1)`, at most
 * `maxDelayMs` (the run waits in `retry_scheduled`, then a sweep claims it again: never a requeue loop).
 */
export const retryPolicy = z
  .strictObject({
    maxRetries: z.number().int().min(0).max(10).default(3),
    delayMs: z.number().int().min(100).max(DAY).default(30_000),
    maxDelayMs: z.number().int().min(100).max(DAY).default(600_000),
  })
  .refine((p) => p.maxDelayMs >= p.delayMs, {
    message: 'maxDelayMs must be >= delayMs',
    path: ['maxDelayMs'],
  });
export type RetryPolicy = z.output<typeof retryPolicy>;

/** The delay before retry number `retry` (1 for the first retry). */
export function retryDelayMs(policy: Pick<RetryPolicy, 'delayMs' | 'maxDelayMs'>, retry: number): number {
  return Math.min(policy.maxDelayMs, policy.delayMs * 2 ** Math.max(0, retry - 1));
}

/** Per-job timeout bounds (the service also caps it at HERALD_CRON_MAX_TIMEOUT_MS). */
export const timeoutMs = z
  .number()
  .int()
  .min(100)
  .max(60 * 60_000);

/** Validates a payload for its job type; the error names the field. */
export function parsePayload(
  jobType: JobType,
  payload: unknown,
): { success: true; data: JobPayload } | { success: false; error: z.ZodError } {
  const result = JOB_PAYLOADS[jobType].safeParse(payload);
  return result.success
    ? { success: true, data: result.data as JobPayload }
    : { success: false, error: result.error };
}
