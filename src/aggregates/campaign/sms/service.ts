/**
 * The SMS campaign library: inline creation, preview, bulk CSV creation, progress and recipients. Inline
 * creation reserves the Idempotency-Key in a transaction of its own, commits the DRAFT campaign with its
 * frozen, priced recipients (invariant 1), deducts the total once under `campaign:{uuid}` (invariant 9),
 * then activates the campaign and completes the key in one transaction. A refused deduction (402) is
 * reversed by the same key, the campaign FAILED and the key released; a deduction billing did not answer
 * keeps the DRAFT and suspends the key, so the client's retry with it charges the same `campaign:{uuid}`
 * (charged once, ADR 0023) — without a key it is reversed (best effort) and FAILED as before. Bulk
 * creation stores the file and a BUILDING campaign with the key in one transaction; build.ts does the
 * rest. ADR 0014.
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  insertRecipients,
  insertUpload,
  insertUploadChunk,
  listRecipients,
  loadUpload,
  type RecipientRow,
  type RejectedRow,
  sealUpload,
  type UploadRow,
} from '../../../adapters/postgres/sms-queries.js';
import {
  IdempotencyKeys,
  type Replayable,
  type RequestKey,
  SuspendedOperation,
  withFingerprintOf,
} from '../../../api/idempotency.js';
import {
  type CampaignCommand,
  type CampaignEvent,
  type CampaignState,
  campaignChargeKey,
  type ExistingCampaign,
  type SmsDefinition,
} from '../../../domain/campaign.js';
import {
  bulkCampaignMetaSchema,
  type CampaignDefinition,
  campaignRuleIssues,
  type FrozenRecipient,
  inlineCampaignRequestSchema,
  parseRequest,
  prepareRecipient,
  type RuleIssue,
  SmsValidationError,
  totals,
} from '../../../domain/sms/campaign-request.js';
import { formatUnits, toUnits } from '../../../domain/sms/money.js';
import {
  BillingUnavailableError,
  ConflictError,
  errorMessage,
  HeraldError,
  InsufficientBalanceError,
  NotFoundError,
  ValidationError,
} from '../../../errors.js';
import {
  type AggregateCommands,
  type CommandHandler,
  databaseNow,
} from '../../../eventstore/command-handler.js';
import { type Logger, silentLogger } from '../../../logger.js';
import type { Database, SqlClient } from '../../../ports/database.js';
import type { EventMeta } from '../../../ports/events.js';
import { campaignAggregate } from '../descriptor.js';
import type { BillingPort } from './billing.js';
import {
  type ControlOptions,
  type ResendOptions,
  type ResendPreview,
  SmsCampaignControls,
} from './controls.js';
import { postgresSmsRouting, type SmsRoutingPort } from './routing.js';
import type { SmsSettings } from './settings.js';

/** Upload chunk size: the file is stored and read back this much at a time. */
export const UPLOAD_CHUNK_BYTES = 1024 * 1024;

export interface SmsCampaignServiceDeps {
  db: Database;
  handler: CommandHandler;
  billing: BillingPort;
  settings: SmsSettings;
  /** How long a completed Idempotency-Key is remembered (config.api.idempotencyTtlMs). */
  idempotencyTtlMs: number;
  routing?: SmsRoutingPort;
  logger?: Logger;
}

export interface SmsRequestOptions {
  organizationId: string;
  /**
   * The request's Idempotency-Key (src/api/idempotency.ts; the HTTP API's is scoped by organization,
   * method and route). For a bulk upload the file's SHA-256 is added to its fingerprint here.
   */
  idempotency?: RequestKey;
  meta?: EventMeta;
}

export interface PreviewMessage {
  msisdn: string;
  operator: string;
  timezone: string;
  content: string;
  encoding: FrozenRecipient['encoding'];
  segments: number;
  sender: string;
  channel: string;
  rate: string;
  cost: string;
}

export interface SmsPreview {
  messageType: CampaignDefinition['messageType'];
  lang: CampaignDefinition['lang'];
  startAt: string | null;
  recipients: number;
  segments: number;
  totalCost: string;
  byOperator: { operator: string; recipients: number; segments: number; cost: string }[];
  messages: PreviewMessage[];
}

export interface UploadView {
  id: string;
  status: UploadRow['status'];
  fileName: string | null;
  sizeBytes: number;
  sha256: string;
  rowsRead: number;
  acceptedCount: number;
  rejectedCount: number;
  rejectedByReason: Record<string, number>;
  /** The first rejected rows with their line (REJECTED_ROWS_KEPT at most). */
  rejectedRows: RejectedRow[];
  /** Build attempts so far. */
  attempt: number;
  error: string | null;
  finishedAt: string | null;
}

export interface BulkCreated {
  campaign: ExistingCampaign;
  upload: UploadView;
}

/** Rolls a transaction back and carries the result to replay out of it. */
class Replay extends Error {
  constructor(readonly stored: unknown) {
    super('replay');
  }
}

export function uploadView(row: UploadRow): UploadView {
  return {
    id: row.id,
    status: row.status,
    fileName: row.fileName,
    sizeBytes: row.sizeBytes,
    sha256: row.sha256,
    rowsRead: row.rowsRead,
    acceptedCount: row.acceptedCount,
    rejectedCount: row.rejectedCount,
    rejectedByReason: row.rejectedByReason,
    rejectedRows: row.rejectedRows,
    attempt: row.attempt,
    error: row.error,
    finishedAt: row.finishedAt ? row.finishedAt.toISOString() : null,
  };
}

export class SmsCampaignService {
  private readonly campaigns: AggregateCommands<CampaignState, CampaignCommand, CampaignEvent>;
  private readonly routing: SmsRoutingPort;
  private readonly logger: Logger;
  /** Pause, resume, reschedule, cancel, resend and its preview (controls.ts). */
  readonly controls: SmsCampaignControls;
  private readonly keys: IdempotencyKeys;

  constructor(private readonly deps: SmsCampaignServiceDeps) {
    this.campaigns = deps.handler.for(campaignAggregate);
    this.routing = deps.routing ?? postgresSmsRouting;
    this.logger = (deps.logger ?? silentLogger).child({ component: 'sms-campaigns' });
    this.keys = new IdempotencyKeys(deps.idempotencyTtlMs);
    this.controls = new SmsCampaignControls({
      db: deps.db,
      handler: deps.handler,
      billing: deps.billing,
      settings: deps.settings,
      idempotencyTtlMs: deps.idempotencyTtlMs,
      logger: this.logger,
    });
  }

  /** SCHEDULED, QUEUED or DISPATCHING → PAUSED with a reason; no new claims, nothing refunded. */
  pause(campaignId: string, reason?: string, options?: ControlOptions) {
    return this.controls.pause(campaignId, reason, options);
  }

  /** PAUSED → SCHEDULED (paused from SCHEDULED) or QUEUED. */
  resume(campaignId: string, reason?: string, options?: ControlOptions) {
    return this.controls.resume(campaignId, reason, options);
  }

  /** `{scheduledAt, reason?}`: validated as at creation; a new dispatch deadline. */
  reschedule(campaignId: string, body: unknown, options?: ControlOptions) {
    return this.controls.reschedule(campaignId, body, options);
  }

  /** → CANCELLING; the `sms:recovery` poller withdraws the unsent recipients, refunds them and settles. */
  cancel(campaignId: string, reason?: string, options?: ControlOptions) {
    return this.controls.cancel(campaignId, reason, options);
  }

  /** What a resend would send and charge (nothing written). */
  resendPreview(campaignId: string, options?: ControlOptions): Promise<ResendPreview> {
    return this.controls.resendPreview(campaignId, options);
  }

  /** Resends the failed recipients of a PARTIAL/FAILED campaign, charged their cost once. */
  resend(campaignId: string, input: { reason?: string }, options: ResendOptions) {
    return this.controls.resend(campaignId, input, options);
  }

  /** Seed 003's inline create (1–5,000 recipients): 201 with the QUEUED or SCHEDULED campaign. */
  async create(raw: unknown, options: SmsRequestOptions): Promise<Replayable<ExistingCampaign>> {
    return this.keys.aroundReservation(this.deps.db, options.idempotency, this.logger, (resume) =>
      this.createReserved(raw, options, resume),
    );
  }

  /** Seed 003's preview: validates, renders, routes and prices; writes nothing, charges nothing. */
  async preview(raw: unknown, options: { organizationId: string }): Promise<SmsPreview> {
    const now = (await databaseNow(this.deps.db)).getTime();
    const request = parseRequest(inlineCampaignRequestSchema, raw);
    const { startAt, recipients } = await this.prepareInline(request, options.organizationId, now);
    const sum = totals(recipients);
    const byOperator = new Map<
      string,
      { operator: string; recipients: number; segments: number; cost: number }
    >();
    for (const r of recipients) {
      const entry = byOperator.get(r.operator) ?? {
        operator: r.operator,
        recipients: 0,
        segments: 0,
        cost: 0,
      };
      entry.recipients++;
      entry.segments += r.segments;
      entry.cost += r.costUnits;
      byOperator.set(r.operator, entry);
    }
    return {
      messageType: request.messageType,
      lang: request.lang,
      startAt,
      recipients: sum.recipients,
      segments: sum.segments,
      totalCost: sum.cost,
      byOperator: [...byOperator.values()].map((o) => ({ ...o, cost: formatUnits(o.cost) })),
      messages: recipients.map((r) => ({
        msisdn: r.msisdn,
        operator: r.operator,
        timezone: r.timezone,
        content: r.content,
        encoding: r.encoding,
        segments: r.segments,
        sender: r.sender,
        channel: r.channel,
        rate: r.rate,
        cost: formatUnits(r.costUnits),
      })),
    };
  }

  /**
   * Seed 003's bulk create: `meta` (promotional only, lang=bn) and a UTF-8 CSV file (a stream of
   * chunks). 202 with the BUILDING campaign and its upload. On a thrown error nothing is written; the
   * file may be left partly unread.
   */
  async createBulk(
    rawMeta: unknown,
    file: AsyncIterable<Buffer | string>,
    options: SmsRequestOptions,
  ): Promise<Replayable<BulkCreated>> {
    const { db, settings } = this.deps;
    const now = (await databaseNow(db)).getTime();
    const meta = parseRequest(bulkCampaignMetaSchema, rawMeta);
    const { fileName, ...definition } = meta;
    const issues: RuleIssue[] = [];
    if (definition.messageType !== 'PROMOTIONAL') {
      issues.push({
        field: 'messageType',
        rule: 'bulk.promotional-only',
        message: 'bulk campaigns are PROMOTIONAL only',
      });
    }
    const checked = campaignRuleIssues(definition, now, settings);
    issues.push(...checked.issues);
    if (issues.length > 0) throw new SmsValidationError(issues);

    const campaignId = randomUUID();
    const uploadId = randomUUID();
    try {
      const { response, result } = await db.transaction(async (tx) => {
        await insertUpload(tx, {
          id: uploadId,
          campaignId,
          organizationId: options.organizationId,
          meta,
          fileName: fileName ?? null,
        });
        const stored = await this.storeFile(tx, uploadId, file);
        // The key covers the file too: the same key with another file is another request.
        const idempotency = options.idempotency && withFingerprintOf(options.idempotency, stored.sha256);
        if (idempotency) {
          const replay = await this.keys.reserve(tx, idempotency);
          if (replay) throw new Replay(replay.stored);
        }
        const result = await this.campaigns.handleInTransaction(
          tx,
          campaignId,
          (at) => ({
            type: 'CreateCampaign',
            campaignId,
            now: at,
            mode: 'building',
            organizationId: options.organizationId,
            channel: 'sms',
            name: definition.name,
            startAt: checked.rules.startAt,
            dispatchDeadline: dispatchDeadlineFor(checked.rules.startAt, settings),
            sms: smsDefinition(definition, 'csv'),
            requestIdempotencyKey: options.idempotency?.key ?? null,
          }),
          { expectedVersion: 0, ...(options.meta ? { meta: options.meta } : {}) },
        );
        const upload = await loadUpload(tx, campaignId);
        const created: BulkCreated = {
          campaign: result.state as ExistingCampaign,
          upload: uploadView(upload!),
        };
        if (idempotency) await this.keys.complete(tx, idempotency, created);
        return { response: { body: created, replayed: false }, result };
      });
      this.campaigns.signalAfterCommit([result]);
      return response;
    } catch (error) {
      if (error instanceof Replay) return { body: error.stored as BulkCreated, replayed: true };
      throw error;
    }
  }

  /** The campaign (its `sms` facts hold totals, charge and progress counters). */
  async get(campaignId: string, organizationId?: string): Promise<ExistingCampaign> {
    const loaded = await campaignAggregate.store.load(this.deps.db, campaignId);
    const state = loaded?.state;
    if (
      !state ||
      state.status === 'NONE' ||
      state.channel !== 'sms' ||
      (organizationId && state.organizationId !== organizationId)
    ) {
      throw new NotFoundError(`sms campaign ${campaignId} not found`, { campaignId });
    }
    return state;
  }

  /** A campaign's frozen recipients in creation order (cursor: the last id of the previous page). */
  async recipients(
    campaignId: string,
    options: { after?: string; limit?: number } = {},
  ): Promise<RecipientRow[]> {
    return listRecipients(this.deps.db, campaignId, {
      limit: Math.min(options.limit ?? 100, 1_000),
      ...options,
    });
  }

  /** A CSV campaign's upload and its build's outcome (rows read, accepted, rejected by reason). */
  async upload(campaignId: string): Promise<UploadView> {
    const row = await loadUpload(this.deps.db, campaignId);
    if (!row) throw new NotFoundError(`campaign ${campaignId} has no upload`, { campaignId });
    return uploadView(row);
  }

  // ─── internals ──────────────────────────────────────────────────────────────────────────────────

  /** Reserves the key in `tx`; returns the stored response to replay, or null when this request owns it. */
  private async prepareInline(
    request: ReturnType<typeof inlineCampaignRequestSchema.parse>,
    organizationId: string,
    now: number,
  ): Promise<{ startAt: string | null; recipients: FrozenRecipient[] }> {
    const { recipients: inputs, ...definition } = request;
    const { issues, rules } = campaignRuleIssues(definition, now, this.deps.settings);
    if (issues.length > 0) throw new SmsValidationError(issues);
    const routing = await this.routing.table(this.deps.db, organizationId, definition.messageType);
    const context = {
      templateType: definition.templateType,
      template: definition.template,
      tags: rules.tags,
      lang: definition.lang,
      routing,
      defaultZone: this.deps.settings.zone,
    };
    const prepared = inputs.map((input, i) => prepareRecipient(`recipients[${i}]`, input, context));
    const problems = prepared.flatMap((p) => (p.ok ? [] : p.issues));
    if (problems.length > 0) throw new SmsValidationError(problems);
    return {
      startAt: rules.startAt,
      recipients: prepared.map((p) => (p as Extract<typeof p, { ok: true }>).recipient),
    };
  }

  private async createReserved(
    raw: unknown,
    options: SmsRequestOptions,
    resume: unknown,
  ): Promise<ExistingCampaign> {
    const { db } = this.deps;
    const metaOption = options.meta ? { meta: options.meta } : {};
    // A retry of a request whose charge billing did not answer: the same DRAFT, charged with its key.
    const draft = await this.resumableDraft(resume, options.organizationId);
    if (draft) {
      const log = this.logger.child({
        aggregateId: draft.campaignId,
        correlationId: options.meta?.correlationId,
      });
      log.info(
        { key: campaignChargeKey(draft.campaignId) },
        'sms campaign creation resumed: charging its key again',
      );
      return this.chargeAndActivate(draft.campaignId, draft.sms!.totalCost, options, log);
    }
    const now = (await databaseNow(db)).getTime();
    const request = parseRequest(inlineCampaignRequestSchema, raw);
    const { startAt, recipients } = await this.prepareInline(request, options.organizationId, now);
    const { recipients: _inputs, ...definition } = request;
    const sum = totals(recipients);
    const campaignId = randomUUID();
    const log = this.logger.child({ aggregateId: campaignId, correlationId: options.meta?.correlationId });

    // Steps 7–9: the DRAFT campaign and its frozen recipients, one transaction.
    await db.transaction(async (tx) => {
      await this.campaigns.handleInTransaction(
        tx,
        campaignId,
        (at) => ({
          type: 'CreateCampaign',
          campaignId,
          now: at,
          mode: 'draft',
          organizationId: options.organizationId,
          channel: 'sms',
          name: definition.name,
          startAt,
          dispatchDeadline: dispatchDeadlineFor(startAt, this.deps.settings),
          sms: smsDefinition(definition, 'inline'),
          requestIdempotencyKey: options.idempotency?.key ?? null,
        }),
        { expectedVersion: 0, ...metaOption },
      );
      await insertRecipients(tx, campaignId, definition.lang, recipients);
      await this.campaigns.handleInTransaction(
        tx,
        campaignId,
        (at) => ({
          type: 'AddRecipients',
          campaignId,
          now: at,
          recipients: sum.recipients,
          segments: sum.segments,
          cost: sum.cost,
          rejected: 0,
        }),
        metaOption,
      );
    });
    return this.chargeAndActivate(campaignId, sum.cost, options, log);
  }

  /** The DRAFT a suspended Idempotency-Key names, while it is still a DRAFT of this organization. */
  private async resumableDraft(resume: unknown, organizationId: string): Promise<ExistingCampaign | null> {
    const campaignId = (resume as { campaignId?: unknown } | undefined)?.campaignId;
    if (typeof campaignId !== 'string') return null;
    const state = (await campaignAggregate.store.load(this.deps.db, campaignId))?.state;
    if (
      state?.status !== 'DRAFT' ||
      state.channel !== 'sms' ||
      state.sms === null ||
      state.organizationId !== organizationId
    ) {
      // Stale recovery failed it meanwhile (its charge reversed): this request starts afresh.
      return null;
    }
    return state;
  }

  /**
   * Step 10 and the activation: one deduction of the total with the campaign's stable key, then
   * ActivateCampaign and the Idempotency-Key completed in one transaction. A refusal (402, a reversed
   * key) reverses and FAILs the campaign; no answer from billing keeps the DRAFT and, with an
   * Idempotency-Key, suspends the key so the client's retry charges the same key (charged once) — without
   * one, the charge is reversed by its key (best effort) as before.
   */
  private async chargeAndActivate(
    campaignId: string,
    cost: string,
    options: SmsRequestOptions,
    log: Logger,
  ): Promise<ExistingCampaign> {
    const { db, billing } = this.deps;
    const metaOption = options.meta ? { meta: options.meta } : {};
    const chargeKey = campaignChargeKey(campaignId);
    const correlation = { correlationId: options.meta?.correlationId };
    if (toUnits(cost) > 0) {
      try {
        await billing.deduct(
          {
            organizationId: options.organizationId,
            key: chargeKey,
            amount: cost,
            reason: `sms campaign ${campaignId}`,
          },
          correlation,
        );
      } catch (error) {
        const unanswered = !(
          error instanceof InsufficientBalanceError ||
          error instanceof ConflictError ||
          error instanceof ValidationError
        );
        const failure =
          error instanceof HeraldError
            ? error
            : new BillingUnavailableError(
                `billing failed: ${errorMessage(error)}`,
                { key: chargeKey },
                error,
              );
        if (unanswered && options.idempotency) {
          log.warn(
            { err: error, key: chargeKey },
            'billing did not answer the charge: the DRAFT is kept for a retry with the same Idempotency-Key',
          );
          throw new SuspendedOperation({ campaignId }, failure);
        }
        await this.failUncharged(campaignId, options.organizationId, chargeKey, error, metaOption, log);
        throw failure;
      }
    }
    const idempotency = options.idempotency;
    const activated = await db.transaction(async (tx) => {
      const result = await this.campaigns.handleInTransaction(
        tx,
        campaignId,
        (at) => ({
          type: 'ActivateCampaign',
          campaignId,
          now: at,
          charge: { key: chargeKey, amount: cost },
        }),
        metaOption,
      );
      if (idempotency) {
        await this.keys.complete(tx, idempotency, result.state);
      }
      return result;
    });
    this.campaigns.signalAfterCommit([activated]);
    const state = activated.state as ExistingCampaign;
    log.info(
      { recipients: state.sms?.recipients, totalCost: cost, status: state.status },
      'sms campaign created and charged',
    );
    return state;
  }

  /**
   * The deduction failed or its outcome is unknown: reverse by the key (best effort; a reversal of a
   * deduction that never happened blocks its late arrival), then FAILED — or, when even the reversal
   * could not be made and the charge may stand, the DRAFT stays for stale recovery to reverse (part 2).
   */
  private async failUncharged(
    campaignId: string,
    organizationId: string,
    chargeKey: string,
    cause: unknown,
    metaOption: { meta?: EventMeta },
    log: Logger,
  ): Promise<void> {
    const definitive = cause instanceof InsufficientBalanceError;
    let reversed = false;
    try {
      await this.deps.billing.reverse(
        organizationId,
        chargeKey,
        `campaign creation failed: ${errorMessage(cause)}`,
        { correlationId: metaOption.meta?.correlationId },
      );
      reversed = true;
    } catch (error) {
      log.warn(
        { err: error, key: chargeKey },
        'could not reverse the charge; the DRAFT is left for recovery',
      );
    }
    if (!definitive && !reversed) return;
    await this.campaigns
      .handle(
        campaignId,
        (at) => ({
          type: 'FailCampaign',
          campaignId,
          now: at,
          reason: definitive
            ? `insufficient balance: ${errorMessage(cause)}`
            : `billing failed: ${errorMessage(cause)}`,
        }),
        metaOption,
      )
      .catch((error: unknown) => log.error({ err: error }, 'could not mark the campaign FAILED'));
  }

  /** Streams the file into upload chunks, hashing it; refuses an empty or too large one. */
  private async storeFile(
    tx: SqlClient,
    uploadId: string,
    file: AsyncIterable<Buffer | string>,
  ): Promise<{ sizeBytes: number; sha256: string; chunks: number }> {
    const hash = createHash('sha256');
    const max = this.deps.settings.bulkMaxBytes;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    let size = 0;
    let seq = 0;
    const flush = async () => {
      if (pendingBytes === 0) return;
      await insertUploadChunk(tx, uploadId, seq++, Buffer.concat(pending, pendingBytes));
      pending = [];
      pendingBytes = 0;
    };
    for await (const piece of file) {
      const buffer = typeof piece === 'string' ? Buffer.from(piece, 'utf8') : piece;
      size += buffer.length;
      if (size > max) {
        throw new SmsValidationError([
          { field: 'file', rule: 'file.too-large', message: `the file is larger than ${max} bytes` },
        ]);
      }
      hash.update(buffer);
      pending.push(buffer);
      pendingBytes += buffer.length;
      if (pendingBytes >= UPLOAD_CHUNK_BYTES) await flush();
    }
    await flush();
    if (size === 0)
      throw new SmsValidationError([{ field: 'file', rule: 'file.empty', message: 'the CSV file is empty' }]);
    const stored = { sizeBytes: size, sha256: hash.digest('hex'), chunks: seq };
    await sealUpload(tx, uploadId, stored);
    return stored;
  }
}

function smsDefinition(definition: CampaignDefinition, source: 'inline' | 'csv'): SmsDefinition {
  return {
    messageType: definition.messageType,
    lang: definition.lang,
    operatorCampaignId: definition.campaignId ?? null,
    templateType: definition.templateType,
    template: definition.template,
    source,
    sendWindow: definition.sendWindow ?? null,
    autoPause: definition.autoPause ?? null,
  };
}

/** A scheduled SMS campaign's dispatch deadline: its start + HERALD_SMS_DISPATCH_DEADLINE_MINUTES. */
export function dispatchDeadlineFor(
  startAt: string | null,
  settings: Pick<SmsSettings, 'dispatchDeadlineMs'>,
) {
  return startAt === null ? null : new Date(Date.parse(startAt) + settings.dispatchDeadlineMs).toISOString();
}
