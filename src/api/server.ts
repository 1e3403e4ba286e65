/**
 * The HTTP API server (`herald api`): Fastify 5 with the zod type provider, so each route's zod schemas
 * validate requests, type handlers, serialize responses and make the OpenAPI 3.1 document. Routes call
 * the library services; nothing in the domain knows about HTTP. Every `/v1` route authenticates first (an
 * API key, or the dashboard's session with its CSRF token on commands), checks the key's role and scopes
 * reads and commands to its organization; the request id becomes the commands' correlation id; errors are
 * problem documents. ADR 0012, ADR 0018.
 */

import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import cookie from '@fastify/cookie';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { type Span, SpanStatusCode } from '@opentelemetry/api';
import Fastify, {
  errorCodes,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import {
  jsonSchemaTransform,
  jsonSchemaTransformObject,
  serializerCompiler,
  validatorCompiler,
} from 'fastify-type-provider-zod';
import { OidcIssuer } from '../adapters/oidc/issuer.js';
import { ValidationError } from '../errors.js';
import type { ReadinessReport } from '../health/readiness.js';
import { healthRoutes } from '../health/role-endpoint.js';
import type { Logger } from '../logger.js';
import { type HeraldMetrics, heraldMetrics } from '../observability/metrics.js';
import {
  contextOf,
  contextWithSpan,
  SpanKind,
  startSpan,
  tracingOn,
  withContext,
} from '../observability/tracing.js';
import type { Database } from '../ports/database.js';
import type { WakeupListener, WakeupSignal } from '../ports/wakeups.js';
import type { HeraldConfig } from '../settings/core.js';
import { ApiKeyAuthenticator, type Permission, requirePermission } from './auth.js';
import { AuthThrottle } from './auth-throttle.js';
import { RequestCommands } from './commands.js';
import { httpMeters } from './http-metrics.js';
import { parseJsonBody, unstorableField } from './input-limits.js';
import type { ApiRegistry, RouteDeps } from './module.js';
import { JwtAuthenticator } from './oidc-auth.js';
import { withRouterErrors } from './openapi.js';
import { clientErrorProblem, HttpProblem, PROBLEM_CONTENT_TYPE, problem, problemFor } from './problem.js';
import { actorRoutes } from './routes/actors.js';
import { dashboardRoutes } from './routes/dashboard.js';
import { oidcSessionRoutes } from './routes/oidc-session.js';
import { operationRoutes } from './routes/operations.js';
import { sessionRoutes } from './routes/session.js';
import { SessionAuthenticator } from './session.js';
import { StreamHub, type StreamHubSettings } from './stream.js';
import { uiRoutes } from './ui.js';

export interface ApiRoute {
  method: string;
  url: string;
  /** False for the docs page's own routes and the document itself (hidden from the document). */
  documented: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    heraldRoutes: readonly ApiRoute[];
    /** The live stream's hub (GET /v1/stream): tests look at its clients and timers. */
    heraldStream: StreamHub;
  }
}

export interface ApiServerDeps {
  db: Database;
  /** Wake-ups the commands owe after their commit (the runtime's coalescing notifier). */
  wakeups: WakeupSignal;
  /** The process's LISTEN connection (the runtime's): the live stream subscribes to it once. */
  listener?: WakeupListener;
  /** The live stream's pacing (tests shorten it). */
  stream?: Partial<StreamHubSettings>;
  /** Where the built dashboard is (default dist/ui of the package). */
  uiRoot?: string;
  config: HeraldConfig;
  /** The registered slices: their services, routes and live-stream topics (src/registry/). */
  registry: ApiRegistry;
  logger: Logger;
  /** `/readyz` (src/observability/readiness.ts). */
  readiness: () => Promise<ReadinessReport>;
  metrics?: HeraldMetrics;
}

/** Longer path parameters are a 414 (documented on every operation with one). */
const MAX_PARAM_LENGTH = 512;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

function requestId(request: { headers: Record<string, string | string[] | undefined> }): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

/** Every `$ref` under `value`. */
function refsIn(value: unknown, into: Set<string>): Set<string> {
  if (Array.isArray(value)) for (const item of value) refsIn(item, into);
  else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (key === '$ref' && typeof item === 'string') into.add(item);
      else refsIn(item, into);
    }
  }
  return into;
}

/**
 * Drops component schemas no operation reaches. The type provider derives an input and an output
 * component from every registered schema (`Campaign`, `CampaignInput`); a view is only ever an output
 * and a body only an input, so half of them would otherwise be orphans in the document.
 */
function withoutUnusedComponents<
  T extends { paths?: unknown; components?: { schemas?: Record<string, unknown> } },
>(document: T): T {
  const schemas = document.components?.schemas;
  if (!schemas) return document;
  const prefix = '#/components/schemas/';
  const used = refsIn(document.paths, new Set());
  for (const pending = [...used]; pending.length > 0; ) {
    const name = pending.pop()!.slice(prefix.length);
    for (const ref of refsIn(schemas[name], new Set())) {
      if (!used.has(ref)) {
        used.add(ref);
        pending.push(ref);
      }
    }
  }
  const kept = Object.fromEntries(Object.entries(schemas).filter(([name]) => used.has(`${prefix}${name}`)));
  return { ...document, components: { ...document.components, schemas: kept } };
}

const permissionOf = (request: FastifyRequest): Permission =>
  request.routeOptions.config.permission ??
  (request.method === 'GET' || request.method === 'HEAD' ? 'read' : 'command');

/** Builds the API (routes registered, not listening). */
export async function buildApiServer(deps: ApiServerDeps): Promise<FastifyInstance> {
  const { config, logger } = deps;
  const metrics = deps.metrics ?? heraldMetrics;
  const meters = httpMeters(metrics.registry);
  const sendProblem = (error: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const mapped = problemFor(error, {
      requestId: request.id,
      instance: request.url.split('?')[0]!,
      contentType: request.headers['content-type'],
    });
    if (mapped.fault) request.log.error({ err: error, status: mapped.status }, 'request failed');
    else
      request.log.info(
        { code: mapped.problem.code, status: mapped.status },
        mapped.problem.detail ?? 'refused',
      );
    return reply
      .code(mapped.status)
      .headers(mapped.headers ?? {})
      .type(PROBLEM_CONTENT_TYPE)
      .send(mapped.problem);
  };
  const app = Fastify({
    loggerInstance: logger.child({ component: 'api' }),
    genReqId: requestId,
    logController: new LogController({
      // The request id is the correlation id of everything the request causes: one name in every log line.
      requestIdLogLabel: 'correlationId',
      // Probes and scrapes are not request traffic.
      disableRequestLogging: (request) => /^\/(healthz|readyz|metrics)(\?|$)/.test(request.url),
    }),
    bodyLimit: config.api.bodyLimitBytes,
    // On close: idle keep-alive connections are closed at once, busy ones after their response.
    forceCloseConnections: 'idle',
    return503OnClosing: true,
    // Behind a TLS-terminating proxy: X-Forwarded-Proto decides the session cookie's Secure flag, and
    // X-Forwarded-For the client address the authentication throttle counts by.
    trustProxy: config.api.trustProxy,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // What the router refuses before any route (a bad percent-encoding, a parameter over 512
    // characters) is a problem document like every other refusal.
    frameworkErrors: (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      void reply.header('x-request-id', request.id);
      void sendProblem(error, request, reply);
    },
    // What Node's HTTP parser refuses (control characters in the target, oversized headers, a method
    // HTTP/1.1 does not define, a slow request): a problem document, then the connection closes.
    clientErrorHandler: clientError,
  });
  // Every route the server serves (the OpenAPI test checks the document lists each one).
  const routes: ApiRoute[] = [];
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      routes.push({ method, url: route.url, documented: route.schema?.hide !== true });
    }
  });
  app.decorate('heraldRoutes', routes);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // JSON only: any other body (text/plain included) is a 415. JSON bodies must be UTF-8: bytes that are
  // not are a 400 naming their offset, never read as U+FFFD (src/api/input-limits.ts).
  app.removeContentTypeParser('text/plain');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
    if ((body as Buffer).length === 0) return done(new errorCodes.FST_ERR_CTP_EMPTY_JSON_BODY(), undefined);
    try {
      done(null, parseJsonBody(body as Buffer));
    } catch (error) {
      done(error as Error, undefined);
    }
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Herald API',
        version: '1',
        description:
          "The registered slices' resources (campaigns, scheduled actions and signals, cron jobs and runs), outbox operations, verify and dispatch statistics of one organization (the API key's). Errors are RFC 9457 problem documents. Commands accept an Idempotency-Key header.",
      },
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'an API key: `herald api-keys create`' },
          bearerJwt: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description:
              'a JWT of the configured OpenID Connect issuer (HERALD_API_OIDC_ISSUER): verified against its JWKS, its claims mapped to an organization and a role (ADR 0035); one that does not verify is a 401 with `WWW-Authenticate: Bearer error="invalid_token"`',
          },
          session: {
            type: 'apiKey',
            in: 'cookie',
            name: 'herald_session',
            description:
              'the dashboard session (POST /v1/session); commands also need the x-csrf-token header',
          },
        },
      },
      security: [{ apiKey: [] }, { bearerJwt: [] }],
    },
    transform: jsonSchemaTransform,
    transformObject: (document) =>
      withRouterErrors(withoutUnusedComponents(jsonSchemaTransformObject(document)), MAX_PARAM_LENGTH),
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  await app.register(cookie);

  const authenticator = new ApiKeyAuthenticator(deps.db, logger);
  const throttle = new AuthThrottle(deps.db, config.api, logger);
  const oidc = config.api.oidc;
  const tokens = oidc ? new JwtAuthenticator(new OidcIssuer(oidc), oidc, deps.db, logger) : undefined;
  const sessions = new SessionAuthenticator(deps.db, authenticator, config.api, throttle, tokens);
  const stream = new StreamHub({
    listener: deps.listener,
    schema: config.schema,
    registry: deps.registry,
    logger,
    // The limits are the configuration's; tests shorten the pacing (and may lower the limits).
    settings: { ...config.api.streams, ...deps.stream },
  });
  app.decorate('heraldStream', stream);
  // Open streams are not in-flight requests to wait for: they end when the server starts closing.
  app.addHook('preClose', async () => stream.close());
  const commands = new RequestCommands({
    db: deps.db,
    wakeups: deps.wakeups,
    config,
    logger,
    services: (context) => deps.registry.services(context),
  });
  const routeDeps: RouteDeps = { commands, registry: deps.registry, config, logger };

  // While tracing, each request is a server span (a child of an incoming traceparent), active for the
  // rest of the request: the commands it issues are its children (ADR 0017).
  const spans = new WeakMap<object, Span>();
  app.addHook('onRequest', (request, reply, done) => {
    void reply.header('x-request-id', request.id);
    if (!tracingOn()) return done();
    const incoming = request.headers.traceparent;
    const span = startSpan(`HTTP ${request.method}`, {
      kind: SpanKind.SERVER,
      parent: contextOf(typeof incoming === 'string' ? incoming : undefined),
      attributes: { 'http.request.method': request.method, 'herald.request_id': request.id },
    })!;
    spans.set(request, span);
    withContext(contextWithSpan(span), done);
  });
  /** Counts the request and ends its span: from onResponse, or when a hijacked response (a live stream) closes. */
  const requestDone = (request: FastifyRequest, reply: FastifyReply) => {
    meters.observe(request.method, request.routeOptions.url, reply.statusCode, reply.elapsedTime / 1000);
    const span = spans.get(request);
    if (span) {
      span.updateName(`HTTP ${request.method} ${request.routeOptions.url ?? 'unmatched'}`);
      span.setAttribute('http.response.status_code', reply.statusCode);
      if (reply.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
      spans.delete(request);
    }
  };
  app.addHook('onResponse', async (request, reply) => requestDone(request, reply));

  app.setErrorHandler(async (error, request, reply) => sendProblem(error, request, reply));
  // A path some route serves with other methods is a 405 listing them in Allow; any other path a 404.
  const allowedMethods = methodsByPath(routes);
  app.setNotFoundHandler(async (request, reply) => {
    const path = request.url.split('?')[0]!;
    const allowed = allowedMethods(path);
    if (allowed.length > 0) {
      return sendProblem(
        new HttpProblem(
          405,
          'METHOD_NOT_ALLOWED',
          `${request.method} is not a method of ${path}; it allows ${allowed.join(', ')}`,
          { headers: { allow: allowed.join(', ') } },
        ),
        request,
        reply,
      );
    }
    return reply
      .code(404)
      .type(PROBLEM_CONTENT_TYPE)
      .send(
        problem(404, `no route ${request.method} ${path}`, {
          instance: path,
          requestId: request.id,
          code: 'ROUTE_NOT_FOUND',
        }),
      );
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  await app.register(healthRoutes, { readiness: deps.readiness, metrics });

  await app.register(
    async (v1) => {
      // Before the body is read: an unauthenticated or unauthorized request costs one index probe.
      v1.addHook('onRequest', async (request) => {
        if (request.routeOptions.config.public) return; // sign-in authenticates itself
        request.principal = await sessions.authenticate(request);
        requirePermission(request.principal, permissionOf(request));
      });
      // What PostgreSQL cannot store (NUL, lone surrogates) or recursion cannot walk (deep nesting) is a
      // 422 naming the field, not a 500 in the command: in the body before anything walks it (validation,
      // the Idempotency-Key fingerprint over the request as received); in the path and query after their
      // validation (a malformed id stays a 400).
      v1.addHook('preValidation', async (request) => {
        refuseUnstorable({ body: request.body ?? null });
        request.receivedInput = { body: request.body ?? null, params: request.params, query: request.query };
      });
      v1.addHook('preHandler', async (request) => {
        refuseUnstorable({ params: request.params, query: request.query });
      });
      for (const module of deps.registry.apiModules) {
        if (module.routes) await v1.register(module.routes, routeDeps);
      }
      await v1.register(operationRoutes, routeDeps);
      await v1.register(actorRoutes, routeDeps);
      await v1.register(sessionRoutes, { sessions });
      await v1.register(oidcSessionRoutes, { sessions });
      await v1.register(dashboardRoutes, { ...routeDeps, stream, requestDone });
    },
    { prefix: '/v1' },
  );
  await app.register(uiRoutes, { root: deps.uiRoot });
  await app.ready();
  return app as unknown as FastifyInstance;
}

export interface RunningApiServer {
  app: FastifyInstance;
  /** E.g. http://127.0.0.1:8080 (a wildcard host shown as loopback). */
  url: string;
  /** Stops accepting, lets in-flight requests finish (at most HERALD_API_SHUTDOWN_TIMEOUT_SECONDS), closes. */
  close(): Promise<void>;
}

/** Builds the API and listens on HERALD_API_HOST:HERALD_API_PORT. */
export async function startApiServer(deps: ApiServerDeps): Promise<RunningApiServer> {
  const app = await buildApiServer(deps);
  const { host, port } = deps.config.api;
  await app.listen({ host, port });
  const address = app.server.address();
  const bound = typeof address === 'object' && address ? address.port : port;
  const shown = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '[::1]' : host;
  const url = `http://${shown}:${bound}`;
  deps.logger.info({ url, host, port: bound }, 'HTTP API listening (/v1, /openapi.json, /docs)');
  return {
    app,
    url,
    async close() {
      const force = setTimeout(() => app.server.closeAllConnections(), deps.config.api.shutdownTimeoutMs);
      force.unref();
      try {
        await app.close();
      } finally {
        clearTimeout(force);
      }
    },
  };
}

/**
 * The methods the routes declare for a concrete path (`/v1/campaigns/abc` matches `/v1/campaigns/:id`),
 * sorted; empty for a path no route serves. The patterns are read on first use (all routes registered).
 */
function methodsByPath(routes: readonly ApiRoute[]): (path: string) => string[] {
  let patterns: { pattern: RegExp; methods: Set<string> }[] | undefined;
  const compile = () => {
    const byUrl = new Map<string, Set<string>>();
    for (const route of routes) {
      const methods = byUrl.get(route.url) ?? new Set<string>();
      methods.add(route.method);
      byUrl.set(route.url, methods);
    }
    return [...byUrl].map(([url, methods]) => ({
      pattern: new RegExp(
        `^${url
          .split('/')
          .map((segment) =>
            segment === '*'
              ? '.*'
              : segment.startsWith(':')
                ? '[^/]+'
                : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
          )
          .join('/')}$`,
      ),
      methods,
    }));
  };
  return (path) => {
    patterns ??= compile();
    const allowed = new Set<string>();
    for (const { pattern, methods } of patterns) {
      if (pattern.test(path)) for (const method of methods) allowed.add(method);
    }
    return [...allowed].sort();
  };
}

/** Node's `clientError` (the request never reached Fastify): a problem document, then the socket closes. */
function clientError(this: FastifyInstance, error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const { status, problem: body } = clientErrorProblem(error.code);
  const id = randomUUID();
  const text = JSON.stringify({ ...body, requestId: id });
  this.log.debug({ err: error, status, code: body.code }, 'client error');
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${body.title}\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(text)}\r\nx-request-id: ${id}\r\nConnection: close\r\n\r\n${text}`,
    );
  }
  socket.destroy(error);
}

function refuseUnstorable(input: Record<string, unknown>): void {
  const refused = unstorableField(input);
  if (refused) throw new ValidationError(`${refused.field} ${refused.reason}`, { field: refused.field });
}
