/**
 * Herald's default aggregate registry: every aggregate the roles, replay, verify, the sandbox and
 * export know about. Adding an aggregate adds one line here (docs/adding-an-aggregate.md).
 */
import { AggregateRegistry } from '../eventstore/registry.js';
import { campaignRegistration } from './campaign/index.js';
import { cronRegistrations } from './cron/index.js';
import { scheduledActionRegistrations } from './scheduled-action/index.js';

export const heraldRegistry = new AggregateRegistry([
  campaignRegistration,
  ...scheduledActionRegistrations,
  ...cronRegistrations,
]);
