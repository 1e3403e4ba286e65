/**
 * The campaign page's timeline layout (ui/src/pages/timeline-groups.ts): events grouped by command,
 * newest first; commands made only of one recipient event type folded into one bundle per type at its
 * newest place, in order; mixed commands and other events left as they are.
 */
import { describe, expect, it } from 'vitest';
import { timelineItems } from '../../ui/src/pages/timeline-groups.js';

let position = 0;
const ev = (type: string, correlationId: string, actor = 'sms-rollup') => ({
  position: ++position,
  type,
  correlationId,
  actor,
});

describe('timelineItems', () => {
  it('six reports and six refunds in commands of their own: one bundle per type, where its newest one was', () => {
    const created = [
      ev('CampaignCreated', 'c1', 'api-key:k'),
      ev('CampaignRecipientsAdded', 'c1', 'api-key:k'),
    ];
    const dispatched = ev('CampaignRecipientsDispatched', 'd1', 'scanner');
    const reports = Array.from({ length: 6 }, (_, i) => [
      ev('CampaignDeliveryReported', `r${i}`),
      ev('CampaignRecipientsRefunded', `f${i}`, 'sms-refunds'),
    ]).flat();
    const failed = [ev('CampaignDeliveryReported', 'r-last'), ev('CampaignFailed', 'r-last')];
    const items = timelineItems([...created, dispatched, ...reports, ...failed]);

    expect(
      items.map((i) =>
        i.kind === 'group' ? i.group.events.map((e) => e.type) : `${i.type} × ${i.groups.length}`,
      ),
    ).toEqual([
      // The last roll-up also failed the campaign: a command of its own, shown as it is.
      ['CampaignFailed', 'CampaignDeliveryReported'],
      'CampaignRecipientsRefunded × 6',
      'CampaignDeliveryReported × 6',
      // A single dispatch: a bundle of one (the page shows it as the command it is).
      'CampaignRecipientsDispatched × 1',
      ['CampaignRecipientsAdded', 'CampaignCreated'],
    ]);
    const refunds = items[1]!;
    expect(refunds.kind === 'bundle' && refunds.groups.map((g) => g.correlationId)).toEqual([
      'f5',
      'f4',
      'f3',
      'f2',
      'f1',
      'f0',
    ]);
    // The creating command keeps its issuer as actor.
    const first = items.at(-1)!;
    expect(first.kind === 'group' && first.group.actor).toBe('api-key:k');
  });

  it('events without a correlation id are commands of their own; other types are never folded', () => {
    const items = timelineItems([
      { position: 1, type: 'CampaignPaused', correlationId: null, actor: 'a' },
      { position: 2, type: 'CampaignPaused', correlationId: null, actor: 'a' },
      { position: 3, type: 'CampaignDeliveryReported', correlationId: null, actor: 'b' },
    ]);
    expect(items.map((i) => i.kind)).toEqual(['bundle', 'group', 'group']);
  });
});
