/**
 * The SMS routing port (seed 003, step 7): resolves each recipient's operator, active
 * sender/channel/MNO user and billing rate. `SmsRoutingPort.table` loads a pure RoutingTable for one
 * organization and message type; the default implementation reads Herald's own tables
 * (sms_operator_prefix, sms_route, sms_rate, seeded by migration 000010). A deployment with a routing
 * service of its own implements the port instead.
 */
import { loadOperatorPrefixes, loadRoutes } from '../../../adapters/postgres/sms-routing-queries.js';
import { RoutingTable, type SmsMessageType } from '../../../domain/sms/routing.js';
import type { SqlClient } from '../../../ports/database.js';

export interface SmsRoutingPort {
  table(sql: SqlClient, organizationId: string, messageType: SmsMessageType): Promise<RoutingTable>;
}

export const postgresSmsRouting: SmsRoutingPort = {
  async table(sql, organizationId, messageType) {
    const [prefixes, routes] = await Promise.all([
      loadOperatorPrefixes(sql),
      loadRoutes(sql, organizationId, messageType),
    ]);
    return new RoutingTable(prefixes, routes);
  },
};
