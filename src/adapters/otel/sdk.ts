/**
 * The OpenTelemetry SDK for a Herald process (ADR 0017): started only when an OTLP endpoint is
 * configured through the standard variables (OTEL_EXPORTER_OTLP_ENDPOINT or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; OTEL_SDK_DISABLED=true turns it off; OTEL_SERVICE_NAME,
 * OTEL_RESOURCE_ATTRIBUTES and the exporter's OTEL_EXPORTER_OTLP_* headers/timeouts as the
 * specification says). Spans go out in batches over OTLP/HTTP (JSON); W3C trace context is the
 * propagator; context follows async calls (AsyncLocalStorage). Off, nothing is registered and the
 * OpenTelemetry API stays a no-op.
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { markTracingOn } from '../../observability/tracing.js';

export interface TracingOptions {
  enabled: boolean;
  serviceName: string;
  /** Milliseconds between batch exports (OTEL_BSP_SCHEDULE_DELAY). */
  exportDelayMs: number;
}

export interface TracingHandle {
  /** Exports what is buffered (tests; a role's shutdown). */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

let running: { provider: TracerProvider; users: number } | undefined;

/** Starts tracing once per process (several roles in one process share it); a no-op when disabled. */
export function startTracing(settings: TracingOptions): TracingHandle {
  if (!settings.enabled) return { flush: async () => {}, shutdown: async () => {} };
  if (!running) {
    const provider = new TracerProvider({
      resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: settings.serviceName }),
      spanProcessors: [
        new BatchSpanProcessor({
          exporter: new OTLPTraceExporter(),
          scheduledDelayMillis: settings.exportDelayMs,
        }),
      ],
    });
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    trace.setGlobalTracerProvider(provider);
    markTracingOn(true);
    running = { provider, users: 0 };
  }
  const current = running;
  current.users++;
  let stopped = false;
  return {
    flush: () => current.provider.forceFlush(),
    async shutdown() {
      if (stopped) return;
      stopped = true;
      if (--current.users > 0) return current.provider.forceFlush();
      running = undefined;
      markTracingOn(false);
      await current.provider.shutdown();
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}
