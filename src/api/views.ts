/**
 * The API's response views: thin zod schemas of the domain's states and the library's results, used
 * for serialization (Fastify encodes every response through its route's schema) and for the OpenAPI
 * document. Each view lists exactly its state's fields (a compile-time check below fails when a state
 * gains or loses one), with the domain's own enums; times are canonical ISO-8601 UTC strings. Secrets
 * stay out: a webhook job's signing secret is never returned.
 */
import { z } from 'zod';
import {
  CAMPAIGN_CHANNELS,
  CAMPAIGN_STATUSES,
  CAST_TYPES,
  PAUSABLE_CAMPAIGN_STATUSES,
} from '../domain/campaign/status.js';
import type { ExistingCampaign } from '../domain/campaign.js';
import {
  AMBIGUOUS_TIME_POLICIES,
  CATCH_UP_MODES,
  CRON_JOB_STATUSES,
  type ExistingCronJob,
  JOB_TYPES,
  MISSING_TIME_POLICIES,
  OVERLAP_POLICIES,
} from '../domain/cron-job.js';
import { type ExistingJobRun, RUN_FATES, RUN_STATUSES, RUN_TRIGGERS } from '../domain/job-run.js';
import {
  ACTION_BRANCHES,
  ACTION_MODES,
  ACTION_OUTCOMES,
  ACTION_STATUSES,
  CLAIM_TRIGGERS,
  DELIVERIES,
  type ExistingAction,
} from '../domain/scheduled-action.js';
import { API_KEY_ROLES } from './auth.js';

const instant = z.iso.datetime().describe('ISO-8601, UTC');
const json = z.record(z.string(), z.unknown());

/** Fails to compile unless View's keys are exactly State's keys (so no field is silently dropped). */
type SameKeys<State, View> = [Exclude<keyof State, keyof View>, Exclude<keyof View, keyof State>] extends [
  never,
  never,
]
  ? true
  : { missingInView: Exclude<keyof State, keyof View>; notInState: Exclude<keyof View, keyof State> };
const sameKeys = <T extends true>(_check: T) => _check;

export const campaignView = z
  .object({
    campaignId: z.uuid(),
    organizationId: z.string(),
    status: z.enum(CAMPAIGN_STATUSES),
    channel: z.enum(CAMPAIGN_CHANNELS),
    castType: z.enum(CAST_TYPES).nullable(),
    audienceId: z.string().nullable(),
    lineOaId: z.string().nullable(),
    name: z.string(),
    idempotencyKey: z.string().nullable(),
    startAt: instant.nullable(),
    dispatchDeadline: instant.nullable(),
    claimEpoch: z.number().int(),
    claimedAt: instant.nullable(),
    pausedFrom: z.enum(PAUSABLE_CAMPAIGN_STATUSES).nullable(),
    pauseReason: z.string().nullable().describe('why a PAUSED campaign was paused; null otherwise'),
    deletedAt: instant.nullable(),
    resendAttempt: z.number().int(),
    failureReason: z.string().nullable(),
    createdAt: instant,
    statusChangedAt: instant,
    // The SMS channel's facts (issue 12) keep the SMS domain's own shape.
    sms: json.nullable().describe('SMS campaigns: totals, charge, build attempts, progress; null for LINE'),
  })
  .meta({ id: 'Campaign' });
sameKeys<SameKeys<ExistingCampaign, z.output<typeof campaignView>>>(true);

export const actionView = z
  .object({
    actionId: z.uuid(),
    organizationId: z.string(),
    status: z.enum(ACTION_STATUSES),
    mode: z.enum(ACTION_MODES),
    actionType: z.string(),
    actionConfig: json,
    sourceConfig: json.nullable(),
    workflowId: z.string().nullable(),
    workflowNodePath: z.string().nullable(),
    subjectId: z.string().nullable(),
    executeAt: instant,
    expiresAt: instant.nullable(),
    wait: z.object({ names: z.array(z.string()), correlationKey: z.string() }).nullable(),
    expiry: z.object({ actionType: z.string(), actionConfig: json }).nullable(),
    maxRetries: z.number().int(),
    retryCount: z.number().int(),
    unlockedBy: z.object({ signalId: z.uuid(), name: z.string(), receivedAt: instant }).nullable(),
    firedNow: z.boolean(),
    expired: z.boolean(),
    dueBecause: z.enum(CLAIM_TRIGGERS),
    claimEpoch: z.number().int(),
    claimedAt: instant.nullable(),
    branch: z.enum(ACTION_BRANCHES).nullable(),
    delivery: z.enum(DELIVERIES).nullable(),
    lastError: z.string().nullable(),
    cancelReason: z.string().nullable(),
    outcome: z.enum(ACTION_OUTCOMES).nullable(),
    createdAt: instant,
    statusChangedAt: instant,
  })
  .meta({ id: 'ScheduledAction' });
sameKeys<SameKeys<ExistingAction, z.output<typeof actionView>>>(true);

export const signalOutcomeView = z
  .object({
    signalId: z.uuid(),
    unlocked: z.array(z.uuid()).describe('the waits this signal unlocked'),
    refused: z
      .array(z.object({ actionId: z.uuid(), reason: z.string() }))
      .describe('matching waits that refused it, and why'),
  })
  .meta({ id: 'SignalOutcome' });

const dstView = z.object({
  ambiguous: z.enum(AMBIGUOUS_TIME_POLICIES),
  missing: z.enum(MISSING_TIME_POLICIES),
});
const catchUpView = z.object({
  mode: z.enum(CATCH_UP_MODES),
  graceMs: z.number().int(),
  windowMs: z.number().int(),
  cap: z.number().int(),
});
const retryView = z.object({
  maxRetries: z.number().int(),
  delayMs: z.number().int(),
  maxDelayMs: z.number().int(),
});

export const cronJobView = z
  .object({
    jobId: z.uuid(),
    organizationId: z.string(),
    name: z.string(),
    status: z.enum(CRON_JOB_STATUSES),
    schedule: z.string(),
    timezone: z.string(),
    dst: dstView,
    jobType: z.enum(JOB_TYPES),
    payload: json.describe("the job type's payload (a webhook's signingSecret is never returned)"),
    timeoutMs: z.number().int(),
    overlap: z.enum(OVERLAP_POLICIES),
    catchUp: catchUpView,
    retry: retryView,
    nextRunAt: instant.nullable(),
    lastOccurrenceAt: instant.nullable(),
    pausedAt: instant.nullable(),
    pausedReason: z.string().nullable(),
    pausedBy: z.string().nullable(),
    createdAt: instant,
    updatedAt: instant,
    deletedAt: instant.nullable(),
  })
  .meta({ id: 'CronJob' });
sameKeys<SameKeys<ExistingCronJob, z.output<typeof cronJobView>>>(true);

/** A job as the API shows it: the signing secret of a webhook stays in the database. */
export function cronJobOut(job: ExistingCronJob): z.input<typeof cronJobView> {
  const { signingSecret: _secret, ...payload } = job.payload as unknown as Record<string, unknown>;
  return { ...job, payload };
}

export const jobRunView = z
  .object({
    runId: z.uuid(),
    jobId: z.uuid(),
    organizationId: z.string(),
    jobType: z.string(),
    scheduledFor: instant,
    trigger: z.enum(RUN_TRIGGERS),
    triggerKey: z.string(),
    fate: z.enum(RUN_FATES),
    spanLast: instant.nullable(),
    spanCount: z.number().int().nullable(),
    reason: z.string().nullable(),
    status: z.enum(RUN_STATUSES),
    attempts: z.number().int(),
    maxAttempts: z.number().int(),
    retry: retryView,
    overlap: z.enum(OVERLAP_POLICIES),
    claimEpoch: z.number().int(),
    claimedAt: instant.nullable(),
    nextAttemptAt: instant.nullable(),
    startedAt: instant.nullable(),
    finishedAt: instant.nullable(),
    responseStatus: z.number().int().nullable(),
    output: z.string().nullable(),
    error: z.string().nullable(),
    durationMs: z.number().int().nullable(),
    createdAt: instant,
    updatedAt: instant,
  })
  .meta({ id: 'JobRun' });
sameKeys<SameKeys<ExistingJobRun, z.output<typeof jobRunView>>>(true);

export const ledgerEntryView = z
  .object({
    scheduledFor: instant,
    fate: z.enum(RUN_FATES),
    status: z.enum(RUN_STATUSES),
    trigger: z.enum(RUN_TRIGGERS),
    runId: z.uuid().nullable(),
    attempts: z.number().int(),
    reason: z.string().nullable(),
    error: z.string().nullable(),
    responseStatus: z.number().int().nullable(),
  })
  .meta({ id: 'LedgerEntry' });

export const occurrenceView = z
  .object({
    at: instant,
    wall: z.string().describe('the wall-clock time the expression named, in the job time zone'),
    kind: z.enum(['regular', 'ambiguous-first', 'ambiguous-second', 'shifted']),
  })
  .meta({ id: 'Occurrence' });

export const backfillView = z
  .object({
    dryRun: z.boolean(),
    from: instant,
    to: instant,
    runs: z.array(z.object({ scheduledFor: instant, runId: z.uuid() })),
    skipped: z.array(instant).describe('occurrences of the range left alone because they already ran'),
  })
  .meta({ id: 'BackfillResult' });

export const outboxRowView = z
  .object({
    id: z.number().int(),
    messageId: z.uuid(),
    eventPosition: z.number().int(),
    sink: z.enum(['amqp', 'kafka']),
    destination: z.string(),
    routingKey: z.string().nullable(),
    partitionKey: z.string().nullable(),
    headers: json,
    payload: z.unknown(),
    priority: z.number().int(),
    status: z.enum(['pending', 'sent', 'dead', 'skipped']),
    attempts: z.number().int(),
    nextAttemptAt: z
      .string()
      .describe("ISO-8601, or 'infinity' for an ordered row waiting behind its key's head"),
    lastError: z.string().nullable(),
    createdAt: instant,
    sentAt: instant.nullable(),
    deadAt: instant.nullable(),
    skippedAt: instant.nullable(),
    recoveryCount: z.number().int(),
    ordered: z.boolean(),
  })
  .meta({ id: 'OutboxRow' });

export const parkedKeyView = z
  .object({
    id: z.number().int().describe('the dead head row'),
    messageId: z.uuid(),
    sink: z.enum(['amqp', 'kafka']),
    destination: z.string(),
    partitionKey: z.string(),
    attempts: z.number().int(),
    recoveryCount: z.number().int(),
    lastError: z.string().nullable(),
    deadAt: instant,
    waiting: z.number().int().describe('rows waiting behind the head'),
  })
  .meta({ id: 'ParkedKey' });

export const apiKeyView = z
  .object({
    id: z.uuid(),
    organizationId: z.string(),
    role: z.enum(API_KEY_ROLES),
    name: z.string(),
    prefix: z.string().describe('the non-secret head of the key, to recognise it'),
    createdAt: instant,
    createdBy: z.string().nullable(),
    revokedAt: instant.nullable(),
    lastUsedAt: instant.nullable().describe('recorded at most once a minute'),
  })
  .meta({ id: 'ApiKey' });

export const createdApiKeyView = z
  .object({
    apiKey: apiKeyView,
    key: z.string().describe('the secret: shown this once, stored only as a hash'),
  })
  .meta({ id: 'CreatedApiKey' });

const traceEvent = z.object({
  position: z.number().int(),
  tx: z.string(),
  version: z.number().int(),
  type: z.string(),
  data: z.unknown(),
  meta: json,
  recordedAt: instant,
});

const receiptView = z.object({
  outcome: z.string(),
  destination: z.string(),
  recordedAt: instant,
});

/** `history`: the stream's replay (src/projections/replay.ts) — events, causal chains, state. */
export const replayView = z
  .object({
    streamType: z.string(),
    streamId: z.string(),
    version: z.number().int(),
    events: z.array(traceEvent),
    commands: z.array(
      z.object({
        tx: z.string(),
        correlationId: z.string().nullable(),
        causationId: z.string().nullable(),
        actor: z.string().nullable(),
        pod: z.string().nullable(),
        recordedAt: instant,
        versions: z.array(z.number().int()),
        messages: z.array(
          z.object({
            messageId: z.string(),
            eventVersion: z.number().int(),
            eventPosition: z.number().int(),
            sink: z.string(),
            destination: z.string(),
            outbox: json.nullable().describe('the outbox row, while retention keeps it'),
            receipts: z.array(receiptView.catchall(z.unknown())),
            inbox: z.array(json),
            effects: z.array(json),
          }),
        ),
      }),
    ),
    state: z.unknown(),
  })
  .meta({ id: 'StreamReplay' });

export const verifyView = z
  .object({
    organizationId: z.string(),
    ok: z.boolean().describe("no drift in this organization's streams"),
    streamTypes: z.array(z.string()),
    driftedStreams: z.number().int(),
    drifts: z.array(
      z.object({
        kind: z.string(),
        streamType: z.string(),
        streamId: z.string(),
        field: z.string().nullable(),
        row: z.unknown(),
        replay: z.unknown(),
        firstDifferingEvent: z
          .object({
            version: z.number().int(),
            position: z.number().int(),
            type: z.string(),
            recordedAt: instant,
          })
          .nullable(),
        detail: z.string(),
      }),
    ),
    truncated: z.boolean(),
    ms: z.number(),
  })
  .meta({ id: 'VerifyReport' });

export const statsView = z
  .object({
    from: instant,
    to: instant,
    rows: z.array(
      z.object({
        hour: instant,
        destination: z.string(),
        claimed: z.number().int(),
        published: z.number().int(),
        delivered: z.number().int(),
        discarded: z.number().int(),
        failed: z.number().int(),
        dead: z.number().int(),
      }),
    ),
  })
  .meta({ id: 'DispatchStats' });

/** A page of a list: the items and the cursor of the next page (null: this was the last). */
export function page<T extends z.ZodType>(item: T, id: string) {
  return z
    .object({
      items: z.array(item),
      nextCursor: z.string().nullable().describe('pass as ?cursor= for the next page; null on the last page'),
    })
    .meta({ id });
}

/**
 * A domain value typed as its view's output. The states are deeply readonly and their JSON fields are
 * typed more narrowly than a view can say; the keys are checked above (SameKeys) and every response
 * is encoded through its view at run time, so a value that does not fit is a 500, never a silent leak.
 */
export function view<S extends z.ZodType>(_schema: S, value: unknown): z.output<S> {
  return value as z.output<S>;
}

/** Dates (replay, receipts) as ISO strings: JSON carries no Date, and the views expect strings. */
export function plainJson<T>(value: T): unknown {
  return JSON.parse(JSON.stringify(value));
}
