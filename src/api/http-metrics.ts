/**
 * The API's request metrics, in the process's Prometheus registry (src/observability/metrics.ts), so
 * `/metrics` on the API port shows them beside the roles' series: a counter and a latency histogram of
 * requests by method, route pattern and status. The route label is the pattern (`/v1/campaigns/:id`),
 * `unmatched` for unknown paths, so label values stay bounded whatever clients send.
 */
import { Counter, Histogram, type Registry } from 'prom-client';

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface HttpMeters {
  observe(method: string, route: string | undefined, status: number, seconds: number): void;
}

const byRegistry = new WeakMap<Registry, HttpMeters>();

/** The meters of `registry` (created once per registry: several API servers in a process share them). */
export function httpMeters(registry: Registry): HttpMeters {
  const existing = byRegistry.get(registry);
  if (existing) return existing;
  const requests = new Counter({
    name: 'herald_http_requests_total',
    help: 'HTTP API requests answered, by method, route pattern and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'herald_http_request_duration_seconds',
    help: 'HTTP API request latency (received → response sent), by method, route pattern and status.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: BUCKETS,
    registers: [registry],
  });
  const meters: HttpMeters = {
    observe(method, route, status, seconds) {
      const labels = { method, route: route ?? 'unmatched', status: String(status) };
      requests.inc(labels);
      duration.observe(labels, seconds);
    },
  };
  byRegistry.set(registry, meters);
  return meters;
}
