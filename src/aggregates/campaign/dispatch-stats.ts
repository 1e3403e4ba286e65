/**
 * The first asynchronous projection, `dispatch_stats`: campaign dispatch per UTC hour, organization and
 * destination, from campaign events and publish receipts. It must always equal DIRECT_DISPATCH_STATS, the
 * same numbers counted straight from the log, which holds because the projector applies each event and
 * receipt exactly once. Organization and channel are read from the campaign row, which CampaignCreated
 * sets and nothing changes, so a rebuild gets the same keys. ADR 0008.
 */
import { type CampaignDispatchKey, campaignDispatchKeys } from '../../adapters/postgres/campaign-queries.js';
import {
  addDispatchStatsRows,
  type DispatchCounter,
  type DispatchStatsRow,
  type DispatchStatsTable,
} from '../../adapters/postgres/dispatch-stats-queries.js';
import type { PublishReceipt } from '../../adapters/postgres/receipt-queries.js';
import { CAMPAIGN_STREAM_TYPE, campaignDestination } from '../../domain/campaign.js';
import type { SqlClient } from '../../ports/database.js';
import type { StoredEvent } from '../../ports/events.js';
import type { Projection, ProjectionTarget } from '../../projections/projection.js';
import { LINE_DELIVERY_STREAM_TYPE as DELIVERY_STREAM_TYPE } from './topology.js';

export const DISPATCH_STATS = 'dispatch_stats';

/** One countable fact: which counter, when, for which campaign (and, for receipts, where it went). */
export interface DispatchFact {
  counter: DispatchCounter;
  at: Date;
  campaignId: string | null;
  destination: string | null;
}

const EVENT_COUNTERS: Readonly<Record<string, DispatchCounter>> = {
  CampaignClaimed: 'claimed',
  CampaignCompleted: 'delivered',
  CampaignFailed: 'failed',
};

export function factFromEvent(event: StoredEvent): DispatchFact | null {
  if (event.streamType === CAMPAIGN_STREAM_TYPE) {
    const counter = EVENT_COUNTERS[event.type];
    return counter ? { counter, at: event.recordedAt, campaignId: event.streamId, destination: null } : null;
  }
  if (event.streamType === DELIVERY_STREAM_TYPE && event.type === 'LineDeliveryDiscarded') {
    const campaignId = (event.data as { campaignId?: unknown } | null)?.campaignId;
    return {
      counter: 'discarded',
      at: event.recordedAt,
      campaignId: typeof campaignId === 'string' ? campaignId : null,
      destination: null,
    };
  }
  return null;
}

/** Receipts of messages caused by campaign events; others (ticks) are not campaign dispatch. */
export function factFromReceipt(receipt: PublishReceipt): DispatchFact | null {
  if (receipt.streamType !== CAMPAIGN_STREAM_TYPE) return null;
  return {
    counter: receipt.outcome === 'sent' ? 'published' : 'dead',
    at: receipt.recordedAt,
    campaignId: receipt.streamId,
    destination: receipt.destination,
  };
}

const HOUR_MS = 3_600_000;

/** The campaign's dispatch destination: its LINE queue; '' for channels without a single destination. */
export function dispatchDestination(campaignId: string, key: CampaignDispatchKey | undefined): string {
  if (key?.channel !== 'line') return '';
  return campaignDestination({ campaignId, channel: key.channel, castType: key.castType });
}

/** Pure: folds facts into per-(hour, organization, destination) increments. */
export function tallyDispatchFacts(
  facts: readonly DispatchFact[],
  keys: ReadonlyMap<string, CampaignDispatchKey>,
): DispatchStatsRow[] {
  const rows = new Map<string, DispatchStatsRow>();
  for (const fact of facts) {
    const key = fact.campaignId === null ? undefined : keys.get(fact.campaignId.toLowerCase());
    const hour = new Date(Math.floor(fact.at.getTime() / HOUR_MS) * HOUR_MS);
    const organizationId = key?.organizationId ?? '';
    const destination = fact.destination ?? dispatchDestination(fact.campaignId ?? '', key);
    const id = `${hour.getTime()}\u0000${organizationId}\u0000${destination}`;
    let row = rows.get(id);
    if (!row) {
      row = {
        hour,
        organizationId,
        destination,
        claimed: 0,
        published: 0,
        delivered: 0,
        discarded: 0,
        failed: 0,
        dead: 0,
      };
      rows.set(id, row);
    }
    row[fact.counter]++;
  }
  return [...rows.values()];
}

const tableFor = (target: ProjectionTarget): DispatchStatsTable =>
  target.shadow ? 'dispatch_stats_rebuild' : 'dispatch_stats';

async function applyFacts(tx: SqlClient, facts: DispatchFact[], target: ProjectionTarget): Promise<void> {
  if (facts.length === 0) return;
  const keys = await campaignDispatchKeys(
    tx,
    facts.flatMap((f) => (f.campaignId === null ? [] : [f.campaignId.toLowerCase()])),
  );
  await addDispatchStatsRows(tx, tableFor(target), tallyDispatchFacts(facts, keys));
}

export const dispatchStatsProjection: Projection = {
  name: DISPATCH_STATS,
  tables: ['dispatch_stats'],
  sources: ['events', 'receipts'],
  applyEvents: (tx, events, target) =>
    applyFacts(
      tx,
      events.flatMap((e) => factFromEvent(e) ?? []),
      target,
    ),
  applyReceipts: (tx, receipts, target) =>
    applyFacts(
      tx,
      receipts.flatMap((r) => factFromReceipt(r) ?? []),
      target,
    ),
};
