/**
 * Pieces every route module uses (the generic ones here and each slice's): command and history route
 * factories, and the documented error responses (RFC 9457 problem documents, `application/problem+json`).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { EventMeta } from '../../ports/events.js';
import { replayStream } from '../../projections/replay.js';
import type { Principal } from '../auth.js';
import type { RequestCommands, Services } from '../commands.js';
import { principalOf, sendCommand } from '../http.js';
import type { RouteDeps } from '../module.js';
import { PROBLEM_CONTENT_TYPE, problemSchema } from '../problem.js';
import { uuidParams } from '../schemas.js';
import { plainJson, replayView, view } from '../views.js';

const DESCRIPTIONS: Record<number, string> = {
  400: 'the request is malformed: field errors in `errors`',
  401: 'no valid API key',
  402: 'the balance does not cover the charge: nothing was charged or changed',
  403: "the key's role does not allow this",
  404: 'no such resource in your organization',
  409: 'not allowed in the current status (`currentStatus`), a concurrent change, or the Idempotency-Key is in flight (Retry-After)',
  413: 'the body is too large',
  415: 'the body is not application/json',
  422: 'the request breaks a domain rule, or holds what cannot be stored (NUL, a lone surrogate, nesting too deep): field errors in `errors`; or the Idempotency-Key was used for another request',
  429: 'too many failed authentications from your address (HERALD_API_AUTH_FAILURE_LIMIT per HERALD_API_AUTH_FAILURE_WINDOW_SECONDS), or your share of a capacity limit is taken (`limit` names its setting): retry after `Retry-After`',
  500: 'an internal fault (logged with the request id)',
  502: 'billing did not answer (timeouts, connection errors, 5xx): nothing changed that a retry cannot finish; retry after `Retry-After` with the same Idempotency-Key, and the charge is made once under its stable key',
  503: 'a dependency (the database) is unavailable; retry later',
};

/** A documented problem response: the status's usual description, or a route's own. */
export const problemResponse = (status: number, description?: string) => ({
  description: description ?? DESCRIPTIONS[status] ?? 'a problem',
  content: { [PROBLEM_CONTENT_TYPE]: { schema: problemSchema } },
});

const problemsFor = (statuses: readonly number[]) =>
  Object.fromEntries(statuses.map((status) => [status, problemResponse(status)]));

/**
 * Error responses of a read: a query or path value can break a rule after validation too (a NUL or a
 * lone surrogate, a range the domain refuses, an unknown topic), a 422 naming the field.
 */
export const readProblems = problemsFor([400, 401, 403, 404, 422, 429, 500, 503]);
/** Error responses of a command (body, state, Idempotency-Key). */
export const commandProblems = problemsFor([400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503]);

/** Error responses of a command that charges through the billing port (SMS create, resend). */
export const chargeProblems = problemsFor([400, 401, 402, 403, 404, 409, 413, 415, 422, 429, 500, 502, 503]);

/** The Idempotency-Key header, documented on every command. */
export const IDEMPOTENCY_HEADER_DOC =
  'Optional `Idempotency-Key` header (1–255 printable ASCII characters): a retry with the same key and request replays the first response with `Idempotent-Replayed: true`; keys expire after HERALD_IDEMPOTENCY_TTL_HOURS (24 h).';

/**
 * The Idempotency-Key header as a schema (documented in OpenAPI, validated before the handler); a
 * loose object, so every other header passes through untouched.
 */
export const idempotencyHeaders = z.looseObject({
  'idempotency-key': z
    .string()
    .regex(/^[\x21-\x7e]{1,255}$/, '1 to 255 printable ASCII characters')
    .optional()
    .describe('makes a retry of this request safe: the first response is replayed'),
});

/**
 * A command on one resource of the caller's organization: `own` loads it (404 when it is missing or
 * another organization's), then `run` changes it, both in the request's transaction; answers 200 with
 * what `run` returns.
 */
export function commandOn<Body, Svc>(
  commands: RequestCommands<Svc>,
  own: (s: Services<Svc>, principal: Principal, id: string) => Promise<unknown>,
  run: (s: Services<Svc>, id: string, body: Body, meta: EventMeta, principal: Principal) => Promise<unknown>,
) {
  return (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const principal = principalOf(request);
    const { id } = request.params as { id: string };
    return sendCommand(commands, request, reply, async (s, meta) => {
      await own(s, principal, id);
      return { status: 200, body: await run(s, id, request.body as Body, meta, principal) };
    });
  };
}

/** What a resource's command routes share: its path, OpenAPI tag, 200 view and ownership check. */
export interface CommandResource<Svc = unknown> {
  /** `/campaigns`, `/actions`, `/cron-jobs`. */
  readonly path: string;
  readonly tag: string;
  readonly view: z.ZodType;
  /** Resolves when the principal's organization owns the resource; a 404 otherwise. */
  readonly own: (s: Services<Svc>, principal: Principal, id: string) => Promise<unknown>;
  /** Maps the command's result to the view (default: as it is). */
  readonly out?: (result: unknown) => unknown;
}

export type CommandRun<Body, Svc = unknown> = (
  s: Services<Svc>,
  id: string,
  body: Body,
  meta: EventMeta,
  principal: Principal,
) => Promise<unknown>;

/**
 * Declares the commands on one resource: `<method> <resource>/:id<path>` with the Idempotency-Key
 * header, the uuid path parameter, an optional body schema, the resource's view as the 200 response,
 * and the ownership check before the command (another organization's resource is a 404).
 */
export function commandRoutes<Svc, Verb extends string = string>(
  app: FastifyInstance,
  commands: RequestCommands<Svc>,
  resource: CommandResource<Svc> & {
    /** The aggregate's operation catalogue: `post` then takes only its operations' names. */
    readonly operations?: Readonly<Record<Verb, unknown>>;
  },
) {
  const out = resource.out ?? ((result: unknown) => result);
  const route = <Body>(
    method: 'POST' | 'PATCH' | 'DELETE',
    path: string,
    summary: string,
    body: z.ZodType | undefined,
    run: CommandRun<Body, Svc>,
  ) =>
    app.route({
      method,
      url: `${resource.path}/:id${path}`,
      schema: {
        tags: [resource.tag],
        summary,
        description: IDEMPOTENCY_HEADER_DOC,
        headers: idempotencyHeaders,
        params: uuidParams,
        ...(body ? { body } : {}),
        response: { 200: resource.view, ...commandProblems },
      },
      handler: commandOn(commands, resource.own, async (s, id, b: Body, meta, principal) =>
        out(await run(s, id, b, meta, principal)),
      ),
    });
  /** `POST <resource>/:id/<name>`, the common case. */
  const post = <Body>(name: Verb, summary: string, body: z.ZodType | undefined, run: CommandRun<Body, Svc>) =>
    route<Body>('POST', `/${name}`, summary, body, run);
  return { route, post };
}

/**
 * `GET <path>/:id/history`: one stream's events with each command's causal chain (messages, receipts,
 * consumers) and its state, after the ownership check (`own` answers the stream id, or a 404).
 */
export function historyRoute(
  app: FastifyInstance,
  deps: Pick<RouteDeps, 'commands' | 'registry'>,
  resource: {
    path: string;
    tag: string;
    summary: string;
    streamType: string;
    own: (principal: Principal, id: string) => Promise<string>;
  },
): void {
  app.get(
    `${resource.path}/:id/history`,
    {
      schema: {
        tags: [resource.tag],
        summary: resource.summary,
        params: uuidParams,
        response: { 200: replayView, ...readProblems },
      },
    },
    async (request) => {
      const { id } = request.params as { id: string };
      const streamId = await resource.own(principalOf(request), id);
      const replay = await replayStream(deps.commands.readers.db, deps.registry, {
        streamType: resource.streamType,
        streamId,
      });
      return view(replayView, plainJson(replay));
    },
  );
}
