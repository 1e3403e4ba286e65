/**
 * The SMS slice's settings (seed 003, ADR 0014 and 0019): campaign rules, CSV builds, dispatch, the
 * submit and report topics, the simulator, recovery, retries, refunds and leases. Composed into the
 * configuration by the campaign registration (`config.sms`).
 */
import { z } from 'zod';
import { isValidTimezone, parseDailyWindow, type SendWindowPolicy } from '../../../domain/sms/windows.js';
import { ConfigError } from '../../../errors.js';
import { describeSetting as d, defineSettings } from '../../../settings/fragment.js';
import { nonNegativeInt, positiveInt, topicName } from '../../../settings/validators.js';

/** SMS campaigns (seed 003, docs/decisions/0014-sms-campaigns.md). */
export interface SmsSettings {
  /** Campaign zone: scheduledAt without an offset, the promotional window, recipients of unknown zone. */
  readonly zone: string;
  /** Seed 003's BTRC window for promotional traffic (daily, in `zone`). */
  readonly promotionalWindow: SendWindowPolicy;
  /** A SCHEDULED campaign starts at least this long after it is created. */
  readonly minLeadMs: number;
  /** …and at most this long after. */
  readonly maxFutureMs: number;
  /** Seed 003's campaign.bulk.max-recipients: most valid rows of a CSV campaign. */
  readonly bulkMaxRecipients: number;
  /** Largest CSV file accepted. */
  readonly bulkMaxBytes: number;
  /** CSV rows priced and saved per build transaction. */
  readonly buildBatchSize: number;
  /** A build attempt without a saved batch for this long is taken over (and fails safe if it saved any). */
  readonly buildStaleMs: number;
  /** Build attempts (each failing for a transient reason, or taken over) before the build gives up: FAILED. */
  readonly buildMaxAttempts: number;
  /** Recipients claimed per dispatch transaction (seed 003: 999). */
  readonly dispatchBatchSize: number;
  /** Where submission chunks go: Kafka (default) or RabbitMQ (a queue named like the topic). */
  readonly sink: 'kafka' | 'amqp';
  readonly submitTopic: string;
  /** Where the SMS gateway (or `herald sms-simulator`) writes delivery reports. */
  readonly dlrTopic: string;
  /** An SMS campaign's dispatch deadline: its startAt (or activation, or next window opening) + this. */
  readonly dispatchDeadlineMs: number;
  /** Stale recovery (`sms:recovery`): a DRAFT older than this is reversed and FAILED. */
  readonly draftStaleMs: number;
  /** …a BUILDING campaign without a charge or saved recipients older than this is FAILED (upload again). */
  readonly buildingStaleMs: number;
  /** …a DISPATCHING campaign without progress this long has its unsent work requeued. */
  readonly dispatchingStaleMs: number;
  /** …a CANCELLING campaign still unsettled after this long is settled again (normally at once). */
  readonly cancellingStaleMs: number;
  /** A recipient SUBMITTED this long without a delivery report gets a synthetic NOT_AVAILABLE (DLR_TIMEOUT). */
  readonly dlrTimeoutMs: number;
  /** Submissions a recipient may have before a temporary failure is final (HERALD_SMS_MAX_ATTEMPTS). */
  readonly maxAttempts: number;
  /** A temporary failure is retried after this long… */
  readonly retryMs: number;
  /** …plus a random 0..retryJitterMs. */
  readonly retryJitterMs: number;
  /** FAILED codes that are temporary (besides codes naming timeouts, connection errors, 5xx). */
  readonly retryableCodes: readonly string[];
  /** A failed recipient still unrefunded this long after it failed is refunded again (same key). */
  readonly refundRetryAfterMs: number;
  /** Delivery reports rolled up per campaign transaction. */
  readonly rollupBatchSize: number;
  /** The SMS pollers' leases (sms:dlr-rollup, sms:retry-dispatcher, sms:refund-retry, sms:recovery). */
  readonly leaseTtlMs: number;
  /** Rolled-up delivery reports are deleted this long after their roll-up (`sms-report-retention`). */
  readonly reportRetentionDays: number;
  readonly simulator: {
    readonly outcomes: readonly { readonly outcome: string; readonly weight: number }[];
    readonly latencyMs: { readonly min: number; readonly max: number };
    readonly failedCodes: readonly string[];
    /** Numbers (E.164 digits) that always get one outcome, like a payment sandbox's test cards. */
    readonly fixed: ReadonlyMap<string, { readonly status: string; readonly errorCode: string | null }>;
  };
}

export const smsSettings = defineSettings({
  key: 'sms',
  title: 'SMS campaigns',
  env: {
    HERALD_SMS_TIMEZONE: d(
      z
        .string()
        .refine(isValidTimezone, 'must be an IANA time zone such as Asia/Dhaka')
        .default('Asia/Dhaka'),
      "SMS campaign zone: a `scheduledAt` without an offset, the promotional window, recipients whose number's country has no known zone",
    ),
    HERALD_SMS_PROMOTIONAL_WINDOW: d(
      z
        .string()
        .refine((v) => parseDailyWindow(v) !== null, 'must be HH:MM[:SS]-HH:MM[:SS] with start before end')
        .default('09:00-21:00'),
      "seed 003's BTRC window for promotional traffic, daily in `HERALD_SMS_TIMEZONE` (`HH:MM[:SS]-HH:MM[:SS]`); outside it a dispatching campaign goes back to SCHEDULED at the next opening",
    ),
    HERALD_SMS_MIN_LEAD_SECONDS: d(
      nonNegativeInt.default(300),
      'a `scheduledAt` must be at least this far ahead',
    ),
    HERALD_SMS_MAX_FUTURE_DAYS: d(positiveInt.max(3_650).default(30), '…and at most this far'),
    HERALD_SMS_BULK_MAX_RECIPIENTS: d(
      positiveInt.max(10_000_000).default(1_000_000),
      "seed 003's `campaign.bulk.max-recipients`: most valid rows of a CSV campaign (more fails the build)",
    ),
    HERALD_SMS_BULK_MAX_BYTES: d(positiveInt.default(256 * 1024 * 1024), 'largest CSV file accepted'),
    HERALD_SMS_BUILD_BATCH_SIZE: d(
      positiveInt.max(10_000).default(1_000),
      'CSV rows priced and saved per build transaction',
    ),
    HERALD_SMS_BUILD_STALE_SECONDS: d(
      positiveInt.default(300),
      'a build without a saved batch this long is taken over (it fails safe if it had saved recipients)',
    ),
    HERALD_SMS_BUILD_MAX_ATTEMPTS: d(
      positiveInt.max(100).default(3),
      'build attempts of a CSV campaign: an attempt that fails for a transient reason (a database error, …) says so on the upload and is retried when it goes stale (`HERALD_SMS_BUILD_STALE_SECONDS`); the last one gives up like an unreadable file — the upload and the campaign FAILED with the reason, recipients cleared, any charge reversed by its key',
    ),
    HERALD_SMS_DISPATCH_BATCH_SIZE: d(
      positiveInt.max(10_000).default(999),
      'recipients claimed per dispatch transaction (seed 003)',
    ),
    HERALD_SMS_SINK: d(
      z.enum(['kafka', 'amqp']).default('kafka'),
      'where submission chunks go: `kafka`, or `amqp` (a RabbitMQ queue named like the topic)',
    ),
    HERALD_SMS_SUBMIT_TOPIC: d(topicName.default('sms.submit'), 'submission chunks'),
    HERALD_SMS_DLR_TOPIC: d(
      topicName.default('sms.dlr'),
      'delivery reports (written by the gateway or `herald sms-simulator`)',
    ),
    HERALD_SMS_SIMULATOR_OUTCOMES: d(
      z
        .string()
        .regex(
          /^(DELIVERED|FAILED|EXPIRED|REJECTED|NOT_AVAILABLE)=\d+(,(DELIVERED|FAILED|EXPIRED|REJECTED|NOT_AVAILABLE)=\d+)*$/,
          'must be OUTCOME=weight[,…] with outcomes DELIVERED, FAILED, EXPIRED, REJECTED, NOT_AVAILABLE',
        )
        .default('DELIVERED=90,FAILED=4,EXPIRED=2,REJECTED=2,NOT_AVAILABLE=2'),
      "`herald sms-simulator`'s outcome weights",
    ),
    HERALD_SMS_SIMULATOR_LATENCY_MS: d(
      z
        .string()
        .regex(/^\d+(-\d+)?$/, 'must be <ms> or <min>-<max>')
        .default('20-200'),
      'its report latency per recipient (`<ms>` or `<min>-<max>`)',
    ),
    HERALD_SMS_SIMULATOR_FAILED_CODES: d(
      z
        .string()
        .regex(/^[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*$/, 'must be code[,code…]')
        .default('1,27,31,34,36'),
      'the MNPSP error codes of its FAILED reports',
    ),
    HERALD_SMS_SIMULATOR_FIXED_OUTCOMES: d(
      z
        .string()
        .regex(
          /^$|^\d{6,15}=(DELIVERED|FAILED|EXPIRED|REJECTED|NOT_AVAILABLE)(:[A-Za-z0-9_]+)?(,\d{6,15}=(DELIVERED|FAILED|EXPIRED|REJECTED|NOT_AVAILABLE)(:[A-Za-z0-9_]+)?)*$/,
          'must be empty or msisdn=OUTCOME[:code][,…] with E.164 digits (no +)',
        )
        .default(''),
      "numbers (E.164 digits, no `+`) that always get one outcome, like a payment sandbox's test cards: `msisdn=OUTCOME[:code][,…]`",
    ),
    HERALD_SMS_DISPATCH_DEADLINE_MINUTES: d(
      positiveInt.max(525_600).default(1_440),
      "an SMS campaign's dispatch deadline: its start (creation's `scheduledAt`, a reschedule, or the next promotional-window opening after a deferral) + this; a SCHEDULED campaign past it expires with its unsent recipients refunded",
    ),
    HERALD_SMS_DRAFT_STALE_MINUTES: d(
      positiveInt.default(10),
      '`sms:recovery`: an SMS DRAFT (created, never activated) older than this has its charge reversed by its key and is FAILED',
    ),
    HERALD_SMS_BUILDING_STALE_MINUTES: d(
      positiveInt.default(60),
      '`sms:recovery`: a BUILDING CSV campaign without a charge or a saved recipient this long is FAILED ("upload again")',
    ),
    HERALD_SMS_DISPATCHING_STALE_MINUTES: d(
      positiveInt.default(30),
      '`sms:recovery`: a DISPATCHING campaign without a dispatch batch or a rolled-up report this long goes back to QUEUED when it has unsent recipients',
    ),
    HERALD_SMS_CANCELLING_STALE_MINUTES: d(
      positiveInt.default(5),
      '`sms:recovery`: a cancellation (or expiry) whose refund failed is retried after this long (the first attempt runs right after the cancel)',
    ),
    HERALD_SMS_DLR_TIMEOUT_MINUTES: d(
      positiveInt.default(2_880),
      'a recipient SUBMITTED this long without a delivery report gets a synthetic NOT_AVAILABLE (`DLR_TIMEOUT`) report: FAILED, unconfirmed, not refunded',
    ),
    HERALD_SMS_MAX_ATTEMPTS: d(
      positiveInt.max(100).default(3),
      'submissions a recipient may have: a temporary failure after the last one is final (FAILED, class EXHAUSTED, refunded)',
    ),
    HERALD_SMS_RETRY_MINUTES: d(
      nonNegativeInt.max(10_080).default(5),
      'a temporary failure (Kafka send error, EXPIRED, a retryable code, a code naming a timeout, connection error or 5xx) with attempts left is RETRY_PENDING for this long…',
    ),
    HERALD_SMS_RETRY_JITTER_SECONDS: d(
      nonNegativeInt.max(3_600).default(30),
      '…plus a random 0..this many seconds, then the retry dispatcher (`sms:retry-dispatcher`) makes it PENDING and its campaign QUEUED again',
    ),
    HERALD_SMS_RETRYABLE_CODES: d(
      z
        .string()
        .regex(/^([A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*)?$/, 'must be code[,code…] (or empty)')
        .default('27,31,34'),
      "FAILED error codes that are temporary (GSM MAP 27 absent subscriber, 31 subscriber busy, 34 system failure; the simulator's 1 and 36 are permanent); empty: none",
    ),
    HERALD_SMS_REFUND_RETRY_AFTER_SECONDS: d(
      nonNegativeInt.default(60),
      'the refund retry poller (`sms:refund-retry`) asks billing again, with the same `recipient:{id}:{resendAttempt}` key, for a failed recipient still unrefunded this long after it failed (and at least 1 s after billing last refused it)',
    ),
    HERALD_SMS_ROLLUP_BATCH_SIZE: d(
      positiveInt.max(50_000).default(2_000),
      'delivery reports rolled up per campaign transaction (`sms:dlr-rollup`)',
    ),
    HERALD_SMS_LEASE_TTL_SECONDS: d(
      positiveInt.max(3_600).default(30),
      "TTL of the SMS pollers' leases (`sms:dlr-rollup`, `sms:retry-dispatcher`, `sms:refund-retry`, `sms:recovery`), renewed every third of it on the database clock; a scanner's `/readyz` requires each to be fresh (`HERALD_READY_MAX_LEASE_AGE_SECONDS`)",
    ),
    HERALD_SMS_REPORT_RETENTION_DAYS: d(
      positiveInt.default(90),
      '`herald maintenance` (`sms-report-retention`, on the inbox pruning interval) deletes delivery reports rolled up longer ago than this; a report not rolled up yet is kept, and the recipient row keeps the outcome',
    ),
  },
  map(e): SmsSettings {
    const outcomes = e.HERALD_SMS_SIMULATOR_OUTCOMES.split(',').map((pair) => {
      const [outcome, weight] = pair.split('=');
      return { outcome: outcome!, weight: Number(weight) };
    });
    if (outcomes.every((o) => o.weight === 0)) {
      throw new ConfigError('HERALD_SMS_SIMULATOR_OUTCOMES', 'at least one weight must be positive');
    }
    const [min, max] = e.HERALD_SMS_SIMULATOR_LATENCY_MS.split('-').map(Number) as [number, number?];
    if (max !== undefined && max < min) {
      throw new ConfigError('HERALD_SMS_SIMULATOR_LATENCY_MS', 'the maximum must not be below the minimum');
    }
    return {
      zone: e.HERALD_SMS_TIMEZONE,
      promotionalWindow: parseDailyWindow(e.HERALD_SMS_PROMOTIONAL_WINDOW)!,
      minLeadMs: e.HERALD_SMS_MIN_LEAD_SECONDS * 1000,
      maxFutureMs: e.HERALD_SMS_MAX_FUTURE_DAYS * 86_400_000,
      bulkMaxRecipients: e.HERALD_SMS_BULK_MAX_RECIPIENTS,
      bulkMaxBytes: e.HERALD_SMS_BULK_MAX_BYTES,
      buildBatchSize: e.HERALD_SMS_BUILD_BATCH_SIZE,
      buildStaleMs: e.HERALD_SMS_BUILD_STALE_SECONDS * 1000,
      buildMaxAttempts: e.HERALD_SMS_BUILD_MAX_ATTEMPTS,
      dispatchBatchSize: e.HERALD_SMS_DISPATCH_BATCH_SIZE,
      sink: e.HERALD_SMS_SINK,
      submitTopic: e.HERALD_SMS_SUBMIT_TOPIC,
      dlrTopic: e.HERALD_SMS_DLR_TOPIC,
      dispatchDeadlineMs: e.HERALD_SMS_DISPATCH_DEADLINE_MINUTES * 60_000,
      draftStaleMs: e.HERALD_SMS_DRAFT_STALE_MINUTES * 60_000,
      buildingStaleMs: e.HERALD_SMS_BUILDING_STALE_MINUTES * 60_000,
      dispatchingStaleMs: e.HERALD_SMS_DISPATCHING_STALE_MINUTES * 60_000,
      cancellingStaleMs: e.HERALD_SMS_CANCELLING_STALE_MINUTES * 60_000,
      dlrTimeoutMs: e.HERALD_SMS_DLR_TIMEOUT_MINUTES * 60_000,
      maxAttempts: e.HERALD_SMS_MAX_ATTEMPTS,
      retryMs: e.HERALD_SMS_RETRY_MINUTES * 60_000,
      retryJitterMs: e.HERALD_SMS_RETRY_JITTER_SECONDS * 1000,
      retryableCodes: e.HERALD_SMS_RETRYABLE_CODES === '' ? [] : e.HERALD_SMS_RETRYABLE_CODES.split(','),
      refundRetryAfterMs: e.HERALD_SMS_REFUND_RETRY_AFTER_SECONDS * 1000,
      rollupBatchSize: e.HERALD_SMS_ROLLUP_BATCH_SIZE,
      leaseTtlMs: e.HERALD_SMS_LEASE_TTL_SECONDS * 1000,
      reportRetentionDays: e.HERALD_SMS_REPORT_RETENTION_DAYS,
      simulator: {
        outcomes,
        latencyMs: { min, max: max ?? min },
        failedCodes: e.HERALD_SMS_SIMULATOR_FAILED_CODES.split(','),
        fixed: new Map(
          e.HERALD_SMS_SIMULATOR_FIXED_OUTCOMES.split(',')
            .filter(Boolean)
            .map((pair) => {
              const [msisdn, outcome] = pair.split('=') as [string, string];
              const [status, errorCode] = outcome.split(':') as [string, string?];
              return [msisdn, { status, errorCode: errorCode ?? (status === 'FAILED' ? '1' : null) }];
            }),
        ),
      },
    };
  },
});
