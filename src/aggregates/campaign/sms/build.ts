/**
 * The CSV build worker (seed 003's CampaignBuildWorker), a claim sweep of `herald worker`: it claims a
 * BUILDING campaign whose upload is pending or whose build went silent (FOR UPDATE SKIP LOCKED) as
 * `StartBuild`, a new build attempt and fencing token: the decider refuses batches of an attempt taken
 * over (invariant 5). It streams the file in bounded memory, saves accepted rows in batches with their
 * AddRecipients event (invariant 1) and deducts once by `campaign:{uuid}` (invariant 9). GENERIC reads
 * the first column, a first row that is not a valid MSISDN being a header; PERSONALIZED needs a header with
 * `msisdn` and every tag. No valid row, or more than campaign.bulk.max-recipients, fails the build. ADR 0014.
 */
import { Readable } from 'node:stream';
import { parse } from 'csv-parse';
import {
  type BuildProgress,
  deleteRecipients,
  finishUpload,
  insertRecipients,
  loadUpload,
  lockDueBuilds,
  nextBuildDueInMs,
  readUploadChunk,
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
import { errorMessage, IllegalStateError } from '../../../errors.js';
import type { AggregateCommands } from '../../../eventstore/command-handler.js';
import type { Logger } from '../../../logger.js';
import type { Database, SqlClient } from '../../../ports/database.js';
import { type ClaimSweepDefinition, defineClaimSweeper, type SweeperDeps } from '../../../scanner/sweeper.js';
import { campaignAggregate } from '../descriptor.js';
import type { BillingPort } from './billing.js';
import { postgresSmsRouting, type SmsRoutingPort } from './routing.js';
import type { SmsSettings } from './settings.js';

export interface SmsBuildDeps extends Omit<SweeperDeps, 'batchSize'> {
  billing: BillingPort;
  settings: Pick<SmsSettings, 'zone' | 'bulkMaxRecipients' | 'buildBatchSize' | 'buildStaleMs'>;
  routing?: SmsRoutingPort;
  /** Recorded on the upload as the build's holder. */
  owner?: string;
}

/** How a build ended (for logs, tests and the bench). */
export interface BuildOutcome {
  campaignId: string;
  attempt: number;
  status: 'QUEUED' | 'SCHEDULED' | 'FAILED' | 'SUPERSEDED';
  reason: string | null;
  rowsRead: number;
  accepted: number;
  rejected: number;
  rejectedByReason: Partial<Record<RejectionReason, number>>;
  elapsedMs: number;
}

/** Progress is recorded at least every this many batches' worth of rows read, accepted or not. */
const PROGRESS_EVERY_BATCHES = 10;

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
  batch: FrozenRecipient[] = [];
  /** rowsRead at the last saved batch or progress record. */
  flushedAt = 0;
  readonly started = performance.now();

  constructor(
    readonly campaign: ExistingCampaign,
    readonly attempt: number,
  ) {}

  reject(reason: RejectionReason): void {
    this.rejected++;
    this.byReason[reason] = (this.byReason[reason] ?? 0) + 1;
  }

  progress(): BuildProgress {
    return {
      rowsRead: this.rowsRead,
      accepted: this.accepted,
      rejected: this.rejected,
      rejectedByReason: { ...this.byReason },
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
      if (!(error instanceof Superseded)) throw error;
      log.warn('build attempt taken over by another worker; stopping');
      outcome = this.outcome(build, 'SUPERSEDED', error.message);
    }
    this.outcomes.push(outcome);
    log.info(outcome, `sms build ${outcome.status}`);
    return outcome;
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
    const records = Readable.from(chunksOf(db, upload.id, upload.chunks), { highWaterMark: 1 }).pipe(
      parse({ bom: true, relax_column_count: true, skip_empty_lines: true, trim: true }),
    );
    let first = true;
    let msisdnColumn = 0;
    let tagColumns: [string, number][] = [];
    try {
      for await (const record of records as AsyncIterable<string[]>) {
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
          build.reject('invalid-msisdn');
          continue;
        }
        if (!seen.add(number.msisdn)) {
          build.reject('duplicate');
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
          build.reject(prepared.reason);
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
      try {
        await this.deps.billing.deduct({
          organizationId: campaign.organizationId,
          key,
          amount: total,
          reason: `sms campaign ${id}`,
        });
      } catch (error) {
        const reason = `charging ${total} failed: ${errorMessage(error)}`;
        await this.fail(build, reason);
        await this.reverse(campaign, reason, log);
        return this.outcome(build, 'FAILED', reason);
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
 * (whatever the consumer's pace), so a 1 MiB stored chunk would become ~40,000 records in memory.
 */
const PARSE_SLICE_BYTES = 64 * 1024;

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
