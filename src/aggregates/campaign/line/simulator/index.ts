/**
 * The LINE test server's public surface: `startLineSimulator` (server.ts), the behaviours and channel
 * settings it takes (channel-state.ts), the OpenAPI contract it enforces (contract.ts) and the
 * `herald line-simulator` command (role.ts).
 */
export {
  LINE_ENDPOINTS,
  type LineBehaviour,
  type LineChannelOptions,
  type LineEndpoint,
  type LineRequestRecord,
  type LineViolation,
  MONTHLY_LIMIT_MESSAGE,
  RATE_LIMIT_MESSAGE,
  RETRY_KEY_WINDOW_MS,
  SENDING_ENDPOINTS,
} from './channel-state.js';
export { type LineErrorDetail, LineOpenApiContract } from './contract.js';
export { LINE_SIMULATOR_DEFAULT_PORT, lineSimulatorRole } from './role.js';
export {
  type BeforeRespondHook,
  type LineAcceptedCall,
  type LineChannelStats,
  type LineChannelSummary,
  type LineSimulator,
  type LineSimulatorOptions,
  type LineSimulatorStats,
  startLineSimulator,
} from './server.js';
