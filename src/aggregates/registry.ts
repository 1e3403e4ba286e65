/**
 * Herald's registry: every slice the configuration, the roles, the API, the CLI, replay, verify, the
 * sandbox, export and the demo know about. Adding a slice adds one line here
 * (docs/adding-an-aggregate.md).
 */
import { AggregateRegistry } from '../registry/registry.js';
import { campaignRegistration } from './campaign/index.js';
import { cronRegistration } from './cron/index.js';
import { scheduledActionRegistration } from './scheduled-action/index.js';

export const heraldRegistry = new AggregateRegistry([
  campaignRegistration,
  scheduledActionRegistration,
  cronRegistration,
]);
