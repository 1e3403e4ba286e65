/**
 * The queues Herald publishes to (declared durable by the relay before its first claim). Names are
 * seed 000's, spelled exactly as the existing consumers expect them.
 */
export const PROCESS_CAMPAIGN_QUEUE = 'process_campaign';
export const LINE_BROADCAST_QUEUE = 'line_broadcast_rich_message';
export const LINE_MULTICAST_QUEUE = 'line_multicast_rich_message';

export const HERALD_QUEUES = [PROCESS_CAMPAIGN_QUEUE, LINE_BROADCAST_QUEUE, LINE_MULTICAST_QUEUE] as const;
