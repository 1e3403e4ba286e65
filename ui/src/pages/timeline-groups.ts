/**
 * How the campaign page lays out a timeline (pure, unit-tested): events grouped by the command that
 * caused them (same correlation id, consecutive), newest command first; then every command made only of
 * one recipient event type (a build batch, a dispatch batch, a delivery roll-up, a refund) folded into
 * one expandable bundle per type, where its newest one was — a campaign with a handful of recipients
 * otherwise shows a screenful per report (issue 23, item 8).
 */

/** Events a campaign records per batch of recipients: many of each, folded into one bundle per type. */
export const RECIPIENT_EVENTS: ReadonlySet<string> = new Set([
  'CampaignRecipientsAdded',
  'CampaignRecipientsDispatched',
  'CampaignDeliveryReported',
  'CampaignRetriesReleased',
  'CampaignRecipientsRefunded',
]);

/** What the layout reads of an event (the timeline API's event). */
export interface TimelineEventLike {
  position: number;
  type: string;
  correlationId: string | null;
  actor: string | null;
}

export interface TimelineGroup<E extends TimelineEventLike> {
  key: string;
  correlationId: string | null;
  /** The actor of the command's first event (who issued it). */
  actor: string | null;
  /** Newest first. */
  events: E[];
}

export type TimelineItem<E extends TimelineEventLike> =
  | { kind: 'group'; group: TimelineGroup<E> }
  | { kind: 'bundle'; type: string; groups: TimelineGroup<E>[] };

/** `events` oldest first (as the API lists them) → items newest first. */
export function timelineItems<E extends TimelineEventLike>(events: readonly E[]): TimelineItem<E>[] {
  const groups: TimelineGroup<E>[] = [];
  for (const event of [...events].reverse()) {
    const last = groups.at(-1);
    if (last && event.correlationId && last.correlationId === event.correlationId) {
      last.events.push(event);
      // Walking newest first: the group's earliest event is the command's own; its actor issued it.
      last.actor = event.actor;
    } else
      groups.push({
        key: `${event.position}`,
        correlationId: event.correlationId,
        actor: event.actor,
        events: [event],
      });
  }
  const items: TimelineItem<E>[] = [];
  const bundles = new Map<string, { kind: 'bundle'; type: string; groups: TimelineGroup<E>[] }>();
  for (const group of groups) {
    const type = group.events[0]!.type;
    if (RECIPIENT_EVENTS.has(type) && group.events.every((e) => e.type === type)) {
      const bundle = bundles.get(type);
      if (bundle) {
        bundle.groups.push(group);
        continue;
      }
      const created = { kind: 'bundle' as const, type, groups: [group] };
      bundles.set(type, created);
      items.push(created);
    } else items.push({ kind: 'group', group });
  }
  return items;
}
