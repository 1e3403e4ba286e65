/**
 * The default SMS routing port's queries (ADR 0014): number prefixes → operator, and per operator the
 * active route (sender, channel, MNO user) and billing rate for an organization and message type; an
 * organization's own route or rate wins over the default one (organization null). Read once per
 * campaign or CSV build into a pure RoutingTable.
 */
import type { SmsRoute } from '../../domain/sms/routing.js';
import type { SqlClient } from '../../ports/database.js';

export const SELECT_OPERATOR_PREFIXES = 'select prefix, operator from sms_operator_prefix';

export const SELECT_ROUTES = `
  select distinct on (r.operator) r.operator, r.sender, r.channel, r.mno_user as "mnoUser", rt.rate::text as rate
    from sms_route r
    join lateral (
      select x.rate from sms_rate x
       where x.operator = r.operator and x.message_type = r.message_type
         and (x.organization_id = $1 or x.organization_id is null)
       order by x.organization_id nulls last
       limit 1) rt on true
   where r.active and r.message_type = $2 and (r.organization_id = $1 or r.organization_id is null)
   order by r.operator, r.organization_id nulls last, r.priority desc, r.id`;

export async function loadOperatorPrefixes(sql: SqlClient): Promise<{ prefix: string; operator: string }[]> {
  const { rows } = await sql.query<{ prefix: string; operator: string }>(SELECT_OPERATOR_PREFIXES);
  return rows;
}

export async function loadRoutes(
  sql: SqlClient,
  organizationId: string,
  messageType: string,
): Promise<SmsRoute[]> {
  const { rows } = await sql.query<SmsRoute>(SELECT_ROUTES, [organizationId, messageType]);
  return rows;
}

export const UPSERT_ROUTE = `
  insert into sms_route (organization_id, operator, message_type, sender, channel, mno_user, active, priority)
  values ($1, $2, $3, $4, $5, $6, true, $7)`;
export const UPSERT_RATE = `
  insert into sms_rate (organization_id, operator, message_type, rate) values ($1, $2, $3, $4)
  on conflict (organization_id, operator, message_type) do update set rate = excluded.rate`;
export const UPSERT_PREFIX = `
  insert into sms_operator_prefix (prefix, operator) values ($1, $2)
  on conflict (prefix) do update set operator = excluded.operator`;

/** Adds a route (and its rate) for an organization (null: every organization); tests and operators. */
export async function addRoute(
  sql: SqlClient,
  route: SmsRoute & { organizationId: string | null; messageType: string; priority?: number },
): Promise<void> {
  await sql.query(UPSERT_ROUTE, [
    route.organizationId,
    route.operator,
    route.messageType,
    route.sender,
    route.channel,
    route.mnoUser,
    route.priority ?? 0,
  ]);
  await sql.query(UPSERT_RATE, [route.organizationId, route.operator, route.messageType, route.rate]);
}

export async function addOperatorPrefix(sql: SqlClient, prefix: string, operator: string): Promise<void> {
  await sql.query(UPSERT_PREFIX, [prefix, operator]);
}
