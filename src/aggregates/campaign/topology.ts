/**
 * The campaign aggregate's wire names, each defined once: the queues its messages go to (declared
 * durable by the relay before its first claim; seed 000's names, spelled exactly as the existing
 * consumers expect them), the tick queue that wakes the scanners, the side streams it appends to,
 * and its consumer names. The LINE queue names are the domain's (the destination follows from the
 * campaign's cast type: src/domain/campaign.ts).
 */
import { LINE_BROADCAST_QUEUE, LINE_MULTICAST_QUEUE } from '../../domain/campaign.js';

/** The per-minute tick (seed 000's cron-scheduler profile); scanners consume it as a wake-up. */
export const PROCESS_CAMPAIGN_QUEUE = 'process_campaign';
export { LINE_BROADCAST_QUEUE, LINE_MULTICAST_QUEUE };
export const LINE_QUEUES = [LINE_BROADCAST_QUEUE, LINE_MULTICAST_QUEUE] as const;
export type LineQueue = (typeof LINE_QUEUES)[number];

/** Every queue the campaign aggregate publishes to. */
export const HERALD_QUEUES = [PROCESS_CAMPAIGN_QUEUE, ...LINE_QUEUES] as const;

/** Side stream: one `LineDeliveryDiscarded` event per message the destination re-check refused, keyed by message id. */
export const LINE_DELIVERY_STREAM_TYPE = 'line_delivery';
/** Side stream: one `CampaignTickEmitted` event per tick period, keyed by the period (`yyyy-MM-ddTHH:mm`). */
export const TICK_STREAM_TYPE = 'campaign_tick';

/** The LINE delivery worker's inbox name (seed 000's delivery consumers). */
export const LINE_DELIVERY_CONSUMER = 'line-delivery';
/** The scanner's inbox name for ticks. */
export const SCANNER_TICK_CONSUMER = 'scanner-tick';
