import { describe, expect, it } from 'vitest';
import type { PublishReceipt } from '../../src/adapters/postgres/receipt-queries.js';
import {
  factFromEvent,
  factFromReceipt,
  tallyDispatchFacts,
} from '../../src/aggregates/campaign/dispatch-stats.js';
import type { StoredEvent } from '../../src/ports/events.js';
import { parseInstant, parseStreamRef } from '../../src/projections/replay.js';

const A = '6f1c2a40-0000-4000-8000-000000000001';
const B = '6f1c2a40-0000-4000-8000-000000000002';

const event = (
  streamType: string,
  type: string,
  at: string,
  streamId = A,
  data: unknown = {},
): StoredEvent => ({
  position: 1,
  tx: '1',
  streamType,
  streamId,
  version: 1,
  type,
  data,
  schemaVersion: 1,
  meta: {},
  recordedAt: new Date(at),
});

const receipt = (
  outcome: 'sent' | 'dead',
  at: string,
  streamType: string | null = 'campaign',
): PublishReceipt => ({
  id: 1,
  tx: '1',
  messageId: 'm',
  outboxId: 1,
  eventPosition: 1,
  sink: 'amqp',
  destination: 'line_broadcast_rich_message',
  routingKey: null,
  partitionKey: null,
  outcome,
  brokerRef: null,
  attempts: 1,
  recoveryCount: 0,
  error: null,
  confirmedAt: outcome === 'sent' ? new Date(at) : null,
  recordedAt: new Date(at),
  streamType,
  streamId: A,
});

describe('dispatch_stats facts and tally (pure)', () => {
  it('maps events and receipts to counters; ignores everything else', () => {
    expect(factFromEvent(event('campaign', 'CampaignClaimed', '2026-01-01T10:00:00Z'))?.counter).toBe(
      'claimed',
    );
    expect(factFromEvent(event('campaign', 'CampaignCompleted', '2026-01-01T10:00:00Z'))?.counter).toBe(
      'delivered',
    );
    expect(factFromEvent(event('campaign', 'CampaignFailed', '2026-01-01T10:00:00Z'))?.counter).toBe(
      'failed',
    );
    expect(factFromEvent(event('campaign', 'CampaignHeartbeat', '2026-01-01T10:00:00Z'))).toBeNull();
    expect(factFromEvent(event('campaign_tick', 'CampaignTickEmitted', '2026-01-01T10:00:00Z'))).toBeNull();
    expect(
      factFromEvent(
        event('line_delivery', 'LineDeliveryDiscarded', '2026-01-01T10:00:00Z', 'msg', { campaignId: B }),
      ),
    ).toMatchObject({ counter: 'discarded', campaignId: B });
    expect(factFromReceipt(receipt('sent', '2026-01-01T10:00:00Z'))?.counter).toBe('published');
    expect(factFromReceipt(receipt('dead', '2026-01-01T10:00:00Z'))?.counter).toBe('dead');
    expect(factFromReceipt(receipt('sent', '2026-01-01T10:00:00Z', 'campaign_tick'))).toBeNull();
  });

  it('buckets by UTC hour, organization and destination', () => {
    const keys = new Map([
      [A, { organizationId: 'org-a', channel: 'line' as const, castType: 'multicast' as const }],
      [B, { organizationId: 'org-b', channel: 'sms' as const, castType: null }],
    ]);
    const facts = [
      factFromEvent(event('campaign', 'CampaignClaimed', '2026-01-01T10:59:59.999Z'))!,
      factFromEvent(event('campaign', 'CampaignCompleted', '2026-01-01T11:00:00.000+00:00'))!,
      factFromEvent(event('campaign', 'CampaignClaimed', '2026-01-01T10:05:00+05:30', B))!,
      factFromEvent(event('campaign', 'CampaignClaimed', '2026-01-01T10:10:00Z', 'not-a-known-campaign'))!,
      factFromReceipt(receipt('sent', '2026-01-01T10:30:00Z'))!,
    ];
    const rows = tallyDispatchFacts(facts, keys).map((r) => ({ ...r, hour: r.hour.toISOString() }));
    const zero = { claimed: 0, published: 0, delivered: 0, discarded: 0, failed: 0, dead: 0 };
    expect(rows).toEqual([
      {
        ...zero,
        hour: '2026-01-01T10:00:00.000Z',
        organizationId: 'org-a',
        destination: 'line_multicast_rich_message',
        claimed: 1,
      },
      {
        ...zero,
        hour: '2026-01-01T11:00:00.000Z',
        organizationId: 'org-a',
        destination: 'line_multicast_rich_message',
        delivered: 1,
      },
      { ...zero, hour: '2026-01-01T04:00:00.000Z', organizationId: 'org-b', destination: '', claimed: 1 },
      { ...zero, hour: '2026-01-01T10:00:00.000Z', organizationId: '', destination: '', claimed: 1 },
      // Receipts count under the destination they were published to.
      {
        ...zero,
        hour: '2026-01-01T10:00:00.000Z',
        organizationId: 'org-a',
        destination: 'line_broadcast_rich_message',
        published: 1,
      },
    ]);
  });
});

describe('replay arguments', () => {
  it('parses <streamType>/<streamId>; the id may contain slashes', () => {
    expect(parseStreamRef(`campaign/${A}`)).toEqual({ streamType: 'campaign', streamId: A });
    expect(parseStreamRef('campaign_tick/2026-01-01T10:00')).toEqual({
      streamType: 'campaign_tick',
      streamId: '2026-01-01T10:00',
    });
    expect(parseStreamRef('x/a/b')).toEqual({ streamType: 'x', streamId: 'a/b' });
    for (const bad of ['campaign', '/id', 'campaign/'])
      expect(() => parseStreamRef(bad)).toThrow(/streamType/);
  });

  it('accepts only ISO 8601 times with a zone', () => {
    expect(parseInstant('2026-01-01T10:00:00Z', '--at')).toBe('2026-01-01T10:00:00Z');
    expect(parseInstant('2026-01-01T10:00:00.123456+07:00', '--at')).toBe('2026-01-01T10:00:00.123456+07:00');
    for (const bad of ['2026-01-01T10:00:00', 'yesterday', '2026-13-01T10:00:00Z']) {
      expect(() => parseInstant(bad, '--at')).toThrow(/--at must be an ISO 8601 time/);
    }
  });
});
