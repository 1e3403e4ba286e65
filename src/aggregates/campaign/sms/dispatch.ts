/**
 * SMS dispatch (seed 003's CampaignDispatcher), a claim sweep of `herald scanner`: it locks one DISPATCHING
 * SMS campaign with FOR UPDATE SKIP LOCKED (a row claim per campaign instead of the seed's ShedLock lease,
 * so any number of scanners: invariant 7) and in ONE transaction (invariant 1) defers promotional traffic
 * outside the BTRC window by the database clock (invariant 6), claims a batch of ready recipients (one
 * outside its send window is deferred to its next opening, never dropped), groups them into submission
 * chunks, each one outbox message carrying the claim epoch (invariants 2 and 5), and records the batch
 * with `RecordDispatch`. ADR 0014.
 */
import { randomUUID } from 'node:crypto';
import {
  lockDispatchableCampaigns,
  lockReadyRecipients,
  markDeferred,
  markSubmitted,
  nextDispatchDueInMs,
  type ReadyRecipient,
} from '../../../adapters/postgres/sms-queries.js';
import {
  CAMPAIGN_STREAM_TYPE,
  type CampaignCommand,
  type CampaignEvent,
  type CampaignState,
  type ExistingCampaign,
} from '../../../domain/campaign.js';
import { isInsideWindow, nextAllowedAt, wallClock } from '../../../domain/sms/windows.js';
import { databaseNow } from '../../../eventstore/command-handler.js';
import { HEADER } from '../../../messaging/headers.js';
import { type OutboxMessageSpec, toOutboxRows, writeOutbox } from '../../../outbox/outbox-writer.js';
import type { SqlClient } from '../../../ports/database.js';
import { channels } from '../../../ports/wakeups.js';
import { type ClaimSweepDefinition, defineClaimSweeper, type SweeperDeps } from '../../../scanner/sweeper.js';
import { campaignAggregate } from '../descriptor.js';
import type { SmsSettings } from './settings.js';

/** Seed 003 (MNPSP limits): recipients per submission chunk. */
export const PROMOTIONAL_CHUNK_MAX = 999;
export const TRANSACTIONAL_CHUNK_MAX = 1;
/** Seed 003: SMS events use priorities 1–3 (reporting uses 5, so it never blocks dispatch). */
export const SMS_PRIORITY = { TRANSACTIONAL: 1, PROMOTIONAL: 2, BULK_PROMOTIONAL: 3 } as const;
export const SMS_REPORTING_PRIORITY = 5;
/** A campaign dispatched within this long is left to the scanner dispatching it (no busy waiting by others). */
export const ACTIVE_DISPATCH_GRACE_MS = 1_000;
/** Deferral of a recipient whose policy would never open (cannot happen for validated policies). */
const FALLBACK_DEFERRAL_MS = 24 * 3_600_000;

/** One submission chunk: what the SMS gateway receives (the outbox payload). */
export interface SmsSubmission {
  submissionId: string;
  campaignId: string;
  organizationId: string;
  /** The claim epoch (invariant 5). */
  epoch: number;
  messageType: 'PROMOTIONAL' | 'TRANSACTIONAL';
  /** Seed 003's operator-approved campaignId. */
  operatorCampaignId: string | null;
  priority: number;
  lang: string;
  encoding: 'GSM7' | 'UCS2';
  segments: number;
  content: string;
  sender: string;
  route: { operator: string; channel: string; mnoUser: string };
  recipients: { recipientId: string; msisdn: string }[];
}

type Plan =
  | { kind: 'defer'; startAt: string; reason: string }
  | {
      kind: 'dispatch';
      submitted: { id: string; submissionId: string }[];
      deferred: { id: string; nextAllowedAt: Date }[];
      counts: {
        submittedFromPending: number;
        submittedFromDeferred: number;
        deferredFromPending: number;
        deferredAgain: number;
      };
      chunks: SmsSubmission[];
    };

export interface SmsDispatchDeps extends Omit<SweeperDeps, 'batchSize'> {
  settings: Pick<
    SmsSettings,
    'zone' | 'promotionalWindow' | 'dispatchBatchSize' | 'sink' | 'submitTopic' | 'dispatchDeadlineMs'
  >;
}

/** Groups ready recipients into submission chunks (pure). */
export function chunkRecipients(
  campaign: ExistingCampaign,
  recipients: readonly ReadyRecipient[],
  newId: () => string = randomUUID,
): SmsSubmission[] {
  const sms = campaign.sms!;
  const max = sms.messageType === 'PROMOTIONAL' ? PROMOTIONAL_CHUNK_MAX : TRANSACTIONAL_CHUNK_MAX;
  const priority =
    sms.messageType === 'TRANSACTIONAL'
      ? SMS_PRIORITY.TRANSACTIONAL
      : sms.source === 'csv'
        ? SMS_PRIORITY.BULK_PROMOTIONAL
        : SMS_PRIORITY.PROMOTIONAL;
  const groups = new Map<string, SmsSubmission[]>();
  const chunks: SmsSubmission[] = [];
  for (const r of recipients) {
    const key = [r.content, r.lang, r.sender, r.operator, r.routeChannel, r.mnoUser].join('\u0000');
    let open = groups.get(key);
    if (!open) {
      open = [];
      groups.set(key, open);
    }
    let chunk = open.at(-1);
    if (!chunk || chunk.recipients.length >= max) {
      chunk = {
        submissionId: newId(),
        campaignId: campaign.campaignId,
        organizationId: campaign.organizationId,
        epoch: campaign.claimEpoch,
        messageType: sms.messageType,
        operatorCampaignId: sms.operatorCampaignId,
        priority,
        lang: r.lang,
        encoding: r.encoding,
        segments: r.segments,
        content: r.content,
        sender: r.sender,
        route: { operator: r.operator, channel: r.routeChannel, mnoUser: r.mnoUser },
        recipients: [],
      };
      open.push(chunk);
      chunks.push(chunk);
    }
    chunk.recipients.push({ recipientId: r.id, msisdn: r.msisdn });
  }
  return chunks;
}

export function smsDispatchSweeper(deps: SmsDispatchDeps) {
  const { settings } = deps;
  // The plans of the sweep in progress, by campaign id: made by lockDue, read by command and followUp in
  // the same transaction (a sweeper's sweeps run one at a time; a retried transaction plans afresh).
  let plans = new Map<string, Plan>();

  async function plan(tx: SqlClient, campaign: ExistingCampaign, now: number): Promise<Plan | null> {
    const sms = campaign.sms!;
    const promo = settings.promotionalWindow;
    if (sms.messageType === 'PROMOTIONAL' && !isInsideWindow(now, settings.zone, promo)) {
      const opening = nextAllowedAt(now, settings.zone, promo)!;
      return {
        kind: 'defer',
        startAt: new Date(opening).toISOString(),
        reason:
          `outside the promotional window ${promo.start}–${promo.end} ${settings.zone} (BTRC) at ` +
          `${wallClock(now, settings.zone)}: back to SCHEDULED until ${wallClock(opening, settings.zone)}`,
      };
    }
    const ready = await lockReadyRecipients(tx, campaign.campaignId, settings.dispatchBatchSize);
    if (ready.length === 0) return null; // their rows are locked by someone else right now
    const send: ReadyRecipient[] = [];
    const deferred: { id: string; nextAllowedAt: Date }[] = [];
    const counts = {
      submittedFromPending: 0,
      submittedFromDeferred: 0,
      deferredFromPending: 0,
      deferredAgain: 0,
    };
    for (const r of ready) {
      const allowed = sms.sendWindow
        ? (nextAllowedAt(now, r.timezone, sms.sendWindow) ?? now + FALLBACK_DEFERRAL_MS)
        : now;
      if (allowed <= now) {
        send.push(r);
        if (r.status === 'PENDING') counts.submittedFromPending++;
        else counts.submittedFromDeferred++;
      } else {
        deferred.push({ id: r.id, nextAllowedAt: new Date(allowed) });
        if (r.status === 'PENDING') counts.deferredFromPending++;
        else counts.deferredAgain++;
      }
    }
    const chunks = chunkRecipients(campaign, send);
    const submitted = chunks.flatMap((c) =>
      c.recipients.map((r) => ({ id: r.recipientId, submissionId: c.submissionId })),
    );
    return { kind: 'dispatch', submitted, deferred, counts, chunks };
  }

  const definition: ClaimSweepDefinition<CampaignState, CampaignCommand, CampaignEvent> = {
    name: 'campaign.sms-dispatch',
    aggregate: campaignAggregate,
    actor: 'scanner',
    async lockDue(tx, limit) {
      const now = (await databaseNow(tx)).getTime(); // now() is the transaction's: the same for the command
      const locked = await lockDispatchableCampaigns(tx, limit);
      const planned = new Map<string, Plan>();
      const due = [];
      for (const { state, version } of locked) {
        const p = await plan(tx, state, now);
        if (!p) continue;
        planned.set(state.campaignId, p);
        due.push({ streamId: state.campaignId, state: state as CampaignState, version });
      }
      plans = planned;
      return due;
    },
    command(stream, now) {
      const state = stream.state as ExistingCampaign;
      const p = plans.get(stream.streamId);
      if (!p) return null;
      if (p.kind === 'defer') {
        return {
          type: 'DeferCampaign',
          campaignId: stream.streamId,
          now,
          epoch: state.claimEpoch,
          startAt: p.startAt,
          // The deadline moves with the new opening (HERALD_SMS_DISPATCH_DEADLINE_MINUTES after it).
          dispatchDeadline: new Date(Date.parse(p.startAt) + settings.dispatchDeadlineMs).toISOString(),
          reason: p.reason,
        };
      }
      return {
        type: 'RecordDispatch',
        campaignId: stream.streamId,
        now,
        epoch: state.claimEpoch,
        ...p.counts,
        submissions: p.chunks.length,
      };
    },
    nextDueInMs: (sql) => nextDispatchDueInMs(sql, ACTIVE_DISPATCH_GRACE_MS),
    async followUp(tx, results) {
      let wrote = 0;
      for (const result of results) {
        const p = plans.get(result.streamId);
        if (p?.kind !== 'dispatch') continue;
        const marked = await markSubmitted(tx, p.submitted);
        const deferred = await markDeferred(tx, p.deferred);
        if (marked !== p.submitted.length || deferred !== p.deferred.length) {
          throw new Error(`campaign ${result.streamId}: recipients changed under their row locks`);
        }
        const event = result.appended.at(-1)!;
        const state = result.state as ExistingCampaign;
        const specs: OutboxMessageSpec[] = p.chunks.map((chunk) => ({
          messageId: chunk.submissionId,
          sink: settings.sink,
          destination: settings.submitTopic,
          partitionKey: chunk.submissionId,
          payload: chunk,
          priority: chunk.priority,
          headers: { [HEADER.epoch]: chunk.epoch, [HEADER.organizationId]: chunk.organizationId },
        }));
        const rows = toOutboxRows(
          {
            eventPosition: event.position,
            eventType: 'CampaignRecipientsDispatched',
            streamType: CAMPAIGN_STREAM_TYPE,
            streamId: result.streamId,
            meta: { correlationId: result.streamId, actor: 'scanner' },
            organizationId: state.organizationId,
          },
          specs,
        );
        wrote += await writeOutbox(tx, rows);
      }
      return wrote > 0 ? () => deps.wakeups?.signal(channels.outbox(deps.db.schema)) : undefined;
    },
    outcome: (result) =>
      result.state.status === 'SCHEDULED'
        ? {
            counter: 'deferredByPromotionalWindow',
            message: 'promotional campaign outside its window: deferred',
            level: 'info',
          }
        : { counter: 'dispatched', message: 'sms recipients dispatched', level: 'debug' },
  };

  // One campaign per transaction: a transaction holds at most one recipient batch.
  return defineClaimSweeper(definition, { ...deps, batchSize: 1 });
}
