/**
 * What every route shares: the caller (set by the authentication hook), the command runner bound to
 * the request (actor, correlation id = request id, Idempotency-Key, replay header), and the tenancy
 * look-ups — a resource of another organization is reported exactly like one that does not exist
 * (404), so a key never learns that another organization's id exists.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { HeraldError, NotFoundError, ValidationError } from '../errors.js';
import type { SqlClient } from '../ports/database.js';
import type { EventMeta } from '../ports/events.js';
import type { Permission, Principal } from './auth.js';
import type { ApiResponse, RequestCommands, Services } from './commands.js';
import { fingerprint, type RequestKey } from './idempotency.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
    /** Body, params and query as received (before validation): the Idempotency-Key fingerprint. */
    receivedInput?: unknown;
  }
  interface FastifyContextConfig {
    /** What the route needs of the caller's role; default: `read` for GET, `command` otherwise. */
    permission?: Permission;
    /** Served without an API key (health, metrics, the OpenAPI document). */
    public?: boolean;
  }
}

export const REPLAY_HEADER = 'idempotent-replayed';

export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new Error('route reached without authentication');
  return request.principal;
}

/**
 * Runs a route's commands in one transaction (with the Idempotency-Key, if given) and sends the
 * response: the route's status and body, or the stored one with `Idempotent-Replayed: true`.
 */
const KEY_FORMAT = /^[\x21-\x7e]{1,255}$/;

/**
 * The request's Idempotency-Key (1 to 255 printable ASCII characters), scoped by the caller's
 * organization, the method and the route pattern, and fingerprinted over `input` (default: the body,
 * path parameters and query as received); undefined without the header.
 */
export function requestKeyOf(
  request: FastifyRequest,
  input: unknown = request.receivedInput,
): RequestKey | undefined {
  const header = request.headers['idempotency-key'];
  if (header === undefined) return undefined;
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || !KEY_FORMAT.test(value)) {
    throw new ValidationError('Idempotency-Key must be 1 to 255 printable ASCII characters', {
      field: 'Idempotency-Key',
    });
  }
  const route = request.routeOptions.url ?? request.url;
  return {
    scope: JSON.stringify([principalOf(request).organizationId, request.method, route]),
    key: value,
    fingerprint: fingerprint(input),
  };
}

/**
 * The request's Idempotency-Key as sent (validated as `requestKeyOf` validates it), or null: a create
 * records it on the resource it makes, so the resource shows which request made it.
 */
export function idempotencyKeyOf(request: FastifyRequest): string | null {
  return requestKeyOf(request, null)?.key ?? null;
}

export async function sendCommand<Svc>(
  commands: RequestCommands<Svc>,
  request: FastifyRequest,
  reply: FastifyReply,
  work: (services: Services<Svc>, meta: EventMeta, tx: SqlClient) => Promise<ApiResponse>,
): Promise<FastifyReply> {
  const outcome = await commands.run(
    { principal: principalOf(request), requestId: request.id, idempotency: requestKeyOf(request) },
    work,
  );
  if (outcome.headers) void reply.headers(outcome.headers);
  if (outcome.replayed) void reply.header(REPLAY_HEADER, 'true');
  return reply.code(outcome.status).send(outcome.body);
}

const notFound = (what: string, id: string | number) => new NotFoundError(`${what} ${id} not found`);

/**
 * Loads with `load`; a resource that is missing or of another organization is a NotFoundError (each
 * slice's routes check ownership of their resources through this).
 */
export async function owned<T extends { organizationId: string }>(
  what: string,
  id: string,
  principal: Principal,
  load: () => Promise<T>,
): Promise<T> {
  let found: T;
  try {
    found = await load();
  } catch (error) {
    if (error instanceof HeraldError && error.code === 'NOT_FOUND') throw notFound(what, id);
    throw error;
  }
  if (found.organizationId !== principal.organizationId) throw notFound(what, id);
  return found;
}

export { notFound };
