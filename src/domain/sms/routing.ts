/**
 * Routing and pricing data for SMS recipients (seed 003, step 7: "resolve operator, active
 * sender/channel/MNO-user, and billing rate"), as a pure lookup table the routing port loads once per
 * campaign (or per CSV build) for one organization and message type: number prefixes → operator
 * (longest prefix wins), operator → the active route (sender, channel, MNO user) and the rate per
 * segment. Resolving a million recipients is then a few map look-ups each, no query per row.
 */
import { toUnits } from './money.js';

export const SMS_MESSAGE_TYPES = ['PROMOTIONAL', 'TRANSACTIONAL'] as const;
export type SmsMessageType = (typeof SMS_MESSAGE_TYPES)[number];

export interface SmsRoute {
  readonly operator: string;
  /** Sender CLI / mask shown to the recipient. */
  readonly sender: string;
  /** The gateway channel (SMPP bind / HTTP connection) the operator is reached through. */
  readonly channel: string;
  /** The account on the operator's side (MNO user). */
  readonly mnoUser: string;
  /** Price of one segment, a money string ("0.3500"). */
  readonly rate: string;
}

export interface ResolvedRoute extends SmsRoute {
  readonly rateUnits: number;
}

export class RoutingTable {
  private readonly prefixes = new Map<string, string>();
  private readonly lengths: number[];
  private readonly routes = new Map<string, ResolvedRoute>();

  constructor(prefixes: readonly { prefix: string; operator: string }[], routes: readonly SmsRoute[]) {
    for (const { prefix, operator } of prefixes) this.prefixes.set(prefix, operator);
    this.lengths = [...new Set(prefixes.map((p) => p.prefix.length))].sort((a, b) => b - a);
    for (const route of routes) this.routes.set(route.operator, { ...route, rateUnits: toUnits(route.rate) });
  }

  /** The operator of an E.164 number (digits, no '+'), by its longest known prefix. */
  operatorOf(msisdn: string): string | null {
    for (const length of this.lengths) {
      const operator = this.prefixes.get(msisdn.slice(0, length));
      if (operator !== undefined) return operator;
    }
    return null;
  }

  /** The active route and rate for a number, or null (unknown operator, or no active route for it). */
  route(msisdn: string): ResolvedRoute | null {
    const operator = this.operatorOf(msisdn);
    return operator === null ? null : (this.routes.get(operator) ?? null);
  }

  get operators(): string[] {
    return [...this.routes.keys()];
  }
}
