/**
 * Queries of the default LINE delivery port: one row per delivery actually performed, so a
 * duplicate delivery (the thing seed 000 exists to prevent) is countable.
 */
import type { SqlClient } from '../../ports/database.js';

export const RECORD_LINE_DELIVERY = `
  insert into line_delivery (campaign_id, epoch, cast_type, audience_id, line_oa_id, message_id)
  values ($1, $2, $3, $4, $5, $6)`;

export const RECORD_LINE_DELIVERIES = `
  insert into line_delivery (campaign_id, epoch, cast_type, audience_id, line_oa_id, message_id)
  select * from unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[])`;

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

export async function recordLineDeliveries(
  sql: SqlClient,
  deliveries: readonly LineDeliveryRecord[],
): Promise<void> {
  if (deliveries.length === 0) return;
  await sql.query(RECORD_LINE_DELIVERIES, [
    deliveries.map((d) => d.campaignId),
    deliveries.map((d) => d.epoch),
    deliveries.map((d) => d.castType),
    deliveries.map((d) => d.audienceId),
    deliveries.map((d) => d.lineOaId),
    deliveries.map((d) => d.messageId),
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
