/**
 * The HTTP endpoint of the long-running roles: `/metrics`, `/healthz` and `/readyz`, on Fastify 5 like the
 * API, which mounts the same routes. One endpoint per process and address: `runRole` acquires it for each
 * role and releases it when the role stopped, so roles in one process share one server with every role's
 * probes, and the last one closes it. A port in use stops the role with a ConfigError naming
 * HERALD_METRICS_PORT. It reads the database through a pool of its own, so a role's busy pool never delays
 * a probe or a scrape. ADR 0013.
 */
import Fastify, { type FastifyInstance, type FastifyPluginAsync } from 'fastify';
import { createDatabase } from '../adapters/postgres/database.js';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import { type HeraldMetrics, heraldMetrics } from '../observability/metrics.js';
import type { Database } from '../ports/database.js';
import type { HeraldConfig } from '../settings/core.js';
import { databaseSource } from './database-sample.js';
import type { LeaseSources } from './readiness.js';
import {
  leaseRequirements,
  processReadiness,
  type ReadinessProbes,
  type ReadinessReport,
} from './readiness.js';

export interface HealthRoutesOptions {
  /** Default: the process's registry. */
  readonly metrics?: HeraldMetrics;
  readonly readiness: () => Promise<ReadinessReport>;
}

/**
 * How the API's OpenAPI document describes these routes (a `swaggerTransform`: documentation only, as
 * the roles' endpoint has neither the document nor the API's schema compilers).
 */
function documented(summary: string, responses: Record<string, unknown>) {
  return {
    swaggerTransform: ({ url }: { url: string }) => ({
      url,
      schema: { tags: ['health'], summary, security: [], response: responses },
    }),
  };
}

const readinessReport = {
  type: 'object',
  required: ['ok', 'checks'],
  properties: {
    ok: { type: 'boolean' },
    checks: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'ok', 'detail'],
        properties: { name: { type: 'string' }, ok: { type: 'boolean' }, detail: { type: 'string' } },
      },
    },
  },
};
const fault = {
  description: 'an internal fault (logged with the request id)',
  content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
};

/** `/metrics`, `/healthz`, `/readyz` as a Fastify plugin (the role endpoint's, and the API's). */
export const healthRoutes: FastifyPluginAsync<HealthRoutesOptions> = async (app, options) => {
  const metrics = options.metrics ?? heraldMetrics;
  app.get(
    '/healthz',
    {
      config: documented('Liveness: the process answers', {
        200: {
          description: 'up',
          type: 'object',
          required: ['status'],
          properties: { status: { const: 'up' } },
        },
      }),
    },
    async () => ({ status: 'up' }),
  );
  app.get(
    '/readyz',
    {
      config: documented('Readiness: the database, the leases and projections this process needs', {
        200: { description: 'ready: every check passes', ...readinessReport },
        500: fault,
        503: { description: 'not ready: the failing checks say why', ...readinessReport },
      }),
    },
    async (_request, reply) => {
      const report = await options.readiness();
      return reply.code(report.ok ? 200 : 503).send(report);
    },
  );
  app.get(
    '/metrics',
    {
      config: documented('Prometheus metrics (text exposition format)', {
        200: {
          description: 'the metrics',
          content: { 'text/plain': { schema: { type: 'string' } } },
        },
        500: fault,
      }),
    },
    async (_request, reply) => {
      const { contentType, body } = await metrics.exposition();
      return reply.type(contentType).send(body);
    },
  );
};

/** What one role contributes to its process's endpoint. */
export interface RoleEndpointSource {
  readonly role: string;
  readonly registry: LeaseSources;
  readonly probes: ReadinessProbes;
}

/** A role's hold on its process's endpoint. */
export interface RoleEndpoint {
  /** E.g. http://127.0.0.1:9464 (a wildcard host is shown as loopback). */
  readonly url: string;
  /** The role stopped; the last release closes the endpoint. */
  release(): Promise<void>;
}

class SharedEndpoint {
  private readonly sources = new Set<RoleEndpointSource>();
  private detachMetrics: (() => void) | undefined;
  readonly readiness: () => Promise<ReadinessReport>;
  url = '';

  private constructor(
    config: HeraldConfig,
    private readonly db: Database,
    readonly app: FastifyInstance,
  ) {
    this.readiness = processReadiness(config.observability, {
      db,
      registries: () => this.registries(),
      probes: () => [...this.sources].flatMap((s) => s.probes.list()),
      roles: () => [...this.sources].map((s) => s.role),
    });
  }

  static async start(config: HeraldConfig, logger: Logger): Promise<SharedEndpoint> {
    const { host, port } = config.observability;
    const db = createDatabase({
      url: config.databaseUrl,
      schema: config.schema,
      poolSize: 2,
      applicationName: 'herald-metrics',
    });
    const app = Fastify({ logger: false });
    const endpoint = new SharedEndpoint(config, db, app);
    await app.register(healthRoutes, { readiness: () => endpoint.readiness() });
    try {
      await app.listen({ host, port });
    } catch (error) {
      await app.close().catch(() => {});
      await db.close();
      if ((error as { code?: unknown }).code === 'EADDRINUSE') {
        throw new ConfigError(
          'HERALD_METRICS_PORT',
          `port ${port} on ${host} is already in use: give each process on this host its own port (0: any free port)`,
        );
      }
      throw error;
    }
    const address = app.server.address();
    const bound = typeof address === 'object' && address ? address.port : port;
    const shown = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '[::1]' : host;
    endpoint.url = `http://${shown}:${bound}`;
    heraldMetrics.enableProcessMetrics();
    endpoint.detachMetrics = heraldMetrics.observeDatabase(
      databaseSource(db, () => leaseRequirements(endpoint.registries()).checkpoints),
    );
    logger.info(
      { url: endpoint.url, host, port: bound },
      'metrics and health endpoint listening (/metrics, /healthz, /readyz)',
    );
    return endpoint;
  }

  attach(source: RoleEndpointSource): void {
    this.sources.add(source);
  }

  detach(source: RoleEndpointSource): void {
    this.sources.delete(source);
  }

  async close(): Promise<void> {
    this.detachMetrics?.();
    await this.app.close();
    await this.db.close();
  }

  private registries(): LeaseSources[] {
    return [...new Set([...this.sources].map((s) => s.registry))];
  }
}

interface Entry {
  refs: number;
  ready: Promise<SharedEndpoint>;
}

/** Endpoints of this process by address and database; and the close of the last one per key. */
const endpoints = new Map<string, Entry>();
const closing = new Map<string, Promise<void>>();

/**
 * Starts this process's endpoint for `config` (or joins the running one) and adds the role's probes
 * to its readiness. Rejects when the port cannot be bound.
 */
export async function acquireRoleEndpoint(
  config: HeraldConfig,
  logger: Logger,
  source: RoleEndpointSource,
): Promise<RoleEndpoint> {
  const { host, port } = config.observability;
  const key = `${host}|${port}|${config.databaseUrl}|${config.schema}`;
  let entry = endpoints.get(key);
  if (!entry) {
    const previous = closing.get(key) ?? Promise.resolve();
    const created: Entry = { refs: 0, ready: previous.then(() => SharedEndpoint.start(config, logger)) };
    created.ready.catch(() => {
      if (endpoints.get(key) === created) endpoints.delete(key);
    });
    endpoints.set(key, created);
    entry = created;
  }
  const held = entry;
  held.refs++;
  let shared: SharedEndpoint;
  try {
    shared = await held.ready;
  } catch (error) {
    held.refs--;
    throw error;
  }
  shared.attach(source);
  let released = false;
  return {
    url: shared.url,
    async release() {
      if (released) return;
      released = true;
      shared.detach(source);
      held.refs--;
      if (held.refs > 0) return;
      if (endpoints.get(key) === held) endpoints.delete(key);
      const closed = shared.close().finally(() => {
        if (closing.get(key) === closed) closing.delete(key);
      });
      closing.set(key, closed);
      await closed;
    },
  };
}
