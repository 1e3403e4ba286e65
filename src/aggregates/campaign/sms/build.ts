/**
 * The CSV build worker (seed 003's CampaignBuildWorker), a claim sweep of `herald worker`: it claims a
 * BUILDING campaign whose upload is pending or whose build went silent (FOR UPDATE SKIP LOCKED) as
 * `StartBuild`, a new build attempt and fencing token: the decider refuses batches of an attempt taken
 * over (invariant 5). It streams the file in bounded memory, saves accepted rows in batches with their
 * AddRecipients event (invariant 1) and deducts once by `campaign:{uuid}` (invariant 9). GENERIC reads
 * the first column, a first row that is not a valid MSISDN being a header; PERSONALIZED needs a header with
 * `msisdn` and every tag. No valid row, or more than campaign.bulk.max-recipients, fails the build; so does
 * a refused charge (402), saying why on the upload. A charge billing does not answer leaves every recipient
 * saved and the upload CHARGING: the charge retry (smsChargeRetrySweeper) asks again with the same key
 * until billing answers, or reverses the key and fails it after HERALD_SMS_CHARGE_GIVE_UP_MINUTES.
 * A file the parser cannot read fails at once. An attempt that throws for a transient reason (a database
 * error) says so on the upload and is retried once stale; the last of HERALD_SMS_BUILD_MAX_ATTEMPTS gives
 * up the same way: FAILED, recipients cleared, a charge it made reversed by its key (issue 23, item 3).
 * ADR 0014, ADR 0023.
 */
import { Readable } from 'node:stream';
import { CsvError, type Options, parse } from 'csv-parse';
import {
  claimUploadCharge,
  finishChargingUpload,
  lockDueCharges,
  nextChargeDueInMs,
  pendUploadCharge,
  recordChargeFailure,
} from '../../../adapters/postgres/sms-charge-queries.js';
import {
  type BuildProgress,
  deleteRecipients,
  finishUpload,
  insertRecipients,
  loadUpload,
  lockDueBuilds,
  nextBuildDueInMs,
  REJECTED_ROWS_KEPT,
  type RejectedRow,
  readUploadChunk,
  recordUploadError,
  recordUploadProgress,
  startUploadBuilds,
} from '../../../adapters/postgres/sms-queries.js';
import {
  type CampaignCommand,
  type CampaignEvent,
  type CampaignState,
  campaignChargeKey,
  type ExistingCampaign,
} from '../../../domain/campaign.js';
import {
  type FrozenRecipient,
  prepareRecipient,
  type RecipientContext,
  type RejectionReason,
} from '../../../domain/sms/campaign-request.js';
import { formatUnits, toUnits } from '../../../domain/sms/money.js';
import { normalizeMsisdn } from '../../../domain/sms/msisdn.js';
import { MsisdnSet } from '../../../domain/sms/msisdn-set.js';
import { templateTags } from '../../../domain/sms/template.js';
import {
  ConflictError,
  errorMessage,
  IllegalStateError,
  InsufficientBalanceError,
  ValidationError,
} from '../../../errors.js';
import type { AggregateCommands } from '../../../eventstore/command-handler.js';
import type { Logger } from '../../../logger.js';
import type { Database, SqlClient } from '../../../ports/database.js';
import { HeapBudget } from '../../../runtime/heap-budget.js';
import type { Sweeper, SweepResult } from '../../../scanner/scanner.js';
import { type ClaimSweepDefinition, defineClaimSweeper, type SweeperDeps } from '../../../scanner/sweeper.js';
import { campaignAggregate } from '../descriptor.js';
import type { BillingPort, BillingReceipt } from './billing.js';
import { postgresSmsRouting, type SmsRoutingPort } from './routing.js';
import type { SmsSettings } from './settings.js';

export interface SmsBuildDeps extends Omit<SweeperDeps, 'batchSize'> {
  billing: BillingPort;
  /** An unanswered charge: asked again after `retryMs`, given up (reversed, FAILED) after `giveUpMs` (config.billing). */
  charge?: { retryMs: number; giveUpMs: number };
  settings: Pick<
    SmsSettings,
    'zone' | 'bulkMaxRecipients' | 'buildBatchSize' | 'buildStaleMs' | 'buildMaxAttempts'
  >;
  routing?: SmsRoutingPort;
  /** Recorded on the upload as the build's holder. */
  owner?: string;
}

/** How a build ended (for logs, tests and the bench). */
export interface BuildOutcome {
  campaignId: string;
  attempt: number;
  /**
   * CHARGING: every recipient saved, the charge unanswered; the charge retry asks again with the key.
   * RETRYING: the attempt failed for a transient reason (said on the upload); the claim retries it.
   */
  status: 'QUEUED' | 'SCHEDULED' | 'CHARGING' | 'FAILED' | 'SUPERSEDED' | 'RETRYING';
  reason: string | null;
  rowsRead: number;
  accepted: number;
  rejected: number;
  rejectedByReason: Partial<Record<RejectionReason, number>>;
  /** The most CSV records parsed ahead of the rows the build had taken (what the stream held at once). */
  parsedAhead: number;
  /** Full collections the build's heap budget ran. */
  heapCollections: number;
  elapsedMs: number;
}

/** How a retried charge ended. */
export interface ChargeOutcome {
  campaignId: string;
  status: 'QUEUED' | 'SCHEDULED' | 'CHARGING' | 'FAILED' | 'SUPERSEDED';
  reason: string | null;
}

/** Billing answered no: nothing was charged under the key (a retry cannot change that). */
function isRefusal(error: unknown): boolean {
  return (
    error instanceof InsufficientBalanceError ||
    error instanceof ConflictError ||
    error instanceof ValidationError
  );
}

/**
 * The garbage a build lets pile up on the heap before it has it collected (HeapBudget, ADR 0033): without
 * it V8 let a million-row build's heap grow ~110 MB past its live set.
 */
const BUILD_HEAP_BUDGET_BYTES = 16 * 1024 * 1024;

/** Progress is recorded at least every this many batches' worth of rows read, accepted or not. */
const PROGRESS_EVERY_BATCHES = 10;

/** A CSV record with the line of the file it ends on. */
interface ParsedRecord {
  record: string[];
  lines: number;
}

/** The attempt was taken over (its batches are refused): stop quietly, the new attempt decides. */
class Superseded extends Error {}

type Campaigns = AggregateCommands<CampaignState, CampaignCommand, CampaignEvent>;

class Build {
  rowsRead = 0;
  accepted = 0;
  rejected = 0;
  segments = 0;
  costUnits = 0;
  readonly byReason: Partial<Record<RejectionReason, number>> = {};
  /** The first rejected rows, with their line in the file (the upload lists them). */
  readonly rejectedRows: RejectedRow[] = [];
  batch: FrozenRecipient[] = [];
  /** rowsRead at the last saved batch or progress record. */
  flushedAt = 0;
  /** This attempt asked billing for the charge (a give-up reverses it by its key). */
  charging = false;
  /** Records the parser has made so far (the loop has taken `rowsTaken` of them). */
  parsed = 0;
  rowsTaken = 0;
  /** The most records parsed ahead of the loop at once: what the stream holds, bounded by back-pressure. */
  maxAhead = 0;
  /** Dead objects the build leaves on the heap are collected past this much (checked after each batch). */
  readonly heap = new HeapBudget(BUILD_HEAP_BUDGET_BYTES);
  readonly started = performance.now();

  constructor(
    readonly campaign: ExistingCampaign,
    readonly attempt: number,
  ) {}

  /** The loop took the next record. */
  consumed(): void {
    this.maxAhead = Math.max(this.maxAhead, this.parsed - this.rowsTaken);
    this.rowsTaken++;
  }

  reject(reason: RejectionReason, line: number, value: string): void {
    this.rejected++;
    this.byReason[reason] = (this.byReason[reason] ?? 0) + 1;
    if (this.rejectedRows.length < REJECTED_ROWS_KEPT) {
      this.rejectedRows.push({ line, value: value.slice(0, 64), reason });
    }
  }

  progress(): BuildProgress {
    return {
      rowsRead: this.rowsRead,
      accepted: this.accepted,
      rejected: this.rejected,
      rejectedByReason: { ...this.byReason },
      rejectedRows: [...this.rejectedRows],
    };
  }
}

export class SmsCampaignBuilder {
  private readonly campaigns: Campaigns;
  private readonly routing: SmsRoutingPort;
  private readonly logger: Logger;
  readonly outcomes: BuildOutcome[] = [];

  constructor(private readonly deps: SmsBuildDeps) {
    this.campaigns = deps.handler.for(campaignAggregate);
    this.routing = deps.routing ?? postgresSmsRouting;
    this.logger = deps.logger.child({ component: 'sms-build' });
  }

  /** Builds a campaign whose build this worker has just claimed (attempt = its current build attempt). */
  async build(campaign: ExistingCampaign): Promise<BuildOutcome> {
    const sms = campaign.sms!;
    const build = new Build(campaign, sms.buildAttempt);
    const log = this.logger.child({ aggregateId: campaign.campaignId, attempt: build.attempt });
    let outcome: BuildOutcome;
    try {
      outcome = await this.run(build, log);
    } catch (error) {
      outcome = await this.attemptFailed(build, error, log);
    }
    this.outcomes.push(outcome);
    log.info(outcome, `sms build ${outcome.status}`);
    return outcome;
  }

  /**
   * An attempt that threw: taken over → SUPERSEDED. Any other error (a database or billing hiccup) is
   * transient: before the last attempt it is recorded on the upload and the attempt left to go stale, so
   * the claim retries it; the last attempt (HERALD_SMS_BUILD_MAX_ATTEMPTS) gives up — upload and campaign
   * FAILED with the reason, recipients cleared, and the charge reversed by its key if this attempt asked
   * billing for it (the one key: never charged or refunded twice).
   */
  private async attemptFailed(build: Build, error: unknown, log: Logger): Promise<BuildOutcome> {
    if (error instanceof Superseded) {
      log.warn('build attempt taken over by another worker; stopping');
      return this.outcome(build, 'SUPERSEDED', error.message);
    }
    const id = build.campaign.campaignId;
    const max = this.deps.settings.buildMaxAttempts;
    const cause = errorMessage(error);
    if (build.attempt < max) {
      const staleS = Math.round(this.deps.settings.buildStaleMs / 1000);
      const reason = `build attempt ${build.attempt} of ${max} failed: ${cause}; retried ${staleS} s after its last batch`;
      log.warn({ err: error }, 'sms build attempt failed; retried once it goes stale');
      try {
        await recordUploadError(this.deps.db, id, build.attempt, reason);
      } catch (recordError) {
        log.error({ err: recordError }, 'could not record the failed build attempt on its upload');
      }
      return this.outcome(build, 'RETRYING', reason);
    }
    const reason = `the build failed ${max} times (HERALD_SMS_BUILD_MAX_ATTEMPTS), the last with: ${cause}; gave up with nothing charged: upload the file again`;
    log.error({ err: error }, 'sms build failed on its last attempt; giving up');
    try {
      await this.fail(build, reason);
    } catch (failError) {
      if (failError instanceof Superseded) return this.outcome(build, 'SUPERSEDED', failError.message);
      // Still failing: the attempt goes stale, and the next claim (past the last attempt) gives up.
      log.error({ err: failError }, 'could not fail the build; the next claim gives up');
      return this.outcome(build, 'RETRYING', reason);
    }
    if (build.charging) await this.reverse(build.campaign, reason, log);
    return this.outcome(build, 'FAILED', reason);
  }

  private outcome(build: Build, status: BuildOutcome['status'], reason: string | null): BuildOutcome {
    return {
      campaignId: build.campaign.campaignId,
      attempt: build.attempt,
      status,
      reason,
      rowsRead: build.rowsRead,
      accepted: build.accepted,
      rejected: build.rejected,
      rejectedByReason: { ...build.byReason },
      parsedAhead: build.maxAhead,
      heapCollections: build.heap.collections,
      elapsedMs: Math.round(performance.now() - build.started),
    };
  }

  private async run(build: Build, log: Logger): Promise<BuildOutcome> {
    const { campaign } = build;
    const sms = campaign.sms!;
    const { db, settings } = this.deps;
    const id = campaign.campaignId;

    if (build.attempt > 1 && sms.recipients > 0) {
      const reason =
        `a recovered build (attempt ${build.attempt}) found ${sms.recipients} saved recipients: ` +
        'failed without recharging; upload the file again';
      await this.fail(build, reason);
      await this.reverse(campaign, reason, log);
      return this.outcome(build, 'FAILED', reason);
    }
    if (build.attempt > settings.buildMaxAttempts) {
      // Every attempt failed or was taken over without saving anything (a worker dying on this file):
      // nothing was charged (a charge follows the saved recipients). Give up as the last attempt does.
      const last = (await loadUpload(db, id))?.error;
      const reason =
        `the build was attempted ${settings.buildMaxAttempts} times (HERALD_SMS_BUILD_MAX_ATTEMPTS) without finishing` +
        `${last ? ` (last: ${last})` : ''}; gave up with nothing charged: upload the file again`;
      await this.fail(build, reason);
      return this.outcome(build, 'FAILED', reason);
    }

    const upload = await loadUpload(db, id);
    if (!upload) throw new IllegalStateError(`campaign ${id} has no upload`, { campaignId: id });
    const routing = await this.routing.table(db, campaign.organizationId, sms.messageType);
    const tags = templateTags(sms.template);
    const context: RecipientContext = {
      templateType: sms.templateType,
      template: sms.template,
      tags,
      lang: sms.lang,
      routing,
      defaultZone: settings.zone,
    };
    const personalized = sms.templateType === 'PERSONALIZED';
    const seen = new MsisdnSet(Math.min(upload.sizeBytes / 12, settings.bulkMaxRecipients));
    const options: Options<ParsedRecord, string[]> = {
      bom: true,
      relax_column_count: true,
      skip_empty_lines: true,
      trim: true,
      // Each record with the file line it ends on (a rejected row is listed with its line); not
      // csv-parse's `info: true`, a twenty-field object kept with every record.
      on_record: (record, info) => {
        build.parsed++;
        return { record, lines: info.lines };
      },
    };
    // Back-pressure end to end: the parser takes the next slice once the loop has taken all but its
    // readable buffer's 16 records, and buffers at most one slice of input (not the 16 KiB default).
    const parser = parse({
      ...(options as unknown as Options), // csv-parse types on_record for the columns overload only
      writableHighWaterMark: PARSE_SLICE_BYTES,
    } as Options);
    const records = Readable.from(chunksOf(db, upload.id, upload.chunks), { highWaterMark: 1 }).pipe(parser);
    let first = true;
    let msisdnColumn = 0;
    let tagColumns: [string, number][] = [];
    try {
      for await (const { record, lines } of records as AsyncIterable<ParsedRecord>) {
        build.consumed();
        if (first) {
          first = false;
          if (personalized) {
            const missing = ['msisdn', ...tags].filter((name) => !record.includes(name));
            if (missing.length > 0) {
              const reason = `the personalized CSV header must contain ${['msisdn', ...tags].join(', ')} (missing: ${missing.join(', ')})`;
              await this.fail(build, reason);
              return this.outcome(build, 'FAILED', reason);
            }
            msisdnColumn = record.indexOf('msisdn');
            tagColumns = tags.map((tag) => [tag, record.indexOf(tag)]);
            continue;
          }
          // Seed 003: a first row whose first value is not a valid MSISDN is a header.
          if (normalizeMsisdn(record[0] ?? '') === null) continue;
        }
        build.rowsRead++;
        // A long run of rejected rows fills no batch: record progress anyway, so the attempt keeps its
        // sign of life (a silent one is taken over after HERALD_SMS_BUILD_STALE_SECONDS).
        if (build.rowsRead - build.flushedAt >= settings.buildBatchSize * PROGRESS_EVERY_BATCHES) {
          await this.flush(build);
        }
        const raw = record[msisdnColumn] ?? '';
        const number = normalizeMsisdn(raw);
        if (!number) {
          build.reject('invalid-msisdn', lines, raw);
          continue;
        }
        if (!seen.add(number.msisdn)) {
          build.reject('duplicate', lines, raw);
          continue;
        }
        const values = personalized
          ? Object.fromEntries(tagColumns.map(([tag, i]) => [tag, record[i] ?? '']))
          : null;
        const prepared = prepareRecipient(
          `row ${build.rowsRead}`,
          { msisdn: raw, tags: values },
          context,
          number,
        );
        if (!prepared.ok) {
          build.reject(prepared.reason, lines, raw);
          continue;
        }
        build.accepted++;
        if (build.accepted > settings.bulkMaxRecipients) {
          const reason = `more than ${settings.bulkMaxRecipients} valid rows (campaign.bulk.max-recipients)`;
          await this.fail(build, reason);
          return this.outcome(build, 'FAILED', reason);
        }
        build.batch.push(prepared.recipient);
        build.segments += prepared.recipient.segments;
        build.costUnits += prepared.recipient.costUnits;
        if (build.batch.length >= settings.buildBatchSize) await this.flush(build);
      }
    } catch (error) {
      // A file the parser cannot read (an unbalanced quote, …) fails the same way on every attempt:
      // FAILED now, with the parser's message and line, before anything was charged.
      if (!(error instanceof CsvError)) throw error;
      const reason = `the CSV cannot be read: ${error.message}`;
      await this.fail(build, reason);
      return this.outcome(build, 'FAILED', reason);
    } finally {
      records.destroy();
    }
    await this.flush(build);
    if (build.accepted === 0) {
      const reason = 'no accepted recipient in the file';
      await this.fail(build, reason);
      return this.outcome(build, 'FAILED', reason);
    }

    const total = formatUnits(build.costUnits);
    const key = campaignChargeKey(id);
    if (toUnits(total) > 0) {
      build.charging = true;
      try {
        await this.deps.billing.deduct({
          organizationId: campaign.organizationId,
          key,
          amount: total,
          reason: `sms campaign ${id}`,
        });
      } catch (error) {
        if (isRefusal(error)) {
          // Billing answered no (a short balance, a key already reversed): nothing was charged.
          const reason = `charging ${total} failed: ${errorMessage(error)}`;
          await this.fail(build, reason);
          return this.outcome(build, 'FAILED', reason);
        }
        // No answer: the outcome is unknown. Every recipient is saved; the upload waits in CHARGING and
        // the charge retry asks again with the same key (never a second charge, never a rebuild).
        const reason = `charging ${total} with ${key}: billing did not answer (${errorMessage(error)}); retried with the same key`;
        await this.pendCharge(build, reason);
        log.warn(
          { err: error, key, amount: total },
          'sms build charge unanswered; the upload waits in CHARGING',
        );
        return this.outcome(build, 'CHARGING', reason);
      }
    }
    const activated = await this.inTransaction(async (tx) => {
      if (
        !(await finishUpload(tx, id, build.attempt, {
          status: 'DONE',
          error: null,
          progress: build.progress(),
        }))
      ) {
        throw new Superseded(`attempt ${build.attempt} no longer holds the upload`);
      }
      await this.addRejected(tx, build);
      return this.campaigns.handleInTransaction(
        tx,
        id,
        (now) => ({ type: 'ActivateCampaign', campaignId: id, now, charge: { key, amount: total } }),
        { meta: { actor: 'sms-build' } },
      );
    });
    this.campaigns.signalAfterCommit([activated], this.deps.wakeups);
    const status = (activated.state as ExistingCampaign).status as 'QUEUED' | 'SCHEDULED';
    return this.outcome(build, status, null);
  }

  /**
   * Asks billing again for the charge of a CSV campaign whose upload waits in CHARGING (claimed by the
   * charge retry sweep), with the same `campaign:{id}` key and the saved total (`totalCost`): charged →
   * DONE and activated in one transaction; refused (402, a reversed key) → FAILED with its recipients
   * cleared; unanswered again → still CHARGING, the error on the upload. Past the give-up window the
   * charge is reversed by its key first (it may have been applied) and only then FAILED; a reversal that
   * fails leaves it CHARGING for the next try. Never two deductions: every try uses the one key.
   */
  async retryCharge(
    campaign: ExistingCampaign,
    tries: { attempt: number; pendingForMs: number },
  ): Promise<ChargeOutcome> {
    const id = campaign.campaignId;
    const sms = campaign.sms!;
    const key = campaignChargeKey(id);
    const amount = sms.totalCost;
    const log = this.logger.child({ aggregateId: id, key, chargeAttempt: tries.attempt });
    const giveUpMs = this.deps.charge?.giveUpMs ?? Number.POSITIVE_INFINITY;
    if (tries.pendingForMs > giveUpMs) {
      const minutes = Math.round(giveUpMs / 60_000);
      try {
        await this.deps.billing.reverse(
          campaign.organizationId,
          key,
          `billing did not answer the charge within ${minutes} min`,
        );
      } catch (error) {
        const reason = `giving up after ${minutes} min: the reversal of ${key} failed too (${errorMessage(error)}); retried`;
        await recordChargeFailure(this.deps.db, id, reason);
        log.error({ err: error }, 'could not reverse an unanswered build charge; retried');
        return { campaignId: id, status: 'CHARGING', reason };
      }
      const reason = `billing did not answer the charge of ${amount} within ${minutes} min: reversed by ${key}; upload the file again`;
      await this.failCharging(campaign, reason);
      return { campaignId: id, status: 'FAILED', reason };
    }
    let charged: BillingReceipt;
    try {
      charged = await this.deps.billing.deduct({
        organizationId: campaign.organizationId,
        key,
        amount,
        reason: `sms campaign ${id}`,
      });
    } catch (error) {
      if (isRefusal(error)) {
        const reason = `charging ${amount} failed: ${errorMessage(error)}`;
        await this.failCharging(campaign, reason);
        return { campaignId: id, status: 'FAILED', reason };
      }
      const reason = `charging ${amount} with ${key}: billing did not answer (try ${tries.attempt}: ${errorMessage(error)}); retried with the same key`;
      await recordChargeFailure(this.deps.db, id, reason);
      log.warn({ err: error }, 'sms build charge still unanswered');
      return { campaignId: id, status: 'CHARGING', reason };
    }
    if (toUnits(charged.amount) !== toUnits(amount)) {
      // The key holds another amount: never activate on a charge that does not match the campaign.
      const reason = `${key} holds a deduction of ${charged.amount}, not the campaign's ${amount}: left for an operator`;
      await recordChargeFailure(this.deps.db, id, reason);
      log.error({ charged: charged.amount, amount }, reason);
      return { campaignId: id, status: 'CHARGING', reason };
    }
    const activated = await this.deps.db.transaction(async (tx) => {
      if (!(await finishChargingUpload(tx, id, { status: 'DONE', error: null }))) return null;
      return this.campaigns.handleInTransaction(
        tx,
        id,
        (now) => ({ type: 'ActivateCampaign', campaignId: id, now, charge: { key, amount } }),
        { meta: { actor: 'sms-build' } },
      );
    });
    if (!activated)
      return { campaignId: id, status: 'SUPERSEDED', reason: 'the upload is no longer CHARGING' };
    this.campaigns.signalAfterCommit([activated], this.deps.wakeups);
    log.info({ applied: charged.applied, amount }, 'sms build charged on retry');
    return { campaignId: id, status: (activated.state as ExistingCampaign).status as 'QUEUED', reason: null };
  }

  /** Every recipient saved, the charge unanswered: IN_PROGRESS → CHARGING with the rejected rows counted. */
  private async pendCharge(build: Build, reason: string): Promise<void> {
    const id = build.campaign.campaignId;
    await this.inTransaction(async (tx) => {
      if (!(await pendUploadCharge(tx, id, build.attempt, reason, build.progress()))) {
        throw new Superseded(`attempt ${build.attempt} no longer holds the upload`);
      }
      await this.addRejected(tx, build);
    });
  }

  /** A CHARGING upload FAILED, its campaign FAILED with the saved recipients cleared, in one transaction. */
  private async failCharging(campaign: ExistingCampaign, reason: string): Promise<void> {
    const id = campaign.campaignId;
    await this.deps.db.transaction(async (tx) => {
      if (!(await finishChargingUpload(tx, id, { status: 'FAILED', error: reason }))) return;
      await deleteRecipients(tx, id);
      await this.campaigns.handleInTransaction(
        tx,
        id,
        (now) => ({ type: 'FailCampaign', campaignId: id, now, reason, clearRecipients: true }),
        { meta: { actor: 'sms-build' } },
      );
    });
  }

  /** Saves the batch with its event and the upload's progress, in one transaction. */
  private async flush(build: Build): Promise<void> {
    const id = build.campaign.campaignId;
    const batch = build.batch;
    build.batch = [];
    build.flushedAt = build.rowsRead;
    await this.inTransaction(async (tx) => {
      if (!(await recordUploadProgress(tx, id, build.attempt, build.progress()))) {
        throw new Superseded(`attempt ${build.attempt} no longer holds the upload`);
      }
      if (batch.length === 0) return;
      await insertRecipients(tx, id, build.campaign.sms!.lang, batch);
      let segments = 0;
      let cost = 0;
      for (const r of batch) {
        segments += r.segments;
        cost += r.costUnits;
      }
      await this.campaigns.handleInTransaction(
        tx,
        id,
        (now) => ({
          type: 'AddRecipients',
          campaignId: id,
          now,
          buildAttempt: build.attempt,
          recipients: batch.length,
          segments,
          cost: formatUnits(cost),
          rejected: 0,
        }),
        { meta: { actor: 'sms-build' } },
      );
    });
    build.heap.check();
  }

  /** Rejected rows are counted on the campaign once, when the build ends (a retried build counts afresh). */
  private async addRejected(tx: SqlClient, build: Build): Promise<void> {
    if (build.rejected === 0) return;
    const id = build.campaign.campaignId;
    await this.campaigns.handleInTransaction(
      tx,
      id,
      (now) => ({
        type: 'AddRecipients',
        campaignId: id,
        now,
        buildAttempt: build.attempt,
        recipients: 0,
        segments: 0,
        cost: '0',
        rejected: build.rejected,
      }),
      { meta: { actor: 'sms-build' } },
    );
  }

  /** FAILED with the saved recipients cleared and the upload FAILED, in one transaction. */
  private async fail(build: Build, reason: string): Promise<void> {
    const id = build.campaign.campaignId;
    await this.inTransaction(async (tx) => {
      if (
        !(await finishUpload(tx, id, build.attempt, {
          status: 'FAILED',
          error: reason,
          progress: build.progress(),
        }))
      ) {
        throw new Superseded(`attempt ${build.attempt} no longer holds the upload`);
      }
      await deleteRecipients(tx, id);
      await this.addRejected(tx, build);
      await this.campaigns.handleInTransaction(
        tx,
        id,
        (now) => ({ type: 'FailCampaign', campaignId: id, now, reason, clearRecipients: true }),
        { meta: { actor: 'sms-build' } },
      );
    });
  }

  /** Best-effort reversal by the campaign's key (whether or not a deduction happened). */
  private async reverse(campaign: ExistingCampaign, reason: string, log: Logger): Promise<void> {
    const key = campaignChargeKey(campaign.campaignId);
    try {
      await this.deps.billing.reverse(campaign.organizationId, key, reason);
    } catch (error) {
      log.error({ err: error, key }, 'could not reverse the charge of a failed build; reverse it by its key');
    }
  }

  /** A transaction whose decider refusals of this attempt's commands mean it was taken over. */
  private async inTransaction<T>(work: (tx: SqlClient) => Promise<T>): Promise<T> {
    try {
      return await this.deps.db.transaction(work);
    } catch (error) {
      // The decider refused this attempt's command: the campaign moved on (another attempt took it over).
      if (error instanceof IllegalStateError) throw new Superseded(error.message);
      throw error;
    }
  }
}

/**
 * The parser is fed this much at a time: csv-parse turns each piece it is given into records at once
 * (whatever the consumer's pace), so a 1 MiB stored chunk would become ~87,000 records in memory, a 64 KiB
 * slice ~5,400 (12-byte rows); 4 KiB, ~340.
 */
const PARSE_SLICE_BYTES = 4 * 1024;

/** The upload's stored chunks, one at a time, in slices for the parser. */
async function* chunksOf(db: Database, uploadId: string, chunks: number): AsyncGenerator<Buffer> {
  for (let seq = 0; seq < chunks; seq++) {
    const data = await readUploadChunk(db, uploadId, seq);
    if (!data) throw new IllegalStateError(`upload ${uploadId} lacks chunk ${seq}`, { uploadId, seq });
    for (let at = 0; at < data.length; at += PARSE_SLICE_BYTES)
      yield data.subarray(at, at + PARSE_SLICE_BYTES);
  }
}

/** The build claim: BUILDING campaigns with a pending or stale upload → StartBuild, then build after commit. */
export function smsBuildSweeper(deps: SmsBuildDeps) {
  const builder = new SmsCampaignBuilder(deps);
  const staleMs = deps.settings.buildStaleMs;
  const definition: ClaimSweepDefinition<CampaignState, CampaignCommand, CampaignEvent> = {
    name: 'campaign.sms-build',
    aggregate: campaignAggregate,
    actor: 'sms-build',
    lockDue: async (tx, limit) =>
      (await lockDueBuilds(tx, limit, staleMs)).map(({ state, version }) => ({
        streamId: state.campaignId,
        state,
        version,
      })),
    command: (stream, now) => ({
      type: 'StartBuild',
      campaignId: stream.streamId,
      now,
      staleAfterMs: staleMs,
    }),
    nextDueInMs: (sql) => nextBuildDueInMs(sql, staleMs),
    async followUp(tx, results) {
      await startUploadBuilds(
        tx,
        results.map((r) => ({
          campaignId: r.streamId,
          attempt: (r.state as ExistingCampaign).sms!.buildAttempt,
        })),
        deps.owner ?? 'sms-build',
      );
      return undefined;
    },
    async afterCommit(results) {
      for (const result of results) await builder.build(result.state as ExistingCampaign);
    },
    outcome: (result) => ({
      counter: 'builds',
      message: `sms build started (attempt ${(result.state as ExistingCampaign).sms?.buildAttempt})`,
      level: 'info',
    }),
  };
  // One build per claim: a build is long, and another worker may take the next upload meanwhile.
  const sweeper = defineClaimSweeper(definition, { ...deps, batchSize: 1 });
  return Object.assign(sweeper, { builder });
}

/**
 * The charge retry (`herald worker`, beside the build sweep): claims CHARGING uploads of BUILDING
 * campaigns whose last try is older than HERALD_SMS_CHARGE_RETRY_SECONDS (row locks, SKIP LOCKED: any
 * number of workers; the try is recorded before billing is asked), then asks billing again with the
 * campaign's one key (`SmsCampaignBuilder.retryCharge`). ADR 0023.
 */
export function smsChargeRetrySweeper(
  deps: SmsBuildDeps & { charge: { retryMs: number; giveUpMs: number }; batchSize?: number },
) {
  const builder = new SmsCampaignBuilder(deps);
  const retryMs = deps.charge.retryMs;
  const limit = deps.batchSize ?? 10;
  const outcomes: ChargeOutcome[] = [];
  const stats = { tried: 0, charged: 0, failed: 0, pending: 0 };
  return {
    name: 'campaign.sms-charge-retry',
    stats,
    outcomes,
    builder,
    async sweep(): Promise<SweepResult> {
      const claimed = await deps.db.transaction(async (tx) => {
        const due = await lockDueCharges(tx, limit, retryMs);
        const tries: { state: ExistingCampaign; attempt: number; pendingForMs: number }[] = [];
        for (const d of due) {
          const attempt = await claimUploadCharge(tx, d.state.campaignId);
          if (attempt !== null) tries.push({ state: d.state, attempt, pendingForMs: d.pendingForMs });
        }
        return tries;
      });
      for (const c of claimed) {
        stats.tried++;
        let outcome: ChargeOutcome;
        try {
          outcome = await builder.retryCharge(c.state, c);
        } catch (error) {
          // A database error between billing and the upload: the next try repeats the same key.
          deps.logger.error({ err: error, aggregateId: c.state.campaignId }, 'sms charge retry failed');
          continue;
        }
        outcomes.push(outcome);
        if (outcome.status === 'QUEUED' || outcome.status === 'SCHEDULED') stats.charged++;
        else if (outcome.status === 'FAILED') stats.failed++;
        else stats.pending++;
      }
      return { processed: claimed.length, more: claimed.length === limit };
    },
    nextDueInMs: () => nextChargeDueInMs(deps.db, retryMs),
  } satisfies Sweeper & Record<string, unknown>;
}
