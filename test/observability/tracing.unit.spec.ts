/**
 * Tracing off is the default and costs nothing (ADR 0017): without an OTLP endpoint the config says
 * off, the helpers create no span and hand out no traceparent, and a bad endpoint stops start-up
 * naming the variable.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { currentTraceparent, inSpan, startSpan, tracingOn } from '../../src/observability/tracing.js';

const base = { DATABASE_URL: 'postgres://herald@127.0.0.1:5432/herald' };

describe('tracing settings and the off state', () => {
  it('is on only with an OTLP endpoint and not disabled', () => {
    expect(loadConfig(base).tracing.enabled).toBe(false);
    expect(loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:4318' }).tracing).toEqual({
      enabled: true,
      serviceName: undefined,
      exportDelayMs: 5_000,
    });
    expect(
      loadConfig({
        ...base,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://otel:4318/v1/traces',
        OTEL_SERVICE_NAME: 'x',
      }).tracing,
    ).toMatchObject({ enabled: true, serviceName: 'x' });
    expect(
      loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:4318', OTEL_SDK_DISABLED: 'true' })
        .tracing.enabled,
    ).toBe(false);
    expect(() => loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'otel:4318' })).toThrow(
      /OTEL_EXPORTER_OTLP_ENDPOINT/,
    );
  });

  it('off: no span, no traceparent, the work runs as it is', async () => {
    expect(tracingOn()).toBe(false);
    expect(currentTraceparent()).toBeUndefined();
    expect(startSpan('x', {})).toBeUndefined();
    await expect(
      inSpan('x', {}, async (span) => (span === undefined ? 'ran without a span' : 'span')),
    ).resolves.toBe('ran without a span');
  });
});
