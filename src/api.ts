/**
 * `herald/api` (dist/api.js): Herald's HTTP API as a library — the server, its role, API keys, and
 * what a slice's routes are built with (route deps, command and history route factories, the
 * Idempotency-Key module, views). ADR 0012, ADR 0020.
 */
export { type ApiKeyRole, createApiKey, type Principal } from './api/auth.js';
export { type ApiResponse, RequestCommands, type Services } from './api/commands.js';
export { owned, principalOf, REPLAY_HEADER, requestKeyOf, sendCommand } from './api/http.js';
export {
  canonicalJson,
  fingerprint,
  IdempotencyKeys,
  IN_PROGRESS_RETRY_AFTER_SECONDS,
  type Replayable,
  type RequestKey,
  withFingerprintOf,
} from './api/idempotency.js';
export type { ApiModule, ApiRegistry, RouteDeps, ServiceContext } from './api/module.js';
export {
  commandOn,
  commandProblems,
  commandRoutes,
  historyRoute,
  IDEMPOTENCY_HEADER_DOC,
  idempotencyHeaders,
  readProblems,
} from './api/routes/common.js';
export { cursor, limit, pageOf, uuidParams } from './api/schemas.js';
export { type ApiServerDeps, buildApiServer, type RunningApiServer, startApiServer } from './api/server.js';
export { instant, json, operationsField, page, plainJson, view } from './api/views.js';
export { apiRole, startApi } from './roles/api-role.js';
