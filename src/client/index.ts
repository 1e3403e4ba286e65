/**
 * `herald/client`: a typed client of Herald's HTTP API for Node 20+ (and any runtime with fetch and
 * web streams). Generated from the server's own OpenAPI document, so a route the server changes breaks
 * the caller's `tsc`, not its production call (ADR 0034). docs/guides/client.md shows its use.
 */
export {
  type CallMethod,
  createHeraldClient,
  type HeraldClient,
  type HeraldClientOptions,
  type Page,
  type PagedPath,
  type PageItem,
  type PathsWith,
  type paths,
  type ResponseData,
  type Schemas,
} from './client.js';
export {
  type FieldError,
  HeraldConflictError,
  HeraldForbiddenError,
  HeraldNotFoundError,
  HeraldProblemError,
  HeraldRateLimitError,
  HeraldUnauthorizedError,
  HeraldUnavailableError,
  HeraldValidationError,
  type Problem,
  type ProblemKind,
} from './errors.js';
export { IDEMPOTENT_OPERATIONS, PAGED_PATHS, STREAM_TOPICS } from './generated/operations.js';
export { type Credential, defaultSleep, type RetryOptions, retryAfterMs } from './retry.js';
export type { StreamEvent, StreamOptions, StreamTopic } from './stream.js';
