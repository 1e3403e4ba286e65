/**
 * Queries of the default LINE delivery port: one row per delivery actually performed, so a
 * duplicate delivery (the thing seed 000 exists to prevent) is countable.
 */
import type { SqlClient } from '../../ports/database.js';

export const RECORD_LINE_DELIVERY = `
  insert into line_delivery (campaign_id, epoch, cast_type, audience_id, line_oa_id, message_id)
  values ($1, $2, $3, $4, $5, $6)`;

export const COUNT_LINE_DELIVERIES = `
  select campaign_id::text, count(*)::int as deliveries from line_delivery
   where campaign_id = any($1::uuid[]) group by campaign_id`;

export interface LineDeliveryRecord {
  campaignId: string;
  epoch: number;
  castType: 'broadcast' | 'multicast';
  audienceId: string | null;
  lineOaId: string | null;
  messageId: string;
}

export async function recordLineDelivery(sql: SqlClient, d: LineDeliveryRecord): Promise<void> {
  await sql.query(RECORD_LINE_DELIVERY, [
    d.campaignId,
    d.epoch,
    d.castType,
    d.audienceId,
    d.lineOaId,
    d.messageId,
  ]);
}

export async function countLineDeliveries(
  sql: SqlClient,
  campaignIds: readonly string[],
): Promise<Map<string, number>> {
  const { rows } = await sql.query<{ campaign_id: string; deliveries: number }>(COUNT_LINE_DELIVERIES, [
    campaignIds,
  ]);
  return new Map(rows.map((r) => [r.campaign_id, r.deliveries]));
}
