/**
 * Tracing through Herald's causal chain (ADR 0017): an API request or library call → the
 * command → its events (the W3C `traceparent` in the events' meta) → the outbox row (the same
 * `traceparent` in the row's headers, so every publish carries it as a message header on AMQP and
 * Kafka) → the relay's publish → the consumer's handling and its effect, as one trace. A due stream's
 * claim continues the trace of the command that made it due (the traceparent of its latest event).
 *
 * Only the OpenTelemetry API is used here; the SDK and exporter are started by the adapter
 * (src/adapters/otel/sdk.ts) when tracing is configured. Off, every helper is a no-op that allocates
 * nothing, and `tracingOn()` lets callers skip work done only for traces (the claim's look-up).
 */
import {
  type Attributes,
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';

export { SpanKind };

const tracer = () => trace.getTracer('herald');
let enabled = false;

/** Set by the SDK adapter when it registered a tracer provider. */
export function markTracingOn(on: boolean): void {
  enabled = on;
}

export function tracingOn(): boolean {
  return enabled;
}

/** The active span's W3C traceparent, if a span is active and tracing is on. */
export function currentTraceparent(active: Context = context.active()): string | undefined {
  if (!enabled) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(active, carrier);
  return carrier.traceparent;
}

/** The context a stored or received traceparent names (the root context without one). */
export function contextOf(traceparent: string | null | undefined): Context {
  if (!enabled || !traceparent) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, { traceparent });
}

/**
 * Runs `fn` in a new span (a child of `parent`, default the active context), recording a throw as the
 * span's error. Off: runs `fn` with no span at all.
 */
export async function inSpan<T>(
  name: string,
  options: { kind?: SpanKind; attributes?: Attributes; parent?: Context },
  fn: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  if (!enabled) return fn(undefined);
  const parent = options.parent ?? context.active();
  const span = tracer().startSpan(
    name,
    {
      kind: options.kind ?? SpanKind.INTERNAL,
      ...(options.attributes ? { attributes: options.attributes } : {}),
    },
    parent,
  );
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (error) {
    span.recordException(error as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
    throw error;
  } finally {
    span.end();
  }
}

/** Starts a span the caller ends (a publish ended at its broker confirm); undefined when off. */
export function startSpan(
  name: string,
  options: { kind?: SpanKind; attributes?: Attributes; parent?: Context },
): Span | undefined {
  if (!enabled) return undefined;
  return tracer().startSpan(
    name,
    {
      kind: options.kind ?? SpanKind.INTERNAL,
      ...(options.attributes ? { attributes: options.attributes } : {}),
    },
    options.parent ?? context.active(),
  );
}

/** The traceparent of a span started with startSpan. */
export function traceparentOf(span: Span): string | undefined {
  return currentTraceparent(trace.setSpan(ROOT_CONTEXT, span));
}

/** Ends a span with an error status. */
export function failSpan(span: Span | undefined, error: unknown): void {
  if (!span) return;
  span.recordException(error as Error);
  span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message ?? String(error) });
  span.end();
}

/** Runs `fn` with `active` as the active context (a span started in a hook, for the rest of a request). */
export function withContext<T>(active: Context, fn: () => T): T {
  return enabled ? context.with(active, fn) : fn();
}

export function contextWithSpan(span: Span, parent: Context = context.active()): Context {
  return trace.setSpan(parent, span);
}
