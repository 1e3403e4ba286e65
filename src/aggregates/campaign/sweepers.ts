/**
 * The campaign sweeper (seed 000's ProcessCampaign, made durable). Each sweep claims a batch of due
 * campaigns with FOR UPDATE SKIP LOCKED (any number of scanners: invariant 7), then runs the reaper
 * (DISPATCHING campaigns whose claim is older than the stale threshold go back to SCHEDULED/QUEUED
 * with a new epoch, so a presumed-dead worker's late messages are fenced off: invariant 5; the next
 * sweep claims them).
 * Each claim appends its events, updates the state row and writes one dispatch outbox row in the
 * same transaction (invariant 1); a SCHEDULED campaign past its deadline expires instead.
 */
import {
  lockDueCampaigns,
  lockStaleClaims,
  nextCampaignDueInMs,
} from '../../adapters/postgres/campaign-queries.js';
import type { CampaignCommand, CampaignEvent, CampaignState } from '../../domain/campaign.js';
import type { LoadedStream } from '../../eventstore/aggregate.js';
import type { AggregateCommands, CommandHandler } from '../../eventstore/command-handler.js';
import type { Logger } from '../../logger.js';
import { HEADER } from '../../messaging/headers.js';
import type { Database } from '../../ports/database.js';
import { channels, type WakeupSignal } from '../../ports/wakeups.js';
import type { Sweeper, SweepResult } from '../../scanner/scanner.js';
import { campaignAggregate } from './descriptor.js';

export interface CampaignSweeperOptions {
  db: Database;
  handler: CommandHandler;
  wakeups?: WakeupSignal;
  logger: Logger;
  /** Campaigns claimed per transaction (seed 002/003 use 500). */
  batchSize?: number;
  /** Seed 000: a DISPATCHING campaign whose heartbeat is older than 15 minutes is presumed dead. */
  staleClaimMs?: number;
}

export const DEFAULT_STALE_CLAIM_MS = 15 * 60_000;

export class CampaignSweeper implements Sweeper {
  readonly name = 'campaign';
  private readonly campaigns: AggregateCommands<CampaignState, CampaignCommand, CampaignEvent>;
  readonly stats = { claimed: 0, expired: 0, reclaimed: 0 };

  constructor(private readonly options: CampaignSweeperOptions) {
    this.campaigns = options.handler.for(campaignAggregate);
  }

  private get batchSize() {
    return this.options.batchSize ?? 500;
  }

  async sweep(): Promise<SweepResult> {
    // Claims first, so a due campaign does not wait for the reaper's transaction. What the reaper puts
    // back is due at once: a reclaim asks for another sweep (`more`), whose claim takes it.
    const claimed = await this.claimDue();
    const reaped = await this.reap();
    return {
      processed: claimed.processed + reaped.processed,
      more: claimed.more || reaped.more || reaped.processed > 0,
    };
  }

  /** Reaper: stale live claims go back to be claimed again, with a new epoch. */
  async reap(): Promise<SweepResult> {
    const staleAfterMs = this.options.staleClaimMs ?? DEFAULT_STALE_CLAIM_MS;
    const { db, logger } = this.options;
    const outcome = await db.transaction(async (tx) => {
      const stale = await lockStaleClaims(tx, staleAfterMs, this.batchSize);
      const batch = await this.campaigns.handleBatchInTransaction(
        tx,
        stale.map(streamOf),
        (stream, now) => ({
          type: 'ReclaimCampaign',
          campaignId: stream.streamId,
          now,
          staleAfterMs,
          reason: `no heartbeat for ${Math.round(staleAfterMs / 1000)} s: claiming worker presumed dead`,
        }),
        { meta: { actor: 'reaper' } },
      );
      return { found: stale.length, batch };
    });
    for (const result of outcome.batch.results) {
      logger.warn({ aggregateId: result.streamId, epoch: epochOf(result.state) }, 'reclaimed stale campaign');
    }
    this.logRefusals(outcome.batch.refused, 'reclaim');
    this.stats.reclaimed += outcome.batch.results.length;
    return { processed: outcome.batch.results.length, more: outcome.found === this.batchSize };
  }

  /** The atomic claim: due campaigns → DISPATCHING with a new epoch and one outbox message each. */
  async claimDue(): Promise<SweepResult> {
    const { db, logger } = this.options;
    const outcome = await db.transaction(async (tx) => {
      const due = await lockDueCampaigns(tx, this.batchSize);
      const batch = await this.campaigns.handleBatchInTransaction(
        tx,
        due.map(streamOf),
        (stream, now) => {
          const s = stream.state;
          const pastDeadline =
            s.status === 'SCHEDULED' &&
            s.dispatchDeadline !== null &&
            Date.parse(s.dispatchDeadline) < now.getTime();
          return pastDeadline
            ? { type: 'ExpireCampaign', campaignId: stream.streamId, now }
            : { type: 'ClaimCampaign', campaignId: stream.streamId, now };
        },
        { meta: { actor: 'scanner' } },
      );
      return { found: due.length, batch };
    });
    let claimed = 0;
    for (const result of outcome.batch.results) {
      if (result.state.status === 'EXPIRED') {
        this.stats.expired++;
        logger.info({ aggregateId: result.streamId }, 'campaign expired: dispatch deadline passed');
      } else {
        claimed++;
        logger.info(
          {
            aggregateId: result.streamId,
            epoch: epochOf(result.state),
            messageId: result.outbox[0]?.messageId,
            correlationId: result.outbox[0]?.headers?.[HEADER.correlationId],
          },
          'campaign claimed',
        );
      }
    }
    this.stats.claimed += claimed;
    this.logRefusals(outcome.batch.refused, 'claim');
    if (outcome.batch.results.some((r) => r.outbox.length > 0)) {
      this.options.wakeups?.signal(channels.outbox(db.schema));
    }
    return { processed: outcome.batch.results.length, more: outcome.found === this.batchSize };
  }

  nextDueInMs(): Promise<number | null> {
    return nextCampaignDueInMs(this.options.db);
  }

  private logRefusals(refused: { streamId: string; error: Error }[], what: string): void {
    for (const { streamId, error } of refused) {
      this.options.logger.warn(
        { aggregateId: streamId, err: error },
        `campaign ${what} refused by the decider`,
      );
    }
  }
}

function streamOf(loaded: { state: CampaignState; version: number }): LoadedStream<CampaignState> {
  const streamId = loaded.state.status === 'NONE' ? '' : loaded.state.campaignId;
  return { streamId, state: loaded.state, version: loaded.version };
}

function epochOf(state: CampaignState): number | undefined {
  return state.status === 'NONE' ? undefined : state.claimEpoch;
}
